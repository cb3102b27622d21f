"""Uniform terminal credit: the reward is split equally among the units present.

Example:
    >>> from orchestrace.runtime import run
    >>> tr = run("swarm", "arith", agents=4, seed=1).trace
    >>> t = UniformCredit().assign(tr, "agent", reward=1.0)
    >>> round(t.total("agent"), 9), len(t.rows)
    (1.0, 6)
"""

from __future__ import annotations

from orchestrace.credit.base import CreditTable, check_unit, table, unit_members
from orchestrace.credit.reward import resolve_reward
from orchestrace.trace.model import Trace

__all__ = ["UniformCredit"]


class UniformCredit:
    """Every unit gets ``reward / number of units`` (efficient)."""

    name = "uniform"
    efficient = True

    def assign(self, trace: Trace, unit: str = "agent", reward: float | None = None) -> CreditTable:
        """Credit table of ``trace`` at ``unit``."""
        unit = check_unit(unit)
        r = resolve_reward(trace, reward)
        ids = list(unit_members(trace, unit))
        share = (r or 0.0) / len(ids) if ids else 0.0
        return table(unit, {i: share for i in ids}, reward=r, method=self.name, efficient=True)
