import contextlib
import json

import pytest

from orchestrace import TraceValidationError, dumps, generate_trace
from orchestrace.io import StreamWriter, iter_jsonl, load, load_all, read_jsonl, write_jsonl


def write_stream(path, tr, close=True):
    w = StreamWriter(
        path,
        trace_id=tr.trace_id,
        task_id=tr.task_id,
        topology=tr.topology,
        system=tr.system,
        meta=tr.meta,
    )
    # interleave like a live recorder: each event followed by the edges into it
    by_dst = {}
    for e in tr.edges:
        by_dst.setdefault(e.dst, []).append(e)
    for ev in tr.events:
        w.event(ev)
        for e in by_dst.get(ev.id, []):
            w.edge(e)
    if close:
        w.close(rewards=tr.rewards, costs=tr.costs, metrics=tr.metrics)
    else:
        w.abandon()


def test_trace_lines_roundtrip(tmp_path):
    traces = [generate_trace(5, 50, 1, seed=s) for s in range(4)]
    p = tmp_path / "many.jsonl"
    assert write_jsonl(traces, p) == 4
    assert read_jsonl(p) == traces
    assert load_all(p) == traces
    with pytest.raises(Exception, match="holds 4 traces"):
        load(p)


def test_stream_roundtrip(tmp_path, medium_trace):
    p = tmp_path / "run.jsonl"
    write_stream(p, medium_trace)
    (back,) = read_jsonl(p)
    assert back.events == medium_trace.events
    assert set(back.edges) == set(medium_trace.edges)
    assert back.costs == medium_trace.costs and not back.meta.get("partial")


@pytest.mark.slow
def test_stream_cut_at_every_byte_keeps_complete_events(tmp_path, small_trace):
    full = tmp_path / "full.jsonl"
    write_stream(full, small_trace)
    data = full.read_bytes()
    header_end = data.index(b"\n") + 1
    cut = tmp_path / "cut.jsonl"
    for n in range(header_end, len(data)):
        cut.write_bytes(data[:n])
        items = list(iter_jsonl(cut, partial=True))
        assert len(items) == 1
        tr = items[0].trace
        head, _, last = data[:n].rpartition(b"\n")
        complete = head.count(b'{"event"')
        with contextlib.suppress(ValueError):
            complete += "event" in json.loads(last)
        assert tr.n_events == complete
        assert tr.events == small_trace.events[:complete]
        footer_done = n == len(data)
        assert bool(tr.meta.get("partial")) != footer_done or n == len(data) - 1
        errors = [p for p in items[0].problems if p.severity == "error"]
        assert errors == [], (n, errors)
        # without --partial the truncation is an error naming what was kept
        strict = next(iter(iter_jsonl(cut, partial=False)))
        if strict.trace is not None and strict.trace.meta.get("partial"):
            assert any(p.code == "truncated" and p.severity == "error" for p in strict.problems)


def test_damaged_line_stops_or_is_skipped(tmp_path, small_trace):
    p = tmp_path / "run.jsonl"
    write_stream(p, small_trace)
    lines = p.read_bytes().split(b"\n")
    lines[4] = b'{"event": {"id": "e4", "t": "garbage"'
    p.write_bytes(b"\n".join(lines))
    (item,) = list(iter_jsonl(p))
    assert item.trace is not None and item.trace.meta["partial"]
    first = str(item.problems[0])
    assert first == (
        f"{p}:5: $.event.t: expected float, got str; make the value a float "
        "(--keep-going skips this line)"
    )
    kept = next(iter(iter_jsonl(p, keep_going=True)))
    assert kept.trace.n_events == small_trace.n_events - 1
    assert not kept.trace.meta.get("partial")
    codes = {q.code for q in kept.problems if q.severity == "error"}
    assert "malformed-json" in codes or "wrong-type" in codes


def test_trace_lines_cut_mid_line(tmp_path):
    traces = [generate_trace(3, 20, 1, seed=s) for s in range(3)]
    p = tmp_path / "many.jsonl"
    write_jsonl(traces, p)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) - 40])
    items = list(iter_jsonl(p))
    assert [i.trace for i in items[:2]] == traces[:2]
    assert items[2].trace is None and items[2].problems[0].code == "truncated"
    assert read_jsonl(p, keep_going=True) == traces[:2]
    with pytest.raises(TraceValidationError, match=r"many.jsonl:3: \$: last line is incomplete"):
        read_jsonl(p)
    # the advice is the one that reads them (--partial mends cut record streams, not this)
    with pytest.raises(TraceValidationError, match=r"--keep-going reads them") as err:
        read_jsonl(p, partial=True)
    assert "validate with --partial" not in str(err.value)


def test_deep_nesting_in_a_stream_line_is_named_as_json_names_it(tmp_path, small_trace):
    p = tmp_path / "run.jsonl"
    write_stream(p, small_trace)
    lines = p.read_bytes().split(b"\n")
    deep = b"[" * 10_000 + b"]" * 10_000
    lines[1] = lines[1].replace(b'"id":', b'"attrs":{"v":' + deep + b'},"id":', 1)
    p.write_bytes(b"\n".join(lines))
    problems = [str(x) for item in iter_jsonl(p) for x in item.problems]
    assert problems[0] == (
        f"{p}:2: $: JSON nested too deeply at document; fix or delete this line (--keep-going "
        "skips it)"
    )


def test_bad_line_in_trace_lines(tmp_path):
    traces = [generate_trace(3, 20, 1, seed=s) for s in range(3)]
    p = tmp_path / "many.jsonl"
    rows = [dumps(t) for t in traces]
    bad = json.loads(rows[1])
    bad["events"][0]["type"] = "dream"
    rows[1] = json.dumps(bad).encode()
    p.write_bytes(b"\n".join([*rows, b"not json at all", b""]))
    items = list(iter_jsonl(p, keep_going=True))
    assert [i.trace == t for i, t in zip(items, traces, strict=False)][:1] == [True]
    assert str(items[1].problems[0]).startswith(
        f"{p}:2: $.events[0].type: unknown event type 'dream'"
    )
    assert items[3].trace is None and "malformed" in items[3].problems[0].message
    assert len(list(iter_jsonl(p))) == 2  # stops at the first bad line


def test_writer_append_and_multi_trace_stream(tmp_path):
    p = tmp_path / "two.jsonl"
    a, b = generate_trace(3, 15, 1, seed=1), generate_trace(3, 15, 1, seed=2)
    write_stream(p, a)
    w = StreamWriter(p, trace_id=b.trace_id, task_id=b.task_id, append=True)
    for e in b.events:
        w.event(e)
    for e in b.edges:
        w.edge(e)
    w.close(costs=b.costs)
    got = read_jsonl(p)
    assert [t.trace_id for t in got] == [a.trace_id, b.trace_id]
    assert got[1].events == b.events
    w.close()  # idempotent
    with pytest.raises(Exception, match="writer is closed"):
        w.event(b.events[0])


@pytest.mark.parametrize("extra", [{}, {"note": "x"}])  # the typed decoder reads it, or not
def test_a_survey_schema_trace_line_is_imported_as_its_json_file_is(tmp_path, extra):
    from orchestrace.io import parse, to_upstream
    from orchestrace.trace.build import TraceBuilder

    b = TraceBuilder(task_id="t", topology="critic_loop")
    b.llm("w", tokens_in=5, dur=1.0)  # exported as a tool call with a type marker
    b.add("message", "w", to="lead", cost=0.0)
    doc = to_upstream(b.build())
    doc["events"][1].update({"cost": 0, **extra})  # an explicit zero: kept in attrs
    first, second = doc["events"][1]["id"], doc["events"][0]["id"]
    doc["edges"].append({"src": first, "dst": second, "type": "causal"})  # a cycle: semantic
    line = json.dumps(doc).encode()
    path = tmp_path / "t.jsonl"
    path.write_bytes(line + b"\n")
    (item,) = list(iter_jsonl(path))
    want, problems = parse(line)
    assert item.trace == want and item.trace is not None
    assert item.trace.events[0].type == "llm_call" and item.trace.topology == "critic_loop"
    assert [(p.severity, p.code) for p in item.problems] == [(p.severity, p.code) for p in problems]
    assert ("semantic", "causal-cycle") in [(p.severity, p.code) for p in item.problems]


@pytest.mark.parametrize("head", [b'{ "header":', b'{\t"h\\u0065ader" :', b'  {"header":'])
def test_a_record_stream_is_known_by_its_first_key_as_json_reads_it(tmp_path, head):
    import msgspec

    tr = generate_trace(agents=3, steps=6, seed=1)
    enc = msgspec.json.encode
    first = enc({"header": {"trace_id": tr.trace_id, "task_id": tr.task_id}})
    lines = [
        head + first[len(b'{"header":') :],
        *(enc({"event": e}) for e in tr.events),
        *(enc({"edge": e}) for e in tr.edges),
        enc({"footer": {"costs": tr.costs, "rewards": {}}}),
    ]
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    (item,) = list(iter_jsonl(path))
    assert item.trace is not None and item.trace.events == tr.events
    assert not [p for p in item.problems if p.severity == "error"]


def test_costs_beyond_the_largest_float_add_up_to_inf_without_a_warning(tmp_path):
    import warnings

    import msgspec

    tr = generate_trace(agents=3, steps=8, seed=1)
    tr = tr.replace(events=tuple(msgspec.structs.replace(e, cost=1e308) for e in tr.events))
    enc = msgspec.json.encode
    lines = [
        enc({"header": {"trace_id": tr.trace_id, "task_id": tr.task_id}}),
        *(enc({"event": e}) for e in tr.events),
        *(enc({"edge": e}) for e in tr.edges),
        enc({"footer": {"costs": tr.costs, "rewards": {}}}),
    ]
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow warning would reach stderr
        (columns,) = list(iter_jsonl(path, columnar=True))
        (objects,) = list(iter_jsonl(path))
    assert [str(p) for p in columns.problems] == [str(p) for p in objects.problems]


def test_only_json_whitespace_may_come_before_the_header_key():
    from orchestrace.io._jsonl_records import starts_a_stream

    assert starts_a_stream(b' \t{ "header": {}}') and starts_a_stream(b'{"\\u0068eader": {}}')
    assert not starts_a_stream(b'\x0b{"header": {}}')  # not whitespace to JSON
    assert not starts_a_stream(b'{"trace_id": "t", "header": 1}')
    assert not starts_a_stream(b'{"' + b"h" * 300 + b'": 1}')
