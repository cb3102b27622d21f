"""Checks on credit tables: sums (for efficient methods), shapes and values.

Example:
    >>> from orchestrace.credit.base import table
    >>> t = table("agent", {"a": 0.5, "b": 0.4}, reward=1.0, method="x", efficient=True)
    >>> [str(p) for p in check_credit(t)]
    ['$.agent: warning: agent credits sum to 0.9, not the distributed reward 1; check the method']
"""

from __future__ import annotations

import math

from orchestrace.credit.base import CreditTable, unit_members
from orchestrace.errors import Problem
from orchestrace.trace.model import Trace

__all__ = ["check_credit"]


def check_credit(
    table: CreditTable, trace: Trace | None = None, *, tol: float = 1e-6
) -> list[Problem]:
    """Problems of a credit table.

    Non-finite values, ids the trace lacks, and (for methods that claim efficiency) unit sums
    that differ from the reward.
    """
    out = []
    for r in table.rows:
        if not math.isfinite(r.value):
            out.append(
                Problem(
                    "non-finite",
                    f"credit of {r.unit} {r.id!r} is {r.value}",
                    "check the reward function",
                    path=f"$.{r.unit}",
                )
            )
    if trace is not None:
        for unit in table.units():
            known = set(unit_members(trace, unit))
            for r in table.rows:
                if r.unit == unit and r.id not in known:
                    out.append(
                        Problem(
                            "unknown-unit-id",
                            f"{unit} {r.id!r} is not in the trace",
                            "assign credit on the trace it came from",
                            path=f"$.{unit}",
                        )
                    )
    if table.efficient and table.reward is not None:
        for unit in table.units():
            s = table.total(unit)
            if abs(s - table.reward) > tol * max(1.0, abs(table.reward)):
                out.append(
                    Problem(
                        "not-efficient",
                        f"{unit} credits sum to {s:.6g}, not the distributed reward {table.reward:.6g}",
                        "check the method",
                        path=f"$.{unit}",
                        severity="warning",
                    )
                )
    return out
