"""What counts as a number in arguments: Python's and numpy's scalars alike, never a bool.

The checks of public arguments use these, so ``np.int64(3)`` is a valid team size wherever
``3`` is, and ``True`` is never a number.

Example:
    >>> import numpy as np
    >>> is_int(np.int64(3)), is_int(True), is_int(2.0), is_real(np.float32(0.5))
    (True, False, False, True)
    >>> as_int(np.int64(3)), type(as_int(np.int64(3))).__name__
    (3, 'int')
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from orchestrace.errors import ConfigError

__all__ = ["MAX_INT", "as_int", "as_real", "check_seed", "is_finite", "is_int", "is_real"]

#: Largest count, budget or seed (the trace format's integer range).
MAX_INT = 2**63 - 1


def is_int(value: Any) -> bool:
    """An integer (Python's or numpy's), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: Any) -> bool:
    """A real number (an integer or a float, Python's or numpy's), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_finite(value: Any) -> bool:
    """A real number that is neither NaN nor infinite."""
    return is_real(value) and math.isfinite(value)


def as_int(value: Any) -> int:
    """``value`` (an integer, see :func:`is_int`) as a Python int."""
    return int(value)


def as_real(value: Any) -> int | float:
    """``value`` (a real, see :func:`is_real`) as a Python int or float (ints stay ints)."""
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def check_seed(value: object, name: str = "seed") -> int:
    """Check a seed: an integer from 0 to 2**63 - 1.

    Raises:
        ConfigError: Not an integer, negative, or too large (the message names ``name``).
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT:
        raise ConfigError(
            f"{name} must be an integer from 0 to 2**63-1 (got {_shown(value)}); "
            "seeds are non-negative, e.g. --seed 0"
        )
    return value


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
