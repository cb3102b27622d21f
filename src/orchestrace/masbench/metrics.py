"""Per-run benchmark metrics: E1-E3, trace shape, credit unit, failure taxonomy.

Example:
    >>> from orchestrace.runtime import run
    >>> res = run("swarm", "arith", agents=4, seed=1)
    >>> m = run_metrics(res.trace, credit_unit="agent")
    >>> m["success"], m["ideal_speedup"], 0 < m["efficiency"] <= 1
    (1.0, 5, True)
    >>> sorted(m["shape"])
    ['depth', 'events', 'length', 'steps', 'width']
"""

from __future__ import annotations

from typing import Any

from orchestrace.credit import make_assigner
from orchestrace.credit.base import check_unit
from orchestrace.errors import ConfigError
from orchestrace.masbench.taxonomy import detect, taxonomy_counts
from orchestrace.trace.analyze import summarize
from orchestrace.trace.model import Trace

__all__ = ["COORDINATION_KINDS", "peak_concurrency", "run_metrics"]

#: LLM call kinds that coordinate rather than solve.
COORDINATION_KINDS = frozenset({"plan", "critique", "judge", "revise", "aggregate"})


def peak_concurrency(trace: Trace) -> int:
    """Most agents working at once (overlapping LLM and tool calls of distinct agents)."""
    points: list[tuple[float, int, str]] = []
    for e in trace.events:
        if e.type in ("llm_call", "tool_call") and e.dur > 0:
            points.append((e.t, 1, e.agent))
            points.append((e.t + e.dur, -1, e.agent))
    points.sort(key=lambda p: (p[0], p[1]))
    live: dict[str, int] = {}
    best = 0
    for _, d, agent in points:
        live[agent] = live.get(agent, 0) + d
        if live[agent] <= 0:
            live.pop(agent)
        best = max(best, len(live))
    return best


def run_metrics(trace: Trace, *, credit_unit: str = "agent") -> dict[str, Any]:
    """Everything the benchmark records about one run.

    Args:
        trace: The run.
        credit_unit: The credit unit this cell exercises; uniform credit is assigned at it and
            the number of units recorded.

    Raises:
        ConfigError: ``trace`` is not a Trace, or ``credit_unit`` is not a credit unit.
    """
    if not isinstance(trace, Trace):
        raise ConfigError(f"run_metrics takes a Trace, not a {type(trace).__name__}")
    check_unit(credit_unit)
    s = summarize(trace)
    workers = max(1, int(s["team_size"]) - 1)  # everyone but the root orchestrator
    speedup = float(s["speedup"])
    coord = total = 0
    for e in trace.events:
        if e.type == "llm_call":
            n = int(e.tokens_in or 0) + int(e.tokens_out or 0)
            total += n
            if (e.attrs or {}).get("kind") in COORDINATION_KINDS:
                coord += n
    table = make_assigner("uniform").assign(trace, credit_unit)
    findings = detect(trace)
    return {
        "success": float(trace.metrics.get("task_success", 0.0)),
        "work_s": float(s["work_s"]),
        "critical_path_s": float(s["critical_path_s"]),
        "speedup": speedup,
        "ideal_speedup": workers,
        "efficiency": speedup / workers,
        "tokens": int(s["tokens"]),
        "coordination_tokens": coord,
        "coordination_share": coord / total if total else 0.0,
        "messages": int(s["messages"]),
        "tool_calls": int(s["tool_calls"]),
        "cost": float(s["cost"]),
        "errors": int(s["errors"]),
        "shape": {
            "width": peak_concurrency(trace),
            "depth": int(s["spawn_depth"]),
            "length": int(s["trace_length"]),
            "events": int(s["events"]),
            "steps": int(s["steps"]),
        },
        "credit": {
            "unit": credit_unit,
            "units": len(table.by_unit(credit_unit)),
            "efficient": bool(table.efficient),
        },
        "failures": taxonomy_counts(findings),
    }
