"""GRPO (group-relative policy optimisation), in one readable file.

Episodes come in groups of ``group`` on the same task instance. Each episode's advantage is its
reward standardised within its group, applied to every decision of the episode; no value model.

    A_i = (R_i - mean(R_group)) / (std(R_group) + eps)
    loss = -E[ log pi(a|s) * A ] - c_e * H(pi(.|s))

Example:
    >>> from orchestrace.learn.algorithms.common import TrainConfig
    >>> res = GRPO(TrainConfig(episodes=64, batch=32, group=8)).train()
    >>> res.log[-1]["episodes"]
    64.0
"""

from __future__ import annotations

import numpy as np

from orchestrace.credit.normalize import group_relative
from orchestrace.learn.algorithms.common import Episode, Trainer, flatten, log_prob_entropy

__all__ = ["GRPO"]


class GRPO(Trainer):
    """Group-relative advantages; ``batch / group`` task instances per update."""

    algo = "grpo"

    def collect(self, group: int = 1) -> list[Episode]:
        """One batch of ``group`` episodes per task instance."""
        return super().collect(group=self.cfg.group)

    def update(self, episodes: list[Episode]) -> dict[str, float]:
        """One optimisation step on a batch; returns losses to log."""
        cfg = self.cfg
        # 1. advantages: standardise rewards within each group (same task instance)
        adv: list[list[float]] = []
        for g in range(0, len(episodes), cfg.group):
            grp = episodes[g : g + cfg.group]
            a = group_relative([e.reward for e in grp])
            adv += [[x] * len(e.obs) for x, e in zip(a, grp, strict=True)]
        b = flatten(episodes, adv)
        # 2. policy gradient on the group-relative advantage
        logp, entropy, _ = log_prob_entropy(self.policy, b["obs"], b["acts"])
        loss = -(logp * b["adv"]).mean() - cfg.entropy * entropy
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return {
            "loss": float(loss.item()),
            "entropy": float(entropy.item()),
            "adv_std": float(np.std(np.concatenate(adv))) if adv else 0.0,
        }
