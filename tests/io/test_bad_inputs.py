"""Bad inputs to the readers: one fault per test, each a clear error naming place and fix."""

from __future__ import annotations

import json
import os
import threading
import time

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from orchestrace import TraceFormatError, TraceValidationError, dumps, native_schema
from orchestrace.io import _common, iter_jsonl, load, load_all, parse
from orchestrace.io._common import read_bytes
from orchestrace.io.parquet import parse_parquet, read_graph, read_parquet, write_parquet
from orchestrace.trace.check import check_trace

ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0


def stream_bytes(tr, *, footer=True, header=None):
    """A record stream (what the runtime writes) of ``tr``, built line by line."""
    enc = msgspec.json.encode
    head = header or {"trace_id": tr.trace_id, "task_id": tr.task_id}
    lines = [enc({"header": head})]
    lines += [enc({"event": e}) for e in tr.events]
    lines += [enc({"edge": e}) for e in tr.edges]
    if footer:
        lines.append(enc({"footer": {"costs": tr.costs, "rewards": tr.rewards}}))
    return b"\n".join(lines) + b"\n"


@pytest.fixture
def json_file(tmp_path, small_trace):
    p = tmp_path / "t.json"
    p.write_bytes(dumps(small_trace))
    return p


@pytest.fixture
def stream_file(tmp_path, small_trace):
    p = tmp_path / "run.jsonl"
    p.write_bytes(stream_bytes(small_trace))
    return p


# ---------------------------------------------------------------------- special files
@pytest.mark.parametrize("name", ["t.json", "t.jsonl"])
def test_fifo_without_writer_gives_up(tmp_path, monkeypatch, name):
    monkeypatch.setattr(_common, "FIFO_WRITER_WAIT_S", 0.2)
    p = tmp_path / name
    os.mkfifo(p)
    start = time.monotonic()
    with pytest.raises(TraceFormatError) as err:
        load_all(p)
    assert time.monotonic() - start < 5
    assert str(err.value) == (
        f"{p}: file: a FIFO that no program opened for writing within 0.2 s; start the "
        "writer first, or pass a file (ORCHESTRACE_FIFO_WRITER_S sets the wait)"
    )


def test_fifo_with_a_writer_is_read(tmp_path, small_trace):
    p = tmp_path / "t.json"
    os.mkfifo(p)

    def write():
        with open(p, "wb") as fh:
            fh.write(dumps(small_trace))

    threading.Thread(target=write, daemon=True).start()
    assert load(p) == small_trace


def test_pipe_without_suffix_is_detected_and_read_once(small_trace):
    """``<(cat RUN.jsonl)``: the format is told from the stream without losing its start."""
    r, w = os.pipe()
    data = stream_bytes(small_trace)

    def write():
        with os.fdopen(w, "wb") as fh:
            fh.write(data)

    threading.Thread(target=write, daemon=True).start()
    try:
        traces = load_all(f"/dev/fd/{r}")
    finally:
        os.close(r)
    assert [t.events for t in traces] == [small_trace.events]


def test_pipe_json_ignores_fstat_size(small_trace):
    r, w = os.pipe()
    os.write(w, dumps(small_trace))
    os.close(w)
    try:
        assert read_bytes(f"/dev/fd/{r}") == dumps(small_trace)
    finally:
        os.close(r)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_character_device_is_refused(device):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    with pytest.raises(TraceFormatError) as err:
        read_bytes(device)
    assert str(err.value) == (
        f"{device}: file: not a regular file (a character device); pass a trace file, or pipe "
        "a trace in (`cat FILE | orchestrace ... -`)"
    )


def test_character_device_as_jsonl_is_refused(tmp_path):
    link = tmp_path / "zero.jsonl"
    link.symlink_to("/dev/zero")
    with pytest.raises(TraceFormatError, match=r"not a regular file \(a character device\)"):
        list(iter_jsonl(link))


def test_endless_line_is_capped(tmp_path, monkeypatch):
    monkeypatch.setattr(_common, "MAX_LINE_BYTES", 1000)
    p = tmp_path / "long.jsonl"
    p.write_bytes(b'{"header": "' + b"x" * 5000)
    with pytest.raises(TraceFormatError) as err:
        list(iter_jsonl(p))
    assert str(err.value) == (
        f"{p}: line 1: line is longer than 1,000 bytes; this is not a trace file; for very "
        "large traces use a Parquet dataset"
    )


def test_endless_stream_is_capped(monkeypatch):
    monkeypatch.setattr(_common, "MAX_STREAM_BYTES", 1 << 20)
    r, w = os.pipe()

    def write():
        with os.fdopen(w, "wb") as fh, __import__("contextlib").suppress(BrokenPipeError):
            for _ in range(64):
                fh.write(b" " * (1 << 16))

    threading.Thread(target=write, daemon=True).start()
    try:
        with pytest.raises(TraceFormatError, match=r"input is longer than 1,048,576 bytes"):
            read_bytes(f"/dev/fd/{r}")
    finally:
        os.close(r)


@pytest.mark.parametrize("name", ["t.json", "t.jsonl"])
def test_directory_as_trace_file(tmp_path, name):
    p = tmp_path / name
    p.mkdir()
    with pytest.raises(TraceFormatError) as err:
        load_all(p)
    assert str(err.value).startswith(f"{p}: file: is a directory; pass a ")


@pytest.mark.skipif(ROOT_USER, reason="root reads any file")
@pytest.mark.parametrize("name", ["t.json", "run.jsonl"])
def test_unreadable_file(tmp_path, small_trace, name):
    p = tmp_path / name
    p.write_bytes(dumps(small_trace) if name.endswith(".json") else stream_bytes(small_trace))
    p.chmod(0)
    with pytest.raises(TraceFormatError) as err:
        load_all(p)
    assert str(err.value) == f"{p}: file: cannot read {p}: permission denied; check its permissions"


@pytest.mark.parametrize("name", ["t.json", "run.jsonl"])
def test_permission_error_is_one_clear_error(tmp_path, small_trace, monkeypatch, name):
    """The same message without needing a non-root user: ``open`` is refused."""
    p = tmp_path / name
    p.write_bytes(dumps(small_trace) if name.endswith(".json") else stream_bytes(small_trace))
    real_open = os.open

    def deny(path, *a, **kw):
        if str(path) == str(p):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *a, **kw)

    monkeypatch.setattr(_common.os, "open", deny)
    with pytest.raises(TraceFormatError) as err:
        load_all(p)
    assert str(err.value) == f"{p}: file: cannot read {p}: permission denied; check its permissions"


def test_unreadable_parquet_table(tmp_path, small_trace, monkeypatch):
    ds = tmp_path / "d.parquet"
    write_parquet([small_trace], ds)
    real = os.access
    monkeypatch.setattr(
        os, "access", lambda p, m: False if str(p).endswith("events.parquet") else real(p, m)
    )
    with pytest.raises(TraceFormatError) as err:
        read_parquet(ds)
    ev = ds / "events.parquet"
    assert (
        str(err.value) == f"{ev}: file: cannot read {ev}: permission denied; check its permissions"
    )


# ---------------------------------------------------------------------- JSON content
def test_utf8_bom_is_accepted(tmp_path, small_trace):
    p = tmp_path / "bom.json"
    p.write_bytes(b"\xef\xbb\xbf" + dumps(small_trace))
    assert load(p) == small_trace


def test_utf8_bom_in_jsonl_is_accepted(tmp_path, small_trace):
    p = tmp_path / "bom.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + stream_bytes(small_trace))
    assert load(p).events == small_trace.events


def test_duplicate_events_key_is_named(small_trace):
    data = dumps(small_trace)[:-1] + b',"events":[]}'
    with pytest.raises(TraceFormatError) as err:
        parse(data, source="t.json")
    msg = str(err.value)
    assert msg.startswith("t.json: line 1, column ")
    assert msg.endswith(
        "duplicate key 'events': a JSON object names it twice; keep one of them (a reader "
        "would silently use only the last)"
    )


def test_duplicate_key_inside_an_event_is_named(small_trace):
    data = dumps(small_trace).replace(b'"id":"e1",', b'"id":"e1","id":"e9",', 1)
    with pytest.raises(TraceFormatError, match="duplicate key 'id'"):
        parse(data, source="t.json")


def test_number_out_of_float_range_names_the_path(small_trace):
    data = dumps(small_trace).replace(b'"t":0.0', b'"t":1e999', 1)
    with pytest.raises(TraceFormatError) as err:
        parse(data, source="t.json")
    assert str(err.value).endswith(
        "number 1e999 at $.events[0].t is out of range (beyond the largest float); record a "
        "finite number"
    )


# ---------------------------------------------------------------------- integers past int64
@pytest.mark.parametrize("field", ["step", "tokens_in", "tokens_out"])
def test_integer_beyond_int64_is_a_problem(small_trace, field):
    doc = json.loads(dumps(small_trace))
    doc["events"][2][field] = 2**63
    _, problems = parse(json.dumps(doc).encode(), source="t.json")
    assert [str(p) for p in problems] == [
        f"t.json: $.events[2].{field}: value out of range: expected an integer <= "
        "9223372036854775807 (2^63-1); record an integer <= 9223372036854775807 (2^63-1)"
    ]


def test_integer_beyond_int64_in_a_stream_line(tmp_path, small_trace):
    p = tmp_path / "run.jsonl"
    p.write_bytes(
        stream_bytes(small_trace).replace(b'"tokens_in":100', b'"tokens_in":1' + b"0" * 30, 1)
    )
    problems = [str(x) for item in iter_jsonl(p) for x in item.problems]
    assert problems[0] == (
        f"{p}:2: $.event.tokens_in: value out of range: expected an integer <= "
        "9223372036854775807 (2^63-1); record an integer <= 9223372036854775807 (2^63-1) "
        "(--keep-going skips this line)"
    )


def test_python_built_trace_with_huge_count_is_checked_not_crashed(small_trace):
    ev = list(small_trace.events)
    ev[1] = msgspec.structs.replace(ev[1], tokens_out=2**64)
    tr = small_trace.replace(events=tuple(ev))
    assert [str(p) for p in check_trace(tr)] == [
        f"$.events[1].tokens_out (event '{ev[1].id}'): tokens_out is 18446744073709551616, "
        "outside 0 to 2^63-1; record tokens_out as an integer from 0 to 2^63-1"
    ]
    with pytest.raises(TraceValidationError, match=r"\$\.events\[1\]\.tokens_out"):
        tr.graph.tokens_out  # noqa: B018


def test_schema_bounds_integers():
    step = native_schema()["$defs"]["Event"]["properties"]["step"]["anyOf"][0]
    assert step == {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}


# ---------------------------------------------------------------------- paths after a bad event
def test_paths_stay_right_after_a_malformed_event(small_trace):
    doc = json.loads(dumps(small_trace))
    doc["events"][1]["type"] = "bogus"
    doc["events"][5]["id"] = doc["events"][4]["id"]
    _, problems = parse(json.dumps(doc).encode(), source="t.json")
    dup = [str(p) for p in problems if p.code == "duplicate-id"]
    e4 = doc["events"][4]["id"]
    assert dup == [
        f"t.json: $.events[5].id: duplicate event id '{e4}' (first used at $.events[4]); "
        "give every event a unique id"
    ]


def test_dropped_spawn_gives_no_knock_on_errors(small_trace):
    doc = json.loads(dumps(small_trace))
    k = next(i for i, e in enumerate(doc["events"]) if e["type"] == "spawn")
    doc["events"][k]["step"] = -1
    _, problems = parse(json.dumps(doc).encode(), source="t.json")
    assert [p.code for p in problems] == ["out-of-range"]
    assert problems[0].path == f"$.events[{k}].step"


# ---------------------------------------------------------------------- record streams
def test_keep_going_with_a_bad_header_reports_it(tmp_path, small_trace):
    p = tmp_path / "run.jsonl"
    header = {"trace_id": 1, "task_id": "x"}
    p.write_bytes(stream_bytes(small_trace, header=header))
    items = list(iter_jsonl(p, keep_going=True))
    n = 1 + len(small_trace.events) + len(small_trace.edges) + 1
    assert [i.trace for i in items] == [None]
    assert [str(x) for x in items[0].problems] == [
        f"{p}:1: $.header.trace_id: expected str, got int; make the value a str "
        "(--keep-going skips this line)",
        f"{p}:2: $: {n - 1} record(s) (lines 2-{n}) were skipped: no readable header comes "
        'before them; fix the {"header": ...} line that starts this trace',
    ]


def test_line_with_event_and_edge_is_rejected(tmp_path, small_trace):
    p = tmp_path / "run.jsonl"
    lines = stream_bytes(small_trace).split(b"\n")
    mixed = json.loads(lines[1])
    mixed["edge"] = {"src": "e1", "dst": "e2", "type": "causal"}
    lines[1] = json.dumps(mixed).encode()
    p.write_bytes(b"\n".join(lines))
    items = list(iter_jsonl(p, keep_going=True))
    assert str(items[0].problems[0]) == (
        f"{p}:2: $: line holds `event` and `edge` records in one object; only one is allowed "
        "per line; put each record on its own line (--keep-going skips this line)"
    )


def test_problems_after_a_footer_are_not_reported_twice(tmp_path, small_trace):
    p = tmp_path / "run.jsonl"
    lines = stream_bytes(small_trace).split(b"\n")
    lines[2] = b'{"event": 5}'
    p.write_bytes(b"\n".join(lines))
    items = list(iter_jsonl(p, keep_going=True))
    assert len(items) == 1 and items[0].trace is not None


# ---------------------------------------------------------------------- Parquet
def _set(ds, file, name, values, typ=None):
    path = ds / file
    t = pq.read_table(path)
    if isinstance(values, pa.Array):
        arr = values
    else:
        arr = pa.array(values, typ) if typ is not None else pa.array(values)
    t = t.set_column(t.schema.get_field_index(name), name, arr)
    pq.write_table(t, path)


def _col(ds, file, name):
    return pq.read_table(ds / file).column(name).to_pylist()


@pytest.fixture
def dataset(tmp_path, small_trace):
    ds = tmp_path / "d.parquet"
    write_parquet([small_trace], ds)
    return ds


def corrupt(ds, kind):
    """Inject one fault into a one-trace dataset."""
    e, tr = "events.parquet", "traces.parquet"
    if kind == "t-strings":
        _set(ds, e, "t", [str(x) for x in _col(ds, e, "t")])
    elif kind == "step-negative":
        v = _col(ds, e, "step")
        v[0] = -4
        _set(ds, e, "step", v, pa.int64())
    elif kind == "meta-list":
        _set(ds, tr, "meta", ["[1,2]"])
    elif kind == "missing-column":
        pq.write_table(pq.read_table(ds / e).drop_columns(["agent"]), ds / e)
    elif kind in ("null-id", "null-type"):
        name = kind[5:]
        v = _col(ds, e, name)
        v[3] = None
        _set(ds, e, name, v, pa.string())
    elif kind == "events-dir":
        (ds / e).unlink()
        (ds / e).mkdir()
    elif kind == "meta-bad-json":
        _set(ds, tr, "meta", ["{not json"])
    elif kind == "nan-cost":
        _set(ds, tr, "costs", [[("tokens", float("nan"))]], pa.map_(pa.string(), pa.float64()))
    elif kind == "unknown-topology":
        _set(ds, tr, "topology", ["ring"])
    elif kind == "attrs-list":
        v = _col(ds, e, "attrs")
        v[0] = "[1]"
        _set(ds, e, "attrs", v, pa.string())
    elif kind == "tokens-huge":
        v = _col(ds, e, "tokens_in")
        v[2] = 2**64 - 1
        _set(ds, e, "tokens_in", v, pa.uint64())
    elif kind == "unknown-type":
        v = _col(ds, e, "type")
        v[1] = "bogus"
        _set(ds, e, "type", v, pa.string())
    elif kind == "n-events-wrong":
        _set(ds, tr, "n_events", [3], pa.int64())
    elif kind == "other-trace-id":
        v = _col(ds, e, "trace_id")
        v[2] = "another"
        _set(ds, e, "trace_id", v, pa.string())
    elif kind in ("agent-not-utf8", "src-not-utf8", "meta-not-utf8"):
        # bytes another writer may store in a string column (Arrow reads them unchecked)
        file, name, row, raw = {
            "agent-not-utf8": (e, "agent", 2, b"\xed\xa0\x80"),  # an encoded lone surrogate
            "src-not-utf8": ("edges.parquet", "src", 1, b"e\xff"),
            "meta-not-utf8": (tr, "meta", 0, b'{"a": "\xc3"}'),
        }[kind]
        v = [None if x is None else x.encode() for x in _col(ds, file, name)]
        v[row] = raw
        _set(ds, file, name, pa.array(v, pa.binary()).view(pa.string()))
    elif kind == "extra-column":  # a conversion would drop its values
        table = pq.read_table(ds / e)
        pq.write_table(table.append_column("score", pa.array([1.0] * table.num_rows)), ds / e)
    elif kind == "no-traces":
        for name in (e, "edges.parquet", tr):
            table = pq.read_table(ds / name)
            pq.write_table(table.slice(0, 0), ds / name)
    else:  # pragma: no cover
        raise KeyError(kind)


# (kind, what the reader says: exact text after "DATASET: " or after the trace's label)
PARQUET_FAULTS = {
    "t-strings": "events.parquet column `t`: holds string values, expected a number per row; "
    "store `t` as a number, or rewrite the dataset with `orchestrace convert`",
    "missing-column": "events.parquet: column `agent` is missing; rewrite the dataset with "
    "`orchestrace convert`",
    "events-dir": "events.parquet: is not a regular file; rewrite the dataset with "
    "`orchestrace convert`",
    "other-trace-id": "events.parquet: events or edges are not grouped by trace; rewrite the "
    "dataset with `orchestrace convert`",
    "no-traces": "traces.parquet: dataset holds no traces; write traces into it "
    "(`orchestrace convert IN -o OUT.parquet`)",
    "n-events-wrong": "traces.parquet: n_events/n_edges do not match the rows of "
    "events.parquet/edges.parquet; rewrite the dataset with `orchestrace convert`",
    "step-negative": "$.events[0].step: value out of range: -4 (expected an integer from 0 "
    "to 2^63-1); record an integer from 0 to 2^63-1",
    "meta-list": "$.meta: expected object, got array; store a JSON object (or null) here",
    "null-id": "$.events[3].id: expected str, got null; make the value a str",
    "null-type": "$.events[3].type: expected str, got null; make the value a str",
    "meta-bad-json": "$.meta: column holds invalid JSON; rewrite the dataset with "
    "`orchestrace convert`",
    "nan-cost": "$.costs.tokens: costs.tokens is nan; record a finite number",
    "unknown-topology": "$.topology: unknown value 'ring'; use one of: centralized, "
    "planner_executor_critic, debate, swarm, hierarchical, harness, mixed, unknown, "
    "critic_loop",
    "attrs-list": "$.events[0].attrs: expected object, got array; store a JSON object (or "
    "null) here",
    "tokens-huge": "$.events[2].tokens_in: value out of range: 18446744073709551615 "
    "(expected an integer from 0 to 2^63-1); record an integer from 0 to 2^63-1",
    "agent-not-utf8": "events.parquet column `agent`, row 2: holds bytes that are not UTF-8 "
    "text; store the value as UTF-8 text, or rewrite the dataset with `orchestrace convert`",
    "src-not-utf8": "edges.parquet column `src`, row 1: holds bytes that are not UTF-8 "
    "text; store the value as UTF-8 text, or rewrite the dataset with `orchestrace convert`",
    "meta-not-utf8": "traces.parquet column `meta`, row 0: holds bytes that are not UTF-8 "
    "text; store the value as UTF-8 text, or rewrite the dataset with `orchestrace convert`",
    "extra-column": "events.parquet column `score`: is not a column of a trace dataset; drop "
    "it, or keep its values in `attrs`",
    "unknown-type": "$.events[1].type: unknown event type 'bogus'; use one of: "
    "orchestrator_decision, spawn, despawn, message, tool_call, tool_result, return, "
    "aggregate, human_intervention, safety_event, llm_call",
}
FILE_LEVEL = {
    "extra-column",
    "agent-not-utf8",
    "src-not-utf8",
    "meta-not-utf8",
    "t-strings",
    "missing-column",
    "events-dir",
    "n-events-wrong",
    "no-traces",
    "other-trace-id",
}


@pytest.mark.parametrize("kind", sorted(PARQUET_FAULTS))
def test_parquet_fault_is_named(dataset, small_trace, kind):
    corrupt(dataset, kind)
    expected = PARQUET_FAULTS[kind]
    if kind in FILE_LEVEL:
        with pytest.raises(TraceFormatError) as err:
            parse_parquet(dataset)
        assert str(err.value) == f"{dataset}: {expected}"
        return
    [(label, trace, problems)] = parse_parquet(dataset)
    assert label == small_trace.trace_id
    assert trace is None
    assert [str(p) for p in problems if p.severity == "error"] == [expected]
    with pytest.raises(TraceValidationError):
        load_all(dataset, check=False)


@pytest.mark.parametrize("kind", sorted(PARQUET_FAULTS))
def test_parquet_column_path_checks_the_same(dataset, kind):
    """``read_graph`` (analyze) refuses what the full reader refuses."""
    corrupt(dataset, kind)
    with pytest.raises((TraceFormatError, TraceValidationError)) as err:
        read_graph(dataset)
    assert PARQUET_FAULTS[kind] in str(err.value)


def test_parquet_reader_accepts_what_it_wrote(dataset, small_trace):
    assert read_parquet(dataset) == [small_trace]
    assert parse_parquet(dataset) == [(small_trace.trace_id, small_trace, [])]


# ---------------------------------------------------------------------- attrs.part
@pytest.mark.parametrize(
    "part",
    [
        {"index": 0},
        {"lo": "a", "hi": 3},
        {"lo": 1.5, "hi": 3},
        {"lo": 5, "hi": 2},
        [0, 3],
        {"lo": 0, "hi": 2**70},
    ],
)
def test_malformed_spawn_part_is_a_clear_error(small_trace, part):
    from orchestrace.rewards.families import split_correctness

    ev = list(small_trace.events)
    k = next(i for i, e in enumerate(ev) if e.type == "spawn")
    ev[k] = msgspec.structs.replace(ev[k], attrs={"part": part})
    tr = small_trace.replace(events=tuple(ev))
    with pytest.raises(TraceValidationError) as err:
        split_correctness(tr)
    [p] = err.value.problems
    assert p.path == f"$.events[{k}].attrs.part"
    assert p.message.endswith('not {"lo": int, "hi": int} with 0 <= lo <= hi')


def test_huge_spawn_parts_are_scored_quickly(small_trace):
    from orchestrace.rewards.families import split_correctness

    ev = list(small_trace.events)
    spawns = [i for i, e in enumerate(ev) if e.type == "spawn"]
    big = 2**62
    for n, k in enumerate(spawns):
        lo, hi = n * big // len(spawns), (n + 1) * big // len(spawns)
        ev[k] = msgspec.structs.replace(ev[k], attrs={"part": {"lo": lo, "hi": hi}})
    start = time.monotonic()
    assert split_correctness(small_trace.replace(events=tuple(ev))) == 1.0
    assert time.monotonic() - start < 1


def test_duplicate_key_in_a_stream_line(tmp_path, small_trace):
    p = tmp_path / "run.jsonl"
    p.write_bytes(stream_bytes(small_trace).replace(b'{"id":"e1",', b'{"id":"e1","id":"e0",', 1))
    [item] = list(iter_jsonl(p))
    assert [str(x) for x in item.problems] == [
        f"{p}:2: $: duplicate key 'id': a JSON object on this line names it twice; keep one "
        "of them (a reader would silently use only the last; --keep-going skips this line)",
        f"{p}:1: $: trace is truncated: reading stopped at damaged line 2 (--keep-going reads "
        "past it); every complete event was kept; validate with --partial to accept it",
    ]


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        (b'"dur":', b'"dur":5.0,"dur":', "dur"),  # any field, not only the main ones
        (b'"agent":', b'"\\u0061gent":"x","agent":', "agent"),  # a key written escaped
    ],
)
@pytest.mark.parametrize("spaced", [False, True], ids=["compact", "spaced"])
def test_any_repeated_key_in_a_stream_line_is_refused(
    tmp_path, medium_trace, old, new, key, spaced
):
    """As a JSON file refuses it, in lines not written by orchestrace (read a block at a time)."""
    lines = stream_bytes(medium_trace).splitlines(keepends=True)
    if spaced:  # lines another writer formats its own way (the block reader's other path)
        lines = [line.replace(b'":', b'": ') for line in lines]
        old, new = old.replace(b'":', b'": '), new.replace(b'":', b'": ')
    k = next(i for i, line in enumerate(lines) if b'"event"' in line and old in line)
    lines[k] = lines[k].replace(old, new, 1)
    p = tmp_path / "run.jsonl"
    p.write_bytes(b"".join(lines))
    problems = [str(x) for item in iter_jsonl(p) for x in item.problems]
    assert problems[0].startswith(f"{p}:{k + 1}: $: duplicate key {key!r}: "), problems[:2]
    # the same stream without the repeat reads clean
    p.write_bytes(b"".join(x.replace(new, old, 1) if i == k else x for i, x in enumerate(lines)))
    assert [str(x) for item in iter_jsonl(p) for x in item.problems] == []


def test_duplicate_key_in_a_trace_line(tmp_path, small_trace):
    p = tmp_path / "lines.jsonl"
    p.write_bytes(dumps(small_trace).replace(b'"task_id"', b'"task_id":"x","task_id"', 1) + b"\n")
    [item] = list(iter_jsonl(p))
    assert item.trace is None
    assert str(item.problems[0]).startswith(
        f"{p}:1: $: duplicate key 'task_id': a JSON object names it twice (line 1, column "
    )


def test_number_out_of_range_in_a_stream_line(tmp_path, small_trace):
    p = tmp_path / "run.jsonl"
    p.write_bytes(stream_bytes(small_trace).replace(b'"t":0.0', b'"t":1e999', 1))
    problems = [str(x) for item in iter_jsonl(p) for x in item.problems]
    assert problems[0] == (
        f"{p}:2: $.event.t: number out of range (beyond the largest float); record a finite "
        "number (--keep-going skips this line)"
    )


def test_device_without_suffix_is_refused_not_read(tmp_path):
    """Telling the format reads the start of a file; a device is refused before that."""
    from orchestrace.io import detect_format

    link = tmp_path / "trace"
    link.symlink_to("/dev/zero")
    with pytest.raises(TraceFormatError, match=r"not a regular file \(a character device\)"):
        detect_format(link)


def test_missing_file_without_suffix_is_named(tmp_path):
    from orchestrace.io import detect_format

    with pytest.raises(TraceFormatError) as err:
        detect_format(tmp_path / "nope")
    assert str(err.value) == f"{tmp_path / 'nope'}: file: no such file; check the path"


def test_parquet_integer_columns_read_as_the_model_types(dataset, small_trace):
    """Integer times (a float column written as int64) load as floats: JSON round-trips."""
    _set(dataset, "events.parquet", "t", [int(x) for x in _col(dataset, "events.parquet", "t")])
    _set(
        dataset,
        "events.parquet",
        "tokens_in",
        _col(dataset, "events.parquet", "tokens_in"),
        pa.uint32(),
    )
    [(_, trace, problems)] = parse_parquet(dataset)
    assert problems == [] and trace is not None
    assert {type(e.t) for e in trace.events} == {float}
    back, again = parse(dumps(trace))
    assert again == [] and back == trace


@pytest.mark.parametrize("tokens", [[2**63], [2**64], pa.array([2**64 - 1], pa.uint64())])
def test_columnar_graph_refuses_counts_beyond_int64(tokens):
    from orchestrace.io._columnar import from_columns

    with pytest.raises(ValueError, match=r"does not fit a 64-bit column \(2\^63-1 at most\)"):
        from_columns(["e1"], [0.0], [0.0], ["message"], ["a"], [], [], [], tokens_in=tokens)


def test_stream_problems_name_the_line_of_their_record(tmp_path, small_trace):
    """A dropped line never shifts a location: each problem names its own line."""
    p = tmp_path / "run.jsonl"
    lines = stream_bytes(small_trace).split(b"\n")
    first = json.loads(lines[1])
    first["event"]["t"] = -5  # line 2 is dropped
    lines[1] = json.dumps(first).encode()
    dup = json.loads(lines[4])
    dup["event"]["id"] = json.loads(lines[3])["event"]["id"]
    lines[4] = json.dumps(dup).encode()
    p.write_bytes(b"\n".join(lines))
    [item] = list(iter_jsonl(p, keep_going=True))
    dup_id = dup["event"]["id"]
    expected = (
        f"{p}:5: $.event.id: duplicate event id '{dup_id}' (first used at line 4); give every "
        "event a unique id"
    )
    assert expected in [str(x) for x in item.problems]


@pytest.mark.parametrize("marker", [{"a": 1}, [1], 5])
def test_survey_type_marker_of_any_json_type_is_kept_not_crashed(small_trace, marker):
    from orchestrace.io import to_upstream

    doc = to_upstream(small_trace)
    doc["events"][0].setdefault("attrs", {})["x_orchestrace_type"] = marker
    trace, problems = parse(json.dumps(doc).encode(), source="u.json")
    assert [p for p in problems if p.severity == "error"] == []
    assert trace is not None
    assert trace.events[0].attrs["x_orchestrace_kept"]["x_orchestrace_type"] == marker
    assert to_upstream(trace) == doc  # kept as read, written back as read


def test_a_negative_time_is_named_alike_in_memory_json_and_a_stream(tmp_path, small_trace):
    """One code, message and fix, whatever holds the trace (a Parquet test covers datasets)."""
    from orchestrace import check_trace
    from orchestrace.io import parse

    ev = list(small_trace.events)
    ev[1] = msgspec.structs.replace(ev[1], t=-1.0)
    [want] = [
        p for p in check_trace(small_trace.replace(events=tuple(ev))) if p.path.endswith(".t")
    ]
    doc = msgspec.json.decode(msgspec.json.encode(small_trace))
    doc["events"][1]["t"] = -1
    _, problems = parse(msgspec.json.encode(doc))
    [in_json] = [p for p in problems if p.path.endswith(".t")]
    lines = stream_bytes(small_trace).split(b"\n")
    rec = msgspec.json.decode(lines[2])
    rec["event"]["t"] = -1.0
    lines[2] = msgspec.json.encode(rec)
    p = tmp_path / "run.jsonl"
    p.write_bytes(b"\n".join(lines))
    [in_stream] = [x for item in iter_jsonl(p) for x in item.problems if x.path.endswith(".t")]
    for got in (in_json, in_stream):
        assert (
            (got.code, got.message)
            == (want.code, want.message)
            == (
                "negative-value",
                "t is negative -1.0",
            )
        )
        assert got.fix.startswith(want.fix)  # (a stream line adds that --keep-going skips it)
