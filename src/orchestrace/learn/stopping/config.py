"""The learned-stopping study's settings and the seeds of its disjoint data sets."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.learn.evaluate import HELD_OUT

DEFAULT_TASKS = ("arith", "search", "multihop")
#: First seed of the tuning instances of the rules (training seeds start at 0, evaluation
#: instances at :data:`~orchestrace.learn.evaluate.HELD_OUT`).
TUNE_BASE = 1_500_000_000
#: Stride between the instance seeds of two training seeds (as the trainers use).
STRIDE = 10_000_019
#: Token weights of the posterior rule's dense curve (the dominance check): from "never
#: mind the tokens" to "one worker is already too many".
DENSE_WEIGHTS = (
    0.0,
    0.01,
    0.02,
    0.035,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.6,
    1.0,
    2.0,
    100.0,
)
#: The rule families, in table order.
FAMILIES = ("fixed", "agree", "confidence", "conf-or-agree", "any-rule", "size-aware")
#: Environment settings of the study: the reward is ``r_perf`` alone (no PARL shaping terms)
#: and the simulator's verifiers decide for themselves (stop-v0 calls none of them: it votes).
ENV_OPTIONS: dict[str, Any] = {
    "lambda1": 0.0,
    "lambda2": 0.0,
    "backend_options": {"oracle_verifiers": False},
}


@dataclass
class StudyConfig:
    """Budgets of the study (defaults: the committed run; ``quick()``: the smoke test).

    Attributes:
        budget: Task instances per training seed and per tuning replicate (equal data).
        train_seeds: Training seeds per learned policy (and tuning replicates per rule family).
        train_episodes: Episodes each training run plays (replayed from its ``budget`` records).
        weights: Token weights ``w`` of the reward ``success - w x tokens / 1000``.
        reference_weight: The weight of the headline table (the environment's default).
        eval_seeds: Held-out evaluation seeds (as ``orchestrace evaluate --seeds``).
        episodes: Episodes per evaluation seed.
        live_episodes: Evaluation instances re-run live per method (the replay check).
        algo: Trainer (``ppo``, ``grpo``, ``reinforce``).
        hidden: Policy hidden width.
        horizon: Look-ahead of the posterior rule (workers).
        samples: Monte-Carlo samples of the posterior rule per decision.
        size_buckets: Size ranges of the size-aware rules (fewer when a task has fewer sizes).
        first_seed: First training seed (and tuning replicate): they run from ``first_seed``
            to ``first_seed + train_seeds - 1``.
    """

    budget: int = 1024
    train_seeds: int = 5
    train_episodes: int = 8192
    weights: tuple[float, ...] = (0.05, 0.1, 0.2, 0.4)
    reference_weight: float = 0.1
    eval_seeds: int = 10
    episodes: int = 200
    live_episodes: int = 40
    algo: str = "ppo"
    hidden: int = 64
    horizon: int = 9
    samples: int = 400
    size_buckets: int = 6
    first_seed: int = 0

    def __post_init__(self) -> None:
        for name in (
            "budget",
            "train_seeds",
            "train_episodes",
            "eval_seeds",
            "episodes",
            "hidden",
            "horizon",
            "samples",
            "size_buckets",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if isinstance(self.first_seed, bool) or self.first_seed < 0:
            raise ConfigError(f"first_seed must be an integer >= 0, got {self.first_seed!r}")
        if self.live_episodes < 0:
            raise ConfigError(f"live_episodes must be >= 0, got {self.live_episodes}")
        if not self.weights or any(not math.isfinite(w) or w < 0 for w in self.weights):
            raise ConfigError(f"weights must be finite numbers >= 0, got {self.weights}")
        self.weights = tuple(sorted(set(float(w) for w in self.weights)))
        if self.reference_weight not in self.weights:
            raise ConfigError(
                f"reference_weight {self.reference_weight} must be one of the weights "
                f"{list(self.weights)}"
            )

    @classmethod
    def quick(cls) -> StudyConfig:
        """A smoke-test size (seconds per task): the same pipeline, small budgets."""
        return cls(
            budget=192,
            train_seeds=2,
            train_episodes=3072,
            weights=(0.1, 0.4),
            eval_seeds=2,
            episodes=40,
            live_episodes=15,
            samples=100,
            size_buckets=3,
        )


# ---------------------------------------------------------------------------- seeds
def train_seeds(seed: int, budget: int) -> list[int]:
    """Instance seeds of training seed ``seed`` (as ``Trainer.next_seeds`` draws them)."""
    return [seed * STRIDE + 1 + i for i in range(budget)]


def tune_seeds(replicate: int, budget: int) -> list[int]:
    """Instance seeds of tuning replicate ``replicate`` of the rules."""
    return [TUNE_BASE + replicate * STRIDE + i for i in range(budget)]


def eval_seeds(seeds: int, episodes: int) -> list[int]:
    """Held-out instance seeds: those of :func:`~orchestrace.learn.evaluate.evaluate`."""
    return [HELD_OUT + s * 1_000_003 + i for s in range(seeds) for i in range(episodes)]


def _check_disjoint(cfg: StudyConfig) -> dict[str, Any]:
    """The three seed sets are pairwise disjoint (and each replicate's from the others')."""
    reps = range(cfg.first_seed, cfg.first_seed + cfg.train_seeds)
    tr = [set(train_seeds(s, cfg.budget)) for s in reps]
    tu = [set(tune_seeds(r, cfg.budget)) for r in reps]
    ev = set(eval_seeds(cfg.eval_seeds, cfg.episodes))
    groups = [*tr, *tu, ev]
    total = sum(len(g) for g in groups)
    union = set().union(*groups)
    if len(union) != total:
        raise ConfigError(
            "training, tuning and evaluation seeds overlap; use a smaller --train-seed, "
            "--train-seeds or --budget"
        )
    return {
        "train": [[min(g), max(g)] for g in tr],
        "tune": [[min(g), max(g)] for g in tu],
        "eval": [min(ev), max(ev)],
        "disjoint": True,
    }
