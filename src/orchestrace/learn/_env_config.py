"""The orchestration environment's settings (:class:`EnvConfig`), checked when built.

Example:
    >>> EnvConfig(max_rounds=2).max_rounds
    2
    >>> EnvConfig(learn=("O9",))
    Traceback (most recent call last):
    ...
    orchestrace.errors.ConfigError: learn must be a non-empty subset of O1..O5, got ('O9',)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrace._numbers import is_finite
from orchestrace.errors import ConfigError
from orchestrace.rewards.parl import Anneal

__all__ = ["SIZE_RANGES", "EnvConfig"]

#: Task size range per task family (inclusive), when ``EnvConfig.size_range`` is not given.
SIZE_RANGES = {"arith-mapreduce-v0": (6, 24), "wide-search-v0": (20, 70), "multihop-v0": (1, 5)}


@dataclass
class EnvConfig:
    """Environment settings.

    Attributes:
        task: Task id or alias.
        size_range: Task size range (inclusive); default per task (see ``SIZE_RANGES``).
        max_rounds: Decision rounds before truncation.
        max_workers: Workers before truncation.
        token_cost: Reward lost per 1,000 tokens.
        learn: Decisions the agent takes (``O1``..``O5``); the others use ``fixed``.
        fixed: Values of the decisions the agent does not take.
        lambda1: PARL weight of ``r_parallel`` (number or :class:`Anneal` over training steps).
        lambda2: PARL weight of ``r_finish``.
        reward_fn: Replace the PARL reward: ``fn([trace], step=) -> [value]``.
        backend: ``sim`` (default: seeded, virtual time, thousands of episodes a minute),
            ``openai`` (any OpenAI-compatible server) or ``hf`` (a local transformers model).
        backend_options: Options for the backend (``model``, ``base_url``...); for ``sim``,
            they replace the default role scaling and ``oracle_verifiers`` (``False`` in
            ``orchestrate-v1``; ``True`` in the v0 environments, whose judge and revisers read
            the ground truth).
        latency_weight: Reward lost per ``latency_norm`` Critical Steps of the episode
            (``reward -= latency_weight * critical_steps / latency_norm``), whichever reward
            the env uses (PARL or ``reward_fn``).
        latency_norm: Critical Steps that cost ``latency_weight`` in full; default the
            ``steps_budget`` in force, else ``3 * max_rounds`` (a round takes at most three
            steps on the critical path: the decision, a worker's answer, its revision).
        steps_budget: Critical-Steps budget: once the Critical Steps so far reach it, the next
            decision that does not stop ends the episode as ``truncated`` (``info
            ["truncated_by"] == "steps_budget"``). ``None``: the ``steps_budget`` declared by
            ``reward_fn`` (a ``parl`` or ``latency`` reward, also in a TOML spec), else none.
    """

    task: str = "arith-mapreduce-v0"
    size_range: tuple[int, int] | None = None
    max_rounds: int = 10
    max_workers: int = 12
    token_cost: float = 0.1
    learn: tuple[str, ...] = ("O1", "O2", "O3", "O4", "O5")
    fixed: dict[str, Any] = field(
        default_factory=lambda: {"O1": 1, "O2": "worker", "O3": "none", "O4": "vote", "O5": None}
    )
    lambda1: float | Anneal = field(default_factory=lambda: Anneal(0.05, 0.0, steps=2000))
    lambda2: float | Anneal = field(default_factory=lambda: Anneal(0.05, 0.0, steps=2000))
    reward_fn: Callable[..., list[float | None]] | None = None
    backend: str = "sim"
    backend_options: dict[str, Any] = field(default_factory=dict)
    latency_weight: float = 0.0
    latency_norm: float | None = None
    steps_budget: int | None = None

    def __post_init__(self) -> None:
        bad = set(self.learn) - {"O1", "O2", "O3", "O4", "O5"}
        if bad or not self.learn:
            raise ConfigError(f"learn must be a non-empty subset of O1..O5, got {self.learn}")
        if self.max_rounds < 1 or self.max_workers < 1:
            raise ConfigError("max_rounds and max_workers must be >= 1")
        if not is_finite(self.token_cost) or self.token_cost < 0:
            raise ConfigError(f"token_cost must be a finite number >= 0, got {self.token_cost!r}")
        self.token_cost = float(self.token_cost)
        for name in ("lambda1", "lambda2"):
            value = getattr(self, name)
            if not isinstance(value, Anneal) and not is_finite(value):
                raise ConfigError(
                    f"{name} must be a finite number or an Anneal schedule, got {value!r}"
                )
            if not isinstance(value, Anneal):
                setattr(self, name, float(value))
        if self.reward_fn is not None and not callable(self.reward_fn):
            raise ConfigError(
                f"reward_fn must be callable as fn([trace], step=) -> [value], got a "
                f"{type(self.reward_fn).__name__}"
            )
        if self.backend not in ("sim", "openai", "hf"):
            raise ConfigError(f"unknown backend {self.backend!r}; use sim, openai or hf")
        _check_latency(self.latency_weight, self.latency_norm, self.steps_budget, "EnvConfig")
        if self.size_range is not None and not 1 <= self.size_range[0] <= self.size_range[1]:
            raise ConfigError(
                f"size_range must be (lo, hi) with 1 <= lo <= hi, got {self.size_range}"
            )


def _check_latency(weight: Any, norm: Any, budget: Any, where: str) -> None:
    """Refuse a bad latency setting with one line naming it and the fix."""
    if not _number(weight) or not math.isfinite(weight) or weight < 0:
        raise ConfigError(
            f"{where}: latency_weight must be a finite number >= 0, got {weight!r}; "
            "e.g. latency_weight=0.1"
        )
    if norm is not None and (not _number(norm) or not math.isfinite(norm) or norm <= 0):
        raise ConfigError(
            f"{where}: latency_norm must be a finite number > 0, got {norm!r}; "
            "e.g. latency_norm=20, or leave it out"
        )
    if budget is not None and (
        not isinstance(budget, int) or isinstance(budget, bool) or budget < 1
    ):
        raise ConfigError(
            f"{where}: steps_budget must be an integer >= 1 (Critical Steps), got {budget!r}; "
            "e.g. steps_budget=12, or leave it out"
        )


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)
