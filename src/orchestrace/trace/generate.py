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
from typing import Any, NamedTuple

import msgspec
import numpy as np

from orchestrace._collector import paused
from orchestrace._numbers import MAX_INT, as_int, is_int
from orchestrace.errors import ConfigError, _short
from orchestrace.trace.build import _costs_of_totals
from orchestrace.trace.model import (
    SCHEMA_VERSION,
    Edge,
    Event,
    Trace,
)

__all__ = [
    "GENERATOR_VERSION",
    "GeneratedColumns",
    "generate_columns",
    "generate_trace",
    "min_events",
]

#: The simulation's version, recorded in each trace's ``meta["generator"]``: the same arguments
#: give the same trace within a version (version 2 draws in batches; version 1 drew one number
#: at a time, so its traces differ for the same seed).
GENERATOR_VERSION = 2

_TOOLS = ("search", "python", "browser")
CAUSAL, SPAWN, AGGREGATE, TOOL_DEPENDENCY = "causal", "spawn", "aggregate", "tool_dependency"
_MAX_DEPTH = 256
_MAX_AGENTS = 10_000_000
_MAX_EVENTS = 100_000_000
# the kinds of a worker's turn: an LLM call; a message to its parent; an LLM call then a tool
# call and its result. A turn is an LLM call and a tool call with chance _P_LLM_TOOL, a message
# with chance _P_MSG (an LLM call instead on the first turn, or without a parent), else an LLM
# call.
_LLM, _MSG, _LLM_TOOL = 0, 1, 2
_P_LLM_TOOL, _P_MSG = 0.27, 0.11
# a worker's events by kind: the three of an _LLM_TOOL turn are 0, 1, 2 in their order
_E_LLM, _E_CALL, _E_RESULT, _E_MSG = 0, 1, 2, 3
_US = 1_000_000  # times are whole microseconds: exact sums, written as seconds
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

    String fields are integer codes into :attr:`strings` (``-1``: the field is ``None``);
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

    def __post_init__(self) -> None:
        for value in vars(self).values():  # the columns are the trace: read-only, as it is
            if isinstance(value, np.ndarray):
                value.flags.writeable = False

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

    @paused()  # (a million objects: no collection meanwhile)
    def trace(self) -> Trace:
        """The trace these columns hold.

        Marked writable without the writers' check: its values are typed and finite by
        construction (the columns are read-only; tests check an unmarked copy in full).
        """
        return self.header.replace(events=self.events(), edges=self.edges())._mark_writable()

    def edges(self) -> tuple[Edge, ...]:
        """The edges as :class:`~orchestrace.trace.model.Edge` objects."""
        ids, strings = self.ids(), self.strings
        return tuple(
            Edge(ids[s], ids[d], strings[k])
            for s, d, k in zip(
                self.edge_src.tolist(), self.edge_dst.tolist(), self.edge_type.tolist(), strict=True
            )
        )


def _check_args(
    agents: Any, steps: Any, depth: Any, seed: Any, task_id: Any
) -> tuple[int, int, int, int]:
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
    if not is_int(seed) or not 0 <= seed <= MAX_INT:
        raise ConfigError(f"seed must be an integer from 0 to 2**63-1, got {seed!r}")
    if task_id is not None and not (type(task_id) is str and task_id and _utf8(task_id)):
        raise ConfigError(
            f"task_id must be a non-empty string (UTF-8), got {_short(repr(task_id), 40)}; "
            "or leave it out for synthetic-K{agents}-L{steps}-D{depth}"
        )
    return agents, steps, depth, as_int(seed)


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate: no file can hold it
        return False
    return True


def _micros(seconds: np.ndarray) -> np.ndarray:
    """Durations drawn in seconds as whole microseconds (int64)."""
    micros: np.ndarray = np.rint(seconds * _US).astype(np.int64)
    return micros


def _segment_start_values(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """For each position, ``values`` at the first position of its segment (values ascending)."""
    return np.maximum.accumulate(np.where(first, values, values.dtype.type(0)))


_I = np.int64  # positions and counts (a trace holds at most _MAX_EVENTS events)


class _Tree(NamedTuple):
    """The spawn tree: agents numbered level by level, the root first."""

    parent: np.ndarray  # -1 for the root
    n_children: np.ndarray
    is_manager: np.ndarray
    managers: np.ndarray
    workers: np.ndarray
    levels: list[np.ndarray]  # the agents of each level


def _spawn_tree(rng: np.random.Generator, agents: int, depth: int) -> _Tree:
    """Each agent of a level picks a parent on the level above, every parent one child first."""
    levels = _levels(agents, depth)
    bounds = np.cumsum([0, *levels])
    parent = np.full(agents, -1, dtype=_I)
    for lv in range(1, len(levels)):
        p0, n_prev, c0, n_lv = bounds[lv - 1], levels[lv - 1], bounds[lv], levels[lv]
        firsts = min(n_prev, n_lv)
        parent[c0 : c0 + firsts] = np.arange(p0, p0 + firsts)
        if n_lv > n_prev:
            parent[c0 + n_prev : c0 + n_lv] = p0 + rng.integers(n_prev, size=n_lv - n_prev)
    n_children = np.bincount(parent[1:], minlength=agents).astype(_I)
    is_manager = n_children > 0
    return _Tree(
        parent,
        n_children,
        is_manager,
        np.flatnonzero(is_manager),
        np.flatnonzero(~is_manager),
        [np.arange(bounds[lv], bounds[lv + 1]) for lv in range(len(levels))],
    )


def _worker_turns(
    rng: np.random.Generator, n_work: np.ndarray, can_message: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each worker's turns, worker by worker: ``(worker of each, kind of each)``.

    One turn is drawn per event a worker does (enough, as a turn holds one to three events);
    the turns that end within its events are kept, and the 0-2 events left over become LLM
    calls that end its turns.
    """
    n_w = len(n_work)
    blk_w = np.repeat(np.arange(n_w, dtype=np.int32), n_work)
    w_first = np.cumsum(n_work) - n_work
    may_message = can_message[blk_w]
    may_message[w_first] = False  # a worker starts with an LLM call
    u = rng.random(len(blk_w))
    kind = np.full(len(blk_w), _LLM, dtype=np.int8)
    kind[(u < _P_LLM_TOOL + _P_MSG) & may_message] = _MSG
    kind[u < _P_LLM_TOOL] = _LLM_TOOL
    del u, may_message
    size = np.where(kind == _LLM_TOOL, 3, 1).astype(_I)
    ends = np.cumsum(size)
    base = (ends - size)[w_first]
    keep = ends - base[blk_w] <= n_work[blk_w]
    del ends
    left = n_work - np.add.reduceat(np.where(keep, size, 0), w_first)
    blk_w = np.concatenate([blk_w[keep], np.repeat(np.arange(n_w, dtype=np.int32), left)])
    kind = np.concatenate([kind[keep], np.full(int(left.sum()), _LLM, dtype=np.int8)])
    order = np.argsort(blk_w, kind="stable")
    return blk_w[order], kind[order]


class _WorkerEvents(NamedTuple):
    """The workers' events, worker by worker, with their draws."""

    worker: np.ndarray  # index into the tree's workers
    step: np.ndarray
    kind: np.ndarray  # _E_LLM, _E_CALL, _E_RESULT or _E_MSG
    dur: np.ndarray  # microseconds
    tokens_in: np.ndarray
    tokens_out: np.ndarray
    tool: np.ndarray  # index into _TOOLS (calls and results)
    n_blocks: np.ndarray  # turns per worker


def _worker_events(
    rng: np.random.Generator, n_work: np.ndarray, can_message: np.ndarray
) -> _WorkerEvents:
    blk_w, kind = _worker_turns(rng, n_work, can_message)
    n_blocks = np.bincount(blk_w, minlength=len(n_work)).astype(_I)
    blk_step = (
        np.arange(len(kind), dtype=_I) - np.repeat(np.cumsum(n_blocks) - n_blocks, n_blocks)
    ).astype(np.int32)
    size = np.where(kind == _LLM_TOOL, 3, 1).astype(_I)
    ev_blk = np.repeat(np.arange(len(kind), dtype=_I), size)
    turn_kind = kind[ev_blk]
    ev_kind = np.full(len(ev_blk), _E_LLM, dtype=np.int8)  # an LLM turn's one event
    ev_kind[turn_kind == _MSG] = _E_MSG
    in_tool_turn = turn_kind == _LLM_TOOL  # its events: _E_LLM, _E_CALL, _E_RESULT in turn
    within = np.arange(len(ev_blk), dtype=_I) - np.repeat(np.cumsum(size) - size, size)
    ev_kind[in_tool_turn] = within[in_tool_turn]
    del within, in_tool_turn, turn_kind
    worker, step = blk_w[ev_blk], blk_step[ev_blk]
    del ev_blk, blk_step
    n = len(ev_kind)
    is_llm, is_call = ev_kind == _E_LLM, ev_kind == _E_CALL
    is_result, is_msg = ev_kind == _E_RESULT, ev_kind == _E_MSG
    n_llm, n_call, n_msg = int(is_llm.sum()), int(is_call.sum()), int(is_msg.sum())
    dur = np.zeros(n, dtype=np.int64)  # microseconds
    dur[is_llm] = _micros(rng.lognormal(0.0, 0.5, n_llm))
    tokens_in = np.zeros(n, dtype=np.int32)
    tokens_out = np.zeros(n, dtype=np.int32)
    tokens_in[is_llm] = rng.integers(300, 4000, n_llm)
    tokens_out[is_llm] = rng.integers(20, 600, n_llm)
    tool = np.full(n, -1, dtype=np.int8)
    tool[is_call] = rng.integers(len(_TOOLS), size=n_call)
    tool[is_result] = tool[np.flatnonzero(is_result) - 1]  # the result of the call before
    dur[is_call] = _micros(rng.exponential(0.4, n_call))
    dur[is_msg] = _US // 100  # 0.01 s
    tokens_out[is_msg] = rng.integers(10, 100, n_msg)
    return _WorkerEvents(worker, step, ev_kind, dur, tokens_in, tokens_out, tool, n_blocks)


def _record_order(tree: _Tree, own: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each agent's first position in recording order, subtree size and rank among siblings.

    Recording is depth first: an agent's own events come first, its children's between its
    spawns and its aggregate. Returns ``(offset, subtree events, rank)`` per agent.
    """
    parent, n_children = tree.parent, tree.n_children
    sub = own.copy()
    for a in tree.levels[:0:-1]:
        np.add.at(sub, parent[a], sub[a])
    off = np.zeros(len(parent), dtype=_I)
    rank = np.zeros(len(parent), dtype=_I)
    for a in tree.levels[1:]:
        a = a[np.argsort(parent[a], kind="stable")]
        p = parent[a]
        grp = np.ones(len(a), dtype=bool)
        grp[1:] = p[1:] != p[:-1]
        before = np.cumsum(sub[a]) - sub[a]
        pos = np.arange(len(a), dtype=_I)
        rank[a] = pos - _segment_start_values(pos, grp)
        off[a] = off[p] + 1 + n_children[p] + before - _segment_start_values(before, grp)
    return off, sub, rank


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
    agents, steps, depth, seed = _check_args(agents, steps, depth, seed, task_id)
    rng = np.random.default_rng(seed)
    llm_type, llm_tool = ("llm_call", "sim") if llm_events else ("tool_call", "llm")
    tree = _spawn_tree(rng, agents, depth)
    parent, is_manager, managers, workers = (
        tree.parent,
        tree.is_manager,
        tree.managers,
        tree.workers,
    )

    # how many events each worker does, the managers' draws, then the workers' events
    n_min = min_events(agents, depth)
    budget = max(steps, n_min) - n_min
    n_work = rng.multinomial(budget, np.full(len(workers), 1 / len(workers))).astype(_I) + 1
    if agents == 1:
        n_work[0] = max(steps - 1, 1)
    n_mgr = len(managers)
    plan_dur = np.zeros(agents, dtype=np.int64)  # microseconds, as every time below
    plan_dur[managers] = _micros(rng.lognormal(0.0, 0.5, n_mgr))
    plan_in = rng.integers(300, 4000, n_mgr)
    plan_out = rng.integers(20, 600, n_mgr)
    agg_dur = np.zeros(agents, dtype=np.int64)
    agg_dur[managers] = _micros(rng.uniform(0.05, 0.5, n_mgr))
    wev = _worker_events(rng, n_work, parent[workers] >= 0)
    is_llm, is_call = wev.kind == _E_LLM, wev.kind == _E_CALL
    is_result, is_msg = wev.kind == _E_RESULT, wev.kind == _E_MSG

    # start times, top down: a child starts when its parent's planning call ends
    start = np.zeros(agents, dtype=np.int64)
    for a in tree.levels[1:]:
        start[a] = start[parent[a]] + plan_dur[parent[a]]
    # a worker's events follow one another; a tool result comes when its call ends (the sums
    # are exact: whole microseconds)
    adv = np.where(is_result, 0, wev.dur)
    done = np.cumsum(adv)  # time spent up to each event's end, counted from the first worker's
    ev_first = np.cumsum(n_work) - n_work
    before = done[ev_first] - adv[ev_first]  # what the workers before each one spent
    end = np.zeros(agents, dtype=np.int64)
    end[workers] = start[workers] + (done[ev_first + n_work - 1] - before)
    done -= adv  # up to each event's start
    done -= before[wev.worker]
    ev_t = start[workers][wev.worker] + done
    del adv, done
    # end times, bottom up: a manager aggregates when its last child returns
    t_agg = np.full(agents, -1, dtype=np.int64)
    for lv in range(len(tree.levels) - 1, -1, -1):
        a = tree.levels[lv]
        m = a[is_manager[a]]
        end[m] = t_agg[m] + agg_dur[m]
        if lv:  # (the root has no parent to return to)
            np.maximum.at(t_agg, parent[a], end[a])

    # the order events are recorded in, which breaks ties of time
    own = np.where(is_manager, tree.n_children + 3, 0)
    own[workers] = n_work + 1
    off, sub, rank = _record_order(tree, own)
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
    strings = (*words, *names)  # the words' codes fit an int8, an agent's is len(words) + index
    code = {s: k for k, s in enumerate(words)}
    name_code = np.arange(len(words), len(words) + agents, dtype=np.int32)
    tool_code = np.array([code[x] for x in _TOOLS], dtype=np.int8)
    role_of = np.where(is_manager, code["manager"], code["worker"]).astype(np.int8)
    role_of[0] = code["orchestrator"]

    # each event's position in recording order, and its time
    kids = np.arange(1, agents)
    kid_parent = parent[kids]
    plan = off[managers]
    sp = off[kid_parent] + 1 + rank[kids]
    agg = off[managers] + sub[managers] - 2
    last = off + sub - 1  # each agent's last event: its return, or the stop
    work = off[workers][wev.worker] + (np.arange(len(wev.worker)) - ev_first[wev.worker])
    t_rec = np.zeros(n, dtype=np.int64)
    t_rec[plan], t_rec[sp], t_rec[agg] = start[managers], start[kids], t_agg[managers]
    t_rec[last], t_rec[work] = end, ev_t
    # by time, ties in recording order: every column is filled at the events' final positions
    order = np.argsort(t_rec, kind="stable")
    new = np.empty(n, dtype=_I)
    new[order] = np.arange(n, dtype=_I)
    t = t_rec[order] / _US  # (the double nearest each time's decimal, as parsing it gives)
    del t_rec, order, ev_t

    typ = np.full(n, -1, dtype=np.int8)
    agent = np.full(n, -1, dtype=np.int32)
    dur = np.zeros(n, dtype=np.int64)  # microseconds, as seconds when done
    dur_default = np.zeros(n, dtype=bool)
    role = np.full(n, -1, dtype=np.int8)
    from_ = np.full(n, -1, dtype=np.int32)
    to = np.full(n, -1, dtype=np.int32)
    tool = np.full(n, -1, dtype=np.int8)
    decision = np.full(n, -1, dtype=np.int8)
    step = np.full(n, -1, dtype=np.int32)
    content = np.full(n, -1, dtype=np.int8)
    has_trusted = np.zeros(n, dtype=bool)
    tokens_in = np.zeros(n, dtype=np.int32)
    tokens_out = np.zeros(n, dtype=np.int32)
    cost = np.zeros(n)
    cost_default = np.ones(n, dtype=bool)

    def llm(at: np.ndarray, who: np.ndarray, tin: np.ndarray, tout: np.ndarray) -> None:
        typ[at], agent[at], role[at] = code[llm_type], name_code[who], role_of[who]
        tool[at] = code[llm_tool]
        tokens_in[at], tokens_out[at] = tin, tout
        cost[at] = np.round((tin * 0.5 + tout * 2.0) * 1e-6, 9)
        cost_default[at] = False

    # managers: plan, spawn each child, aggregate, then return (or stop)
    at = new[plan]
    dur[at], step[at] = plan_dur[managers], 0
    llm(at, managers, plan_in, plan_out)
    at = new[sp]
    typ[at], agent[at], to[at] = code["spawn"], name_code[kid_parent], name_code[kids]
    role[at], step[at], decision[at] = role_of[kids], 1, code["spawn"]  # the child's role
    at = new[agg]
    typ[at], agent[at], dur[at] = code["aggregate"], name_code[managers], agg_dur[managers]
    role[at], step[at], decision[at] = role_of[managers], 2, code["aggregate"]
    last_step = np.where(is_manager, 3, 0)
    last_step[workers] = wev.n_blocks
    at = new[last]
    agent[at], role[at], step[at] = name_code, role_of, last_step
    at = at[1:]  # the returns
    typ[at], to[at], from_[at] = code["return"], name_code[kid_parent], name_code[kids]
    at = new[last[0]]  # the stop
    typ[at], decision[at], content[at] = code["orchestrator_decision"], code["stop"], code["done"]
    dur_default[at] = True
    # workers' events
    at = new[work]
    who = workers[wev.worker]
    step[at], dur[at] = wev.step, wev.dur
    llm(at[is_llm], who[is_llm], wev.tokens_in[is_llm], wev.tokens_out[is_llm])
    x, used, sender = at[is_call], tool_code[wev.tool[is_call]], who[is_call]
    typ[x], agent[x], role[x], tool[x] = code["tool_call"], name_code[sender], role_of[sender], used
    x, used = at[is_result], tool_code[wev.tool[is_result]]
    typ[x], agent[x], tool[x] = code["tool_result"], used, used
    step[x], dur_default[x], has_trusted[x] = -1, True, True
    x, sender = at[is_msg], who[is_msg]
    typ[x], agent[x], role[x] = code["message"], name_code[sender], role_of[sender]
    to[x], from_[x] = name_code[parent[sender]], name_code[sender]
    tokens_out[x] = wev.tokens_out[is_msg]

    # edges, sorted by destination, then source
    src = [
        sp,  # a spawn to the child's first event
        off[kid_parent],  # the plan to each spawn
        off[managers] + tree.n_children[managers],  # the last spawn to the aggregate
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
    e_type = np.concatenate(kinds).astype(np.int8)
    edge_order = np.argsort(e_dst * n + e_src, kind="stable")
    cols: dict[str, np.ndarray] = {
        "t": t,
        "type": typ,
        "agent": agent,
        "dur": dur / _US,
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
    costs = _costs_of_totals(  # (default_costs of the events, from the columns)
        int(tokens_in.sum()) + int(tokens_out.sum()),
        float(np.cumsum(cost)[-1]),  # added one after another, in event order
        int((typ == code["tool_call"]).sum()),
        int((typ == code["message"]).sum()),
        float(t.min()),
        max(0.0, float((t + cols["dur"]).max())),
    )
    header = Trace(
        trace_id=f"synthetic-{agents}-{steps}-{depth}-{seed}",
        task_id=task_id or f"synthetic-K{agents}-L{steps}-D{depth}",
        events=(),
        edges=(),
        rewards={},
        costs=costs,
        system="orchestrace.generate",
        topology="hierarchical" if len(tree.levels) > 2 else "centralized",  # (depth > 1)
        metrics={},
        schema_version=SCHEMA_VERSION,
        meta={
            "generator": {
                "version": GENERATOR_VERSION,
                "agents": agents,
                "steps": steps,
                "depth": depth,
                "seed": seed,
            }
        },
    )
    return GeneratedColumns(
        header=header,
        strings=strings,
        edge_src=e_src[edge_order],
        edge_dst=e_dst[edge_order],
        edge_type=e_type[edge_order],
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
        depth: Spawn tree depth D (0 for a lone agent); a depth over ``agents - 1`` gives a
            tree of depth ``agents - 1``, the deepest the team allows (``meta["generator"]``
            records the depth asked for).
        seed: Seed of every random draw; the same arguments give the same trace.
        task_id: Task id (default ``synthetic-K{agents}-L{steps}-D{depth}``).
        llm_events: Record LLM turns as ``llm_call`` events; ``False`` records them as
            ``tool_call`` events with tool ``"llm"``, the way survey-schema producers do (the
            trace then uses only the survey schema's ten event types).

    Raises:
        ConfigError: An argument is out of range (the message says the allowed range).
    """
    return generate_columns(
        agents, steps, depth, seed, task_id=task_id, llm_events=llm_events
    ).trace()
