"""REINFORCE with a learned baseline, in one readable file.

    loss = -E[ log pi(a|s) * (G - V(s)) ] + c_v * (V(s) - G)^2 - c_e * H(pi(.|s))

The return ``G`` is the episode's final reward (rewards come at the end, gamma = 1).

Example:
    >>> from orchestrace.learn.algorithms.common import TrainConfig
    >>> res = Reinforce(TrainConfig(episodes=64, batch=32, group=1)).train()
    >>> len(res.log), res.log[-1]["episodes"]
    (2, 64.0)
"""

from __future__ import annotations

from typing import Any

from orchestrace.learn.algorithms.common import Episode, Trainer, flatten, log_prob_entropy

__all__ = ["Reinforce"]


class Reinforce(Trainer):
    """Monte-Carlo policy gradient with a value baseline."""

    algo = "reinforce"

    def update(self, episodes: list[Episode]) -> dict[str, float]:
        """One optimisation step on a batch; returns losses to log."""
        cfg = self.cfg
        b: dict[str, Any] = flatten(episodes)
        # 1. policy gradient with the baseline subtracted
        logp, entropy, values = log_prob_entropy(self.policy, b["obs"], b["acts"])
        adv = (b["returns"] - values).detach()
        pg_loss = -(logp * adv).mean()
        # 2. the baseline regresses on the returns
        v_loss = ((values - b["returns"]) ** 2).mean()
        loss = pg_loss + cfg.value_coef * v_loss - cfg.entropy * entropy
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return {"loss": float(loss.item()), "entropy": float(entropy.item())}
