"""The learning configs in one place: environments and trainers.

:class:`EnvConfig` configures an environment, :class:`TrainConfig` a trainer (building it
needs no torch).

Example:
    >>> TrainConfig().lr, TrainConfig().episodes, EnvConfig().token_cost
    (0.001, 20000, 0.1)
"""

from orchestrace.learn.algorithms.common import TrainConfig
from orchestrace.learn.env import EnvConfig

__all__ = ["EnvConfig", "TrainConfig"]
