"""`analyze` on Parquet: errors counted as for JSONL, one result per trace, CLI flags named."""

from __future__ import annotations

import json

import msgspec
import pytest

from orchestrace.cli import main
from orchestrace.errors import TraceFormatError
from orchestrace.io import dump, read_graph
from orchestrace.trace.generate import generate_trace
from orchestrace.trace.model import Trace


def _with_errors(tr: Trace, every: int) -> Trace:
    events = tuple(
        msgspec.structs.replace(e, error=f"failed {i}") if i % every == 0 else e
        for i, e in enumerate(tr.events)
    )
    return tr.replace(events=events)


@pytest.fixture
def traces() -> list[Trace]:
    return [
        _with_errors(generate_trace(agents=3 + k, steps=30 + 10 * k, seed=k), every=5 + k)
        for k in range(3)
    ]


def _json_lines(capsys, *argv: str) -> list[dict]:
    assert main(["analyze", *argv, "--json"]) == 0
    return [json.loads(x) for x in capsys.readouterr().out.splitlines()]


def test_several_traces_one_result_each_as_for_jsonl(tmp_path, capsys, traces):
    ds, jl = tmp_path / "many.parquet", tmp_path / "many.jsonl"
    dump(traces, ds)
    dump(traces, jl)
    from_parquet = _json_lines(capsys, str(ds))
    assert [s["trace_id"] for s in from_parquet] == [t.trace_id for t in traces]
    assert [s["errors"] for s in from_parquet] == [
        sum(e.error is not None for e in t.events) for t in traces
    ]
    assert all(s["errors"] > 0 for s in from_parquet)
    assert from_parquet == _json_lines(capsys, str(jl))
    assert main(["analyze", str(ds)]) == 0
    text = capsys.readouterr().out
    assert [x for x in text.splitlines() if x.startswith("trace ")] == [
        f"trace {t.trace_id}" for t in traces
    ]


def test_one_trace_column_wise_counts_errors(tmp_path, capsys, traces):
    ds, jl = tmp_path / "one.parquet", tmp_path / "one.jsonl"
    dump(traces[1], ds)
    dump(traces[1], jl)
    [s] = _json_lines(capsys, str(ds))
    assert s["errors"] == sum(e.error is not None for e in traces[1].events) > 0
    assert [s] == _json_lines(capsys, str(jl))


def test_trace_id_picks_one_and_unknown_ids_are_named(tmp_path, capsys, traces):
    ds = tmp_path / "many.parquet"
    dump(traces, ds)
    [s] = _json_lines(capsys, str(ds), "--trace-id", traces[2].trace_id)
    assert s["trace_id"] == traces[2].trace_id and s["events"] == traces[2].n_events
    assert main(["analyze", str(ds), "--trace-id", "nope"]) == 1
    assert capsys.readouterr().err.strip() == f"{ds}: no trace with id 'nope'"


def test_library_error_names_the_cli_flag(tmp_path, traces):
    ds = tmp_path / "many.parquet"
    dump(traces, ds)
    with pytest.raises(TraceFormatError, match="`--trace-id` on the command line"):
        read_graph(ds)
    graph, header = read_graph(ds, trace_id=traces[0].trace_id)
    assert header["n_errors"] == sum(e.error is not None for e in traces[0].events)
    assert graph.n == traces[0].n_events
