"""PARL Critical Steps: how a trace's actions group into steps, stages and episodes.

A trace's latency in agent turns is its *Critical Steps*: per stage of the root agent, its main
steps plus the longest sub-agent branch it waits for, recursively down the spawn tree
(:func:`critical_steps` gives the definitions). The computation reads a compiled trace's
columns through the :class:`StepColumns` protocol, which
:class:`~orchestrace.trace.graph.TraceGraph` satisfies; this module imports neither the graph
nor the records, so the graph can offer ``step_structure()`` as a method.

Example:
    >>> from orchestrace.trace.build import TraceBuilder
    >>> b = TraceBuilder(task_id="demo")
    >>> plan = b.add("orchestrator_decision", "lead", dur=1.0, step=0)
    >>> w = [b.spawn("lead", f"w{i}", after=[plan], step=1) for i in range(3)]
    >>> r = [b.ret(f"w{i}", "lead", after=[w[i]], dur=float(i + 1)) for i in range(3)]
    >>> agg = b.aggregate("lead", r, dur=1.0, step=2)
    >>> tr = b.build()
    >>> critical_steps(tr)
    4
    >>> s = step_structure(tr.graph)
    >>> s.total_steps, s.critical_steps()
    (6, 4)
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from orchestrace.trace.enums import DECISION_CODE, EVENT_CODE, EVENT_TYPES, Decision, EventType

__all__ = [
    "ACTION_TYPES",
    "HasGraph",
    "StepColumns",
    "StepStructure",
    "critical_steps",
    "step_structure",
]

#: Event types that count as an agent's steps (actions) for Critical Steps.
ACTION_TYPES: frozenset[EventType] = frozenset(
    {
        EventType.ORCHESTRATOR_DECISION,
        EventType.SPAWN,
        EventType.MESSAGE,
        EventType.TOOL_CALL,
        EventType.RETURN,
        EventType.AGGREGATE,
        EventType.LLM_CALL,
    }
)

_SPAWN = EVENT_CODE[EventType.SPAWN]
#: Edges handled at once when marking waits (bounds the temporaries of a long trace).
_EDGE_SLICE = 1 << 20
_DELEGATE = DECISION_CODE[Decision.DELEGATE]
_ACTION_MASK = np.zeros(len(EVENT_TYPES), dtype=bool)
_ACTION_MASK[[EVENT_CODE[x] for x in ACTION_TYPES]] = True
_ACTION_LIST: list[bool] = _ACTION_MASK.tolist()
#: Up to this many events (or episodes and stages), plain Python loops replace the array passes:
#: on a trace of a few dozen events the per-call cost of NumPy dominates. Both give the same
#: results (``tests/trace/test_steps_differential.py`` compares them).
_SMALL = 256


class StepColumns(Protocol):
    """What Critical Steps read of a compiled trace (a :class:`~orchestrace.trace.graph.TraceGraph`).

    Columns are numpy arrays indexed by event; codes follow :mod:`orchestrace.trace.enums`,
    -1 meaning "not set".
    """

    @property
    def n(self) -> int:
        """Number of events."""

    @property
    def t(self) -> np.ndarray:
        """Start times."""

    @property
    def type_code(self) -> np.ndarray:
        """Event type codes."""

    @property
    def agent_code(self) -> np.ndarray:
        """Producing agent's name code."""

    @property
    def to_code(self) -> np.ndarray:
        """Name code of ``to`` (-1: unset)."""

    @property
    def decision_code(self) -> np.ndarray:
        """Decision codes (-1: unset)."""

    @property
    def step(self) -> np.ndarray:
        """Agent-local step (-1: unset)."""

    def tool_mask(self) -> np.ndarray:
        """Per name code: the name is a tool, not an agent."""

    def dependency_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` event indices of the dependency edges."""


@runtime_checkable
class HasGraph(Protocol):
    """Anything with a compiled ``graph`` (a :class:`~orchestrace.trace.model.Trace`)."""

    @property
    def graph(self) -> StepColumns:
        """The compiled graph."""


@dataclass(frozen=True)
class StepStructure:
    """How a trace's action events group into steps, stages and episodes.

    Attributes:
        stage_main: Main steps per stage (int64).
        stage_episode: Episode of each stage.
        episode_parent_stage: For each episode, the parent stage it is attributed to (-1: root).
        episode_agent: Name code of each episode's agent.
    """

    stage_main: np.ndarray
    stage_episode: np.ndarray
    episode_parent_stage: np.ndarray
    episode_agent: np.ndarray

    @property
    def total_steps(self) -> int:
        """Steps taken by all agents together."""
        return int(self.stage_main.sum())

    def critical_steps(self) -> int:
        """Sum over stages of main steps plus the longest attributed episode, from the roots."""
        n_ep = len(self.episode_agent)
        if n_ep == 0:
            return 0
        if n_ep + len(self.stage_episode) <= _SMALL:
            stage_list = self.stage_episode.tolist()
            parents = [stage_list[k] if k >= 0 else -1 for k in self.episode_parent_stage.tolist()]
            return _critical_steps_loop(self, parents, _walk_depths(parents))
        parent_stage = np.asarray(self.episode_parent_stage, dtype=np.int64)
        stage_ep = np.asarray(self.stage_episode, dtype=np.int64)
        parent_ep = np.where(parent_stage >= 0, stage_ep[np.maximum(parent_stage, 0)], -1)
        depth = _episode_depths(parent_ep)
        levels = int(depth.max()) + 1
        if levels * _LEVEL_COST > n_ep + len(stage_ep):  # a deep spawn chain: walk instead
            return _critical_steps_loop(self, parent_ep.tolist(), depth.tolist())
        stage_total = np.asarray(self.stage_main, dtype=np.int64)
        stage_branch = np.zeros(len(stage_total), dtype=np.int64)
        ep_value = np.zeros(n_ep, dtype=np.int64)
        # stages grouped by episode: episode e owns by_ep[lo[e]:hi[e]]
        by_ep = np.argsort(stage_ep, kind="stable")
        lo = np.searchsorted(stage_ep[by_ep], np.arange(n_ep))
        hi = np.searchsorted(stage_ep[by_ep], np.arange(n_ep), side="right")
        order = np.argsort(-depth, kind="stable")
        bounds = np.searchsorted(-depth[order], np.arange(-levels + 1, 1))
        bounds = np.append(bounds, n_ep)
        for k in range(levels):  # deepest episodes first: a level only feeds shallower ones
            eps = order[bounds[k] : bounds[k + 1]]
            if not len(eps):
                continue
            d = int(depth[eps[0]])
            counts = hi[eps] - lo[eps]
            ends = np.cumsum(counts)
            rows = np.arange(int(ends[-1]) if len(ends) else 0) + np.repeat(
                lo[eps] - (ends - counts), counts
            )
            sidx = by_ep[rows]
            sums = np.concatenate(([0], np.cumsum(stage_total[sidx] + stage_branch[sidx])))
            values = sums[ends] - sums[ends - counts]
            ep_value[eps] = values
            s = parent_stage[eps]
            pe = parent_ep[eps]
            ok = (s >= 0) & (pe != eps)
            ok[ok] = depth[pe[ok]] < d
            np.maximum.at(stage_branch, s[ok], values[ok])
        roots = parent_stage < 0
        return int(ep_value[roots].max()) if roots.any() else 0


#: Per-level cost of the vectorised Critical Steps pass, in steps of the per-episode walk.
_LEVEL_COST = 32


def _episode_depths(parent_ep: np.ndarray) -> np.ndarray:
    """Depth of each episode in the attribution tree (roots 0), by pointer jumping.

    Episodes on or below an attribution cycle (possible with equal times) have no root; for
    them the depths are those of the per-episode walk, which stops where it meets itself.
    """
    n_ep = len(parent_ep)
    up = parent_ep.copy()
    depth = (up >= 0).astype(np.int64)
    for _ in range(int(n_ep).bit_length() + 1):
        m = np.flatnonzero(up >= 0)
        if not len(m):
            return depth
        anc = up[m]
        depth[m] += depth[anc]
        up[m] = up[anc]
    if not bool((up >= 0).any()):
        return depth
    return np.asarray(_walk_depths(parent_ep.tolist()), dtype=np.int64)


def _walk_depths(parent_ep: list[int]) -> list[int]:
    """Depths by walking each episode's chain of parents (guarding against cycles)."""
    n_ep = len(parent_ep)
    depth = [-1] * n_ep
    for e in range(n_ep):
        chain = []
        node = e
        while node >= 0 and depth[node] < 0 and node not in chain:
            chain.append(node)
            node = parent_ep[node]
        base = depth[node] + 1 if node >= 0 and depth[node] >= 0 else 0
        for k, x in enumerate(reversed(chain)):
            depth[x] = base + k
    return depth


def _critical_steps_loop(s: StepStructure, parent_ep: list[int], depth: list[int]) -> int:
    """Critical Steps one episode at a time, deepest first (for deep attribution trees)."""
    n_ep = len(parent_ep)
    parent_stage = s.episode_parent_stage.tolist()
    stage_ep = s.stage_episode.tolist()
    stage_total = s.stage_main.astype(np.int64).tolist()
    stage_branch = [0] * len(stage_total)
    ep_value = [0] * n_ep
    stages_of: list[list[int]] = [[] for _ in range(n_ep)]
    for k, e in enumerate(stage_ep):
        stages_of[e].append(k)
    for e in sorted(range(n_ep), key=lambda x: -depth[x]):
        ep_value[e] = sum(stage_total[k] + stage_branch[k] for k in stages_of[e])
        k = parent_stage[e]
        if k >= 0 and parent_ep[e] != e and depth[parent_ep[e]] < depth[e]:
            stage_branch[k] = max(stage_branch[k], ep_value[e])
    roots = [e for e in range(n_ep) if parent_stage[e] < 0]
    return max((ep_value[e] for e in roots), default=0)


def step_structure(g: StepColumns) -> StepStructure:
    """Group the action events of a compiled trace into steps, stages and episodes.

    Args:
        g: A compiled trace (a :class:`~orchestrace.trace.graph.TraceGraph`).

    Returns:
        The structure :func:`critical_steps` sums over.
    """
    n = g.n
    empty = np.zeros(0, dtype=np.int64)
    if n == 0:
        return StepStructure(empty, empty, empty, empty)
    if n <= _SMALL:
        small = _step_structure_small(g, n)
        if small is not None:
            return small
    # per-event temporaries stay narrow (codes as stored, masks as bools, edges in slices):
    # at 10,000,000 events each int64 copy of a column would cost 80 MB
    type_code = g.type_code
    agent = g.agent_code
    t = g.t
    tool = g.tool_mask()
    act = _ACTION_MASK[type_code]
    if tool.any():
        act &= ~tool[agent]

    # an event "waits" when it consumes an event of another agent
    src, dst = g.dependency_edges()
    waits = np.zeros(n, dtype=bool)
    for lo in range(0, len(src), _EDGE_SLICE):
        s_e, d_e = src[lo : lo + _EDGE_SLICE], dst[lo : lo + _EDGE_SLICE]
        waits[d_e[agent[s_e] != agent[d_e]]] = True

    # entries: spawns and delegations open an episode of the target agent
    to = g.to_code
    entry = (type_code == _SPAWN) | (g.decision_code == _DELEGATE)
    entry &= act
    entry &= to >= 0
    entry &= to != agent
    ent_idx = np.flatnonzero(entry)
    ent_idx = ent_idx[np.lexsort((ent_idx, t[ent_idx], to[ent_idx]))]
    ent_child = to[ent_idx].astype(np.int64)

    # action events sorted by agent, time, index; each gets an episode (positions, episode
    # and stage numbers as int32 below 2**31 events, and each freed once used: at
    # 10,000,000 events every live per-event int64 array costs 80 MB of peak memory)
    idx = np.int32 if n < 2**31 else np.int64
    a_idx = np.flatnonzero(act).astype(idx)
    del act
    a_idx = a_idx[np.lexsort((a_idx, t[a_idx], agent[a_idx]))]
    a_agent = agent[a_idx]
    n_names = int(max(agent.max(initial=0), to.max(initial=0))) + 1
    ent_first = np.searchsorted(ent_child, np.arange(n_names + 1))
    ep_local = np.zeros(len(a_idx), dtype=idx)
    agent_first = np.searchsorted(a_agent, np.arange(n_names + 1))
    has_entries = np.flatnonzero(ent_first[1:] > ent_first[:-1])
    for c in has_entries.tolist():
        lo, hi = int(agent_first[c]), int(agent_first[c + 1])
        if lo == hi:
            continue
        times = t[ent_idx[ent_first[c] : ent_first[c + 1]]]
        k = np.searchsorted(times, t[a_idx[lo:hi]], side="right") - 1
        ep_local[lo:hi] = np.maximum(k, 0)
    # global episode id per action event
    new_ep = np.ones(len(a_idx), dtype=bool)
    if len(a_idx) > 1:
        np.not_equal(a_agent[1:], a_agent[:-1], out=new_ep[1:])
        new_ep[1:] |= ep_local[1:] != ep_local[:-1]
    ep_first = np.flatnonzero(new_ep)
    n_ep = len(ep_first)
    episode_agent = a_agent[ep_first].astype(np.int64) if n_ep else empty
    episode_local = ep_local[ep_first].astype(np.int64) if n_ep else empty
    del a_agent, ep_local, ep_first

    # steps: runs of equal recorded step within an episode (unset steps stand alone)
    new_step = new_ep.copy()
    if len(a_idx) > 1:
        step = g.step[a_idx]
        new_step[1:] |= step[1:] != step[:-1]
        new_step[1:] |= step[1:] < 0
        del step
    new_stage = waits[a_idx]
    del waits
    new_stage |= new_ep
    new_stage &= new_step
    stage_id = np.cumsum(new_stage, dtype=idx)
    np.subtract(stage_id, 1, out=stage_id)
    stage_main = np.bincount(
        stage_id[new_step], minlength=int(stage_id[-1]) + 1 if len(stage_id) else 0
    )
    del new_step
    # the episode of each stage's first event: episodes counted up to there
    ep_count = np.cumsum(new_ep, dtype=idx)
    del new_ep
    stage_episode = ep_count[np.flatnonzero(new_stage)]
    np.subtract(stage_episode, 1, out=stage_episode)
    del ep_count, new_stage

    # attach each episode to the parent stage holding its entry event
    stage_of_event = np.full(n, -1, dtype=idx)
    stage_of_event[a_idx] = stage_id
    del a_idx, stage_id
    parent_stage = np.full(n_ep, -1, dtype=np.int64)
    if n_ep and len(ent_idx):
        # entry k of child c opens local episode k; find its global episode id
        key_ep = episode_agent * (len(ent_idx) + 1) + episode_local
        ent_local = np.arange(len(ent_idx)) - ent_first[ent_child]
        key_ent = ent_child * (len(ent_idx) + 1) + ent_local
        order = np.argsort(key_ep, kind="stable")
        pos = np.searchsorted(key_ep[order], key_ent)
        pos = np.minimum(pos, n_ep - 1)
        found = key_ep[order][pos] == key_ent
        target = order[pos[found]]
        parent_stage[target] = stage_of_event[ent_idx[found]]
    return StepStructure(
        stage_main.astype(np.int64),
        stage_episode.astype(np.int64),
        parent_stage,
        episode_agent.astype(np.int64),
    )


def _step_structure_small(g: StepColumns, n: int) -> StepStructure | None:
    """:func:`step_structure` in plain Python, for small traces (``None``: a NaN time)."""
    t = g.t.tolist()
    if any(math.isnan(x) for x in t):  # NaN orders differently in a sort than in NumPy's
        return None
    type_code = g.type_code.tolist()
    agent = g.agent_code.tolist()
    to = g.to_code.tolist()
    decision = g.decision_code.tolist()
    step = g.step.tolist()
    tool = g.tool_mask().tolist()
    any_tool = any(tool)

    # an event "waits" when it consumes an event of another agent
    src, dst = g.dependency_edges()
    waits = [False] * n
    for s_e, d_e in zip(src.tolist(), dst.tolist(), strict=True):
        if agent[s_e] != agent[d_e]:
            waits[d_e] = True

    # action events, and the entries among them (spawns and delegations to another agent)
    acts: list[int] = []
    entries: list[int] = []
    for i in range(n):
        a = agent[i]
        if not _ACTION_LIST[type_code[i]] or (any_tool and tool[a]):
            continue
        acts.append(i)
        c = to[i]
        if (type_code[i] == _SPAWN or decision[i] == _DELEGATE) and c >= 0 and c != a:
            entries.append(i)
    entries.sort(key=lambda i: (to[i], t[i], i))
    acts.sort(key=lambda i: (agent[i], t[i], i))
    entry_times: dict[int, list[float]] = {}
    entry_of: dict[tuple[int, int], int] = {}  # (child, k): the child's k-th entry event
    for i in entries:
        child_times = entry_times.setdefault(to[i], [])
        entry_of[(to[i], len(child_times))] = i
        child_times.append(t[i])

    # walk the actions by agent, time, index: episodes, steps and stages as they open
    stage_main: list[int] = []
    stage_episode: list[int] = []
    episode_agent: list[int] = []
    episode_of: dict[tuple[int, int], int] = {}  # (agent, local episode): global episode id
    stage_of: dict[int, int] = {}
    prev_agent = prev_local = prev_step = -1
    for i in acts:
        a = agent[i]
        times = entry_times.get(a)
        local = max(bisect_right(times, t[i]) - 1, 0) if times else 0
        new_ep = a != prev_agent or local != prev_local
        s = step[i]
        new_step = new_ep or s != prev_step or s < 0
        if new_ep:
            episode_of[(a, local)] = len(episode_agent)
            episode_agent.append(a)
        if new_step:
            if new_ep or waits[i]:
                stage_main.append(0)
                stage_episode.append(len(episode_agent) - 1)
            stage_main[-1] += 1
        stage_of[i] = len(stage_main) - 1
        prev_agent, prev_local, prev_step = a, local, s

    # attach each episode to the parent stage holding its entry event
    parent_stage = [-1] * len(episode_agent)
    for key, e in episode_of.items():
        i = entry_of.get(key, -1)
        if i >= 0:
            parent_stage[e] = stage_of[i]
    return StepStructure(
        np.array(stage_main, dtype=np.int64),
        np.array(stage_episode, dtype=np.int64),
        np.array(parent_stage, dtype=np.int64),
        np.array(episode_agent, dtype=np.int64),
    )


def critical_steps(trace: StepColumns | HasGraph) -> int:
    """PARL Critical Steps: per stage, main steps plus the longest sub-agent branch.

    Applied recursively down the spawn tree and summed over the root's stages.

    Definitions (also in ``docs/trace-format.md``):

    * A *step* of an agent is one of its action events (:data:`ACTION_TYPES`); consecutive
      events that share a recorded ``step`` number count once (one LLM turn that emits several
      tool calls or spawns).
    * A *stage* of an agent starts at its first step and at every step that consumes (has an
      incoming dependency edge from) an event of another agent: that is where it waits.
    * Each spawn or delegation opens an *episode* of the target agent, attributed to the stage
      of the parent that issued it. A stage costs its main steps plus the largest critical steps
      among its episodes. With several roots the result is the maximum over roots.

    Args:
        trace: A :class:`~orchestrace.trace.model.Trace` or its compiled graph.

    Returns:
        The number of Critical Steps (0 for a trace without actions).

    Example:
        >>> from orchestrace.trace.build import TraceBuilder
        >>> b = TraceBuilder(task_id="demo")
        >>> s = b.spawn("lead", "w1", step=0)
        >>> w = b.llm("w1", after=[s], step=0)
        >>> r = b.ret("w1", "lead", after=[w], step=1)
        >>> critical_steps(b.build())
        3
    """
    graph = trace.graph if isinstance(trace, HasGraph) else trace
    return step_structure(graph).critical_steps()
