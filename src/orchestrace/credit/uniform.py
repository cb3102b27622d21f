"""Uniform terminal credit: the reward is split equally among the units present.

Example:
    >>> from orchestrace.runtime import run
    >>> tr = run("swarm", "arith", agents=4, seed=1).trace
    >>> t = UniformCredit().assign(tr, "agent", reward=1.0)
    >>> round(t.total("agent"), 9), len(t.rows)
    (1.0, 6)
"""

from __future__ import annotations

from orchestrace.credit.base import CreditTable, check_assign_args, table, unit_members
from orchestrace.credit.target import RewardLike, resolve_reward
from orchestrace.trace.model import Trace

__all__ = ["UniformCredit"]


class UniformCredit:
    """Every unit gets ``reward / number of units`` (efficient).

    Args:
        reward_fn: Reward to distribute when none is given (default: team reward, R1).
        rerun_checks: Check the recorded answer again even where that runs it as code
            (sandboxed); by default the verdict recorded with the run counts.
    """

    name = "uniform"
    efficient = True

    def __init__(self, reward_fn: RewardLike | None = None, rerun_checks: bool = False) -> None:
        self.reward_fn = reward_fn
        self.rerun_checks = rerun_checks

    def assign(self, trace: Trace, unit: str = "agent", reward: float | None = None) -> CreditTable:
        """Credit table of ``trace`` at ``unit`` (all 0, reward ``None``, when it is unknown)."""
        unit = check_assign_args(trace, unit)
        r = resolve_reward(trace, reward, self.reward_fn, rerun_checks=self.rerun_checks)
        ids = list(unit_members(trace, unit))
        share = (r or 0.0) / len(ids) if ids else 0.0
        return table(unit, {i: share for i in ids}, reward=r, method=self.name, efficient=True)
