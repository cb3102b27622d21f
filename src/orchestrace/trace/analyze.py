"""``summarize``: the numbers ``orchestrace analyze`` prints for a trace.

Works on a :class:`~orchestrace.trace.model.Trace` or straight on a columnar
:class:`~orchestrace.trace.graph.TraceGraph` (e.g. from a Parquet dataset).

Example:
    >>> from orchestrace.trace.generate import generate_trace
    >>> s = summarize(generate_trace(agents=4, steps=30, depth=1, seed=0))
    >>> s["events"], s["agents"], s["spawn_depth"], s["critical_steps"] <= s["steps"]
    (30, 4, 1, True)
    >>> round(s["speedup"], 6) == round(s["work_s"] / s["critical_path_s"], 6)
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrace.trace.enums import EVENT_CODE, EVENT_TYPES
from orchestrace.trace.graph import TraceGraph
from orchestrace.trace.model import EventType, Trace

__all__ = ["SUMMARY_KEYS", "summarize"]

#: Keys of :func:`summarize`'s result, in order (stable: scripts may rely on them).
SUMMARY_KEYS = (
    "events",
    "agents",
    "work_s",
    "critical_path_s",
    "speedup",
    "critical_steps",
    "critical_path",
    "events_by_type",
    "agents_by_role",
    "team_size",
    "trace_length",
    "steps",
    "spawn_depth",
    "makespan_s",
    "tokens",
    "tokens_in",
    "tokens_out",
    "cost",
    "messages",
    "tool_calls",
    "llm_calls",
    "errors",
)
_SPAWN = EVENT_CODE[EventType.SPAWN]


#: Rows per slice where a whole column would be copied (a few megabytes of scratch memory
#: whatever the trace's length).
_SLICE = 1 << 20


def _first_own_events(g: TraceGraph) -> dict[int, int]:
    """Agent code -> its first event with a role of its own (spawns excluded), in row order."""
    first: dict[int, int] = {}
    rc = g.role_code
    for lo in range(0, g.n, _SLICE):
        part = slice(lo, lo + _SLICE)
        own = np.flatnonzero((rc[part] >= 0) & (g.type_code[part] != _SPAWN))
        if not len(own):
            continue
        # first row of each agent in the slice (no sort: the last write to a slot is the first)
        own_agents = g.agent_code[part][own]
        slot = np.full(int(own_agents.max()) + 1, len(own), dtype=np.int64)
        slot[own_agents[::-1]] = np.arange(len(own) - 1, -1, -1, dtype=np.int64)
        codes = np.flatnonzero(slot < len(own))
        for a, i in zip(codes.tolist(), (own[slot[codes]] + lo).tolist(), strict=True):
            first.setdefault(a, i)  # an earlier slice's row stays first
    return first


def summarize(trace: Trace | TraceGraph) -> dict[str, Any]:
    """Counts, graph metrics and costs of a trace, keyed by :data:`SUMMARY_KEYS`.

    ``critical_path`` lists the event ids on the critical path; ``events`` is the trace
    length in events and ``steps`` the number of agent steps (see ``critical_steps``);
    ``agents`` (= ``team_size``) counts agents, tools excluded.

    Raises:
        CycleError: The dependency edges contain a cycle (validate the trace first).
    """
    g = trace if isinstance(trace, TraceGraph) else trace.graph
    n = g.n
    type_counts = np.zeros(len(EVENT_TYPES), dtype=np.int64)
    for lo in range(0, n, _SLICE):  # (bincount copies its input to int64: a slice at a time)
        type_counts += np.bincount(g.type_code[lo : lo + _SLICE], minlength=len(EVENT_TYPES))
    by_type = {str(t): int(c) for t, c in zip(EVENT_TYPES, type_counts, strict=True) if c}
    agents = g.agent_codes()
    # an agent's role: the role its spawn gave it, else the first role it used itself
    role_of: dict[int, str] = {}
    roles = g.roles
    rc = g.role_code
    sp = np.flatnonzero((g.type_code == _SPAWN) & (g.to_code >= 0) & (rc >= 0))
    for child, r in zip(g.to_code[sp].tolist(), rc[sp].tolist(), strict=True):
        role_of.setdefault(child, roles[r])
    for a, i in _first_own_events(g).items():
        role_of.setdefault(a, roles[rc[i]])
    by_role: dict[str, int] = {}
    for a in agents.tolist():
        r = role_of.get(a, "unknown")
        by_role[r] = by_role.get(r, 0) + 1
    # Critical Steps first: its temporaries are the largest, and are freed before the
    # critical path's (peak memory is then the larger of the two, not their sum)
    structure = g.step_structure()
    critical_steps = structure.critical_steps()
    cp = g.critical_path()
    work = g.work()
    with np.errstate(over="ignore"):  # finite times and durations can add up to inf
        t_end = float((g.t + g.dur).max()) if n else 0.0
    t0 = float(g.t.min()) if n else 0.0
    tin, tout = _exact_sum(g.tokens_in), _exact_sum(g.tokens_out)
    with np.errstate(over="ignore"):
        cost = float(g.cost.sum())
    errors = 0
    if isinstance(trace, Trace):
        errors = sum(1 for e in trace.events if e.error is not None)
    out = {
        "events": n,
        "agents": len(agents),
        "work_s": work,
        "critical_path_s": cp.length,
        "speedup": work / cp.length if cp.length > 0 else 1.0,
        "critical_steps": critical_steps,
        "critical_path": list(cp.ids),
        "events_by_type": by_type,
        "agents_by_role": dict(sorted(by_role.items())),
        "team_size": len(agents),
        "trace_length": n,
        "steps": structure.total_steps,
        "spawn_depth": g.spawn_depth(),
        "makespan_s": t_end - t0,
        "tokens": tin + tout,
        "tokens_in": tin,
        "tokens_out": tout,
        "cost": cost,
        "messages": by_type.get("message", 0),
        "tool_calls": by_type.get("tool_call", 0),
        "llm_calls": by_type.get("llm_call", 0),
        "errors": errors,
    }
    return {k: out[k] for k in SUMMARY_KEYS}


def _exact_sum(counts: np.ndarray) -> int:
    """The sum of int64 counts, exact (numpy's int64 sum wraps past 2**63 - 1)."""
    n = len(counts)
    if not n or max(int(counts.max()), -int(counts.min())) <= (2**63 - 1) // n:
        return int(counts.sum())
    return sum(counts.tolist())
