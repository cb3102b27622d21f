"""Credit discounted along causal paths: events close (in hops) to the outcome earn more.

Each event's weight is ``gamma ** d``, ``d`` being the fewest dependency hops from it to the
final event (events that never lead to the outcome weigh 0). A unit's credit is the reward times
its events' share of the total weight among the units of that kind, so the credits of each unit
sum to the reward.

Example:
    >>> from orchestrace.runtime import run
    >>> tr = run("centralized", "arith", agents=4, seed=2).trace
    >>> t = DiscountedCredit(gamma=0.9).assign(tr, "message", reward=1.0)  # no messages
    >>> t.rows
    []
    >>> t = DiscountedCredit(gamma=0.9).assign(tr, "agent", reward=1.0)
    >>> round(t.total("agent"), 9)
    1.0
"""

from __future__ import annotations

from collections import deque

import numpy as np

from orchestrace.credit.base import CreditTable, check_assign_args, table, unit_members
from orchestrace.credit.target import RewardLike, resolve_reward
from orchestrace.errors import ConfigError
from orchestrace.trace.model import Trace

__all__ = ["DiscountedCredit", "hop_distance"]


def hop_distance(trace: Trace) -> np.ndarray:
    """Fewest dependency hops from each event to the last event (-1: never reaches it)."""
    g = trace.graph
    n = g.n
    dist = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return dist
    src, dst = g.dependency_edges()
    preds: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip(src.tolist(), dst.tolist(), strict=True):
        preds[v].append(u)
    end = n - 1
    dist[end] = 0
    queue = deque([end])
    while queue:
        v = queue.popleft()
        for u in preds[v]:
            if dist[u] < 0:
                dist[u] = dist[v] + 1
                queue.append(u)
    return dist


class DiscountedCredit:
    """Discounted along causal paths (efficient: each unit's credits sum to the reward).

    Args:
        gamma: Discount per hop, in (0, 1].
        reward_fn: Reward to distribute when none is given (default: team reward, R1).
        rerun_checks: Check the recorded answer again even where that runs it as code
            (sandboxed); by default the verdict recorded with the run counts.
    """

    name = "discounted"
    efficient = True

    def __init__(
        self,
        gamma: float = 0.95,
        reward_fn: RewardLike | None = None,
        rerun_checks: bool = False,
    ) -> None:
        if not 0.0 < gamma <= 1.0:
            raise ConfigError(f"gamma must be in (0, 1], got {gamma}")
        self.gamma = gamma
        self.reward_fn = reward_fn
        self.rerun_checks = rerun_checks

    def assign(self, trace: Trace, unit: str = "agent", reward: float | None = None) -> CreditTable:
        """Credit table of ``trace`` at ``unit`` (all 0, reward ``None``, when it is unknown)."""
        unit = check_assign_args(trace, unit)
        known = resolve_reward(trace, reward, self.reward_fn, rerun_checks=self.rerun_checks)
        r = 0.0 if known is None else known
        dist = hop_distance(trace)
        weight = np.where(dist >= 0, self.gamma ** np.maximum(dist, 0), 0.0)
        members = unit_members(trace, unit)
        # a token owns a share of its llm_call's weight
        per_token = {}
        if unit == "token":
            for e_i, e in enumerate(trace.events):
                if e.type == "llm_call" and e.tokens_out:
                    per_token[e_i] = 1.0 / e.tokens_out
        w = {
            k: float(sum(weight[i] * per_token.get(i, 1.0) for i in idx))
            for k, idx in members.items()
        }
        total = sum(w.values())
        if total > 0:
            values = {k: r * v / total for k, v in w.items()}
        else:  # nothing leads to the outcome: fall back to an equal split
            values = {k: r / len(w) for k in w}
        return table(
            unit,
            values,
            reward=known,
            method=self.name,
            efficient=True,
            stats={"gamma": self.gamma},
        )
