"""PPO (clipped surrogate, GAE, value head), in one readable file.

    ratio = pi(a|s) / pi_old(a|s)
    loss  = -E[ min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A) ] + c_v * (V - R)^2 - c_e * H

Advantages come from GAE over each episode (reward at the last decision, gamma = 1), are
normalised per batch, and the batch is reused for ``epochs`` passes in 4 minibatches.

Example:
    >>> from orchestrace.learn.algorithms.common import TrainConfig
    >>> res = PPO(TrainConfig(episodes=64, batch=32, group=1, epochs=2)).train()
    >>> res.log[-1]["episodes"]
    64.0
"""

from __future__ import annotations

import numpy as np

from orchestrace.learn.algorithms.common import Episode, Trainer, flatten, log_prob_entropy

__all__ = ["PPO"]


def gae(values: list[float], reward: float, lam: float) -> list[float]:
    """GAE advantages of one episode whose only reward comes at the end (gamma = 1)."""
    adv = [0.0] * len(values)
    last = 0.0
    for t in reversed(range(len(values))):
        next_v = values[t + 1] if t + 1 < len(values) else 0.0
        r = reward if t == len(values) - 1 else 0.0
        delta = r + next_v - values[t]
        last = delta + lam * last
        adv[t] = last
    return adv


class PPO(Trainer):
    """Proximal policy optimisation."""

    algo = "ppo"

    def update(self, episodes: list[Episode]) -> dict[str, float]:
        """One optimisation step on a batch; returns losses to log."""
        cfg = self.cfg
        torch = self.policy.torch
        # 1. advantages by GAE, normalised over the batch; value targets are the returns
        adv = [gae(e.values, e.reward, cfg.gae_lambda) for e in episodes]
        flat = np.concatenate(adv)
        mean, std = float(flat.mean()), float(flat.std()) + 1e-8
        b = flatten(episodes, [[(x - mean) / std for x in a] for a in adv])
        n = len(b["obs"])
        losses = []
        # 2. several clipped passes over minibatches
        for _ in range(cfg.epochs):
            perm = torch.randperm(n)
            for idx in perm.chunk(4):
                logp, entropy, values = log_prob_entropy(self.policy, b["obs"][idx], b["acts"][idx])
                ratio = torch.exp(logp - b["logp"][idx])
                a = b["adv"][idx]
                pg = -torch.min(
                    ratio * a, torch.clamp(ratio, 1 - cfg.clip, 1 + cfg.clip) * a
                ).mean()
                v_loss = ((values - b["returns"][idx]) ** 2).mean()
                loss = pg + cfg.value_coef * v_loss - cfg.entropy * entropy
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                losses.append(float(loss.item()))
        return {"loss": float(np.mean(losses)), "entropy": float(entropy.item())}
