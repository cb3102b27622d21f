"""Trainers, one readable file each: REINFORCE with baseline, GRPO, PPO.

Example:
    >>> sorted(ALGOS)
    ['grpo', 'ppo', 'reinforce']
"""

from orchestrace.errors import ConfigError
from orchestrace.learn.algorithms.common import TrainConfig, Trainer, TrainResult
from orchestrace.learn.algorithms.grpo import GRPO
from orchestrace.learn.algorithms.ppo import PPO
from orchestrace.learn.algorithms.reinforce import Reinforce

__all__ = [
    "ALGOS",
    "GRPO",
    "PPO",
    "Reinforce",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "make_trainer",
]

ALGOS: dict[str, type[Trainer]] = {"reinforce": Reinforce, "grpo": GRPO, "ppo": PPO}


def make_trainer(algo: str, config: TrainConfig) -> Trainer:
    """A trainer by name.

    Raises:
        ConfigError: Unknown algorithm.
    """
    cls = ALGOS.get(algo)
    if cls is None:
        raise ConfigError(f"unknown algorithm {algo!r}; use one of: {', '.join(ALGOS)}")
    return cls(config)
