"""The reward families R2-R8 (R1, the team reward, is in :mod:`orchestrace.rewards.base`).

| family | factory | what it scores |
| --- | --- | --- |
| R2 individual agent | :func:`agent_reward` | an agent's (or role's) answers against their ground truth |
| R3 role-specific | :func:`role_reward` | each role on its own job (solver accuracy, critic verdicts, judge picks, team outcome) |
| R4 process | :func:`process_reward` | every step by a pluggable rule or judge |
| R5 tool use | :func:`tool_reward` | tool success, minus call and latency costs |
| R6 debate/verifier | :func:`verifier_reward` | message-level answers and verification verdicts |
| R7 orchestration | :func:`orchestration_reward` | parallel efficiency (critical path), split correctness, aggregation quality |
| R8 hybrid | :func:`hybrid_reward` | ``alpha * local + (1 - alpha) * global`` |

Example:
    >>> from orchestrace.runtime import run
    >>> tr = run("debate", "arith", agents=3, seed=2, rounds=1).trace
    >>> r7 = orchestration_reward()
    >>> [round(v, 3) for v in r7([tr])] == [round(v, 3) for v in r7([tr])]
    True
    >>> 0.0 <= agent_reward(role="debater")([tr])[0] <= 1.0
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from orchestrace.errors import ConfigError, Problem, TraceValidationError, _short
from orchestrace.rewards.base import (
    RewardFn,
    _Fn,
    agent_correctness,
    make,
    register,
    solve_events,
    team_reward,
    truth_of,
)
from orchestrace.tasks import make_task
from orchestrace.trace.graph import speedup
from orchestrace.trace.model import MAX_INT, Event, Trace

__all__ = [
    "agent_reward",
    "hybrid_reward",
    "orchestration_reward",
    "process_reward",
    "role_reward",
    "tool_reward",
    "verifier_reward",
]


def _roles(trace: Trace) -> dict[str, str]:
    """Agent -> role, from spawn events (the root is ``orchestrator``)."""
    out: dict[str, str] = {}
    for e in trace.events:
        if e.type == "spawn" and e.to and e.role:
            out.setdefault(e.to, e.role)
        elif e.role and e.agent not in out and e.type != "spawn":
            out.setdefault(e.agent, e.role)
    return out


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


# ---------------------------------------------------------------------- R2
@register("agent", "R2", "individual")
def agent_reward(agent: str | None = None, role: str | None = None) -> RewardFn:
    """R2 individual reward: the share of correct answers of an agent, a role, or everyone.

    Counted over the calls that recorded a ground truth.

    Args:
        agent: Score only this agent.
        role: Score only agents of this role.
    """

    def score(tr: Trace, **_: Any) -> float | None:
        roles = _roles(tr)
        right = total = 0
        for a, (c, n) in agent_correctness(tr).items():
            if (agent is None or a == agent) and (role is None or roles.get(a) == role):
                right += c
                total += n
        return right / total if total else None

    return _Fn("agent", score, {"agent": agent, "role": role})


# ---------------------------------------------------------------------- R3
_SOLVERS = {"worker", "expert", "novice", "executor", "debater", "manager", "planner"}


def _critic_accuracy(events: list[Event]) -> list[float]:
    out = []
    for e in events:
        a = e.attrs or {}
        if a.get("kind") == "critique" and "candidate" in a:
            right = a["candidate"] == a.get("truth")
            out.append(float((a.get("answer") == "accept") == right))
    return out


def _judge_accuracy(events: list[Event]) -> list[float]:
    out = []
    for e in events:
        a = e.attrs or {}
        cands = a.get("candidates")
        if a.get("kind") == "judge" and isinstance(cands, list) and a.get("truth") in cands:
            pick = a.get("answer")
            ok = isinstance(pick, int) and 0 <= pick < len(cands) and cands[pick] == a["truth"]
            out.append(float(ok))
    return out


@register("role", "R3", "role_specific")
def role_reward(weights: dict[str, float] | None = None) -> RewardFn:
    """R3 role-specific reward: each role scored on its own job, averaged with ``weights``.

    Solvers (worker, expert, executor, debater...) by answer accuracy, critics by verdict
    accuracy, judges by picking the correct candidate, the orchestrator and aggregator by the
    team outcome. Roles absent from a trace are skipped.
    """
    w = dict(weights or {})

    def score(tr: Trace, rerun_checks: bool = False, **_: Any) -> float | None:
        roles = _roles(tr)
        per_role: dict[str, list[float]] = {}
        for a, (c, n) in agent_correctness(tr).items():
            r = roles.get(a, "worker")
            if r in _SOLVERS:
                per_role.setdefault(r, []).extend([1.0] * c + [0.0] * (n - c))
        by_agent: dict[str, list[Event]] = {}
        for e in solve_events(tr):
            by_agent.setdefault(roles.get(e.agent, "worker"), []).append(e)
        if crit := _critic_accuracy(by_agent.get("critic", [])):
            per_role["critic"] = crit
        if judge := _judge_accuracy(by_agent.get("judge", [])):
            per_role["judge"] = judge
        team = team_reward()([tr], rerun_checks=rerun_checks)[0]
        if team is not None:
            per_role["orchestrator"] = [team]
        if not per_role:
            return None
        total = sum(w.get(r, 1.0) for r in per_role)
        if total <= 0:
            return None
        return sum(w.get(r, 1.0) * sum(v) / len(v) for r, v in per_role.items()) / total

    return _Fn("role", score, {"weights": w})


# ---------------------------------------------------------------------- R4
StepRule = Callable[[Event, Trace], float | None]


def default_step_rule(event: Event, trace: Trace) -> float | None:
    """1/0 for answers with a known truth, 1/0 for tool results by success, 0 for failures."""
    a = event.attrs or {}
    if event.type == "llm_call" and "truth" in a and a.get("kind") in ("solve", "revise"):
        return float(a.get("answer") == a["truth"])
    if event.type == "tool_result":
        return float(event.error is None)
    if event.type in ("despawn", "llm_call") and event.error is not None:
        return 0.0
    return None


@register("process", "R4")
def process_reward(rule: StepRule | None = None, judge: StepRule | None = None) -> RewardFn:
    """R4 process reward: the mean score of the trace's steps.

    Args:
        rule: ``rule(event, trace) -> score | None`` (default :func:`default_step_rule`).
        judge: Alternatively a judge with the same signature (e.g. an LLM-backed scorer); used
            instead of ``rule`` when given.
    """
    scorer = judge or rule or default_step_rule

    def score(tr: Trace, **_: Any) -> float | None:
        vals = [v for e in tr.events if (v := scorer(e, tr)) is not None]
        return _mean(vals)

    return _Fn("process", score, {"rule": getattr(scorer, "__name__", repr(scorer))})


def step_scores(trace: Trace, rule: StepRule | None = None) -> dict[str, float]:
    """Per-event process scores (event id -> score) for the events the rule scores."""
    scorer = rule or default_step_rule
    return {e.id: v for e in trace.events if (v := scorer(e, trace)) is not None}


# ---------------------------------------------------------------------- R5
@register("tool", "R5", "tool_use")
def tool_reward(cost_weight: float = 0.0, latency_weight: float = 0.0) -> RewardFn:
    """R5 tool-use reward: the share of successful tool calls, minus costs.

    ``cost_weight`` per call and ``latency_weight`` per second of tool time are subtracted;
    ``None`` for a trace without tool calls.
    """
    if cost_weight < 0 or latency_weight < 0:
        raise ConfigError("cost_weight and latency_weight must be >= 0")

    def score(tr: Trace, **_: Any) -> float | None:
        calls = [e for e in tr.events if e.type == "tool_call"]
        if not calls:
            return None
        results = [e for e in tr.events if e.type == "tool_result"]
        ok = sum(e.error is None for e in results) / max(len(results), 1)
        return ok - cost_weight * len(calls) - latency_weight * sum(e.dur for e in calls)

    return _Fn("tool", score, {"cost_weight": cost_weight, "latency_weight": latency_weight})


# ---------------------------------------------------------------------- R6
def message_signals(trace: Trace) -> dict[str, float]:
    """Message-level judge signal: 1/0 for each message carrying an answer to the task."""
    truth = truth_of(trace)
    out: dict[str, float] = {}
    if truth is None:
        return out
    for e in trace.events:
        if e.type == "message" and e.attrs:
            data = e.attrs.get("data")
            if isinstance(data, dict) and "answer" in data:
                out[e.id] = float(data["answer"] == truth)
    return out


@register("verifier", "R6", "debate")
def verifier_reward() -> RewardFn:
    """R6 debate/verifier reward: mean of message-level signals and verification verdicts.

    Message-level signals judge the answers sent in messages against the truth; verdicts are
    the critics' and judges' calls.
    """

    def score(tr: Trace, **_: Any) -> float | None:
        vals = list(message_signals(tr).values())
        evs = solve_events(tr)
        vals += _critic_accuracy(evs) + _judge_accuracy(evs)
        return _mean(vals)

    return _Fn("verifier", score, {})


# ---------------------------------------------------------------------- R7
def _task(trace: Trace) -> Any:
    spec = trace.meta.get("task") if isinstance(trace.meta, dict) else None
    if not isinstance(spec, dict):
        return None

    try:
        return make_task(spec["name"], seed=spec.get("seed", 0), size=spec.get("size"))
    except (ConfigError, KeyError, ImportError):
        return None


def _part(trace: Trace, i: int, e: Event) -> tuple[int, int] | None:
    """The item range ``[lo, hi)`` a spawn hands its child (``attrs.part``), if any.

    Raises:
        TraceValidationError: ``attrs.part`` is not an object with integers
            ``0 <= lo <= hi <= 2^63-1`` (a malformed part is an error, never ignored: the
            split and aggregation scores would silently change without it).
    """
    part = (e.attrs or {}).get("part") if e.type == "spawn" else None
    if part is None or not e.to:
        return None
    lo = part.get("lo") if isinstance(part, dict) else None
    hi = part.get("hi") if isinstance(part, dict) else None
    if (
        not isinstance(lo, int)
        or not isinstance(hi, int)
        or isinstance(lo, bool)
        or isinstance(hi, bool)
        or not 0 <= lo <= hi <= MAX_INT
    ):
        raise TraceValidationError(
            [
                Problem(
                    "invalid-value",
                    f"spawn attrs.part is {_short(repr(part), 80)}, not "
                    '{"lo": int, "hi": int} with 0 <= lo <= hi',
                    "record the item range handed to the child as integers lo <= hi, or "
                    "remove attrs.part",
                    path=f"$.events[{i}].attrs.part",
                    event_id=e.id,
                )
            ],
            source=trace.trace_id,
        )
    return lo, hi


def _covered(parts: list[tuple[int, int]], lo: int, hi: int) -> int:
    """How many items of ``[lo, hi)`` the ranges ``parts`` cover (overlaps counted once)."""
    total = 0
    end = lo
    for a, b in sorted((max(a, lo), min(b, hi)) for a, b in parts):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def split_correctness(trace: Trace) -> float | None:
    """How well each splitting agent's parts cover its span without overlap.

    The mean over splitters; 1.0 is an exact partition.

    Raises:
        TraceValidationError: A spawn's ``attrs.part`` is malformed (see :func:`_part`).
    """
    task = _task(trace)
    spans: dict[str, tuple[int, int]] = {}
    children: dict[str, list[tuple[int, int]]] = {}
    for i, e in enumerate(trace.events):
        span = _part(trace, i, e)
        if span is not None and e.to:
            spans[e.to] = span
            children.setdefault(e.agent, []).append(span)
    if not children:
        return None
    scores = []
    for parent, parts in children.items():
        if parent in spans:
            lo, hi = spans[parent]
        elif task is not None:
            lo, hi = 0, task.size
        else:
            lo, hi = min(p[0] for p in parts), max(p[1] for p in parts)
        length = hi - lo
        if length <= 0:
            continue
        covered = _covered(parts, lo, hi)
        total = sum(b - a for a, b in parts)
        overlap = total - covered
        scores.append(max(0.0, covered / length - overlap / length))
    return _mean(scores)


def aggregation_quality(trace: Trace) -> float | None:
    """Whether aggregates were right when their inputs allowed a right answer (mean)."""
    task = _task(trace)
    if task is None:
        return None
    spans = {e.to: _part(trace, i, e) for i, e in enumerate(trace.events) if e.to}
    values: dict[str, Any] = {}
    for e in trace.events:
        a = e.attrs or {}
        if e.type == "return" and "value" in a:
            values[e.id] = a["value"]
        elif e.type == "message" and isinstance(a.get("data"), dict) and "value" in a["data"]:
            values[e.id] = a["data"]["value"]
    inputs: dict[str, list[str]] = {}
    for edge in trace.edges:
        if edge.type in ("aggregate", "message"):
            inputs.setdefault(edge.dst, []).append(edge.src)
    scores = []
    for e in trace.events:
        if e.type != "aggregate" or not e.attrs:
            continue
        part = spans.get(e.agent)
        if part is not None and isinstance(task.size, int) and part[1] > task.size:
            continue  # a range beyond the task's items has no truth to compare with
        truth = task.span_truth(*part) if part is not None else task.answer
        got = [values[s] for s in inputs.get(e.id, []) if s in values]
        method = e.attrs.get("method")
        if method == "combine":
            attainable = bool(got) and task.combine(got) == truth
        else:
            attainable = truth in got
        if attainable:
            scores.append(float(e.attrs.get("value") == truth))
    return _mean(scores)


def parallel_efficiency(trace: Trace, ideal: int | None = None) -> float | None:
    """Speedup (work / critical path) over the ideal for the team size, capped at 1."""
    team = len({e.to for e in trace.events if e.type == "spawn" and e.to})
    best = ideal or team
    if best <= 0:
        return None
    return min(1.0, speedup(trace) / best)


@register("orchestration", "R7")
def orchestration_reward(
    w_parallel: float = 1.0,
    w_split: float = 1.0,
    w_aggregate: float = 1.0,
    ideal: int | None = None,
) -> RewardFn:
    """R7 orchestration reward: parallelism, split correctness and aggregation quality.

    A weighted mean of parallel efficiency (speedup via the critical path over the ideal for
    the team size), split correctness (parts cover the task without overlap) and aggregation
    quality (aggregates right whenever their inputs allowed).
    """
    weights = (w_parallel, w_split, w_aggregate)
    if min(weights) < 0 or sum(weights) <= 0:
        raise ConfigError("orchestration weights must be >= 0 and not all 0")

    def score(tr: Trace, **_: Any) -> float | None:
        parts = (parallel_efficiency(tr, ideal), split_correctness(tr), aggregation_quality(tr))
        got = [(w, p) for w, p in zip(weights, parts, strict=True) if p is not None and w > 0]
        if not got:
            return None
        return sum(w * p for w, p in got) / sum(w for w, _ in got)

    return _Fn(
        "orchestration",
        score,
        {"w_parallel": w_parallel, "w_split": w_split, "w_aggregate": w_aggregate, "ideal": ideal},
    )


# ---------------------------------------------------------------------- R8
@register("hybrid", "R8")
def hybrid_reward(
    local: str | RewardFn = "agent", global_: str | RewardFn = "team", alpha: float = 0.5
) -> RewardFn:
    """R8 hybrid local-global reward: ``alpha * local + (1 - alpha) * global``.

    When one side does not apply, the other alone.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"alpha must be in [0, 1], got {alpha}")
    lo = make(local) if isinstance(local, str) else local
    gl = make(global_) if isinstance(global_, str) else global_

    def score(tr: Trace, **kw: Any) -> float | None:
        a, b = lo([tr], **kw)[0], gl([tr], **kw)[0]
        if a is None or b is None:
            return b if a is None else a
        return alpha * a + (1 - alpha) * b

    return _Fn("hybrid", score, {"local": lo.name, "global": gl.name, "alpha": alpha})
