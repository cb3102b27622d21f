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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from orchestrace.errors import ConfigError
from orchestrace.trace.model import Event, Trace

__all__ = [
    "REGISTRY",
    "RewardFn",
    "agent_correctness",
    "answer_of",
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
    factory = REGISTRY.get(name) or REGISTRY.get(name.lower())
    if factory is None:
        raise ConfigError(f"unknown reward {name!r}; use one of: {', '.join(sorted(REGISTRY))}")
    try:
        return factory(**params)
    except TypeError as err:
        raise ConfigError(f"reward {name!r}: {err}") from None


# ---------------------------------------------------------------------- trace helpers
def answer_of(trace: Trace) -> Any:
    """The run's final answer (from the stop event or the run result)."""
    result = trace.meta.get("result") if isinstance(trace.meta, dict) else None
    if isinstance(result, dict) and "answer" in result:
        return result["answer"]
    for e in reversed(trace.events):
        if e.decision == "stop" and e.attrs and "answer" in e.attrs:
            return e.attrs["answer"]
    return None


def truth_of(trace: Trace) -> Any:
    """The task's ground truth, when the trace records it."""
    result = trace.meta.get("result") if isinstance(trace.meta, dict) else None
    return result.get("truth") if isinstance(result, dict) else None


def _check(trace: Trace, checker: Callable[[Trace, Any], bool] | None) -> bool | None:
    answer = answer_of(trace)
    if checker is not None:
        return bool(checker(trace, answer))
    spec = trace.meta.get("task") if isinstance(trace.meta, dict) else None
    if isinstance(spec, dict) and "name" in spec:
        from orchestrace.runtime.tasks import make_task

        try:
            task = make_task(spec["name"], seed=spec.get("seed", 0), size=spec.get("size"))
        except ConfigError:
            task = None
        if task is not None:
            return bool(task.check(answer))
    if "task_success" in trace.metrics:
        return bool(trace.metrics["task_success"])
    truth = truth_of(trace)
    return None if truth is None else answer == truth


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

    Args:
        checker: ``checker(trace, answer) -> bool``; default: the task recorded in the trace.
    """

    def score(tr: Trace, **_: Any) -> float | None:
        ok = _check(tr, checker)
        return None if ok is None else float(ok)

    return _Fn("team", score, {"checker": checker})
