"""Which reward a credit assigner distributes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrace.trace.model import Trace

__all__ = ["RewardLike", "resolve_reward", "reward_of"]

RewardLike = Callable[..., Any]


def reward_of(trace: Trace, reward_fn: RewardLike | None = None) -> float:
    """The reward of ``trace``: ``reward_fn([trace])[0]`` or the team reward (R1).

    ``None`` counts as 0: a counterfactual that makes a reward inapplicable earns nothing.
    """
    if reward_fn is None:
        from orchestrace.rewards.base import team_reward

        reward_fn = team_reward()
    value = reward_fn([trace])[0]
    return 0.0 if value is None else float(value)


def resolve_reward(
    trace: Trace, reward: float | None, reward_fn: RewardLike | None = None
) -> float:
    """``reward`` when given, else the trace's reward."""
    return float(reward) if reward is not None else reward_of(trace, reward_fn)
