"""Benchmark cells on every executor: the same report; failed runs kept out and listed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orchestrace.bench import suite as suite_mod
from orchestrace.bench.suite import Suite, run_suite
from orchestrace.executors import make_executor

TINY = Suite(
    "tiny-v1",
    topologies=("swarm", "critic_loop"),
    tasks=("arith-mapreduce-v0",),
    agents=3,
    seeds=2,
    faults=("wrong_answer",),
)


def _stable(report: dict[str, Any]) -> str:
    """The report without timings and the executor's own description."""
    runs = [{k: v for k, v in r.items() if k != "cpu_s"} for r in report["runs"]]
    cells = [{k: v for k, v in c.items() if k != "cpu_s"} for c in report["cells"]]
    return json.dumps({"runs": runs, "cells": cells, "missing": report["missing"]}, sort_keys=True)


def _ray_or_skip() -> Any:
    import os

    try:
        import ray  # noqa: F401
    except ImportError:
        if os.environ.get("ORCHESTRACE_REQUIRE_RAY") == "1":
            raise
        pytest.skip("ray is not installed")
    from orchestrace.executors import shutdown_ray

    shutdown_ray()
    return make_executor("ray", 2)


@pytest.mark.slow
def test_cells_are_identical_on_every_executor() -> None:
    local = run_suite(TINY, executor="local", progress=False, envelope=False)
    assert local["config"]["executor"] == "local" and local["missing"]["runs"] == []
    process = run_suite(TINY, executor=make_executor("process", 2), progress=False, envelope=False)
    assert process["config"]["executor"] == "process" and process["config"]["workers"] == 2
    assert _stable(local) == _stable(process)
    ray_ex = _ray_or_skip()
    try:
        on_ray = run_suite(TINY, executor=ray_ex, progress=False, envelope=False)
    finally:
        from orchestrace.executors import shutdown_ray

        shutdown_ray()
    assert _stable(local) == _stable(on_ray)


def test_a_failed_run_is_listed_and_the_others_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    real = suite_mod.run_one

    def flaky(spec: dict[str, Any]) -> dict[str, Any]:
        if spec["topology"] == "critic_loop" and spec["seed"] == 1 and spec["fault"] is None:
            raise ValueError("backend went away")
        return real(spec)

    monkeypatch.setattr(suite_mod, "run_one", flaky)
    rep = run_suite(TINY, executor="local", progress=False, envelope=False)
    assert len(rep["runs"]) == 7  # 2 topologies x 2 seeds x (clean + 1 fault) - 1
    (lost,) = rep["missing"]["runs"]
    assert lost["topology"] == "critic_loop" and lost["seed"] == 1 and lost["fault"] is None
    assert lost["error"] == "ValueError: backend went away" and lost["kind"] == "raised"
    assert rep["missing"]["cells"] == [
        {
            "topology": "critic_loop",
            "task": "arith-mapreduce-v0",
            "missing_runs": 1,
            "aggregated": True,
        }
    ]
    cell = next(c for c in rep["cells"] if c["topology"] == "critic_loop")
    assert cell["runs"] == 1
    assert any(
        n.startswith("missing run critic_loop/arith-mapreduce-v0 seed 1: ValueError")
        for n in rep["notes"]
    )
