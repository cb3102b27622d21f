"""Checks of an intervention's arguments, made when it is built.

A malformed intervention is refused where it is written, not when the forked trace is
written at the end of the run (as numpy numbers or data JSON cannot hold used to be).

Example:
    >>> import numpy as np
    >>> _plain({"v": [np.int64(2)]})
    {'v': [2]}
"""

from __future__ import annotations

from typing import Any

import msgspec

from orchestrace._numbers import as_int, is_int
from orchestrace._safe import display
from orchestrace.errors import ConfigError

__all__: list[str] = []


def _check_address(iv: Any, kind: str) -> None:
    """Check (and make plain ints of) a message intervention's sender, step and index."""
    _check_name(iv.sender, f"{kind} sender")
    _check_step(iv.step, f"{kind} step", optional=False)
    if not is_int(iv.index) or iv.index < 0:
        raise ConfigError(
            f"{kind} index must be an integer >= 0 (which message of the step), got "
            f"{display(repr(iv.index), 60)}"
        )
    iv.step, iv.index = as_int(iv.step), as_int(iv.index)


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars (at any depth of lists and dicts) as Python values."""
    if type(value) is dict:
        return {k: _plain(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_plain(v) for v in value)
    item = getattr(value, "item", None)
    if type(value).__module__ == "numpy" and callable(item) and not getattr(value, "ndim", 0):
        return item()
    return value


def _check_encodable(value: Any, what: str) -> None:
    """Refuse a value a trace could not record (the fork would fail only at its end)."""
    try:
        msgspec.json.encode(value)
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as err:
        raise ConfigError(
            f"{what} must be JSON data (a trace records it): {str(err)[:120]}"
        ) from None


def _check_step(step: Any, what: str, *, optional: bool) -> None:
    if step is None and optional:
        return
    if not is_int(step) or step < 0:
        raise ConfigError(
            f"{what} must be an integer >= 0 (an agent's step), got {display(repr(step), 60)}"
        )


def _check_name(name: Any, what: str) -> None:
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{what} must be a non-empty string, got {display(repr(name), 60)}")
