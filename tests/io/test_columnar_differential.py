"""The column-wise dataset reader rejects exactly what the object reader rejects, in the same words.

Every bad dataset of the corpus (the faults of ``test_bad_inputs``, graph rules broken by
traces written as Parquet, the hostile corpus's Parquet inputs and each hostile JSON trace that
decodes, written as Parquet) goes through :func:`~orchestrace.io.parquet.parse_parquet` plus
``check_trace`` and through :func:`~orchestrace.io.parquet._columns.scan_parquet`; both must
give the same problems, or raise the same error.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrace import Edge, EdgeType, Event, EventType
from orchestrace.errors import OrchestraceError
from orchestrace.io import detect_format, parse
from orchestrace.io.parquet import parse_parquet, write_parquet
from orchestrace.io.parquet._columns import scan_parquet
from orchestrace.trace.generate import generate_trace
from orchestrace.trace.model import Trace

ROOT = Path(__file__).resolve().parents[2]


def _bad_inputs() -> Any:
    spec = importlib.util.spec_from_file_location(
        "_parquet_bad_inputs", Path(__file__).with_name("test_bad_inputs.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_BAD = _bad_inputs()
PARQUET_FAULTS, corrupt = _BAD.PARQUET_FAULTS, _BAD.corrupt


@pytest.fixture
def dataset(tmp_path, small_trace):
    ds = tmp_path / "d.parquet"
    write_parquet([small_trace], ds)
    return ds


def _object_side(path: Path, partial: bool) -> object:
    try:
        return [
            (label, trace is not None, [str(p) for p in problems])
            for label, trace, problems in parse_parquet(path, partial=partial)
        ]
    except OrchestraceError as err:
        return f"{type(err).__name__}: {err}"


def _columnar_side(path: Path, partial: bool, all_columns: bool = True) -> object:
    try:
        return [
            (s.label, s.graph is not None, [str(p) for p in s.problems])
            for s in scan_parquet(path, partial=partial, all_columns=all_columns)
        ]
    except OrchestraceError as err:
        return f"{type(err).__name__}: {err}"


def _same(path: Path) -> object:
    for partial in (False, True):
        want = _object_side(path, partial)
        assert _columnar_side(path, partial) == want, (path, partial)
    return want


@pytest.mark.parametrize("kind", sorted(PARQUET_FAULTS))
def test_column_faults_agree(dataset, kind):
    corrupt(dataset, kind)
    result = _same(dataset)
    # the corpus holds bad datasets: each side must reject it
    assert isinstance(result, str) or any(p for _, _, p in result), result


def _graph_faults(small: Trace) -> dict[str, Trace]:
    ev = list(small.events)
    first, last = ev[0], ev[-1]
    return {
        "dangling-edge": small.replace(edges=(*small.edges, Edge(first.id, "nowhere", "causal"))),
        "duplicate-id": small.replace(events=(*ev, ev[1])),
        "cycle": small.replace(edges=(*small.edges, Edge(last.id, first.id, EdgeType.CAUSAL))),
        "return-without-spawn": small.replace(
            events=(*ev, Event(id="rx", t=50.0, type=EventType.RETURN, agent="ghost", to="lead"))
        ),
        "edge-back-in-time": small.replace(
            events=(
                *ev,
                Event(id="late", t=0.0, type=EventType.MESSAGE, agent="lead", to="w0"),
            ),
            edges=(*small.edges, Edge(last.id, "late", EdgeType.CAUSAL)),
        ),
        "truncated": small.replace(meta={**small.meta, "partial": True, "truncated": "crash"}),
        "no-costs": small.replace(costs={}),
        # (the writers refuse it: marked writable, as a file from elsewhere may hold it)
        "no-events": small.replace(events=(), edges=())._mark_writable(),
    }


@pytest.mark.parametrize(
    "kind",
    [
        "dangling-edge",
        "duplicate-id",
        "cycle",
        "return-without-spawn",
        "edge-back-in-time",
        "truncated",
        "no-costs",
        "no-events",
    ],
)
def test_graph_rules_agree(tmp_path, small_trace, kind):
    bad = _graph_faults(small_trace)[kind]
    good = generate_trace(agents=3, steps=25, seed=4)
    for name, traces in (("alone", [bad]), ("among", [good, bad, good.replace(trace_id="x")])):
        ds = tmp_path / f"{name}.parquet"
        write_parquet(traces, ds)
        result = _same(ds)
        assert isinstance(result, list) and any(p for _, _, p in result), (kind, result)


def test_good_datasets_agree(tmp_path):
    traces = [generate_trace(agents=5, steps=300, depth=2, seed=s) for s in range(3)]
    ds = tmp_path / "good.parquet"
    write_parquet(traces, ds)
    result = _same(ds)
    assert result == [(t.trace_id, True, []) for t in traces]
    assert _columnar_side(ds, False, all_columns=False) == result


@pytest.fixture(scope="module")
def hostile_inputs(tmp_path_factory):
    """The hostile corpus's inputs: Parquet datasets as they are, decodable JSON as Parquet."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from hostile.corpus import CASES, make_seeds
    finally:
        sys.path.remove(str(ROOT / "tests"))
    root = tmp_path_factory.mktemp("hostile")
    seeds = make_seeds(root / "seeds")
    out: list[tuple[str, Path]] = []
    for case in CASES:
        if case.special or case.pipe_data is not None or case.unprivileged:
            continue
        try:
            path = case.materialize(seeds, root / "cases")
        except Exception:  # a case this machine cannot build
            continue
        try:
            fmt = detect_format(path)
        except OrchestraceError:
            continue
        if fmt == "parquet":
            out.append((case.name, path))
        elif fmt == "json" and path.is_file() and path.stat().st_size < 5_000_000:
            try:
                trace, _ = parse(path.read_bytes(), source=str(path), partial=True)
            except (OrchestraceError, RecursionError, ValueError):
                continue
            if trace is None:
                continue
            ds = root / "as-parquet" / f"{case.name.replace('/', '__')}.parquet"
            ds.parent.mkdir(exist_ok=True)
            try:
                write_parquet([trace], ds)
            except OrchestraceError:
                continue
            out.append((f"{case.name} (as Parquet)", ds))
    return out


@pytest.mark.slow
def test_hostile_corpus_agrees(hostile_inputs):
    assert len(hostile_inputs) >= 10, [n for n, _ in hostile_inputs]
    for name, path in hostile_inputs:
        try:
            _same(path)
        except AssertionError as err:
            raise AssertionError(f"{name}: {err}") from None


def test_validate_command_agrees_with_objects(tmp_path, small_trace):
    """``orchestrace validate`` of a dataset prints what the object reader finds."""
    bad = _graph_faults(small_trace)["dangling-edge"]
    ds = tmp_path / "d.parquet"
    write_parquet([bad], ds)
    out = subprocess.run(
        [sys.executable, "-m", "orchestrace", "validate", str(ds)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 1
    ((label, _, problems),) = json.loads(json.dumps(_object_side(ds, False)))
    assert out.stdout.splitlines() == [f"{ds}[{label}]: {p}" for p in problems]


@pytest.mark.slow
def test_bad_values_across_batches_agree(tmp_path):
    """Problems past the first batch, and the cap of 100 rows per rule, match the object reader."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    traces = [generate_trace(agents=4, steps=40_000, depth=2, seed=s) for s in (1, 2)]
    ds = tmp_path / "big.parquet"
    write_parquet(traces, ds)
    table = pq.read_table(ds / "events.parquet")
    step = table.column("step").to_pylist()
    attrs = table.column("attrs").to_pylist()
    for i in range(300, len(step), 499):
        step[i] = -1
    for i in (70_000, 79_999):
        attrs[i] = "[1]"
    table = table.set_column(table.schema.get_field_index("step"), "step", pa.array(step))
    table = table.set_column(table.schema.get_field_index("attrs"), "attrs", pa.array(attrs))
    pq.write_table(table, ds / "events.parquet", row_group_size=30_000)
    result = _same(ds)
    assert isinstance(result, list) and all(p for _, _, p in result)


def test_read_graph_names_a_bad_value_past_the_first_batch_by_its_place_in_the_trace(tmp_path):
    """read_graph reads 65,536-row batches: a row of a later one is named by its trace index."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from orchestrace.errors import TraceValidationError
    from orchestrace.io import read_graph

    first = generate_trace(agents=3, steps=65_530, seed=1)
    second = generate_trace(agents=3, steps=40, seed=2)  # its rows cross row 65,536
    ds = tmp_path / "d.parquet"
    write_parquet([first, second], ds)
    table = pq.read_table(ds / "events.parquet")
    attrs = table.column("attrs").to_pylist()
    attrs[first.n_events + 25] = "[1]"  # past row 65,536
    table = table.set_column(table.schema.get_field_index("attrs"), "attrs", pa.array(attrs))
    pq.write_table(table, ds / "events.parquet")
    want = [
        (p.code, p.path)
        for label, _, found in parse_parquet(ds)
        if label == second.trace_id
        for p in found
    ]
    assert want == [("wrong-type", "$.events[25].attrs")]
    with pytest.raises(TraceValidationError) as err:
        read_graph(ds, trace_id=second.trace_id)
    assert [(p.code, p.path) for p in err.value.problems] == want


@pytest.mark.parametrize(
    ("column", "value", "arrow_type"),
    [
        ("t", 2**53 + 1, "int64"),  # no double holds it: the nearest one is read
        ("t", 2**63 - 1, "int64"),
        ("t", 2**63 + 5, "uint64"),  # beyond int64, still a number a double holds
        ("dur", 2**63 + 5, "uint64"),
        ("cost", 2**53 + 1, "int64"),
    ],
)
def test_integer_number_columns_read_as_json_reads_them(tmp_path, column, value, arrow_type):
    """A float column written as integers: both readers take the nearest double, as JSON does."""
    import msgspec
    import pyarrow as pa
    import pyarrow.parquet as pq

    ds = tmp_path / "ints.parquet"
    write_parquet([generate_trace(agents=3, steps=20, seed=1)], ds)
    table = pq.read_table(ds / "events.parquet")
    values = [int(x) for x in table.column(column).to_pylist()]
    values[3] = value
    i = table.schema.get_field_index(column)
    pq.write_table(
        table.set_column(i, column, pa.array(values, getattr(pa, arrow_type)())),
        ds / "events.parquet",
    )
    result = _same(ds)
    assert result[0][1], result  # read, not refused (the times only draw a warning)
    [(_, trace, _)] = parse_parquet(ds, partial=True)
    want = msgspec.json.decode(f'{{"x": {value}}}'.encode(), type=dict[str, float])["x"]
    assert (
        getattr(trace.events[3], column) == want and type(getattr(trace.events[3], column)) is float
    )


def _set_column(path: Path, name: str, values: list[Any], typ: Any) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    arr = values if isinstance(values, pa.Array) else pa.array(values, typ)
    pq.write_table(table.set_column(table.schema.get_field_index(name), name, arr), path)


def test_every_bad_value_is_reported_in_each_trace(tmp_path):
    """No cap across the dataset: a trace's bad value is named whatever the traces before hold."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    a = generate_trace(agents=4, steps=400, seed=1)
    b = generate_trace(agents=3, steps=10, seed=2)
    ds = tmp_path / "two.parquet"
    write_parquet([a, b], ds)
    t = pq.read_table(ds / "events.parquet").column("t").to_pylist()
    bad_a = list(range(0, 150 * 2, 2))
    for i in bad_a:
        t[i] = -1.0
    t[a.n_events + 3] = -1.0  # b's events[3]
    _set_column(ds / "events.parquet", "t", t, pa.float64())
    result = _same(ds)
    assert isinstance(result, list)
    (_, built_a, said_a), (_, built_b, said_b) = result
    assert not built_a and not built_b
    assert [p for p in said_a if ".t:" in p and "negative" in p] == [
        f"$.events[{i}].t: t is negative -1.0; record t as a finite number >= 0 (seconds since "
        "the trace start)"
        for i in bad_a
    ]
    assert (
        "$.events[3].t: t is negative -1.0; record t as a finite number >= 0 (seconds"
        in " ".join(said_b)
    )


def test_attrs_stored_as_the_json_text_null_reads_as_no_attrs(tmp_path, small_trace):
    """As ``"attrs": null`` in a JSON trace (the column's own null is what the writer stores)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ds = tmp_path / "d.parquet"
    write_parquet([small_trace], ds)
    attrs = pq.read_table(ds / "events.parquet").column("attrs").to_pylist()
    k = next(i for i, e in enumerate(small_trace.events) if e.attrs is None)
    attrs[k] = "null"
    _set_column(ds / "events.parquet", "attrs", attrs, pa.string())
    assert _same(ds) == [(small_trace.trace_id, True, [])]
    [(_, trace, _)] = parse_parquet(ds)
    assert trace == small_trace


@pytest.mark.parametrize(
    ("column", "value", "typ", "says"),
    [
        (
            "rewards",
            [[("r", None)]],
            "map",
            "$.rewards.r: rewards.r is null; record a finite number",
        ),
        ("trace_id", [None], "str", "$.trace_id: expected str, got null; make the value a str"),
    ],
)
def test_a_null_in_the_header_is_named_once_by_its_field(
    tmp_path, small_trace, column, value, typ, says
):
    import pyarrow as pa

    ds = tmp_path / "d.parquet"
    write_parquet([small_trace], ds)
    kind = pa.map_(pa.string(), pa.float64()) if typ == "map" else pa.string()
    _set_column(ds / "traces.parquet", column, value, kind)
    if column == "trace_id":  # (the rows of the trace's events and edges name it alike)
        for name, n in (("events", small_trace.n_events), ("edges", len(small_trace.edges))):
            _set_column(ds / f"{name}.parquet", column, value * n, kind)
    result = _same(ds)
    assert isinstance(result, list)
    [(_, built, said)] = result
    assert not built and said == [says], said


def test_edges_not_grouped_by_trace_name_the_edges_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    ds = tmp_path / "two.parquet"
    write_parquet([generate_trace(agents=3, steps=10, seed=s) for s in (1, 2)], ds)
    tids = pq.read_table(ds / "edges.parquet").column("trace_id").to_pylist()
    tids[1] = "elsewhere"
    _set_column(ds / "edges.parquet", "trace_id", tids, pa.string())
    result = _same(ds)
    assert isinstance(result, str) and "edges.parquet: events or edges are not grouped" in result


def test_a_bad_number_is_named_in_parquet_as_check_trace_names_it_in_memory(tmp_path, small_trace):
    """The same code, path, message and fix for a number no column may hold."""
    import math

    import msgspec
    import pyarrow as pa
    import pyarrow.parquet as pq

    from orchestrace import check_trace

    bad = {1: ("t", -1.0), 2: ("dur", math.nan), 3: ("cost", math.inf), 4: ("t", -math.inf)}
    ds = tmp_path / "d.parquet"
    write_parquet([small_trace], ds)
    table = pq.read_table(ds / "events.parquet")
    for name in ("t", "dur", "cost"):
        values = table.column(name).to_pylist()
        for i, (field, value) in bad.items():
            if field == name:
                values[i] = value
        _set_column(ds / "events.parquet", name, values, pa.float64())
        table = pq.read_table(ds / "events.parquet")
    [(_, _, found)] = parse_parquet(ds)
    events = list(small_trace.events)
    for i, (field, value) in bad.items():
        events[i] = msgspec.structs.replace(events[i], **{field: value})
    want = check_trace(Trace(trace_id="x", task_id="k", events=tuple(events)))
    shape = [
        (p.code, p.path, p.message, p.fix)
        for p in want
        if p.code in ("negative-value", "non-finite")
    ]
    # (found in row order here, a column at a time in memory)
    assert sorted((p.code, p.path, p.message, p.fix) for p in found) == sorted(shape)
