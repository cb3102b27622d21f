"""Synthetic hierarchical traces for tests and benchmarks.

:func:`generate_trace` builds a valid trace of a given team size, length and spawn depth. The
root orchestrator plans, spawns its children in one step, waits, aggregates their returns and
stops; managers do the same one level down; workers take turns of an LLM call optionally
followed by a tool call, now and then report progress to their parent, and return. Times come
from a seeded simulation, so the same arguments give the same bytes.

Example:
    >>> from orchestrace.trace.check import check_trace
    >>> tr = generate_trace(agents=5, steps=60, depth=2, seed=1)
    >>> tr.n_events, check_trace(tr)
    (60, [])
    >>> generate_trace(agents=5, steps=60, depth=2, seed=1) == tr
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrace._collector import paused
from orchestrace._numbers import as_int, is_int
from orchestrace.errors import ConfigError
from orchestrace.trace.build import default_costs
from orchestrace.trace.model import (
    SCHEMA_VERSION,
    Edge,
    Event,
    Trace,
)

__all__ = ["generate_trace", "min_events"]

_TOOLS = ("search", "python", "browser")
CAUSAL, SPAWN, AGGREGATE, TOOL_DEPENDENCY = "causal", "spawn", "aggregate", "tool_dependency"
_MAX_DEPTH = 256
_MAX_AGENTS = 10_000_000
_MAX_EVENTS = 100_000_000


def _levels(agents: int, depth: int) -> list[int]:
    """Agents per spawn level (level 0 is the root), growing geometrically."""
    if agents == 1:
        return [1]
    depth = max(1, min(depth, agents - 1))
    rest = agents - 1 - depth  # each level gets one agent first
    weights = np.array([2.0**lv for lv in range(1, depth + 1)])
    share = np.floor(rest * weights / weights.sum()).astype(int)
    share[-1] += rest - int(share.sum())
    return [1, *(int(x) + 1 for x in share)]


def min_events(agents: int, depth: int) -> int:
    """The fewest events a generated trace with this shape can have."""
    levels = _levels(agents, depth)
    managers = sum(levels[:-1])
    workers = levels[-1] if len(levels) > 1 else 1
    non_root = agents - 1
    # spawn + return per non-root agent; plan + aggregate per manager (the root too); stop;
    # one llm call per worker
    return 2 * non_root + 2 * managers + 1 + workers if agents > 1 else 2


@paused()
def generate_trace(
    agents: int = 8,
    steps: int = 200,
    depth: int = 1,
    seed: int = 0,
    *,
    task_id: str | None = None,
    llm_events: bool = True,
) -> Trace:
    """Generate a valid synthetic hierarchical trace.

    Args:
        agents: Team size K, the root included (>= 1).
        steps: Trace length L in events (raised to :func:`min_events` when smaller).
        depth: Spawn tree depth D (0 for a lone agent; at most ``agents - 1``).
        seed: Seed of every random draw; the same arguments give the same trace.
        task_id: Task id (default ``synthetic-K{agents}-L{steps}-D{depth}``).
        llm_events: Record LLM turns as ``llm_call`` events; ``False`` records them as
            ``tool_call`` events with tool ``"llm"``, the way survey-schema producers do (the
            trace then uses only the survey schema's ten event types).

    Raises:
        ConfigError: An argument is out of range (the message says the allowed range).
    """
    for name, value, lo in (("agents", agents, 1), ("steps", steps, 1), ("depth", depth, 0)):
        if not is_int(value) or value < lo:
            raise ConfigError(f"{name} must be an integer >= {lo}, got {value!r}")
    agents, steps, depth = as_int(agents), as_int(steps), as_int(depth)
    for name, value, hi in (("agents", agents, _MAX_AGENTS), ("steps", steps, _MAX_EVENTS)):
        if value > hi:
            raise ConfigError(
                f"{name} must be at most {hi:,} (got {value:,}); a generated trace is held in "
                "memory, so generate several smaller ones"
            )
    if depth > _MAX_DEPTH:
        raise ConfigError(f"depth must be <= {_MAX_DEPTH}, got {depth}")
    if agents > 1 and depth == 0:
        raise ConfigError("depth 0 means a lone agent: use --agents 1, or --depth >= 1")
    if not is_int(seed) or seed < 0:
        raise ConfigError(f"seed must be an integer >= 0, got {seed!r}")
    seed = as_int(seed)
    rng = np.random.default_rng(seed)
    llm_type, llm_tool = ("llm_call", "sim") if llm_events else ("tool_call", "llm")
    levels = _levels(agents, depth)
    # parents: each agent of level l picks a parent on level l-1 (every parent gets one first)
    names = ["orchestrator"]
    level_of = [0]
    parent = [-1]
    prev = [0]
    for lv, size in enumerate(levels[1:], start=1):
        cur = []
        for k in range(size):
            idx = len(names)
            names.append(f"agent_{idx}")
            level_of.append(lv)
            parent.append(prev[k] if k < len(prev) else prev[int(rng.integers(len(prev)))])
            cur.append(idx)
        prev = cur
    children: list[list[int]] = [[] for _ in names]
    for a, p in enumerate(parent):
        if p >= 0:
            children[p].append(a)
    workers = [a for a in range(len(names)) if not children[a]]
    budget = max(steps, min_events(agents, depth)) - min_events(agents, depth)
    extra = rng.multinomial(budget, np.full(len(workers), 1 / len(workers)))
    work_events = dict(zip(workers, (int(x) + 1 for x in extra), strict=True))

    recs: list[tuple[float, int, dict[str, object]]] = []  # (t, seq, fields)
    links: list[tuple[int, int, Any]] = []  # (src seq, dst seq)
    r6 = round

    def emit(t: float, **fields: object) -> int:
        seq = len(recs)
        recs.append((r6(t, 6), seq, fields))
        return seq

    def link(src: int, dst: int, kind: str = CAUSAL) -> None:
        links.append((src, dst, kind))

    def llm(
        agent: int, t: float, step: int, prev: int | None, role: str, kind: str = CAUSAL
    ) -> tuple[int, float]:
        dur = r6(float(rng.lognormal(0.0, 0.5)), 6)
        tin, tout = int(rng.integers(300, 4000)), int(rng.integers(20, 600))
        seq = emit(
            t,
            type=llm_type,
            agent=names[agent],
            dur=dur,
            role=role,
            tool=llm_tool,
            step=step,
            tokens_in=tin,
            tokens_out=tout,
            cost=r6((tin * 0.5 + tout * 2.0) * 1e-6, 9),
        )
        if prev is not None:
            link(prev, seq, kind)
        return seq, t + dur

    def run(agent: int, t: float, entry: int | None) -> tuple[int, float]:
        """Simulate one agent from time t; return (last event seq, end time)."""
        name = names[agent]
        role = "orchestrator" if agent == 0 else ("manager" if children[agent] else "worker")
        to_parent = names[parent[agent]] if parent[agent] >= 0 else None
        prev = entry
        step = 0
        if children[agent]:
            prev, t = llm(agent, t, step, prev, role, SPAWN)
            step += 1
            spawns = []
            for c in children[agent]:
                s = emit(
                    t,
                    type="spawn",
                    agent=name,
                    to=names[c],
                    role="worker" if not children[c] else "manager",
                    step=step,
                    decision="spawn",
                    dur=0.0,
                )
                link(prev, s, CAUSAL)
                spawns.append(s)
            step += 1
            ends = [
                run(c, t, s)  # noqa: F821 (``run`` is deleted only once the run is over)
                for c, s in zip(children[agent], spawns, strict=True)
            ]
            t_agg = max(end for _, end in ends)
            dur = r6(float(rng.uniform(0.05, 0.5)), 6)
            agg = emit(
                t_agg,
                type="aggregate",
                agent=name,
                dur=dur,
                role=role,
                step=step,
                decision="aggregate",
            )
            link(spawns[-1], agg)
            for last, _ in ends:
                link(last, agg, AGGREGATE)
            prev, t = agg, t_agg + dur
            step += 1
        else:
            left = work_events[agent]
            first = True
            while left > 0:
                if first or left < 3 or rng.random() < 0.45:
                    kind = SPAWN if first else CAUSAL
                    prev, t = llm(agent, t, step, prev, role, kind)
                    first = False
                    left -= 1
                    if left >= 2 and rng.random() < 0.6:
                        tool = _TOOLS[int(rng.integers(len(_TOOLS)))]
                        dur = r6(float(rng.exponential(0.4)), 6)
                        call = emit(
                            t,
                            type="tool_call",
                            agent=name,
                            tool=tool,
                            dur=dur,
                            role=role,
                            step=step,
                        )
                        link(prev, call)
                        res = emit(
                            t + dur, type="tool_result", agent=tool, tool=tool, trusted=False
                        )
                        link(call, res, TOOL_DEPENDENCY)
                        prev, t = res, t + dur
                        left -= 2
                    step += 1
                elif to_parent is not None and rng.random() < 0.2:
                    msg = emit(
                        t,
                        type="message",
                        agent=name,
                        to=to_parent,
                        role=role,
                        step=step,
                        dur=0.01,
                        tokens_out=int(rng.integers(10, 100)),
                        **{"from_": name},
                    )
                    link(prev, msg)  # type: ignore[arg-type]
                    prev, t = msg, t + 0.01
                    step += 1
                    left -= 1
                else:
                    prev, t = llm(agent, t, step, prev, role)
                    step += 1
                    left -= 1
        if to_parent is None:
            stop = emit(
                t,
                type="orchestrator_decision",
                agent=name,
                role=role,
                step=step,
                decision="stop",
                content="done",
            )
            link(prev, stop)  # type: ignore[arg-type]
            return stop, t
        ret = emit(
            t,
            type="return",
            agent=name,
            to=to_parent,
            role=role,
            step=step,
            dur=0.0,
            **{"from_": name},
        )
        link(prev, ret)  # type: ignore[arg-type]
        return ret, t

    if agents == 1:
        work_events[0] = max(steps - 1, 1)
    try:
        run(0, 0.0, None)
    finally:
        # ``run`` refers to itself (it recurses): clearing it breaks that cycle, so the
        # records are freed by reference counting, not left to the cyclic collector
        del run
    # by time, ties in the order recorded (a stable sort on the times alone: no key tuples)
    order = sorted(range(len(recs)), key=[r[0] for r in recs].__getitem__)
    new_id = [0] * len(recs)
    for k, s in enumerate(order):
        new_id[s] = k
    events = tuple(
        Event(id=f"e{k + 1}", t=recs[s][0], **recs[s][2])  # type: ignore[arg-type]
        for k, s in enumerate(order)
    )
    edges = tuple(
        Edge(f"e{new_id[a] + 1}", f"e{new_id[b] + 1}", kind)
        # by destination, then source (one integer per edge: both ids are below len(recs))
        for a, b, kind in sorted(links, key=lambda x: new_id[x[1]] * len(recs) + new_id[x[0]])
    )
    return Trace(
        trace_id=f"synthetic-{agents}-{steps}-{depth}-{seed}",
        task_id=task_id or f"synthetic-K{agents}-L{steps}-D{depth}",
        events=events,
        edges=edges,
        rewards={},
        costs=default_costs(events),
        system="orchestrace.generate",
        topology="hierarchical" if depth > 1 else "centralized",
        metrics={},
        schema_version=SCHEMA_VERSION,
        meta={"generator": {"agents": agents, "steps": steps, "depth": depth, "seed": seed}},
    )._mark_writable()  # its values are typed and finite by construction (tests check it)
