"""E1 intervals and per-solved figures in the aggregated benchmark cells and the report."""

from orchestrace.masbench.report import markdown
from orchestrace.masbench.suite import INTERVALS, Suite, aggregate


def _run(success: float, seed: int, fault: str | None = None) -> dict:
    return {
        "topology": "swarm",
        "task": "arith-mapreduce-v0",
        "seed": seed,
        "fault": fault,
        "success": success,
        "speedup": 2.0,
        "ideal_speedup": 4,
        "efficiency": 0.5,
        "messages": 12,
        "tokens": 1000,
        "cost": 0.5,
        "coordination_share": 0.1,
        "shape": {"width": 2, "depth": 1, "length": 5, "steps": 4},
        "credit": {"unit": "agent", "units": 4},
        "failures": {"no_verification": 0},
        "cpu_s": 0.01,
        "fault_units": 10,
        "faults_injected": 2,
    }


SUITE = Suite("t", topologies=("swarm",), tasks=("arith-mapreduce-v0",), faults=("wrong_answer",))


def _report(cells: list[dict]) -> dict:
    return {
        "suite": {"id": "t", "seeds": 4, "agents": 4, "fault_rate": 0.2},
        "config": {"backend": "sim", "jobs": 1},
        "environment": {},
        "intervals": INTERVALS,
        "wall_s": 0.0,
        "runs": [],
        "cells": cells,
        "envelope": [],
    }


def test_nothing_solved_has_no_per_solved_figures():
    runs = [_run(0.0, s) for s in range(4)] + [_run(0.0, s, "wrong_answer") for s in range(4)]
    (cell,) = aggregate(runs, SUITE)
    assert cell["E3_solved"] == 0
    assert cell["E3_messages_per_solved"] is None
    assert cell["E3_tokens_per_solved"] is None
    assert cell["E3_cost_per_solved"] is None
    md = markdown(_report([cell]))
    row = next(line for line in md.splitlines() if line.startswith("| swarm |"))
    assert "| 0.00 [0.00, 0.49] |" in row and "| n/a | n/a |" in row


def test_all_solved_interval_has_width():
    runs = [_run(1.0, s) for s in range(4)]
    (cell,) = aggregate(runs, SUITE)
    assert cell["E1_success"] == 1.0 and cell["E1_success_high"] == 1.0
    assert 0.5 < cell["E1_success_low"] < 0.52  # Wilson, 4 of 4
    assert cell["E1_interval"] == "wilson-95"
    assert cell["E3_messages_per_solved"] == 12.0
    md = markdown(_report([cell]))
    assert "E1 success [95% Wilson]" in md and "| 1.00 [0.51, 1.00] |" in md


def test_fault_error_rate_has_wilson_interval():
    runs = [_run(1.0, s) for s in range(4)] + [
        _run(float(s % 2), s, "wrong_answer") for s in range(4)
    ]
    (cell,) = aggregate(runs, SUITE)
    e = cell["E4"]["wrong_answer"]
    assert e["error_rate"] == 0.5 and e["error_low"] < 0.5 < e["error_high"]
