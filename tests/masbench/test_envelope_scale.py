"""The industry envelope: staged deep hierarchy, large swarm points, streaming Parquet."""

from __future__ import annotations

import pytest

from orchestrace.errors import ConfigError, RuntimeError_
from orchestrace.io import read_parquet
from orchestrace.io._output import OutputError
from orchestrace.io.parquet_stream import ParquetExporter, ParquetStreamWriter
from orchestrace.masbench import SUITES
from orchestrace.masbench.envelope import (
    ENVELOPE_POINTS,
    INDUSTRY,
    envelope_markdown,
    envelope_point,
    industry_point,
    measure_point,
)
from orchestrace.runtime import run


@pytest.mark.slow
def test_industry_configuration_counts_on_one_seeded_run():
    row = industry_point(seed=3)
    assert row["sub_agents"] >= 300
    assert row["spawn_depth"] >= 3
    assert row["orchestrator_stages"] >= 2
    assert row["tool_calls"] >= 4000
    assert row["valid"] and row["setting"] == "production"
    assert row["events"] == row["shape"]["events"]
    again = industry_point(seed=3)
    assert {k: again[k] for k in ("events", "tool_calls", "success", "virtual_s")} == {
        k: row[k] for k in ("events", "tool_calls", "success", "virtual_s")
    }


def test_industry_success_rests_on_the_work():
    small = {"agents": 30, "task_size": 420, "managers": 2, "branching": 2}
    ok = industry_point(seed=1, **small)
    assert ok["success"] == 1.0 and ok["tool_calls"] >= 300
    broken = industry_point(seed=1, tool_failure_rate=1.0, **small)  # no search returns
    assert broken["success"] == 0.0


def test_hierarchy_options_shape_the_tree():
    plain = run("hierarchical", "arith-mapreduce-v0", agents=8, seed=4)
    same = run("hierarchical", "arith-mapreduce-v0", agents=8, seed=4, depth=1, stages=1)
    assert same.trace.events == plain.trace.events
    deep = run("hierarchical", "arith-mapreduce-v0", agents=27, seed=4, depth=3, branching=3)
    depth = {e.agent: 0 for e in deep.trace.events}
    for e in deep.trace.events:
        if e.type == "spawn" and e.to:
            depth[e.to] = depth[e.agent] + 1
    assert max(depth.values()) == 4
    assert sum(1 for e in deep.trace.events if e.type == "spawn" and e.role == "worker") == 27
    staged = run("hierarchical", "arith-mapreduce-v0", agents=12, seed=4, stages=3)
    plans = [
        e
        for e in staged.trace.events
        if e.agent == "orchestrator" and e.type == "llm_call" and e.attrs["kind"] == "plan"
    ]
    assert len(plans) == 3 and isinstance(staged.answer, int)


def test_envelope_suite_reaches_the_industry_envelope():
    suite = SUITES["envelope-v1"]
    assert (1000, 40_000) in suite.envelope_points and (10_000, 400_000) in suite.envelope_points
    assert suite.envelope_industry and suite.envelope_isolate
    assert set(ENVELOPE_POINTS) <= set(suite.envelope_points)
    assert INDUSTRY["depth"] >= 2 and INDUSTRY["stages"] >= 2


@pytest.mark.slow
def test_measure_point_reports_its_own_peak_memory():
    row = measure_point("swarm", agents=20, length=200)
    assert row is not None and row["valid"]
    assert row["peak_rss_mb"] >= row["base_rss_mb"] > 0
    assert row["cpu_s"] == pytest.approx(
        row["cpu_run_s"] + row["cpu_check_s"] + row["cpu_analyse_s"]
    )
    here = measure_point("swarm", isolate=False, agents=20, length=200)
    assert here is not None and here["peak_rss_mb"] is None and here["events"] == row["events"]
    with pytest.raises(ConfigError, match="unknown envelope point kind 'mesh'"):
        measure_point("mesh")
    with pytest.raises(RuntimeError_, match="failed in its process"):
        measure_point("swarm", agents=0, length=10)
    assert envelope_markdown([row])[2].startswith("| swarm | 21 | 200 |")


@pytest.mark.slow
def test_thousand_agent_point_is_recorded_validated_and_analysed():
    row = envelope_point(1000, 40_000)
    assert row is not None and row["valid"]
    assert 30_000 <= row["events"] <= 50_000 and row["sub_agents"] == 1001
    assert row["cpu_s"] < 30


@pytest.mark.parametrize("row_group", [1, 7, 1 << 16])
def test_streamed_parquet_is_the_trace(tmp_path, row_group):
    path = tmp_path / "run.parquet"
    res = run(
        "swarm",
        "wide-search-v0",
        agents=6,
        seed=2,
        processors=[ParquetExporter(path, row_group=row_group)],
    )
    assert read_parquet(path) == [res.trace]
    assert [p.name for p in tmp_path.iterdir()] == ["run.parquet"]


def test_streamed_parquet_refuses_and_cleans_up(tmp_path):
    path = tmp_path / "run.parquet"
    run("swarm", "arith", agents=2, seed=1, processors=[ParquetExporter(path)])
    with pytest.raises(OutputError):
        ParquetExporter(path)  # exists: checked before any run
    other = run("swarm", "arith", agents=3, seed=1)
    w = ParquetStreamWriter(tmp_path / "b.parquet", trace_id="x")
    for e in other.trace.events[:5]:
        w.event(e)
    with pytest.raises(RuntimeError_, match="stream each run to its own dataset"):
        w.finish(other.trace)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.parquet"]  # nothing left over


def test_run_streams_a_parquet_output(tmp_path, capsys):
    from orchestrace.cli import main

    path = tmp_path / "run.parquet"
    res = run("swarm", "arith", agents=3, seed=5, output=path)
    assert read_parquet(path) == [res.trace]
    with pytest.raises(OutputError):
        run("swarm", "arith", agents=3, seed=5, output=path)
    assert main(["run", "swarm", "-k", "3", "--no-progress", "-o", str(path), "--force"]) == 0
    assert read_parquet(path)[0].n_events == res.trace.n_events
