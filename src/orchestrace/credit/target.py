"""Which reward a credit assigner distributes."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.rewards.base import outcome_known, team_reward
from orchestrace.trace.model import Trace

__all__ = [
    "RewardLike",
    "counterfactual_reward",
    "finite_reward",
    "resolve_reward",
    "reward_of",
]

RewardLike = Callable[..., Any]


def _takes_kw(fn: RewardLike) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _value(trace: Trace, reward_fn: RewardLike | None, rerun_checks: bool) -> float | None:
    if reward_fn is None:
        reward_fn = team_reward()
    kw = {"rerun_checks": True} if rerun_checks and _takes_kw(reward_fn) else {}
    value = reward_fn([trace], **kw)[0]
    return None if value is None else float(value)


def reward_of(
    trace: Trace, reward_fn: RewardLike | None = None, *, rerun_checks: bool = False
) -> float:
    """The reward of ``trace``: ``reward_fn([trace])[0]`` or the team reward (R1).

    ``None`` counts as 0: a counterfactual that makes a reward inapplicable earns nothing.
    ``rerun_checks`` is passed on to rewards that take keyword arguments (see
    :func:`orchestrace.rewards.base.outcome`).
    """
    value = _value(trace, reward_fn, rerun_checks)
    return 0.0 if value is None else value


def counterfactual_reward(
    trace: Trace,
    reward_fn: RewardLike | None = None,
    *,
    rerun_checks: bool = False,
    forked: bool = True,
) -> float:
    """The reward of a run a counterfactual method compares, as :func:`reward_of`.

    Args:
        trace: The recorded run, or a fork of it (``forked``).
        reward_fn: The reward (default: team reward).
        rerun_checks: Check answers again even where that runs them as code (sandboxed).
        forked: Whether ``trace`` is a fork (only changes the message).

    Raises:
        ConfigError: The reward does not apply because the run's outcome is unknown: its
            task judges answers by running them as code, and no verdict covers this answer.
    """
    value = _value(trace, reward_fn, rerun_checks)
    if value is None and not outcome_known(trace, rerun_checks=rerun_checks):
        spec = trace.meta.get("task") if isinstance(trace.meta, dict) else None
        name = str(spec.get("name"))[:60] if isinstance(spec, dict) else "its task"
        what = (
            f"a counterfactual run of {trace.trace_id[:80]!r} has a new answer"
            if forked
            else f"the recorded run {trace.trace_id[:80]!r} has no recorded verdict"
        )
        raise ConfigError(
            f"{what}, and {name} judges answers by running them as code; pass --rerun-checks "
            "(rerun_checks=True) to check answers in the sandbox, or use --method uniform or "
            "discounted"
        )
    return 0.0 if value is None else value


def resolve_reward(
    trace: Trace,
    reward: float | None,
    reward_fn: RewardLike | None = None,
    *,
    rerun_checks: bool = False,
) -> float | None:
    """``reward`` when given, else the trace's reward (``None`` when it is unknown).

    Raises:
        ConfigError: ``reward`` is given but not a finite number.
    """
    if reward is not None:
        return finite_reward(reward)
    return _value(trace, reward_fn, rerun_checks)


def finite_reward(reward: object) -> float:
    """``reward`` as a float, when it is a finite number.

    Raises:
        ConfigError: Not a number (booleans included), NaN or infinite.
    """
    value = float(reward) if isinstance(reward, int | float) else math.nan
    if isinstance(reward, bool) or not math.isfinite(value):
        raise ConfigError(
            f"reward must be a finite number (got {reward!r:.40}); pass e.g. reward=1.0, "
            "or leave it out to use the trace's team reward"
        )
    return value
