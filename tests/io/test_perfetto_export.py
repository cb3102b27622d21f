"""Perfetto export: the Chrome trace event format file, checked against the format's rules.

``check_chrome_trace`` checks what the format requires of each phase, and replays the flow
binding rules of Perfetto's JSON importer (a ``s``/``f`` record binds to the slice open on its
track at that time), so every edge must land on the right two events. When Perfetto's trace
processor binary is available offline (``ORCHESTRACE_TRACE_PROCESSOR``, ``trace_processor_shell``
on PATH, or the perfetto package's download cache) the file is also loaded and queried there.
"""

from __future__ import annotations

import glob
import json
import math
import os
import shutil
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import msgspec
import pytest

from orchestrace import TraceBuilder, dump, generate_trace
from orchestrace.cli import main
from orchestrace.errors import TraceError
from orchestrace.io import export_bytes as export_any
from orchestrace.io.perfetto import PREVIEW, export_bytes, to_chrome_trace
from orchestrace.trace._layout import layout
from orchestrace.trace.model import Edge, Event, Trace

META_NAMES = {
    "process_name": "name",
    "process_labels": "labels",
    "process_sort_index": "sort_index",
    "thread_name": "name",
    "thread_sort_index": "sort_index",
}


def _num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def check_chrome_trace(doc: Any) -> dict[str, Any]:
    """Check ``doc`` against the trace event format; return what a reader would build.

    Returns a dict with ``slices`` (pid, event id) -> record, ``flows`` list of
    (pid, src id, dst id, edge type), ``threads`` (pid, tid) -> name, ``sort`` (pid, tid) ->
    sort index, ``counters`` (pid, name) -> [(ts, value)].
    """
    assert isinstance(doc, dict)
    assert next(iter(doc)) == "displayTimeUnit", "readers look for displayTimeUnit first"
    assert doc["displayTimeUnit"] in ("ms", "ns")
    events = doc["traceEvents"]
    assert isinstance(events, list)
    slices: dict[tuple[int, str], dict[str, Any]] = {}
    threads: dict[tuple[int, int], str] = {}
    sort: dict[tuple[int, int], int] = {}
    counters: dict[tuple[int, str], list[tuple[int, float]]] = defaultdict(list)
    stacks: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    last_start: dict[tuple[int, int], float] = {}
    open_flows: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
    flows: list[tuple[int, str, str, str]] = []
    tid_pid: dict[int, int] = {}
    prev_ts = -1.0
    seen_timed = False
    for rec in events:
        ph = rec["ph"]
        assert isinstance(rec.get("pid"), int) and isinstance(rec.get("tid"), int), rec
        assert tid_pid.setdefault(rec["tid"], rec["pid"]) == rec["pid"], "tid reused by a pid"
        if ph == "M":
            assert not seen_timed, "metadata comes before timed records"
            key = META_NAMES[rec["name"]]
            value = rec["args"][key]
            if rec["name"] == "thread_name":
                threads[(rec["pid"], rec["tid"])] = value
            if rec["name"] == "thread_sort_index":
                sort[(rec["pid"], rec["tid"])] = value
            assert isinstance(value, int if key == "sort_index" else str)
            continue
        seen_timed = True
        ts = rec["ts"]
        assert isinstance(ts, int) and ts >= 0, "integer microseconds: exact for every reader"
        assert ts >= prev_ts, "records sorted by ts"
        prev_ts = ts
        track = (rec["pid"], rec["tid"])
        if ph in ("X", "i"):
            assert isinstance(rec["name"], str) and isinstance(rec["cat"], str)
            if ph == "X":
                assert isinstance(rec["dur"], int) and rec["dur"] >= 0
                end = ts + rec["dur"]
            else:
                assert rec["s"] == "t" and "dur" not in rec
                end = ts
            # one slice starts at a time on a track, after the previous one ended
            assert ts > last_start.get(track, -1), f"two slices start together on {track}"
            stack = stacks[track]
            while stack and stack[-1]["end"] <= ts:
                stack.pop()
            assert not stack, f"slice {rec['args']['id']} overlaps another on {track}"
            stack.append({"end": end, "id": rec["args"]["id"]})
            last_start[track] = ts
            key2 = (rec["pid"], rec["args"]["id"])
            assert key2 not in slices, f"event {key2} written twice"
            slices[key2] = rec
        elif ph in ("s", "f"):
            assert isinstance(rec["id"], int) and rec["name"] == rec["cat"]
            stack = stacks[track]
            assert stack, f"flow {rec['id']} has no slice to bind to on {track}"
            bound = stack[-1]["id"]
            if ph == "s":
                assert rec["id"] not in open_flows, f"flow id {rec['id']} reused"
                open_flows[rec["id"]] = (rec, {"id": bound})
            else:
                assert rec["bp"] == "e"
                start, src = open_flows.pop(rec["id"])  # an end needs its start first
                assert (start["cat"], start["pid"]) == (rec["cat"], rec["pid"])
                flows.append((rec["pid"], src["id"], bound, rec["cat"]))
        elif ph == "C":
            assert isinstance(rec["name"], str)
            (value,) = rec["args"].values()
            assert _num(value)
            series = counters[(rec["pid"], rec["name"])]
            assert not series or ts > series[-1][0], "one counter sample per time"
            series.append((ts, value))
        else:
            raise AssertionError(f"unexpected phase {ph!r}")
    assert not open_flows, f"flows without an end: {sorted(open_flows)[:5]}"
    for track in {(p, t) for p, t in threads} | {(r["pid"], r["tid"]) for r in slices.values()}:
        assert track in threads and track in sort, f"track {track} is not named and sorted"
    return {
        "slices": slices,
        "flows": flows,
        "threads": threads,
        "sort": sort,
        "counters": dict(counters),
    }


def every_edge_trace(trace_id: str = "all-edges") -> Trace:
    """A small trace with every event type and every edge type."""
    b = TraceBuilder(task_id="demo", trace_id=trace_id, topology="centralized")
    plan = b.llm("lead", dur=1.0, step=0, tokens_in=100, tokens_out=20, cost=0.01)
    d = b.add("orchestrator_decision", "lead", after=[plan], decision="delegate", dur=0.1)
    spawns = [b.spawn("lead", f"w{i}", role="worker", after=[d]) for i in range(2)]
    msg = b.message("lead", "w0", content="go", after=[(spawns[0], "message")])
    rets = []
    for i, s in enumerate(spawns):
        _call, res = b.tool(f"w{i}", "search", after=[s, msg] if i == 0 else [s], dur=i + 1.0)
        llm = b.llm(f"w{i}", after=[res], dur=0.5, tokens_in=10 * (i + 1), tokens_out=5)
        rets.append(b.ret(f"w{i}", "lead", after=[(llm, "return")], content=str(i)))
    agg = b.aggregate("lead", rets, dur=0.5, content="0,1")
    safe = b.add("safety_event", "lead", after=[(agg, "safety_flow")])
    human = b.add("human_intervention", "lead", after=[(safe, "temporal")], dur=0.2)
    b.add("despawn", "lead", to="w1", after=[human])
    b.stop("lead", "done", after=[human])
    return b.build(rewards={"team": 1.0})


def _decode(data: bytes) -> Any:
    doc = json.loads(data)  # the strict standard parser
    assert doc == msgspec.json.decode(data)
    return doc


def _check_against(tr: Trace, got: dict[str, Any], pid: int) -> None:
    events = {e.id: e for e in tr.events}
    mine = {k[1]: r for k, r in got["slices"].items() if k[0] == pid}
    assert set(mine) == set(events)
    for eid, rec in mine.items():
        e = events[eid]
        assert rec["ph"] == ("X" if e.dur > 0 else "i")
        assert rec["ts"] == round(e.t * 1e6)
        if e.dur > 0:
            assert rec["dur"] == round((e.t + e.dur) * 1e6) - rec["ts"]
        assert rec["cat"] == e.type and rec["args"]["type"] == e.type
        assert rec["args"]["t_s"] == e.t and rec["args"]["dur_s"] == e.dur
        assert rec["args"].get("tokens", 0) == e.tokens
        assert rec["args"].get("cost", 0) == e.cost
        name = got["threads"][(pid, rec["tid"])]
        assert name.startswith("tool: " if e.type == "tool_result" else e.agent)
    want = Counter((e.src, e.dst, e.type) for e in tr.edges)
    have = Counter((s, d, t) for p, s, d, t in got["flows"] if p == pid)
    assert have == want
    # tracks follow the spawn tree
    lanes = [lane.name for lane in layout(tr)]
    tracks = sorted(
        ((got["sort"][k], name) for k, name in got["threads"].items() if k[0] == pid),
    )
    firsts = [n for _, n in tracks if not n.endswith("]")]
    assert [n.split(" (")[0].removeprefix("tool: ") for n in firsts] == lanes
    # cumulative token counters end at each agent's total
    for agent in {e.agent for e in tr.events if e.tokens}:
        series = got["counters"][(pid, f"tokens: {agent}")]
        assert series[0] == (0, 0)
        assert [v for _, v in series] == sorted(v for _, v in series)
        assert series[-1][1] == sum(e.tokens for e in tr.events if e.agent == agent)
    if any(e.tokens for e in tr.events):
        assert got["counters"][(pid, "tokens")][-1][1] == sum(e.tokens for e in tr.events)
    else:
        assert not [k for k in got["counters"] if k[0] == pid and k[1].startswith("tokens")]
    if any(e.cost for e in tr.events):
        cost = got["counters"][(pid, "cost")][-1][1]
        assert cost == pytest.approx(sum(e.cost for e in tr.events))


def test_every_event_edge_and_counter_is_represented():
    tr = every_edge_trace()
    assert {e.type for e in tr.edges} == {
        "temporal",
        "causal",
        "spawn",
        "message",
        "tool_dependency",
        "return",
        "aggregate",
        "safety_flow",
    }
    assert len({e.type for e in tr.events}) == 11
    doc = _decode(export_bytes([tr]))
    got = check_chrome_trace(doc)
    _check_against(tr, got, 1)
    assert doc["otherData"]["traces"][0]["edges_not_drawn"] == {}
    names = set(got["threads"].values())
    assert {"lead", "w0 (worker)", "w1 (worker)", "tool: search"} <= names


def test_generated_traces_several_processes():
    a = generate_trace(agents=12, steps=600, depth=2, seed=3)
    b = generate_trace(agents=5, steps=200, depth=1, seed=4, llm_events=False)
    doc = _decode(export_bytes([a, b, every_edge_trace()]))
    got = check_chrome_trace(doc)
    for pid, tr in enumerate((a, b, every_edge_trace()), 1):
        _check_against(tr, got, pid)
    procs = {r["pid"]: r["args"]["name"] for r in doc["traceEvents"] if r["name"] == "process_name"}
    assert procs == {
        1: f"{a.task_id} · {a.trace_id}",
        2: f"{b.task_id} · {b.trace_id}",
        3: "demo · all-edges",
    }


def test_overlapping_events_of_one_agent_get_extra_tracks():
    ev = [
        Event(id="a", t=0.0, dur=3.0, type="llm_call", agent="x"),
        Event(id="b", t=1.0, dur=3.0, type="tool_call", agent="x", tool="t"),  # overlaps a
        Event(id="c", t=1.0, dur=0.0, type="message", agent="x", to="y"),  # starts with b
        Event(id="d", t=1.0, dur=0.0, type="message", agent="x", to="y"),  # and again
        Event(id="e", t=3.0, dur=1.0, type="llm_call", agent="x"),  # a ended: back on track 1
        Event(id="f", t=2.0, dur=0.0, type="message", agent="y", to="x"),
    ]
    edges = [Edge("a", "e", "causal"), Edge("c", "f", "message"), Edge("d", "f", "message")]
    tr = Trace(trace_id="ov", task_id="t", events=tuple(ev), edges=tuple(edges))
    got = check_chrome_trace(_decode(export_bytes([tr])))
    _check_against(tr, got, 1)
    track = {eid: got["threads"][(1, r["tid"])] for (_, eid), r in got["slices"].items()}
    assert track["a"] == track["e"] == "x"
    assert {track["b"], track["c"], track["d"]} == {"x [2]", "x [3]", "x [4]"}


def test_edges_that_cannot_be_drawn_are_counted():
    ev = (
        Event(id="a", t=5.0, type="message", agent="x", to="y"),
        Event(id="b", t=1.0, type="message", agent="y", to="x"),
    )
    tr = Trace(
        trace_id="bw",
        task_id="t",
        events=ev,
        edges=(Edge("a", "b", "message"), Edge("a", "zz", "causal")),
    )
    doc = _decode(export_bytes([tr]))
    check_chrome_trace(doc)
    assert doc["otherData"]["traces"][0]["edges_not_drawn"] == {
        "destination starts before source": 1,
        "unknown event": 1,
    }
    assert not [r for r in doc["traceEvents"] if r["ph"] in "sf"]


HOSTILE = [
    "<script>alert(1)</script>",
    '"},{"ph":"X"',
    "\x1b[31mred\x1b[0m\x00\x07\r\n\u2028",
    "lone \ud800 surrogate",
    "\\u0000 \\",
    "ü 漢字 🙂",
]


def test_hostile_strings_give_valid_bounded_json():
    big = "A" * 10**7
    ev = []
    for i, s in enumerate(HOSTILE):
        ev.append(
            Event(
                id=f"{s}-{i}",
                t=float(i),
                dur=0.5,
                type="tool_call",
                agent=s,
                role=s,
                tool=s,
                content=s + big if i == 0 else s,
                error=s,
                attrs={s: s, "nested": {"k": [s, 1, 2.5, None]}, "big": 2**70},
            )
        )
    ev.append(Event(id="plain", t=9.0, type="message", agent="p", attrs={"k": "v", "n": [1, 2]}))
    tr = Trace(
        trace_id=HOSTILE[0],
        task_id=HOSTILE[2],
        events=tuple(ev),
        edges=(Edge(ev[0].id, ev[1].id, "message"),),
        system=HOSTILE[1],
        topology="swarm",
    )
    data = export_bytes([tr])
    assert len(data) < 40_000, len(data)  # the 10^7-character content is previewed
    doc = _decode(data)
    got = check_chrome_trace(doc)
    for rec in doc["traceEvents"]:
        for value in _strings(rec):
            assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value), value
            value.encode("utf-8")  # no lone surrogates
    first = got["slices"][(1, "<script>alert(1)</script>-0")]
    assert len(first["args"]["content"]) == PREVIEW
    assert first["args"]["content_chars"] == len(HOSTILE[0]) + 10**7
    assert isinstance(first["args"]["attrs"], str)  # unusual keys: kept as cut JSON text
    plain = got["slices"][(1, "plain")]
    assert plain["args"]["attrs"] == {"k": "v", "n": [1, 2]}


def _strings(x: Any) -> list[str]:
    if isinstance(x, str):
        return [x]
    if isinstance(x, dict):
        return [s for k, v in x.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(x, list):
        return [s for v in x for s in _strings(v)]
    return []


@pytest.mark.parametrize("t", [float("inf"), float("nan"), 1e12])
def test_times_beyond_the_format_are_one_clear_error(t):
    tr = Trace(
        trace_id="big", task_id="t", events=(Event(id="e1", t=t, type="message", agent="a"),)
    )
    with pytest.raises(TraceError) as err:
        export_bytes([tr])
    msg = str(err.value)
    assert "trace 'big', event 'e1': t=" in msg and "shift the trace's times" in msg
    assert "\n" not in msg


def test_registry_and_dump_use_this_exporter(tmp_path):
    tr = every_edge_trace()
    assert export_any([tr], format="perfetto") == export_bytes([tr])
    out = tmp_path / "t.json"
    dump(tr, out, format="perfetto")
    assert out.read_bytes() == export_bytes([tr])


def test_cli_convert_to_perfetto(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    a, b = generate_trace(agents=4, steps=60, seed=1), every_edge_trace()
    dump([a, b], src)
    out = tmp_path / "trace.json"
    code = main(["convert", str(src), "--to", "perfetto", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0 and "2 trace(s)" in err
    got = check_chrome_trace(_decode(out.read_bytes()))
    _check_against(a, got, 1)
    _check_against(b, got, 2)
    # an existing output is kept unless --force
    assert main(["convert", str(src), "--to", "perfetto", "-o", str(out)]) == 1
    assert "exists" in capsys.readouterr().err


def test_cli_time_beyond_the_format_is_one_line_and_no_file(tmp_path, capsys):
    tr = Trace(
        trace_id="x", task_id="t", events=(Event(id="e7", t=1e12, type="message", agent="a"),)
    )
    src, out = tmp_path / "big.json", tmp_path / "big.perfetto.json"
    dump(tr, src)
    assert main(["convert", str(src), "--to", "perfetto", "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: trace 'x', event 'e7': t=1000000000000.0 s cannot be written in the Chrome "
        "trace format (at most 9.01e+09 s); shift the trace's times so that it starts near 0"
    )
    assert not out.exists()


def test_to_chrome_trace_preview_option():
    tr = every_edge_trace()
    doc = to_chrome_trace([tr], preview=3)
    contents = [r["args"]["content"] for r in doc["traceEvents"] if "content" in r.get("args", {})]
    assert contents and all(len(c) <= 3 for c in contents)


# ---------------------------------------------------------------------- trace processor


def _trace_processor_binary() -> str | None:
    env = os.environ.get("ORCHESTRACE_TRACE_PROCESSOR")
    if env and Path(env).is_file():
        return env
    found = shutil.which("trace_processor_shell") or shutil.which("trace_processor")
    if found:
        return found
    cache = Path.home() / ".local" / "share" / "perfetto" / "prebuilts"
    hits = sorted(glob.glob(str(cache / "trace_processor_shell*")))
    return hits[0] if hits else None


def test_perfetto_trace_processor_loads_the_file(tmp_path):
    tp_mod = pytest.importorskip("perfetto.trace_processor", reason="pip install perfetto")
    binary = _trace_processor_binary()
    if binary is None:
        pytest.skip(
            "Perfetto's trace_processor_shell is not available offline (the perfetto package "
            "downloads it on first use; no wheel ships it): set ORCHESTRACE_TRACE_PROCESSOR to "
            "its path to run this check"
        )
    tr, gen = every_edge_trace(), generate_trace(agents=6, steps=200, depth=2, seed=0)
    path = tmp_path / "t.json"
    path.write_bytes(export_bytes([tr, gen]))
    config = tp_mod.TraceProcessorConfig(bin_path=binary)
    with tp_mod.TraceProcessor(trace=str(path), config=config) as tp:
        n = tp.query("select count(*) as n from slice").as_pandas_dataframe()["n"][0]
        assert n == tr.n_events + gen.n_events
        flows = tp.query("select count(*) as n from flow").as_pandas_dataframe()["n"][0]
        assert flows == len(tr.edges) + len(gen.edges)
        names = set(tp.query("select name from thread").as_pandas_dataframe()["name"].dropna())
        assert {"lead", "w0 (worker)", "tool: search"} <= names
        bad = tp.query(
            "select name, value from stats where severity in ('error', 'data_loss') and value > 0"
        ).as_pandas_dataframe()
        assert bad.empty, bad.to_dict("records")


def test_large_trace_export_is_complete():
    """A 20,000-event trace of 60 agents exports every event and edge, in bounded size.

    ``ORCHESTRACE_FULL_SWEEP=1`` checks a 100,000-event trace the same way (about 5 s).
    """
    n = 100_000 if os.environ.get("ORCHESTRACE_FULL_SWEEP") == "1" else 20_000
    tr = generate_trace(agents=60, steps=n, depth=3, seed=2)
    data = export_bytes([tr])
    got = check_chrome_trace(msgspec.json.decode(data))
    assert len(got["slices"]) == n
    assert len(got["flows"]) == len(tr.edges)
    # each event's content preview and args stay small: under 1 KB a record on average
    assert len(data) < 1000 * (tr.n_events + len(tr.edges)), len(data)
