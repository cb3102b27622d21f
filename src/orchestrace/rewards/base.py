"""Reward functions over traces: ``fn(traces, **kw) -> list[float | None]``.

Like TRL's reward functions: plain callables, one value per trace (``None`` when the reward does
not apply to that trace), built by factories that take the parameters, combined by weights and
logged under ``rewards/<name>``.

Example:
    >>> from orchestrace.runtime import run
    >>> traces = [run("centralized", "arith", agents=k, seed=1).trace for k in (2, 16)]
    >>> team = team_reward()
    >>> team(traces)
    [0.0, 1.0]
    >>> team.name
    'team'
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from orchestrace.errors import ConfigError
from orchestrace.runtime.core import ROOT
from orchestrace.tasks import _checking, task_class
from orchestrace.tasks.base import answer_digest, recorded_verdict
from orchestrace.trace.model import Event, Trace

__all__ = [
    "REGISTRY",
    "RewardFn",
    "VerdictWarning",
    "agent_correctness",
    "answer_of",
    "executes_code",
    "orchestrators",
    "outcome",
    "outcome_known",
    "prepare_outcome",
    "recorded_verdict",
    "register",
    "team_reward",
    "truth_of",
]


@runtime_checkable
class RewardFn(Protocol):
    """A reward function: one value (or ``None``) per trace."""

    name: str

    def __call__(self, traces: Sequence[Trace], **kw: Any) -> list[float | None]:
        """Score each trace."""
        ...


@dataclass
class _Fn:
    """A named reward function built from a per-trace scorer."""

    name: str
    score: Callable[..., float | None]
    params: dict[str, Any] = field(default_factory=dict)

    def __call__(self, traces: Sequence[Trace], **kw: Any) -> list[float | None]:
        out: list[float | None] = []
        for tr in traces:
            v = self.score(tr, **kw)
            if v is not None and not math.isfinite(v):
                raise ValueError(f"reward {self.name} gave {v} for trace {tr.trace_id}")
            out.append(None if v is None else float(v))
        return out

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{self.name}({args})"


#: Reward factories by name (and family alias R1..R8).
REGISTRY: dict[str, Callable[..., RewardFn]] = {}


def register(*names: str) -> Callable[[Callable[..., RewardFn]], Callable[..., RewardFn]]:
    """Register a reward factory under ``names``."""

    def deco(factory: Callable[..., RewardFn]) -> Callable[..., RewardFn]:
        for n in names:
            REGISTRY[n] = factory
        return factory

    return deco


def make(name: str, **params: Any) -> RewardFn:
    """Build a registered reward by name or family (``team``, ``R1``, ``parl``...).

    Raises:
        ConfigError: Unknown name or bad parameters.
    """
    if not isinstance(name, str):
        raise ConfigError(
            f"a reward is named by a string, not a {type(name).__name__}; use one of: "
            f"{', '.join(sorted(REGISTRY))}"
        )
    factory = REGISTRY.get(name) or REGISTRY.get(name.lower())
    if factory is None:
        raise ConfigError(f"unknown reward {name!r}; use one of: {', '.join(sorted(REGISTRY))}")
    try:
        return factory(**params)
    except TypeError as err:
        raise ConfigError(f"reward {name!r}: {err}") from None


# ---------------------------------------------------------------------- trace helpers
class VerdictWarning(UserWarning):
    """A recorded run's outcome is unknown, or its recorded verdict was contradicted."""


def _warn(message: str) -> None:
    warnings.warn(VerdictWarning(message), stacklevel=3)


def _clip(text: Any, limit: int = 80) -> str:
    """A possibly hostile string for a message: escaped, on one line, bounded."""
    out = str(text).encode("unicode_escape", "backslashreplace").decode("ascii")
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _result(trace: Trace) -> dict[str, Any] | None:
    result = trace.meta.get("result") if isinstance(trace.meta, dict) else None
    return result if isinstance(result, dict) else None


def orchestrators(trace: Trace) -> list[str]:
    """The agents whose stop decision ends the run, in order of appearance.

    These are the root agents (:func:`orchestrace.credit.base.root_agents`: agents that no
    ``spawn`` event created, tool pseudo-agents excluded). When several roots act and some of
    them hold the role ``orchestrator`` (their own events say so, or their name is
    ``orchestrator``), only those. An agent spawned by another is never an orchestrator,
    whatever role it was given. A run recorded by the runtime (``meta.runner`` present) has
    exactly one orchestrator, the root agent it starts (named ``orchestrator``): any other
    agent that no spawn created was added to the trace afterwards.
    """
    from orchestrace.credit.base import root_agents  # noqa: PLC0415  import cycle: orchestrace.credit imports this module

    roots = root_agents(trace)
    if isinstance(trace.meta, dict) and isinstance(trace.meta.get("runner"), dict):
        return [ROOT] if ROOT in roots else []
    if len(roots) <= 1:
        return roots
    rooted = set(roots)
    named = {
        e.agent
        for e in trace.events
        if e.agent in rooted and (e.agent == "orchestrator" or e.role == "orchestrator")
    }
    return [a for a in roots if a in named] or roots


def answer_of(trace: Trace) -> Any:
    """The run's final answer.

    Taken from ``meta.result.answer`` (what the runtime records), else from the last stop
    decision made by an orchestrator (see :func:`orchestrators`). A stop decision of any other
    agent (a worker, or an agent a worker spawned) is never the run's answer.
    """
    result = _result(trace)
    if result is not None and "answer" in result:
        return result["answer"]
    stops = [e for e in trace.events if e.decision == "stop" and e.attrs and "answer" in e.attrs]
    if not stops:
        return None
    allowed = set(orchestrators(trace))
    for e in reversed(stops):
        if e.agent in allowed:
            return e.attrs["answer"] if e.attrs else None
    return None


def truth_of(trace: Trace) -> Any:
    """The task's ground truth, when the trace records it."""
    result = _result(trace)
    return result.get("truth") if result is not None else None


def executes_code(trace: Trace) -> bool:
    """Whether the trace's task (``meta.task.name``) checks answers by running them as code."""
    spec = trace.meta.get("task") if isinstance(trace.meta, dict) else None
    cls = task_class(spec.get("name")) if isinstance(spec, dict) else None
    return bool(cls is not None and cls.executes_code)


def outcome_known(trace: Trace, *, rerun_checks: bool = False) -> bool:
    """Whether :func:`outcome` can tell if the run succeeded, without warning.

    False only for a task whose check runs code, when the trace records no verdict (or an
    unknown one) and ``rerun_checks`` is off.
    """
    if rerun_checks or not executes_code(trace):
        return True
    v = recorded_verdict(trace)
    if v is None or v["passed"] is None:
        return False
    digest = v.get("answer_sha256")
    return not isinstance(digest, str) or digest == answer_digest(answer_of(trace))


def prepare_outcome(trace: Trace) -> None:
    """Build what :func:`outcome` needs to check runs of ``trace``'s task, ahead of time.

    A process that is about to be copied for many forks of one run calls it once, so that
    the copies share the task instead of each building it again.

    Example:
        >>> from orchestrace.runtime import run
        >>> tr = run("debate", "arith", agents=2, seed=1, task_size=8).trace
        >>> prepare_outcome(tr)
        >>> outcome(tr) in (True, False)
        True
    """
    _checking.prepare_checking(trace.meta, f"trace {_clip(trace.trace_id)}: meta.task")


def outcome(
    trace: Trace,
    checker: Callable[[Trace, Any], bool] | None = None,
    *,
    rerun_checks: bool = False,
) -> bool | None:
    """Whether the run solved its task; ``None`` when that cannot be known.

    Reading a trace never runs code from it. In order:

    * ``checker(trace, answer)`` when given;
    * a task whose check executes code (``humaneval-v0``): the verdict recorded with the run
      (``meta.result.verdict``); without one the outcome is ``None`` and a
      :class:`VerdictWarning` says so. Only with ``rerun_checks=True`` is the recorded answer
      checked again, by the task's own (sandboxed) checker;
    * any other known task: its checker on the recorded answer (a value comparison). The
      recorded verdict is kept when it agrees; when it does not, a :class:`VerdictWarning`
      says so and the checker's result counts;
    * otherwise the recorded verdict, ``metrics.task_success``, or answer == recorded truth.

    Args:
        trace: A recorded run.
        checker: ``checker(trace, answer) -> bool`` replacing the task's checker.
        rerun_checks: Check the recorded answer again even where that runs it as code.

    Raises:
        ConfigError: ``meta.task`` names a known task with an unusable seed or size (the
            message names the field and the allowed range).
    """
    answer = answer_of(trace)
    if checker is not None:
        return bool(checker(trace, answer))

    recorded = recorded_verdict(trace)
    spec = trace.meta.get("task") if isinstance(trace.meta, dict) else None
    cls = task_class(spec.get("name")) if isinstance(spec, dict) else None
    tid = _clip(trace.trace_id)
    if spec is not None and cls is not None and (rerun_checks or not cls.executes_code):
        assert isinstance(spec, dict)
        task = _checking.checking_task(cls, spec, f"trace {tid}: meta.task")
        raw = task.verdict(answer).get("passed")
        now = None if raw is None else bool(raw)
        if recorded is not None and recorded["passed"] is not None and recorded["passed"] != now:
            _warn(
                f"trace {tid}: the recorded verdict (passed={recorded['passed']}) disagrees with "
                f"the {cls.name} checker on the recorded answer (passed={now}); using the "
                "checker's"
            )
        return now
    if cls is not None and cls.executes_code:
        if recorded is None:
            _warn(
                f"trace {tid}: outcome unknown: {cls.name} checks an answer by running it as "
                "code and the trace records no verdict; record the run again, or pass "
                "--rerun-checks (rerun_checks=True) to check the recorded answer in the sandbox"
            )
            return None
        digest = recorded.get("answer_sha256")
        if isinstance(digest, str) and digest != answer_digest(answer):
            _warn(
                f"trace {tid}: outcome unknown: the recorded verdict judged a different answer "
                "than the one the trace now holds (it was changed after the run); pass "
                "--rerun-checks (rerun_checks=True) to check the answer in the sandbox"
            )
            return None
        if recorded["passed"] is None:
            _warn(
                f"trace {tid}: outcome unknown: {_clip(recorded.get('reason'), 200)}; pass "
                "--rerun-checks (rerun_checks=True) to check the answer in the sandbox"
            )
            return None
        return bool(recorded["passed"])
    if recorded is not None and recorded["passed"] is not None:
        return bool(recorded["passed"])
    if "task_success" in trace.metrics:
        return bool(trace.metrics["task_success"])
    truth = truth_of(trace)
    return None if truth is None else bool(answer == truth)


def agent_correctness(trace: Trace) -> dict[str, tuple[int, int]]:
    """Per agent: (correct answers, answers) over its calls that recorded a ground truth."""
    out: dict[str, list[int]] = {}
    for e in trace.events:
        if (
            e.type == "llm_call"
            and e.attrs
            and "truth" in e.attrs
            and e.attrs.get("kind") in ("solve", "revise")
        ):
            c = out.setdefault(e.agent, [0, 0])
            c[0] += int(e.attrs.get("answer") == e.attrs["truth"])
            c[1] += 1
    return {a: (c[0], c[1]) for a, c in out.items()}


def solve_events(trace: Trace) -> list[Event]:
    """LLM calls that answered a part with a known ground truth."""
    return [e for e in trace.events if e.type == "llm_call" and e.attrs and "truth" in e.attrs]


# ---------------------------------------------------------------------- R1
@register("team", "R1", "outcome")
def team_reward(checker: Callable[[Trace, Any], bool] | None = None) -> RewardFn:
    """R1 shared team/outcome reward: 1.0 when the task's checker accepts the final answer.

    The outcome is :func:`outcome`: the verdict recorded with the run for tasks whose check
    runs code (``None`` when there is none), the task's checker otherwise. Call with
    ``rerun_checks=True`` to check recorded answers again in the sandbox.

    Args:
        checker: ``checker(trace, answer) -> bool``; default: the task recorded in the trace.
    """

    def score(tr: Trace, rerun_checks: bool = False, **_: Any) -> float | None:
        ok = outcome(tr, checker, rerun_checks=rerun_checks)
        return None if ok is None else float(ok)

    return _Fn("team", score, {"checker": checker})
