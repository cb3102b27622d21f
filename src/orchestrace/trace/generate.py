"""Synthetic hierarchical traces for tests and benchmarks.

:func:`generate_trace` builds a valid trace of a given team size, length and spawn depth. The
root orchestrator plans, spawns its children in one step, waits, aggregates their returns and
stops; managers do the same one level down; workers take turns of an LLM call optionally
followed by a tool call, now and then report progress to their parent, and return. Times come
from a seeded simulation, so the same arguments give the same bytes.

The simulation draws its random numbers in batches and builds the trace as columns
(:func:`generate_columns`), which the Parquet writer can write without event objects; the
events of :func:`generate_trace` are made from the same columns.

Example:
    >>> from orchestrace.trace.check import check_trace
    >>> tr = generate_trace(agents=5, steps=60, depth=2, seed=1)
    >>> tr.n_events, check_trace(tr)
    (60, [])
    >>> generate_trace(agents=5, steps=60, depth=2, seed=1) == tr
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from orchestrace._collector import paused
from orchestrace._numbers import as_int, is_int
from orchestrace.errors import ConfigError
from orchestrace.trace.build import _costs_of_totals
from orchestrace.trace.model import (
    SCHEMA_VERSION,
    Edge,
    Event,
    Trace,
)

__all__ = ["GeneratedColumns", "generate_columns", "generate_trace", "min_events"]

_TOOLS = ("search", "python", "browser")
CAUSAL, SPAWN, AGGREGATE, TOOL_DEPENDENCY = "causal", "spawn", "aggregate", "tool_dependency"
_MAX_DEPTH = 256
_MAX_AGENTS = 10_000_000
_MAX_EVENTS = 100_000_000
# the block kinds of a worker's turn: an LLM call, an LLM call and a tool call with its result,
# a message to the parent; and the chance of the first two (the rest is a message, or an LLM
# call for a worker without a parent or on its first turn)
_LLM, _MSG, _LLM_TOOL = 0, 1, 2
_P_LLM_TOOL, _P_MSG = 0.27, 0.11
# a worker's events by kind
_E_LLM, _E_CALL, _E_RESULT, _E_MSG = 0, 1, 2, 3
_DEFAULT_DUR: float = next(f.default for f in msgspec.structs.fields(Event) if f.name == "dur")
_DEFAULT_COST: float = next(f.default for f in msgspec.structs.fields(Event) if f.name == "cost")


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


@dataclass(frozen=True)
class GeneratedColumns:
    """A generated trace as columns, in event order (what :func:`generate_trace` holds).

    String fields are ``int32`` codes into :attr:`strings` (``-1``: the field is ``None``);
    ``step`` is ``-1`` where an event has none, and ``trusted`` is ``False`` where
    ``has_trusted`` is set and ``None`` elsewhere. ``dur_default``/``cost_default`` mark the
    events that leave ``dur``/``cost`` at the field's default (native JSON omits them).
    Edges hold event positions (``src < dst``), sorted by destination, then source.

    Example:
        >>> g = generate_columns(agents=3, steps=20, depth=1, seed=0)
        >>> g.n_events, len(g.edge_src), g.strings[g.type[0]]
        (20, 21, 'llm_call')
    """

    header: Trace
    strings: tuple[str, ...]
    t: np.ndarray
    type: np.ndarray
    agent: np.ndarray
    dur: np.ndarray
    dur_default: np.ndarray
    role: np.ndarray
    from_: np.ndarray
    to: np.ndarray
    tool: np.ndarray
    decision: np.ndarray
    step: np.ndarray
    content: np.ndarray
    has_trusted: np.ndarray
    tokens_in: np.ndarray
    tokens_out: np.ndarray
    cost: np.ndarray
    cost_default: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_type: np.ndarray

    @property
    def n_events(self) -> int:
        """Number of events."""
        return len(self.t)

    def ids(self) -> list[str]:
        """The event ids, ``e1`` to ``eN`` in event order."""
        return [f"e{k}" for k in range(1, self.n_events + 1)]

    def events(self) -> tuple[Event, ...]:
        """The events as :class:`~orchestrace.trace.model.Event` objects."""
        lookup = np.array([*self.strings, None], dtype=object)  # code -1: None

        def text(codes: np.ndarray) -> list[Any]:
            return list(lookup[codes])

        dur: list[Any] = self.dur.tolist()
        for k in np.flatnonzero(self.dur_default).tolist():
            dur[k] = _DEFAULT_DUR
        cost: list[Any] = self.cost.tolist()
        for k in np.flatnonzero(self.cost_default).tolist():
            cost[k] = _DEFAULT_COST
        step: list[Any] = self.step.tolist()
        for k in np.flatnonzero(self.step < 0).tolist():
            step[k] = None
        trusted: list[Any] = np.array([None, False])[self.has_trusted.astype(np.intp)].tolist()
        n = self.n_events
        nones = [None] * n
        return tuple(
            map(
                Event,
                self.ids(),
                self.t.tolist(),
                text(self.type),
                text(self.agent),
                dur,
                text(self.role),
                text(self.from_),
                text(self.to),
                text(self.tool),
                text(self.decision),
                step,
                text(self.content),
                nones,
                trusted,
                self.tokens_in.tolist(),
                self.tokens_out.tolist(),
                cost,
                nones,
                nones,
            )
        )

    def trace(self) -> Trace:
        """The trace these columns hold (marked writable: its values are typed and finite)."""
        return self.header.replace(events=self.events(), edges=self.edges())._mark_writable()

    def edges(self) -> tuple[Edge, ...]:
        """The edges as :class:`~orchestrace.trace.model.Edge` objects."""
        ids = self.ids()
        kinds = [self.strings[k] for k in range(len(self.strings))]
        return tuple(
            Edge(ids[s], ids[d], kinds[k])
            for s, d, k in zip(
                self.edge_src.tolist(), self.edge_dst.tolist(), self.edge_type.tolist(), strict=True
            )
        )


def _check_args(agents: Any, steps: Any, depth: Any, seed: Any) -> tuple[int, int, int, int]:
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
    return agents, steps, depth, as_int(seed)


def _r6(x: np.ndarray) -> np.ndarray:
    return np.round(x, 6)


def _segment_start_values(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """For each position, ``values`` at the first position of its segment (values ascending)."""
    return np.maximum.accumulate(np.where(first, values, values.dtype.type(0)))


def generate_columns(
    agents: int = 8,
    steps: int = 200,
    depth: int = 1,
    seed: int = 0,
    *,
    task_id: str | None = None,
    llm_events: bool = True,
) -> GeneratedColumns:
    """Generate a valid synthetic hierarchical trace as columns (see :func:`generate_trace`).

    The same arguments give the same trace as :func:`generate_trace`, without event objects:
    the Parquet writer writes these columns directly.

    Raises:
        ConfigError: An argument is out of range (the message says the allowed range).
    """
    agents, steps, depth, seed = _check_args(agents, steps, depth, seed)
    rng = np.random.default_rng(seed)
    llm_type, llm_tool = ("llm_call", "sim") if llm_events else ("tool_call", "llm")
    i64 = np.int64

    # the spawn tree: agents are numbered level by level; each agent of a level picks a parent
    # on the level above, every parent getting one child first
    levels = _levels(agents, depth)
    bounds = np.cumsum([0, *levels])
    parent = np.full(agents, -1, dtype=i64)
    for lv in range(1, len(levels)):
        p0, n_prev, c0, n_lv = bounds[lv - 1], levels[lv - 1], bounds[lv], levels[lv]
        firsts = min(n_prev, n_lv)
        parent[c0 : c0 + firsts] = np.arange(p0, p0 + firsts)
        if n_lv > n_prev:
            parent[c0 + n_prev : c0 + n_lv] = p0 + rng.integers(n_prev, size=n_lv - n_prev)
    n_children = np.bincount(parent[1:], minlength=agents).astype(i64)
    is_manager = n_children > 0
    managers = np.flatnonzero(is_manager)
    workers = np.flatnonzero(~is_manager)
    level_agents = [np.arange(bounds[lv], bounds[lv + 1]) for lv in range(len(levels))]

    # how many events each worker does, then the managers' draws
    n_min = min_events(agents, depth)
    budget = max(steps, n_min) - n_min
    n_work = rng.multinomial(budget, np.full(len(workers), 1 / len(workers))).astype(i64) + 1
    if agents == 1:
        n_work[0] = max(steps - 1, 1)
    n_mgr = len(managers)
    plan_dur = np.zeros(agents)
    plan_dur[managers] = _r6(rng.lognormal(0.0, 0.5, n_mgr))
    plan_in = rng.integers(300, 4000, n_mgr)
    plan_out = rng.integers(20, 600, n_mgr)
    agg_dur = np.zeros(agents)
    agg_dur[managers] = _r6(rng.uniform(0.05, 0.5, n_mgr))

    # each worker's turns (blocks): drawn until they cover its events, the last one that
    # does not fit dropped and the events left made LLM calls
    n_w = len(workers)
    n_draw = int(n_work.sum())
    blk_w = np.repeat(np.arange(n_w), n_work)
    w_first = np.cumsum(n_work) - n_work
    first = np.zeros(n_draw, dtype=bool)
    first[w_first] = True
    may_message = (parent[workers] >= 0)[blk_w] & ~first
    u = rng.random(n_draw)
    kind = np.where(
        u < _P_LLM_TOOL, _LLM_TOOL, np.where((u < _P_LLM_TOOL + _P_MSG) & may_message, _MSG, _LLM)
    )
    size = np.where(kind == _LLM_TOOL, 3, 1).astype(i64)
    ends = np.cumsum(size)
    base = (ends - size)[w_first]
    keep = ends - base[blk_w] <= n_work[blk_w]
    kept_size = np.add.reduceat(np.where(keep, size, 0), w_first)
    left = n_work - kept_size  # 0, 1 or 2 events: that many LLM calls end the worker's turns
    blk_w = np.concatenate([blk_w[keep], np.repeat(np.arange(n_w), left)])
    kind = np.concatenate([kind[keep], np.full(int(left.sum()), _LLM)])
    order = np.argsort(blk_w, kind="stable")
    blk_w, kind = blk_w[order], kind[order]
    n_blocks = np.bincount(blk_w, minlength=n_w).astype(i64)
    blk_first = np.cumsum(n_blocks) - n_blocks
    blk_step = np.arange(len(kind)) - np.repeat(blk_first, n_blocks)
    size = np.where(kind == _LLM_TOOL, 3, 1).astype(i64)
    # the workers' events, worker by worker
    ev_blk = np.repeat(np.arange(len(kind)), size)
    ev_in_blk = np.arange(len(ev_blk)) - np.repeat(np.cumsum(size) - size, size)
    ev_kind = np.where(
        kind[ev_blk] == _MSG, _E_MSG, np.where(kind[ev_blk] == _LLM, _E_LLM, ev_in_blk)
    )
    ev_w = blk_w[ev_blk]
    ev_step = blk_step[ev_blk]
    is_llm, is_call = ev_kind == _E_LLM, ev_kind == _E_CALL
    is_result, is_msg = ev_kind == _E_RESULT, ev_kind == _E_MSG
    n_llm, n_call, n_msg = int(is_llm.sum()), int(is_call.sum()), int(is_msg.sum())
    ev_dur = np.zeros(len(ev_kind))
    ev_dur[is_llm] = _r6(rng.lognormal(0.0, 0.5, n_llm))
    ev_in = np.zeros(len(ev_kind), dtype=i64)
    ev_out = np.zeros(len(ev_kind), dtype=i64)
    ev_in[is_llm] = rng.integers(300, 4000, n_llm)
    ev_out[is_llm] = rng.integers(20, 600, n_llm)
    ev_tool = np.full(len(ev_kind), -1, dtype=i64)
    ev_tool[is_call] = rng.integers(len(_TOOLS), size=n_call)  # an index into _TOOLS
    ev_tool[is_result] = ev_tool[np.flatnonzero(is_result) - 1]  # the result of the call before
    ev_dur[is_call] = _r6(rng.exponential(0.4, n_call))
    ev_dur[is_msg] = 0.01
    ev_out[is_msg] = rng.integers(10, 100, n_msg)

    # start times, top down: a child starts when its parent's planning call ends
    start = np.zeros(agents)
    for lv in range(1, len(levels)):
        a = level_agents[lv]
        start[a] = start[parent[a]] + plan_dur[parent[a]]
    # a worker's events follow one another; a tool result comes when its call ends
    adv = np.where(is_result, 0.0, ev_dur)
    done = np.cumsum(adv)
    ev_first = np.cumsum(n_work) - n_work
    w_base = (done - adv)[ev_first]
    ev_t = start[workers][ev_w] + ((done - adv) - w_base[ev_w])
    end = np.zeros(agents)
    end[workers] = start[workers] + (done[ev_first + n_work - 1] - w_base)
    # end times, bottom up: a manager aggregates when its last child returns
    t_agg = np.full(agents, -np.inf)
    for lv in range(len(levels) - 1, -1, -1):
        a = level_agents[lv]
        m = a[is_manager[a]]
        end[m] = t_agg[m] + agg_dur[m]
        if lv:
            np.maximum.at(t_agg, parent[a], end[a])

    # the order events are recorded in (depth first), which breaks ties of time: each agent's
    # events, its children's between its spawns and its aggregate
    own = np.where(is_manager, n_children + 3, 0)
    own[workers] = n_work + 1
    sub = own.copy()
    for lv in range(len(levels) - 1, 0, -1):
        a = level_agents[lv]
        np.add.at(sub, parent[a], sub[a])
    off = np.zeros(agents, dtype=i64)
    rank = np.zeros(agents, dtype=i64)  # position among its parent's children
    for lv in range(1, len(levels)):
        a = level_agents[lv]
        a = a[np.argsort(parent[a], kind="stable")]
        p = parent[a]
        grp = np.ones(len(a), dtype=bool)
        grp[1:] = p[1:] != p[:-1]
        before = np.cumsum(sub[a]) - sub[a]
        pos = np.arange(len(a), dtype=i64)
        rank[a] = pos - _segment_start_values(pos, grp)
        off[a] = off[p] + 1 + n_children[p] + before - _segment_start_values(before, grp)
    n = int(sub[0])

    # the strings every column codes into
    names = ["orchestrator", *(f"agent_{k}" for k in range(1, agents))]
    words = [
        *_TOOLS,
        llm_type,
        llm_tool,
        "spawn",
        "aggregate",
        "tool_call",
        "tool_result",
        "message",
        "return",
        "orchestrator_decision",
        "orchestrator",
        "manager",
        "worker",
        "stop",
        "done",
        CAUSAL,
        TOOL_DEPENDENCY,
    ]
    strings = tuple(dict.fromkeys([*names, *words]))
    code = {s: k for k, s in enumerate(strings)}
    tool_code = np.array([code[x] for x in _TOOLS], dtype=np.int32)
    role_of = np.where(is_manager, code["manager"], code["worker"])
    role_of[0] = code["orchestrator"]
    spawn_role = np.where(is_manager, code["manager"], code["worker"])

    # each event's position in recording order, and its time
    kids = np.arange(1, agents)
    kid_parent = parent[kids]
    plan = off[managers]
    sp = off[kid_parent] + 1 + rank[kids]
    agg = off[managers] + sub[managers] - 2
    last = off + sub - 1  # each agent's last event: its return, or the stop
    work = off[workers][ev_w] + (np.arange(len(ev_w)) - ev_first[ev_w])
    t_rec = np.zeros(n)
    t_rec[plan], t_rec[sp], t_rec[agg] = start[managers], start[kids], t_agg[managers]
    t_rec[last], t_rec[work] = end, ev_t
    t_rec = _r6(t_rec)
    # by time, ties in recording order: every column is filled at the events' final positions
    order = np.argsort(t_rec, kind="stable")
    new = np.empty(n, dtype=i64)
    new[order] = np.arange(n, dtype=i64)
    t = t_rec[order]

    typ = np.full(n, -1, dtype=np.int32)
    agent = np.full(n, -1, dtype=np.int32)
    dur = np.zeros(n)
    dur_default = np.zeros(n, dtype=bool)
    role = np.full(n, -1, dtype=np.int32)
    from_ = np.full(n, -1, dtype=np.int32)
    to = np.full(n, -1, dtype=np.int32)
    tool = np.full(n, -1, dtype=np.int32)
    decision = np.full(n, -1, dtype=np.int32)
    step = np.full(n, -1, dtype=i64)
    content = np.full(n, -1, dtype=np.int32)
    has_trusted = np.zeros(n, dtype=bool)
    tokens_in = np.zeros(n, dtype=i64)
    tokens_out = np.zeros(n, dtype=i64)
    cost = np.zeros(n)
    cost_default = np.ones(n, dtype=bool)

    def llm(at: np.ndarray, who: np.ndarray, tin: np.ndarray, tout: np.ndarray) -> None:
        typ[at], agent[at], role[at], tool[at] = code[llm_type], who, role_of[who], code[llm_tool]
        tokens_in[at], tokens_out[at] = tin, tout
        cost[at] = np.round((tin * 0.5 + tout * 2.0) * 1e-6, 9)
        cost_default[at] = False

    # managers: plan, spawn each child, aggregate, then return (or stop)
    at = new[plan]
    dur[at], step[at] = plan_dur[managers], 0
    llm(at, managers, plan_in, plan_out)
    at = new[sp]
    typ[at], agent[at], to[at] = code["spawn"], kid_parent, kids
    role[at], step[at], decision[at] = spawn_role[kids], 1, code["spawn"]
    at = new[agg]
    typ[at], agent[at], dur[at] = code["aggregate"], managers, agg_dur[managers]
    role[at], step[at], decision[at] = role_of[managers], 2, code["aggregate"]
    last_step = np.where(is_manager, 3, 0)
    last_step[workers] = n_blocks
    at = new[last]
    agent[at], role[at], step[at] = np.arange(agents), role_of, last_step
    at = at[1:]  # the returns
    typ[at], to[at], from_[at] = code["return"], kid_parent, kids
    at = new[last[0]]  # the stop
    typ[at], decision[at], content[at] = code["orchestrator_decision"], code["stop"], code["done"]
    dur_default[at] = True
    # workers' events
    at = new[work]
    who = workers[ev_w]
    step[at], dur[at] = ev_step, ev_dur
    llm(at[is_llm], who[is_llm], ev_in[is_llm], ev_out[is_llm])
    x, used, by = at[is_call], tool_code[ev_tool[is_call]], who[is_call]
    typ[x], agent[x], role[x], tool[x] = code["tool_call"], by, role_of[by], used
    x, used = at[is_result], tool_code[ev_tool[is_result]]
    typ[x], agent[x], tool[x] = code["tool_result"], used, used
    step[x], dur_default[x], has_trusted[x] = -1, True, True
    x, by = at[is_msg], who[is_msg]
    typ[x], agent[x], role[x] = code["message"], by, role_of[by]
    to[x], from_[x], tokens_out[x] = parent[by], by, ev_out[is_msg]

    # edges, sorted by destination, then source
    src = [
        sp,  # a spawn to the child's first event
        off[kid_parent],  # the plan to each spawn
        off[managers] + n_children[managers],  # the last spawn to the aggregate
        last[kids],  # each child's return to its parent's aggregate
        agg,  # the aggregate to the return (or the stop)
        work,  # a worker's event to the next (its return after the last)
    ]
    dst = [off[kids], sp, agg, off[kid_parent] + sub[kid_parent] - 2, agg + 1, work + 1]
    kinds = [
        np.full(len(kids), code[SPAWN]),
        np.full(len(kids), code[CAUSAL]),
        np.full(n_mgr, code[CAUSAL]),
        np.full(len(kids), code[AGGREGATE]),
        np.full(n_mgr, code[CAUSAL]),
        np.where(is_call, code[TOOL_DEPENDENCY], code[CAUSAL]),
    ]
    e_src, e_dst = new[np.concatenate(src)], new[np.concatenate(dst)]
    e_type = np.concatenate(kinds).astype(np.int32)
    by = np.argsort(e_dst * n + e_src, kind="stable")
    cols: dict[str, np.ndarray] = {
        "t": t,
        "type": typ,
        "agent": agent,
        "dur": dur,
        "dur_default": dur_default,
        "role": role,
        "from_": from_,
        "to": to,
        "tool": tool,
        "decision": decision,
        "step": step,
        "content": content,
        "has_trusted": has_trusted,
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "cost": cost,
        "cost_default": cost_default,
    }
    ts, durs = cols["t"], cols["dur"]
    types = cols["type"]
    costs = _costs_of_totals(
        int(cols["tokens_in"].sum()) + int(cols["tokens_out"].sum()),
        float(np.cumsum(cols["cost"])[-1]),  # added one after another, in event order
        int((types == code["tool_call"]).sum()),
        int((types == code["message"]).sum()),
        float(ts.min()),
        max(0.0, float((ts + durs).max())),
    )
    header = Trace(
        trace_id=f"synthetic-{agents}-{steps}-{depth}-{seed}",
        task_id=task_id or f"synthetic-K{agents}-L{steps}-D{depth}",
        events=(),
        edges=(),
        rewards={},
        costs=costs,
        system="orchestrace.generate",
        topology="hierarchical" if depth > 1 else "centralized",
        metrics={},
        schema_version=SCHEMA_VERSION,
        meta={"generator": {"agents": agents, "steps": steps, "depth": depth, "seed": seed}},
    )
    return GeneratedColumns(
        header=header,
        strings=strings,
        edge_src=e_src[by],
        edge_dst=e_dst[by],
        edge_type=e_type[by],
        **cols,
    )


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
    # its values are typed and finite by construction (tests check it)
    return generate_columns(
        agents, steps, depth, seed, task_id=task_id, llm_events=llm_events
    ).trace()
