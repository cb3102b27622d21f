"""Benchmark cells on every executor: the same report; failed runs kept out and listed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from orchestrace.executors import make_executor
from orchestrace.masbench import suite as suite_mod
from orchestrace.masbench.suite import Suite, run_suite

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


@pytest.fixture(scope="module")
def pool() -> Iterator[Any]:
    """Two process workers shared by this module's tests (a worker that dies is replaced)."""
    with make_executor("process", 2) as ex:
        yield ex


def _ray_or_skip(shared_ray: str | None) -> Any:
    """A Ray executor on the test process's local Ray instance."""
    if shared_ray is None:
        pytest.skip("ray is not installed")
    return make_executor("ray", 2)


@pytest.mark.slow
def test_cells_are_identical_on_every_executor(pool: Any, shared_ray: str | None) -> None:
    local = run_suite(TINY, executor="local", progress=False, envelope=False)
    assert local["config"]["executor"] == "local" and local["missing"]["runs"] == []
    process = run_suite(TINY, executor=pool, progress=False, envelope=False)
    assert process["config"]["executor"] == "process" and process["config"]["workers"] == 2
    assert _stable(local) == _stable(process)
    on_ray = run_suite(TINY, executor=_ray_or_skip(shared_ray), progress=False, envelope=False)
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


def dies_on_critic_seed_1(spec: dict[str, Any]) -> dict[str, Any]:
    """``run_one``, except that one run kills its worker process (a crash mid-task)."""
    import os

    if spec["topology"] == "critic_loop" and spec["seed"] == 1 and spec["fault"] is None:
        os._exit(3)
    return suite_mod.run_one(spec)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["process", "ray"])
def test_a_run_whose_worker_dies_is_listed_and_the_others_kept(
    name: str, monkeypatch: pytest.MonkeyPatch, pool: Any, shared_ray: str | None
) -> None:
    from orchestrace.masbench.report import markdown

    monkeypatch.setattr(suite_mod, "run_one", dies_on_critic_seed_1)
    ex = _ray_or_skip(shared_ray) if name == "ray" else pool
    rep = run_suite(TINY, executor=ex, progress=False, envelope=False)
    assert len(rep["runs"]) == 7
    (lost,) = rep["missing"]["runs"]
    assert (lost["topology"], lost["seed"], lost["fault"]) == ("critic_loop", 1, None)
    assert lost["kind"] == "worker-died" and lost["attempts"] >= 2
    md = markdown(rep)
    assert (
        "## Missing runs" in md
        and "| critic_loop | arith-mapreduce-v0 | 1 | - | worker-died |" in md
    )


def test_an_envelope_only_report_has_no_empty_tables() -> None:
    from orchestrace.masbench.report import markdown

    only = Suite(
        "env-only-v1",
        topologies=(),
        tasks=(),
        seeds=1,
        envelope_agents=(2,),
        envelope_lengths=(40,),
        envelope_industry=False,
        envelope_isolate=False,
    )
    rep = run_suite(only, executor="local", progress=False)
    md = markdown(rep)
    assert rep["envelope"] and "## Scale envelope" in md
    assert "Scale envelope only: 1 point in" in md
    for absent in ("E1-E3", "E4", "Failure taxonomy", "Missing runs", "seeds per cell"):
        assert absent not in md


def dies_once_on_swarm_seed_0(marker: str, spec: dict[str, Any]) -> dict[str, Any]:
    """``run_one``, except that one run kills its worker the first time it starts."""
    import os
    from pathlib import Path

    first = spec["topology"] == "swarm" and spec["seed"] == 0 and spec["fault"] is None
    if first and not os.path.exists(marker):
        Path(marker).write_text("x")
        os._exit(3)
    return suite_mod.run_one(spec)


@pytest.mark.slow
def test_a_run_retried_after_its_worker_died_is_recorded(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
    pool: Any,
) -> None:
    import functools

    from orchestrace.masbench.report import markdown

    run = functools.partial(dies_once_on_swarm_seed_0, str(tmp_path / "died"))
    monkeypatch.setattr(suite_mod, "run_one", run)
    rep = run_suite(TINY, executor=pool, progress=False, envelope=False)
    assert len(rep["runs"]) == 8 and rep["missing"]["runs"] == []
    retried = rep["retries"]
    assert retried and all(r["attempt"] == 1 for r in retried)
    assert any((r["topology"], r["seed"], r["fault"]) == ("swarm", 0, None) for r in retried)
    assert all("worker died" in r["reason"] for r in retried)
    assert "## Retried runs" in markdown(rep)
    assert "note: process executor: " in capsys.readouterr().err
