"""PARL, the parallel-agent RL orchestration reward: ``r = r_perf + λ1·r_parallel + λ2·r_finish``.

PARL trains an orchestrator that spawns sub-agents. Two auxiliary terms shape early training
and are annealed away: ``r_parallel`` rewards instantiating sub-agents (against *serial
collapse*, an orchestrator that does everything itself), ``r_finish`` rewards sub-agents that
finish their assigned sub-tasks (against *spurious parallelism*, spawning sub-agents that do
nothing useful to collect ``r_parallel``). The published description gives the roles of the
terms, not their formulas; these are the definitions used here:

* ``r_perf``: the task outcome (R1), optionally minus ``latency_weight`` times the Critical
  Steps over ``steps_budget`` (latency is counted along the critical path, not in total steps).
* ``r_finish``: the share of sub-tasks (spawns of another agent) that the spawned agent
  finished: it delivered a non-empty result (return or message) that reaches the run's answer
  along dependency edges and that carries work done for the sub-task (an LLM or tool call of
  the agent or its own sub-agents flows into it, or it aggregates such work). A spawn whose
  agent returns at once, returns nothing, or works on something the answer never uses counts
  against it. See :func:`subtasks` for the exact checks. Limit: the checks read the trace's
  structure, not the values, so busy work passes them: a sub-agent that makes one LLM call
  and returns a value the aggregate consumes counts as finished even when the aggregate's
  output and the answer are unchanged (20 such sub-agents added to a ``centralized``
  ``arith`` run with 8 workers raise ``r_parallel`` from 0.70 to 0.90 at ``r_finish`` 1.0,
  and the reward at λ1 = λ2 = 0.1 from 1.17 to 1.19). Whether an input changed an aggregate
  (a sum, a vote, an LLM's synthesis) cannot be read off the trace; it takes re-running
  without it, which leave-one-out and counterfactual credit (:mod:`orchestrace.credit`) do
  and a per-episode reward does not. Annealing λ1 to 0 bounds what busy work can earn.
* ``r_parallel`` = ``1 - CriticalSteps / TotalSteps`` over the *productive* trace: the root
  agents plus the episodes of finished sub-tasks (the spawn steps of unfinished ones stay, as
  the spawner's own steps). It is the share of useful steps taken off the critical path: 0 for
  a serial run, near 1 for a wide, shallow one. Counting only finished sub-tasks keeps idle
  sub-agents from inflating it (their steps would otherwise all sit off the critical path), so
  the hack of spawning do-nothing sub-agents lowers ``r_finish`` and leaves ``r_parallel``
  unchanged or lower, for any ``λ1, λ2 >= 0``. The ``critical_steps`` and ``total_steps``
  components are the whole trace's, idle sub-agents included.
* ``λ1``, ``λ2``: numbers or :class:`Anneal` schedules; PARL anneals them to 0 so training ends
  on the task reward alone. Pass ``step=`` when calling the reward.

Example:
    >>> from orchestrace.runtime import run
    >>> tr = run("centralized", "arith", agents=8, seed=1).trace
    >>> c = parl_components(tr)
    >>> 0 < c["r_parallel"] < 1, c["r_finish"], c["subtasks"], c["finished_subtasks"]
    (True, 1.0, 8.0, 8.0)
    >>> c["critical_steps"] < c["total_steps"]
    True
    >>> lam = Anneal(0.2, 0.0, steps=100)
    >>> lam(0), lam(50), lam(100), lam(1000)
    (0.2, 0.1, 0.0, 0.0)
    >>> r = parl_reward(lambda1=lam, lambda2=0.0)
    >>> r([tr], step=100) == [c["r_perf"]]
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrace._numbers import as_real, is_finite, is_int, is_real
from orchestrace.errors import ConfigError
from orchestrace.rewards.base import RewardFn, _Fn, orchestrators, register, team_reward
from orchestrace.trace.graph import DEPENDENCY_EDGES
from orchestrace.trace.model import Event, Trace
from orchestrace.trace.steps import ACTION_TYPES

__all__ = [
    "Anneal",
    "SubTask",
    "latency_reward",
    "parl_components",
    "parl_reward",
    "subtasks",
]


@dataclass(frozen=True)
class Anneal:
    """A schedule from ``start`` to ``end`` over ``steps`` training steps.

    Args:
        start: Value at step 0.
        end: Value from step ``steps`` on.
        steps: Length of the schedule.
        kind: ``linear``, ``cosine`` or ``exp`` (geometric, ``end`` must be > 0 for exp... or
            decays to 0 as ``start * 0.01 ** (step / steps)`` when ``end`` is 0).
    """

    start: float
    end: float = 0.0
    steps: int = 1000
    kind: str = "linear"

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            value = getattr(self, name)
            if not is_real(value):
                raise ConfigError(f"Anneal {name} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ConfigError(f"Anneal {name} must be a finite number, got {value!r}")
            object.__setattr__(self, name, as_real(value))  # (numpy scalars too)
        steps = self.steps
        if not is_finite(steps) or steps < 1:
            raise ConfigError(f"Anneal steps must be >= 1 (a finite number), got {steps!r}")
        object.__setattr__(self, "steps", as_real(steps))
        if self.kind not in ("linear", "cosine", "exp"):
            raise ConfigError(f"Anneal kind must be linear, cosine or exp, got {self.kind!r}")

    def __call__(self, step: int) -> float:
        """The value at training ``step``."""
        x = min(max(step, 0) / self.steps, 1.0)
        if x >= 1.0:
            return self.end
        if self.kind == "linear":
            return self.start + (self.end - self.start) * x
        if self.kind == "cosine":
            return self.end + (self.start - self.end) * 0.5 * (1 + math.cos(math.pi * x))
        floor = self.end if self.end > 0 else self.start * 0.01
        return self.start * (floor / self.start) ** x if self.start > 0 else self.end


def _value(lam: float | Anneal, step: int) -> float:
    return lam(step) if isinstance(lam, Anneal) else float(lam)


@dataclass(frozen=True)
class SubTask:
    """One sub-task: a spawn of a sub-agent, and whether the sub-agent finished it.

    Attributes:
        spawn: Id of the spawn event that assigned it.
        agent: The sub-agent.
        finished: Whether it counts towards ``r_finish`` (see :func:`subtasks`).
        reason: ``"finished"``, or the furthest check that a result of the sub-task reached
            before failing: ``"failed"``, ``"no result"``, ``"empty result"``,
            ``"does not reach the answer"``, ``"no work"``.
        returned: Id of the result (return or message) that finished it (``None`` when
            unfinished).
    """

    spawn: str
    agent: str
    finished: bool
    reason: str
    returned: str | None = None


#: Why a sub-task is unfinished, from the earliest check to the latest.
_REASONS = ("failed", "no result", "empty result", "does not reach the answer", "no work")
_WORK = frozenset({"llm_call", "tool_call"})
_DEPENDENCY = frozenset(t.value for t in DEPENDENCY_EDGES)
_ACTIONS = frozenset(t.value for t in ACTION_TYPES)


def _empty(ev: Event) -> bool:
    """Whether a result is recorded as carrying nothing (``None``, ``""``, ``[]``, ``{}``)."""
    if ev.content is not None and not ev.content.strip():
        return True
    if ev.attrs and "value" in ev.attrs:
        v = ev.attrs["value"]
        return v is None or (isinstance(v, str | list | dict | tuple) and len(v) == 0)
    return False


def subtasks(trace: Trace) -> list[SubTask]:
    """Every sub-task of a trace (one per spawn of another agent) and whether it finished.

    A sub-task finishes when one *result* of the spawned agent (a ``return`` or a ``message``
    it sends), recorded in the episode the spawn opened (from the spawn until the agent's next
    spawn), passes every check:

    1. the episode did not fail (no ``despawn`` of the agent with an ``error``);
    2. the result is not empty: its ``content`` is not blank and a recorded ``attrs.value``
       is not ``None``, ``""``, ``[]`` or ``{}`` (a result that records neither is not empty);
    3. it reaches the answer: a path of dependency edges (causal, spawn, message,
       tool_dependency, return, aggregate) leads from it to the run's answer, i.e. to a stop
       decision or the last action of an orchestrator
       (:func:`orchestrace.rewards.base.orchestrators`);
    4. it carries work done for the sub-task: along dependency edges, made since the spawn,
       an ``llm_call`` or ``tool_call`` of the agent or of an agent in its spawn subtree flows
       into the result through that subtree (and its tools' results), or an ``aggregate`` of
       the subtree on that way combines inputs into which an ``llm_call`` or ``tool_call``
       of any agent, made since the spawn, flows (an aggregator combining reports).

    Spawning an agent that returns at once, returns nothing, relays what it was given, or
    works on something the answer never uses therefore finishes no sub-task. The checks are
    structural: a result that reaches the answer but does not change it still counts
    (counterfactual credit, :mod:`orchestrace.credit`, measures that).

    Example:
        >>> from orchestrace.runtime import run
        >>> tasks = subtasks(run("centralized", "arith", agents=4, seed=1).trace)
        >>> [(s.agent, s.finished, s.reason) for s in tasks][:2]
        [('worker1', True, 'finished'), ('worker2', True, 'finished')]
    """
    events = trace.events
    if not events:
        return []
    # one pass over the events: ids, spawns of another agent, results, the run's answer
    bosses = set(orchestrators(trace))
    index: dict[str, int] = {}
    spawns: list[int] = []
    by_agent: dict[str, list[int]] = {}
    answer: list[int] = []
    last: dict[str, int] = {}  # each orchestrator's last action (the latest time, then index)
    for i, e in enumerate(events):
        index[e.id] = i
        kind = e.type
        if kind == "spawn":
            if e.to and e.to != e.agent:
                spawns.append(i)
        elif kind in ("return", "message", "despawn"):
            by_agent.setdefault(e.agent, []).append(i)
        if e.agent in bosses and kind in _ACTIONS:
            if e.decision == "stop":
                answer.append(i)
            j = last.get(e.agent)
            if j is None or e.t >= events[j].t:
                last[e.agent] = i
    if not spawns:
        return []
    episodes = _episodes(events, spawns)
    preds: list[list[int]] = [[] for _ in events]
    for ed in trace.edges:
        if ed.type in _DEPENDENCY:
            src, dst = index.get(ed.src), index.get(ed.dst)
            if src is not None and dst is not None:
                preds[dst].append(src)
    children: dict[str, list[str]] = {}
    for s, child, _, _ in episodes:
        children.setdefault(events[s].agent, []).append(child)
    reaches = _ancestors(preds, answer + list(last.values()))
    teams: dict[str, set[str]] = {}

    out: list[SubTask] = []
    for s, child, lo, hi in episodes:
        sid = events[s].id
        mine = [i for i in by_agent.get(child, []) if lo <= (events[i].t, i) < hi]
        if any(events[i].type == "despawn" and events[i].error for i in mine):
            out.append(SubTask(sid, child, False, "failed"))
            continue
        worst = 1  # "no result"
        done: int | None = None
        team = teams.get(child)
        if team is None:
            team = teams[child] = _subtree(child, children)
        for r in (i for i in mine if events[i].type != "despawn"):
            if _empty(events[r]):
                worst = max(worst, 2)
            elif r not in reaches:
                worst = max(worst, 3)
            elif not _has_work(r, events, preds, team, lo[0]):
                worst = max(worst, 4)
            else:
                done = r
                break
        if done is not None:
            out.append(SubTask(sid, child, True, "finished", events[done].id))
        else:
            out.append(SubTask(sid, child, False, _REASONS[worst]))
    return out


_Pos = tuple[float, int]


def _episodes(
    events: tuple[Event, ...], spawns: list[int] | None = None
) -> list[tuple[int, str, _Pos, _Pos]]:
    """Each spawn of another agent, in time order: ``(index, child, start, end)``.

    A spawn opens an episode of the child that lasts until the child's next spawn; the first
    one also covers anything the child did before it (as in Critical Steps). Positions are
    ``(time, recording index)``, so events at the time of a spawn keep their recorded order.
    ``spawns``, when given, are the indices of those spawns in recording order.
    """
    if spawns is None:
        spawns = [i for i, e in enumerate(events) if e.type == "spawn" and e.to and e.to != e.agent]
    spawns = sorted(spawns, key=lambda i: (events[i].t, i))
    opened: dict[str, list[int]] = {}
    for i in spawns:
        opened.setdefault(events[i].to or "", []).append(i)
    out = []
    for child, entries in opened.items():
        for k, i in enumerate(entries):
            lo = (events[i].t, i) if k else (-math.inf, -1)
            nxt = entries[k + 1] if k + 1 < len(entries) else -1
            hi = (events[nxt].t, nxt) if nxt >= 0 else (math.inf, -1)
            out.append((i, child, lo, hi))
    out.sort(key=lambda x: (events[x[0]].t, x[0]))
    return out


def _ancestors(preds: list[list[int]], start: list[int]) -> set[int]:
    seen = set(start)
    stack = list(start)
    while stack:
        for p in preds[stack.pop()]:
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return seen


def _subtree(agent: str, children: dict[str, list[str]]) -> set[str]:
    team = {agent}
    stack = [agent]
    while stack:
        for c in children.get(stack.pop(), ()):
            if c not in team:
                team.add(c)
                stack.append(c)
    return team


def _has_work(
    out: int, events: tuple[Event, ...], preds: list[list[int]], team: set[str], since: float
) -> bool:
    """Whether work for the sub-task flows into result ``out`` (check 4 of :func:`subtasks`)."""
    seen = {out}
    stack = [out]
    combined: list[int] = []
    while stack:
        for p in preds[stack.pop()]:
            if p in seen:
                continue
            seen.add(p)
            e = events[p]
            if e.t < since or (e.agent not in team and e.type != "tool_result"):
                continue
            if e.type in _WORK and e.agent in team:
                return True
            if e.type == "aggregate":
                combined.append(p)
            stack.append(p)
    # an aggregate of the subtree combining work done since the spawn, by anyone
    reached = set(combined)
    stack = combined
    while stack:
        for p in preds[stack.pop()]:
            if p in reached:
                continue
            reached.add(p)
            e = events[p]
            if e.t < since:
                continue
            if e.type in _WORK:
                return True
            stack.append(p)
    return False


def _without(trace: Trace, drop: list[SubTask]) -> Trace:
    """The trace without the events of the given sub-tasks' episodes (their spawns stay)."""
    events = trace.events
    ids = {x.spawn for x in drop}
    windows: dict[str, list[tuple[_Pos, _Pos]]] = {}
    for s, child, lo, hi in _episodes(events):
        if events[s].id in ids:
            windows.setdefault(child, []).append((lo, hi))
    gone = {
        e.id
        for i, e in enumerate(events)
        if e.agent in windows and any(lo <= (e.t, i) < hi for lo, hi in windows[e.agent])
    }
    return trace.replace(
        events=tuple(e for e in events if e.id not in gone),
        edges=tuple(ed for ed in trace.edges if ed.src not in gone and ed.dst not in gone),
    )


def parl_components(
    trace: Trace,
    *,
    latency_weight: float = 0.0,
    steps_budget: int | None = None,
    rerun_checks: bool = False,
    checker: Callable[[Trace, Any], bool] | None = None,
) -> dict[str, float]:
    """``r_perf``, ``r_parallel``, ``r_finish`` and the counts behind them.

    Keys: ``r_perf``, ``r_parallel``, ``r_finish``, ``critical_steps`` and ``total_steps`` (of
    the whole trace), ``subtasks`` (spawns of another agent) and ``finished_subtasks``.

    ``r_perf`` counts an unknown outcome (see :func:`orchestrace.rewards.base.outcome`) as 0;
    :func:`parl_reward` gives ``None`` for such a run instead. ``checker(trace, answer)``
    replaces the task's checker (a caller holding the task instance saves rebuilding it).

    Raises:
        ConfigError: ``latency_weight`` negative or not finite, without ``steps_budget``, or
            ``steps_budget`` below 1.
    """
    _check_latency(latency_weight, steps_budget)
    return _components(
        trace,
        latency_weight=latency_weight,
        steps_budget=steps_budget,
        rerun_checks=rerun_checks,
        checker=checker,
    )[0]


def _components(
    trace: Trace,
    *,
    latency_weight: float,
    steps_budget: int | None,
    rerun_checks: bool,
    checker: Callable[[Trace, Any], bool] | None = None,
) -> tuple[dict[str, float], bool]:
    structure = trace.graph.step_structure()
    total = structure.total_steps
    cs = structure.critical_steps()
    team = team_reward(checker)([trace], rerun_checks=rerun_checks)[0]
    perf = team or 0.0
    if latency_weight and steps_budget:
        perf -= latency_weight * min(1.0, cs / steps_budget)
    tasks = subtasks(trace)
    done = sum(1 for s in tasks if s.finished)
    r_finish = done / len(tasks) if tasks else 0.0
    eff_cs, eff_total = cs, total
    if done < len(tasks):
        eff = _without(trace, [s for s in tasks if not s.finished]).graph.step_structure()
        eff_cs, eff_total = eff.critical_steps(), eff.total_steps
    r_parallel = max(0.0, 1.0 - eff_cs / eff_total) if eff_total else 0.0
    return {
        "r_perf": perf,
        "r_parallel": r_parallel,
        "r_finish": r_finish,
        "critical_steps": float(cs),
        "total_steps": float(total),
        "subtasks": float(len(tasks)),
        "finished_subtasks": float(done),
    }, team is not None


@register("parl", "PARL")
def parl_reward(
    lambda1: float | Anneal = 0.1,
    lambda2: float | Anneal = 0.1,
    latency_weight: float = 0.0,
    steps_budget: int | None = None,
) -> RewardFn:
    """The PARL reward ``r_perf + λ1·r_parallel + λ2·r_finish`` (call with ``step=``).

    ``None`` for a run whose outcome is unknown (see :func:`orchestrace.rewards.base.outcome`).

    Args:
        lambda1: Weight of ``r_parallel`` (a number or an :class:`Anneal` schedule).
        lambda2: Weight of ``r_finish``.
        latency_weight: ``r_perf`` loses ``latency_weight * min(1, CriticalSteps /
            steps_budget)``; needs ``steps_budget``.
        steps_budget: The Critical-Steps budget. The learning environments also stop an
            episode (``truncated``) once it is reached, when driven by this reward.

    Raises:
        ConfigError: A negative ``latency_weight``, a ``latency_weight`` without
            ``steps_budget``, or a ``steps_budget`` below 1.
    """
    _check_latency(latency_weight, steps_budget)

    def score(tr: Trace, step: int = 0, rerun_checks: bool = False, **_: Any) -> float | None:
        c, known = _components(
            tr, latency_weight=latency_weight, steps_budget=steps_budget, rerun_checks=rerun_checks
        )
        if not known:
            return None
        return (
            c["r_perf"]
            + _value(lambda1, step) * c["r_parallel"]
            + _value(lambda2, step) * c["r_finish"]
        )

    return _Fn(
        "parl",
        score,
        {
            "lambda1": lambda1,
            "lambda2": lambda2,
            "latency_weight": latency_weight,
            "steps_budget": steps_budget,
        },
    )


def _check_latency(latency_weight: Any, steps_budget: Any) -> None:
    """Refuse a latency term that cannot be computed (see :func:`parl_reward`)."""
    if not is_finite(latency_weight) or latency_weight < 0:
        raise ConfigError(f"latency_weight must be a finite number >= 0, got {latency_weight!r}")
    _check_budget(steps_budget)
    if latency_weight and steps_budget is None:
        raise ConfigError(
            "latency_weight needs steps_budget (the Critical Steps that cost latency_weight in "
            "full); add steps_budget, e.g. steps_budget = 20"
        )


def _check_budget(steps_budget: int | None) -> None:
    if steps_budget is not None and (not is_int(steps_budget) or steps_budget < 1):
        raise ConfigError(
            f"steps_budget must be an integer >= 1 (Critical Steps), got {steps_budget!r}"
        )


@register("latency", "critical_steps")
def latency_reward(norm: float = 1.0, steps_budget: int | None = None) -> RewardFn:
    """Minus the run's Critical Steps over ``norm``: a latency term for composite rewards.

    PARL counts latency in Critical Steps (:func:`orchestrace.trace.steps.critical_steps`), the
    steps along the run's critical path, not its total steps. In a TOML spec,
    ``[reward.latency]`` with ``weight = 0.01`` costs 0.01 per Critical Step.

    Args:
        norm: Critical Steps per unit of reward (> 0).
        steps_budget: A Critical-Steps budget, for the learning environments: driven by a
            reward that declares one, an episode is truncated once it is reached. It does not
            change the value.

    Raises:
        ConfigError: ``norm`` not a finite number > 0, or ``steps_budget`` below 1.

    Example:
        >>> from orchestrace.runtime import run
        >>> tr = run("centralized", "arith", agents=8, seed=1).trace
        >>> latency_reward()([tr]), latency_reward(norm=10)([tr])
        ([-3.0], [-0.3])
    """
    if isinstance(norm, bool) or not isinstance(norm, int | float) or not 0 < norm < math.inf:
        raise ConfigError(f"norm must be a finite number > 0, got {norm!r}")
    _check_budget(steps_budget)

    def score(tr: Trace, **_: Any) -> float:
        return -tr.graph.critical_steps() / norm

    return _Fn("latency", score, {"norm": norm, "steps_budget": steps_budget})
