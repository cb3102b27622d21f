"""Rewards over traces: the eight families R1-R8, the PARL orchestration reward, composition.

Every reward is ``fn(traces, **kw) -> list[float | None]`` (``None``: not applicable), built by a
factory, combined by weights (:class:`Composite`) and logged as ``rewards/<name>``.

Example:
    >>> from orchestrace.rewards import REGISTRY
    >>> sorted(k for k in REGISTRY if k.startswith("R"))
    ['R1', 'R2', 'R3', 'R4', 'R5', 'R6', 'R7', 'R8']
"""

from orchestrace.rewards.base import REGISTRY, RewardFn, make, register, team_reward
from orchestrace.rewards.compose import Composite, load_spec
from orchestrace.rewards.families import (
    agent_reward,
    hybrid_reward,
    orchestration_reward,
    process_reward,
    role_reward,
    tool_reward,
    verifier_reward,
)
from orchestrace.rewards.parl import Anneal, parl_components, parl_reward

__all__ = [
    "REGISTRY",
    "Anneal",
    "Composite",
    "RewardFn",
    "agent_reward",
    "hybrid_reward",
    "load_spec",
    "make",
    "orchestration_reward",
    "parl_components",
    "parl_reward",
    "process_reward",
    "register",
    "role_reward",
    "team_reward",
    "tool_reward",
    "verifier_reward",
]
