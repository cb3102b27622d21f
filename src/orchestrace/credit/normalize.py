"""Normalising rewards and credit across a group of runs.

* :func:`group_relative`: GRPO advantages ``(r - mean) / (std + eps)`` within a group of runs
  of the same task (``scale="none"`` keeps only the mean baseline, as in Dr. GRPO).
* :func:`by_task`: apply it within each ``task_id`` group.
* :func:`agentwise`: Dr. MAS style: each agent's (or role's) credit is normalised with that
  agent's own statistics across the group, so agents with different reward scales train stably.

Example:
    >>> [round(x, 3) for x in group_relative([1.0, 0.0, 1.0, 0.0])]
    [1.0, -1.0, 1.0, -1.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from orchestrace.credit.base import Credit, CreditTable
from orchestrace.errors import ConfigError
from orchestrace.trace.model import Trace

__all__ = ["agentwise", "by_task", "group_relative"]


def group_relative(
    values: Sequence[float | None], *, scale: Literal["std", "none"] = "std", eps: float = 1e-6
) -> list[float]:
    """Group-relative advantages; ``None`` values count as 0."""
    if scale not in ("std", "none"):
        raise ConfigError(f"scale must be 'std' or 'none', got {scale!r}")
    try:
        x = np.asarray([0.0 if v is None else float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError("group_relative takes numbers (or None for a missing reward)") from None
    if not np.isfinite(x).all():
        bad = int(np.flatnonzero(~np.isfinite(x))[0])
        raise ConfigError(f"value {bad} is {x[bad]}: group-relative advantages need finite rewards")
    if not math.isfinite(eps) or eps <= 0:
        raise ConfigError(f"eps must be a finite number > 0, got {eps!r}")
    if not len(x):
        return []
    adv = x - x.mean()
    if scale == "std":
        adv = adv / (x.std() + eps)
    return [float(a) for a in adv]


def by_task(traces: Sequence[Trace], values: Sequence[float | None], **kw: object) -> list[float]:
    """Group-relative advantages within each task (same ``task_id``)."""
    if len(traces) != len(values):
        raise ConfigError(f"{len(traces)} traces but {len(values)} values")
    out = [0.0] * len(values)
    groups: dict[str, list[int]] = {}
    for i, tr in enumerate(traces):
        groups.setdefault(tr.task_id, []).append(i)
    for idx in groups.values():
        for i, a in zip(idx, group_relative([values[i] for i in idx], **kw), strict=True):  # type: ignore[arg-type]
            out[i] = a
    return out


def agentwise(
    tables: Sequence[CreditTable], unit: str = "agent", eps: float = 1e-6
) -> list[CreditTable]:
    """Normalise each id's credit at ``unit`` with its own mean and std across ``tables``.

    Raises:
        ConfigError: ``eps`` is not a finite number > 0 (it keeps the division defined).
    """
    if (
        isinstance(eps, bool)
        or not isinstance(eps, int | float)
        or not math.isfinite(eps)
        or eps <= 0
    ):
        raise ConfigError(f"eps must be a finite number > 0, got {eps!r}")
    series: dict[str, list[tuple[int, float]]] = {}
    for t_i, t in enumerate(tables):
        for r in t.rows:
            if r.unit == unit:
                series.setdefault(r.id, []).append((t_i, r.value))
    stats = {}
    for k, pts in series.items():
        v = np.asarray([x for _, x in pts])
        stats[k] = (float(v.mean()), float(v.std()))
    out = []
    for t in tables:
        rows = [
            Credit(r.unit, r.id, (r.value - stats[r.id][0]) / (stats[r.id][1] + eps))
            if r.unit == unit
            else r
            for r in t.rows
        ]
        out.append(CreditTable(rows, t.reward, f"{t.method}+agentwise", False, dict(t.stats)))
    return out
