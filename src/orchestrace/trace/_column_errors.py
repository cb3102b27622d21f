"""The errors of a graph compile for a record whose value no column can hold.

``check_trace`` lists every such problem; a compile stops at the first and names it (its place,
and what the column holds), instead of a ``KeyError`` or ``OverflowError`` from numpy.

Example:
    >>> from orchestrace import Event
    >>> err = _unknown_type([Event(id="e1", t=0.0, type="x", agent="a")], "events", {"message": 1})
    >>> print(err.problems[0])
    $.events[0].type: type is 'x', not a known event type; use one of: message
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from orchestrace.errors import Problem, TraceValidationError

__all__: list[str] = []


def _unknown_type(records: Sequence[Any], where: str, codes: Mapping[Any, int]) -> Exception:
    """The error for the first record whose ``type`` has no code (``check_trace`` lists all)."""
    for i, r in enumerate(records):
        kind = getattr(r, "type", None)
        if not isinstance(kind, str) or kind not in codes:
            return TraceValidationError(
                [
                    Problem(
                        "unknown-type",
                        f"type is {str(kind)[:80]!r}, not a known {where[:-1]} type",
                        "use one of: " + ", ".join(sorted(k for k in codes if isinstance(k, str))),
                        path=f"$.{where}[{i}].type",
                    )
                ]
            )
    return TraceValidationError(
        [
            Problem(
                "unknown-type",
                f"an {where[:-1]} type is unknown",
                "run check_trace",
                path=f"$.{where}",
            )
        ]
    )


def _overflow(events: Sequence[Any], name: str, dtype: Any = np.int64) -> Exception:
    """The error for an event field too large for its column (int64, or float64)."""
    floating = np.dtype(dtype).kind == "f"
    if floating:
        beyond, fix = "beyond the largest float", f"record {name} as a finite number >= 0"
    else:
        beyond, fix = (
            "beyond the largest count 2^63-1",
            f"record {name} as an integer from 0 to 2^63-1",
        )
    for i, e in enumerate(events):
        value = getattr(e, name, None)
        if isinstance(value, int) and (
            abs(value) > _FLOAT_MAX if floating else not -(2**63) <= value < 2**63
        ):
            # (a long integer is not printed whole: str() refuses over 4,300 digits)
            digits = int(value.bit_length() * 0.30103) + 1
            shown = str(value) if digits < 60 else f"an integer of about {digits:,} digits"
            return TraceValidationError(
                [
                    Problem(
                        "out-of-range",
                        f"{name} is {shown}, {beyond}",
                        fix,
                        path=f"$.events[{i}].{name}",
                        event_id=e.id if isinstance(e.id, str) else None,
                    )
                ]
            )
    return TraceValidationError(
        [
            Problem(
                "out-of-range",
                f"an event's {name} does not fit a 64-bit " + ("float" if floating else "integer"),
                fix,
                path="$.events",
            )
        ]
    )


_FLOAT_MAX = float(np.finfo(np.float64).max)


def _not_a_name(events: Sequence[Any], name: str, *, optional: bool) -> Exception:
    """The error for the first event whose ``name`` field is no string (``None`` if optional)."""
    for i, e in enumerate(events):
        value = getattr(e, "from_" if name == "from" else name, None)
        if not (isinstance(value, str) or (optional and value is None)):
            return _wrong_type(
                i, e, name, value, f"record {name} as a string" + (" or None" * optional)
            )
    return _wrong_type(None, None, name, None, "run check_trace")


def _not_a_number(events: Sequence[Any], name: str) -> Exception:
    """The error for the first event whose ``name`` field is no number (bools are not)."""
    for i, e in enumerate(events):
        value = getattr(e, name, None)
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            return _wrong_type(i, e, name, value, f"record {name} as a number >= 0")
    return _wrong_type(None, None, name, None, "run check_trace")


def _wrong_type(i: int | None, event: Any, name: str, value: Any, fix: str) -> Exception:
    """A ``wrong-type`` error at event ``i`` (or, unlocated, at ``$.events``)."""
    if i is None:
        return TraceValidationError(
            [Problem("wrong-type", f"an event's {name} has the wrong type", fix, path="$.events")]
        )
    eid = getattr(event, "id", None)
    return TraceValidationError(
        [
            Problem(
                "wrong-type",
                f"{name} is {repr(value)[:40]}, a {type(value).__name__}",
                fix,
                path=f"$.events[{i}].{name}",
                event_id=eid if isinstance(eid, str) else None,
            )
        ]
    )
