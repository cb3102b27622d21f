"""Interval estimates shared by evaluation and benchmarks.

* :func:`mean_ci`: mean and 95% Student-t half-width, for continuous scores averaged over seeds.
* :func:`wilson_interval`: Wilson score interval for a success rate (``k`` of ``n`` runs
  solved); it never has zero width and stays inside [0, 1], unlike a t-interval on 0/1
  outcomes, which reads "1.00 ± 0.00" when every run succeeded.
* :func:`clopper_pearson`: the exact (conservative) binomial interval.

This module depends on nothing else in the package, so any layer may import it.

Example:
    >>> mean, half = mean_ci([1.0, 2.0, 3.0])
    >>> mean, round(half, 3)
    (2.0, 2.484)
    >>> low, high = wilson_interval(10, 10)
    >>> round(low, 3), high
    (0.722, 1.0)
    >>> low, high = clopper_pearson(10, 10)
    >>> round(low, 3), high
    (0.692, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

__all__ = ["T95", "clopper_pearson", "mean_ci", "t95", "wilson_interval"]

#: Two-sided 95% Student-t quantiles by degrees of freedom (1-30; larger use an approximation).
T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    15: 2.131,
    20: 2.086,
    30: 2.042,
}


def t95(dof: int) -> float:
    """Two-sided 95% Student-t quantile (``nan`` for fewer than 1 degree of freedom).

    Between tabulated values the next smaller degree of freedom is used, which errs wide.

    Example:
        >>> t95(4), t95(0)
        (2.776, nan)
    """
    if dof < 1:
        return float("nan")
    return T95[max(k for k in T95 if k <= dof)] if dof < 30 else 1.96 + 2.4 / dof


def mean_ci(values: Iterable[float]) -> tuple[float, float]:
    """Mean and 95% t-interval half-width (``nan`` where too few values).

    Example:
        >>> mean, half = mean_ci([1.0, 2.0, 3.0])
        >>> mean, round(half, 3)
        (2.0, 2.484)
    """
    arr = np.asarray(list(values), dtype=np.float64)
    if len(arr) == 0:
        return float("nan"), float("nan")
    mean = float(arr.mean())
    if len(arr) < 2:
        return mean, float("nan")
    return mean, t95(len(arr) - 1) * float(arr.std(ddof=1)) / math.sqrt(len(arr))


def _check_counts(successes: float, n: int) -> None:
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval ``(low, high)`` for a success rate.

    Args:
        successes: Runs that succeeded (a float is allowed for fractional scores).
        n: Runs in all; ``n == 0`` gives ``(nan, nan)``.
        z: Normal quantile (1.96 for 95%).

    Raises:
        ValueError: ``successes`` outside ``[0, n]``.

    Example:
        >>> [round(v, 3) for v in wilson_interval(0, 20)]
        [0.0, 0.161]
        >>> [round(v, 3) for v in wilson_interval(15, 20)]
        [0.531, 0.888]
    """
    _check_counts(successes, n)
    if n == 0:
        return float("nan"), float("nan")
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 1.0 if k >= n else 0.0
    lp, lq = math.log(p), math.log1p(-p)
    lg = math.lgamma(n + 1)
    terms = [
        lg - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
        for i in range(k + 1)
    ]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def _solve(f: Callable[[float], float], target: float) -> float:
    """The p in [0, 1] where the decreasing function ``f`` crosses ``target`` (bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def clopper_pearson(successes: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Exact Clopper-Pearson interval ``(low, high)`` at level ``1 - alpha``.

    Args:
        successes: Runs that succeeded.
        n: Runs in all; ``n == 0`` gives ``(nan, nan)``.
        alpha: One minus the coverage.

    Raises:
        ValueError: ``successes`` outside ``[0, n]``.

    Example:
        >>> [round(v, 3) for v in clopper_pearson(15, 20)]
        [0.509, 0.913]
    """
    _check_counts(successes, n)
    if n == 0:
        return float("nan"), float("nan")
    k = int(successes)
    low = 0.0 if k == 0 else _solve(lambda p: _binom_cdf(k - 1, n, p), 1 - alpha / 2)
    high = 1.0 if k == n else _solve(lambda p: _binom_cdf(k, n, p), alpha / 2)
    return low, high
