"""Notebook views: one-line reprs, the bounded and escaped HTML view, pandas and Arrow tables."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from html.parser import HTMLParser

import pytest

from orchestrace import TraceBuilder, generate_trace
from orchestrace.io import write_parquet
from orchestrace.trace._html import MAX_BARS, MAX_ROWS
from orchestrace.trace._tables import EDGE_COLUMNS, EVENT_COLUMNS
from orchestrace.trace.model import Edge, Event, Trace

HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "</svg><script>x()</script>",
    "javascript:alert(1)",
    "\x1b[31mred\x1b[0m\x00\x07\r\n\u2028",
    "&amp; &lt;",
]
ALLOWED_TAGS = {"div", "table", "tr", "th", "td", "svg", "rect", "text", "title", "line", "span"}
ALLOWED_ATTRS = {
    "style",
    "xmlns",
    "width",
    "height",
    "x",
    "y",
    "x1",
    "x2",
    "y1",
    "y2",
    "fill",
    "stroke",
    "stroke-width",
    "text-anchor",
}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_data(self, data):
        self.text.append(data)


def parse(html: str) -> _Tags:
    p = _Tags()
    p.feed(html)
    p.close()
    return p


def hostile_trace(content_chars: int = 0) -> Trace:
    ev = []
    for i, s in enumerate(HOSTILE):
        ev.append(
            Event(
                id=f"{s}{i}",
                t=float(i),
                dur=1.0,
                type="message",
                agent=s,
                role=s,
                to=HOSTILE[(i + 1) % len(HOSTILE)],
                tool=s,
                content=s + "A" * content_chars,
                attrs={s: s},
            )
        )
    return Trace(
        trace_id=HOSTILE[0] * (1 + content_chars // 100),
        task_id=HOSTILE[1],
        events=tuple(ev),
        edges=(Edge(ev[0].id, ev[1].id, "message"),),
        rewards={HOSTILE[2]: 1.0, "nan": math.nan},
        metrics={HOSTILE[3]: 0.5},
        system=HOSTILE[4],
        topology="swarm",
    )


def assert_safe(html: str) -> _Tags:
    p = parse(html)
    for tag, attrs in p.tags:
        assert tag in ALLOWED_TAGS, tag
        for name, value in attrs:
            assert name in ALLOWED_ATTRS, (tag, name)
            assert "javascript" not in (value or "").lower()
            assert "url(" not in (value or "").lower()
    low = html.lower()
    assert "<script" not in low and "<img" not in low and "<iframe" not in low
    assert not any(ord(c) < 0x20 and c not in "\n" for c in html)
    assert "\x1b" not in "".join(p.text)
    return p


def test_repr_html_escapes_every_trace_string():
    tr = hostile_trace()
    html = tr._repr_html_()
    p = assert_safe(html)
    text = "".join(p.text)
    # the hostile strings are shown as text, not dropped
    assert "<script>alert(1)</script>" in text
    assert '"><img src=x onerror=alert(1)>' in text
    assert "&amp; &lt;" in text
    titles = [t for t, _ in p.tags if t == "title"]
    assert len(titles) == len(tr.events)  # one bar per event in a small trace


def test_huge_contents_and_ids_stay_bounded():
    tr = hostile_trace(content_chars=10**7)
    t0 = time.perf_counter()
    html = tr._repr_html_()
    assert time.perf_counter() - t0 < 5
    assert len(html) < 30_000, len(html)
    assert_safe(html)
    line = repr(tr)
    assert "\n" not in line and len(line) < 300, line
    for e in tr.events:
        r = repr(e)
        assert "\n" not in r and len(r) < 1000, len(r)
        assert f"({len(e.content)} chars)" in r
    r = repr(Edge("x" * 10**7, "y", "causal"))
    assert len(r) < 200 and "(10000000 chars)" in r


def test_repr_is_one_line():
    tr = generate_trace(agents=8, steps=4000, depth=2, seed=1)
    r = repr(tr)
    assert r == (
        f"Trace(trace_id={tr.trace_id!r}, task_id={tr.task_id!r}, events=4000, "
        f"edges={len(tr.edges)}, agents=8, topology='hierarchical')"
    )
    assert str(tr) == r
    odd = tr.replace(trace_id="a\nb" + "c" * 500, topology=None)
    r2 = repr(odd)
    assert "\n" not in r2 and len(r2) < 200 and r2.endswith("topology=None)")


def test_event_repr_lists_set_fields_only():
    e = Event(id="e1", t=1.5, type="tool_call", agent="w", tool="search", dur=2.0)
    assert repr(e) == "Event(id='e1', t=1.5, type='tool_call', agent='w', dur=2.0, tool='search')"
    assert repr(Edge("a", "b", "spawn")) == "Edge(src='a', dst='b', type='spawn')"


@pytest.mark.slow
def test_hundred_thousand_events_html_is_bounded():
    tr = generate_trace(agents=60, steps=100_000, depth=3, seed=2)
    t0 = time.perf_counter()
    html = tr._repr_html_()
    took = time.perf_counter() - t0
    assert len(html) < 100_000, len(html)
    p = assert_safe(html)
    rects = sum(1 for t, _ in p.tags if t == "rect")
    # row shading + merged spans + critical-path marks
    assert rects <= MAX_ROWS + MAX_BARS + 130, rects
    assert "events merged into busy spans" in html and "more rows not shown" in html
    assert took < 20, took


def test_small_trace_summary(small_trace):
    html = small_trace._repr_html_()
    assert_safe(html)
    text = " ".join(parse(html).text)
    assert "critical path" in text and "team=1" in text and "makespan" in text
    cp = small_trace.graph.critical_path()
    assert f"over {len(cp.ids)} events" in text
    # one timeline row per agent and tool, in spawn-tree order
    labels = [t.strip() for t in parse(html).text if t.strip() in {"lead", "w0", "w1", "w2"}]
    assert labels == ["lead", "w0", "w1", "w2"]


def test_invalid_trace_still_renders():
    ev = (
        Event(id="a", t=0.0, dur=1.0, type="message", agent="x"),
        Event(id="b", t=1.0, dur=1.0, type="message", agent="x"),
    )
    tr = Trace(
        trace_id="cyc",
        task_id="t",
        events=ev,
        edges=(Edge("a", "b", "causal"), Edge("b", "a", "causal")),
    )
    html = tr._repr_html_()
    assert_safe(html)
    assert "n/a (causal cycle" in html


def _expected(e: Event, col: str):
    if col == "from":
        return e.from_
    return getattr(e, col)


def test_to_pandas_columns_equal_the_events(small_trace):
    pd = pytest.importorskip("pandas")
    tr = generate_trace(agents=5, steps=300, depth=2, seed=3)
    tr = tr.replace(
        events=(
            *tr.events,
            Event(
                id="x1",
                t=1.0,
                type="message",
                agent="orchestrator",
                from_="orchestrator",
                to="w",
                content=HOSTILE[0],
                trusted=False,
                attrs={"k": [1, {"n": None}]},
                error="boom",
            ),
        )
    )
    events, edges = tr.to_pandas()
    tables = tr.to_pandas()
    assert tables.events is not None and tables.edges is not None
    assert list(events.columns) == list(EVENT_COLUMNS)
    assert list(edges.columns) == list(EDGE_COLUMNS)
    assert len(events) == tr.n_events and len(edges) == len(tr.edges)
    assert str(events["step"].dtype) == "Int64" and str(events["trusted"].dtype) == "boolean"
    for row, e in zip(events.itertuples(index=False), tr.events, strict=True):
        got = dict(zip(EVENT_COLUMNS, row, strict=True))
        assert got["trace_id"] == tr.trace_id
        for col in EVENT_COLUMNS[1:]:
            want = _expected(e, col)
            value = got[col]
            if want is None:
                assert value is None or pd.isna(value), (col, value)
            else:
                assert value == want, (col, value, want)
    for row, ed in zip(edges.itertuples(index=False), tr.edges, strict=True):
        assert tuple(row) == (tr.trace_id, ed.src, ed.dst, ed.type)
    assert events.groupby("agent")["tokens_in"].sum().sum() == sum(e.tokens_in for e in tr.events)


def test_to_arrow_matches_the_parquet_tables(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    tr = generate_trace(agents=4, steps=200, seed=5)
    tr = tr.replace(
        events=(
            *tr.events,
            Event(id="x", t=0.5, type="message", agent="a", attrs={"k": 1}, trusted=True),
        )
    )
    events, edges = tr.to_arrow()
    write_parquet([tr], tmp_path / "d.parquet")
    want_ev = pq.read_table(tmp_path / "d.parquet" / "events.parquet")
    want_ed = pq.read_table(tmp_path / "d.parquet" / "edges.parquet")
    # the dataset also stores which optional fields a recording left at their default (the
    # 'defaults' column, a storage detail the reader uses to give the trace back exactly);
    # every event field is a column of both, with the same type
    assert want_ev.column_names == [*events.column_names, "defaults"]
    stored = want_ev.drop_columns(["defaults"])
    assert events.schema.equals(stored.schema.remove_metadata())
    assert events.equals(want_ev.select(events.column_names).cast(events.schema))
    assert edges.equals(want_ed.cast(edges.schema))
    col = events.column("attrs").to_pylist()
    assert json.loads(col[-1]) == {"k": 1} and col[0] is None
    assert events.column("id").to_pylist() == [e.id for e in tr.events]
    assert events.column("t").to_pylist() == [e.t for e in tr.events]


def test_pandas_missing_names_the_install(monkeypatch, small_trace):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pip install 'orchestrace\[viewer\]'"):
        small_trace.to_pandas()


def test_views_import_no_heavy_dependency():
    code = (
        "import sys, orchestrace\n"
        "tr = orchestrace.generate_trace(agents=3, steps=30, seed=0)\n"
        "repr(tr); tr._repr_html_()\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_builder_trace_views():
    b = TraceBuilder(task_id="demo")
    s = b.spawn("lead", "w1", role="worker")
    b.tool("w1", "search", after=[s], dur=1.0)
    tr = b.build()
    assert "tool: search" in tr._repr_html_()
    assert repr(tr).startswith("Trace(trace_id=")
