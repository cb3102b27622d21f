"""The batched and column-wise JSONL readers reject exactly what the line-by-line reader rejects.

Three readings of every record stream are compared: the reference reads it line by line into
event objects (the batch decoder switched off), the default reads it in batches into event
objects, and ``columnar=True`` reads it in batches into columns checked as a compiled graph.
All three must yield the same traces (events, edges, header), the same problems in the same
words and order, and raise the same errors. The corpus: faults of every kind applied to a small
and a 3,000-event stream (with tiny batches, so that faults land on batch edges), graph rules
broken by streams, and every JSONL input of the hostile corpus.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from orchestrace import Edge, Event
from orchestrace.errors import OrchestraceError
from orchestrace.io import _jsonl_records, detect_format, iter_jsonl, jsonl
from orchestrace.trace.generate import generate_trace
from orchestrace.trace.model import Trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

enc = msgspec.json.encode


def _lines(tr: Trace) -> list[bytes]:
    head = {"trace_id": tr.trace_id, "task_id": tr.task_id, "meta": {"k": 1}}
    out = [enc({"header": head})]
    out += [enc({"event": e}) for e in tr.events]
    out += [enc({"edge": e}) for e in tr.edges]
    out.append(enc({"footer": {"costs": tr.costs, "rewards": {"team": 1.0}}}))
    return out


def _interleaved(tr: Trace) -> list[bytes]:
    """Events and edges interleaved, as the runtime writes them (an edge after its dst)."""
    head = {"trace_id": tr.trace_id, "task_id": tr.task_id}
    by_dst: dict[str, list[Edge]] = {}
    for e in tr.edges:
        by_dst.setdefault(e.dst, []).append(e)
    out = [enc({"header": head})]
    for ev in tr.events:
        out.append(enc({"event": ev}))
        out += [enc({"edge": e}) for e in by_dst.get(ev.id, [])]
    return out  # no footer: the recording stopped


def _join(lines: list[bytes]) -> bytes:
    return b"\n".join(lines) + b"\n"


def _ev(line: bytes) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.json.decode(line)
    return out


Fault = Callable[[list[bytes]], bytes]


def _at(k: int, new: bytes) -> Fault:
    def fault(lines: list[bytes]) -> bytes:
        lines = list(lines)
        lines[k % len(lines)] = new
        return _join(lines)

    return fault


def _edit_event(k: int, **kw: Any) -> Fault:
    def fault(lines: list[bytes]) -> bytes:
        lines = list(lines)
        idx = [i for i, x in enumerate(lines) if x.startswith(b'{"event"')][k]
        rec = _ev(lines[idx])
        rec["event"].update(kw)
        lines[idx] = enc(rec)
        return _join(lines)

    return fault


def _edge_to(k: int, dst: str) -> Fault:
    def fault(lines: list[bytes]) -> bytes:
        lines = list(lines)
        idx = [i for i, x in enumerate(lines) if x.startswith(b'{"edge"')][k]
        rec = _ev(lines[idx])
        rec["edge"]["dst"] = dst
        lines[idx] = enc(rec)
        return _join(lines)

    return fault


def _drop(pred: Callable[[bytes], bool], which: int = 0) -> Fault:
    def fault(lines: list[bytes]) -> bytes:
        hits = [i for i, x in enumerate(lines) if pred(x)]
        return _join([x for i, x in enumerate(lines) if i != hits[which]])

    return fault


def _raw(fn: Callable[[bytes], bytes]) -> Fault:
    return lambda lines: fn(_join(lines))


FAULTS: dict[str, Fault] = {
    "clean": _join,
    "malformed-json": _at(5, b'{"event": {"id": "x",'),
    "not-an-object": _at(6, b"[1, 2]"),
    "mixed-record": _at(
        4,
        b'{"event":{"id":"m","t":0.0,"type":"message","agent":"a"},"edge":{"src":"e1",'
        b'"dst":"e2","type":"causal"}}',
    ),
    "empty-record": _at(7, b"{}"),
    "unknown-record": _at(7, b'{"comment": 1}'),
    "duplicate-key": _at(
        3, b'{"event":{"id":"e2","id":"e9","t":0.0,"type":"message","agent":"a"}}'
    ),
    "duplicate-event-key": _at(
        3,
        b'{"event":{"id":"q","t":0.0,"type":"message","agent":"a"},'
        b'"event":{"id":"q2","t":0.0,"type":"message","agent":"a"}}',
    ),
    "spaced-lines": _raw(lambda b: b.replace(b'":', b'": ').replace(b",", b", ")),
    "crlf": _raw(lambda b: b.replace(b"\n", b"\r\n")),
    "blank-lines": _raw(lambda b: b.replace(b"\n", b"\n\n", 5)),
    "trailing-space": _raw(lambda b: b.replace(b"}\n", b"}  \n", 7)),
    "cut-mid-record": _raw(lambda b: b[: len(b) * 2 // 3]),
    "cut-at-line-end": _raw(lambda b: b[: b.rfind(b"\n", 0, len(b) // 2) + 1]),
    "no-newline-at-end": _raw(lambda b: b.rstrip(b"\n")),
    "no-footer": lambda lines: _join(lines[:-1]),
    "no-header": lambda lines: _join(lines[1:]),
    "header-twice": lambda lines: _join([*lines[:9], lines[0], *lines[9:]]),
    "two-traces": lambda lines: _join(lines + lines),
    "record-after-footer": lambda lines: _join([*lines, lines[2]]),
    "bad-header": _at(0, b'{"header": {"trace_id": 5}}'),
    "negative-time": _edit_event(2, t=-1.0),
    "unknown-type": _edit_event(2, type="thinking"),
    "empty-agent": _edit_event(3, agent=""),
    "huge-int": _raw(
        lambda b: b.replace(b'"tokens_in":', b'"tokens_in":99999999999999999999', 1).replace(
            b"99999999999999999999" + b"1", b"99999999999999999999", 1
        )
    ),
    "out-of-range-float": _raw(lambda b: b.replace(b'"t":0.0', b'"t":1e999', 1)),
    "duplicate-id": _edit_event(4, id="e1"),
    "dangling-edge": _edge_to(1, "nowhere"),
    "self-loop": _edge_to(2, "e2"),
    "cycle": lambda lines: _join(
        [
            *lines[:-1],
            enc(
                {
                    "edge": Edge(
                        _ev(lines[-3])["edge"]["dst"], _ev(lines[-3])["edge"]["src"], "causal"
                    )
                }
            ),
            lines[-1],
        ]
    ),
    "dropped-spawn": _drop(lambda x: b'"type":"spawn"' in x, 1),
    "damaged-spawn": lambda lines: _join(
        [
            x.replace(b'"type":"spawn"', b'"type":"spawn","step":-1', 1)
            if b'"type":"spawn"' in x
            else x
            for x in lines
        ]
    ),
    "time-travel": _edit_event(6, t=0.0),
    "negative-cost": _raw(lambda b: b.replace(b'"costs":{', b'"costs":{"x":-1.0,', 1)),
    "partial-meta": _at(0, b'{"header":{"trace_id":"t","task_id":"d","meta":{"partial":true}}}'),
    "binary": _raw(lambda b: b[:200] + b"\x00\xff\xfe" + b[200:]),
    "not-utf8": _raw(lambda b: b.replace(b'"agent":"', b'"agent":"\xff', 1)),
}


def _small() -> Trace:
    return generate_trace(agents=4, steps=30, depth=2, seed=2)


def _large() -> Trace:
    return generate_trace(agents=20, steps=3000, depth=2, seed=5)


def _summary(items: Iterator[Any]) -> object:
    try:
        out = []
        for item in items:
            tr = item.trace
            graph = item.graph
            events = (
                [
                    (graph.ids[i] if isinstance(graph.ids, list) else graph.ids[i].as_py())
                    for i in range(graph.n)
                ]
                if graph is not None
                else [e.id for e in tr.events]
                if tr is not None
                else []
            )
            n_edges = (
                len(graph.src) if graph is not None else len(tr.edges) if tr is not None else 0
            )
            head = (
                None
                if tr is None
                else (
                    tr.trace_id,
                    tr.task_id,
                    tr.system,
                    tr.topology,
                    tr.rewards,
                    tr.costs,
                    tr.metrics,
                    tr.meta,
                    tr.schema_version,
                )
            )
            errors = (
                item.n_errors
                if graph is not None
                else sum(e.error is not None for e in tr.events)
                if tr is not None
                else 0
            )
            out.append((head, events, n_edges, errors, item.line, [str(p) for p in item.problems]))
        return out
    except OrchestraceError as err:
        return f"{type(err).__name__}: {err}"


def _three_ways(path: Path, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> None:
    with monkeypatch.context() as m:
        m.setattr(jsonl, "BATCHED", False)
        reference = _summary(iter_jsonl(path, **kw))
    batched = _summary(iter_jsonl(path, **kw))
    columns = _summary(iter_jsonl(path, columnar=True, **kw))
    assert batched == reference
    assert columns == reference


@pytest.fixture(
    params=[(4096, 65536, 1 << 22), (7, 5, 100), (3, 2, 1)],
    ids=["batches", "tiny-batches", "byte-blocks"],
)
def batch_sizes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    lines, columns, block = request.param
    monkeypatch.setattr(_jsonl_records, "BATCH_LINES", lines)
    monkeypatch.setattr(_jsonl_records, "COLUMN_BATCH", columns)
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", block)


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("layout", ["grouped", "interleaved"])
def test_small_stream_faults(fault, layout, batch_sizes, tmp_path, monkeypatch):
    tr = _small()
    lines = _lines(tr) if layout == "grouped" else _interleaved(tr)
    path = tmp_path / "run.jsonl"
    path.write_bytes(FAULTS[fault](lines))
    for keep_going in (False, True):
        for partial in (False, True):
            _three_ways(path, monkeypatch, keep_going=keep_going, partial=partial)


@pytest.mark.parametrize(
    "fault",
    [
        "clean",
        "malformed-json",
        "duplicate-id",
        "dangling-edge",
        "cycle",
        "cut-mid-record",
        "two-traces",
        "spaced-lines",
        "dropped-spawn",
        "time-travel",
    ],
)
def test_large_stream_faults(fault, tmp_path, monkeypatch):
    """3,000 events: ids map through the dense integer table, many column batches."""
    monkeypatch.setattr(_jsonl_records, "BATCH_LINES", 257)
    monkeypatch.setattr(_jsonl_records, "COLUMN_BATCH", 1000)
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 10_000)
    path = tmp_path / "run.jsonl"
    path.write_bytes(FAULTS[fault](_lines(_large())))
    for keep_going in (False, True):
        _three_ways(path, monkeypatch, keep_going=keep_going, partial=True)


def test_the_fast_path_is_taken(tmp_path, monkeypatch):
    """A clean stream is read in runs (not line by line) and into columns."""
    path = tmp_path / "run.jsonl"
    path.write_bytes(_join(_lines(_large())))
    seen: list[int] = []
    real = _jsonl_records.RecordColumns.add_events

    def spy(self: Any, events: list[Event], lines: list[int]) -> None:
        seen.append(len(events))
        real(self, events, lines)

    monkeypatch.setattr(_jsonl_records.RecordColumns, "add_events", spy)
    (item,) = iter_jsonl(path, columnar=True)
    assert sum(seen) == 3000 and item.graph is not None and item.trace is not None
    assert item.trace.events == () and item.n_events == 3000 and item.problems == []


def test_hostile_jsonl_inputs(tmp_path, monkeypatch):
    """Every JSONL input of the hostile corpus reads the same three ways."""
    from hostile.corpus import CASES, make_seeds

    seeds = make_seeds(tmp_path / "seeds")
    n = 0
    for case in CASES:
        if case.special or case.feed is not None:
            continue
        try:
            path = case.materialize(seeds, tmp_path / "cases")
        except OSError:  # (a case that needs what this machine lacks)
            continue
        try:
            if not path.is_file() or detect_format(path) != "jsonl":
                continue
        except OrchestraceError:
            continue
        n += 1
        for keep_going in (False, True):
            for partial in (False, True):
                _three_ways(path, monkeypatch, keep_going=keep_going, partial=partial)
    assert n >= 20


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 22])
@pytest.mark.parametrize("where", ["middle", "last-complete", "last-cut", "exactly-at-limit"])
def test_line_length_limit_is_applied_alike(block, where, tmp_path, monkeypatch):
    """The block reader refuses an over-long line at the same line, after the same items."""
    from orchestrace.io import _common

    monkeypatch.setattr(_common, "MAX_LINE_BYTES", 120)
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", block)
    lines = [x for x in _lines(_small()) if len(x) < 100]
    long = b'{"comment":"' + b"x" * 200 + b'"}'
    at_limit = b'{"comment":"' + b"x" * (120 - 14) + b'"}'  # 120 bytes + its newline
    assert len(at_limit) == 120
    data = {
        "middle": _join([*lines[:6], long, *lines[6:]]),
        "last-complete": _join([*lines, long]),
        "last-cut": _join(lines) + long,
        "exactly-at-limit": _join([*lines[:6], at_limit, *lines[6:]]),
    }[where]
    path = tmp_path / "run.jsonl"
    path.write_bytes(data)
    for keep_going in (False, True):
        _three_ways(path, monkeypatch, keep_going=keep_going, partial=True)
