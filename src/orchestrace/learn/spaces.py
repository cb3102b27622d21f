"""Gymnasium-style spaces (no Gymnasium dependency): ``Discrete``, ``MultiDiscrete``, ``Box``.

Example:
    >>> s = MultiDiscrete([5, 3, 2])
    >>> s.contains([4, 0, 1]), s.contains([5, 0, 0]), s.shape
    (True, False, (3,))
    >>> Box(0.0, 1.0, (4,)).sample(seed=0).shape
    (4,)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["Box", "Discrete", "MultiDiscrete"]


class Discrete:
    """Integers ``0 .. n-1``."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"Discrete needs n >= 1, got {n}")
        self.n = int(n)
        self.shape: tuple[int, ...] = ()

    def sample(self, seed: int | None = None) -> int:
        """A uniform draw."""
        return int(np.random.default_rng(seed).integers(self.n))

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is in the space."""
        try:
            return 0 <= int(x) < self.n and float(x) == int(x)
        except (TypeError, ValueError):
            return False

    def __repr__(self) -> str:
        return f"Discrete({self.n})"


class MultiDiscrete:
    """Vectors of integers, component ``i`` in ``0 .. nvec[i]-1``."""

    def __init__(self, nvec: Sequence[int]) -> None:
        self.nvec = np.asarray(nvec, dtype=np.int64)
        if self.nvec.ndim != 1 or (self.nvec < 1).any():
            raise ValueError(f"MultiDiscrete needs positive sizes, got {list(nvec)}")
        self.shape = (len(self.nvec),)

    def sample(self, seed: int | None = None) -> np.ndarray:
        """A uniform draw."""
        rng = np.random.default_rng(seed)
        return np.asarray([rng.integers(n) for n in self.nvec], dtype=np.int64)

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is in the space."""
        a = np.asarray(x)
        return a.shape == self.shape and bool(((a >= 0) & (a < self.nvec)).all())

    def __repr__(self) -> str:
        return f"MultiDiscrete({self.nvec.tolist()})"


class Box:
    """Real vectors in ``[low, high]``."""

    def __init__(self, low: float, high: float, shape: tuple[int, ...]) -> None:
        self.low, self.high, self.shape = float(low), float(high), tuple(shape)

    def sample(self, seed: int | None = None) -> np.ndarray:
        """A uniform draw."""
        return (
            np.random.default_rng(seed).uniform(self.low, self.high, self.shape).astype(np.float32)
        )

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is in the space."""
        a = np.asarray(x)
        return a.shape == self.shape and bool(((a >= self.low) & (a <= self.high)).all())

    def __repr__(self) -> str:
        return f"Box({self.low}, {self.high}, {self.shape})"
