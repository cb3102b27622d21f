"""Reading the values of other frameworks' exports: times, counts, text, and causal order.

Shared by the Agents SDK and LangGraph mappers, which read the same kinds of values (ISO or
epoch times, token counts, JSON payloads) and chain an agent's events the same way.

Example:
    >>> parse_time("2025-01-01T00:00:01Z"), count(-3), text({"a": 1})
    (1735689601.0, 0, '{"a":1}')
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec

__all__ = ["EPS", "Pending", "count", "latest", "parse_time", "text"]

#: Seconds under which two times count as the same instant.
EPS = 1e-6


def parse_time(value: object) -> float | None:
    """Seconds since the epoch of an ISO 8601 string (or a number), else ``None``.

    Example:
        >>> parse_time("2025-01-01T00:00:00"), parse_time(float("nan")), parse_time(True)
        (1735689600.0, None, None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and value:
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return dt.timestamp()
    return None


def count(value: object) -> int:
    """A token count: a finite non-negative number, capped to 64 bits; anything else is 0.

    Example:
        >>> count(12.7), count("3"), count(float("inf"))
        (12, 0, 0)
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if not math.isfinite(value) or value < 0:
        return 0
    return min(int(value), 2**63 - 1)


def text(value: object) -> str | None:
    """A payload as event content: strings as they are, anything else as compact JSON.

    Example:
        >>> text(None), text("hi"), text([1, 2])
        (None, 'hi', '[1,2]')
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, ValueError, OverflowError):
        return str(value)


def latest(done: list[tuple[float, str, float]], t: float) -> tuple[float, str] | None:
    """The latest ``(end, id)`` of ``done`` (sorted) that ended by ``t`` and started before it.

    Events starting at the same instant as ``t`` are concurrent with it, not before it.

    Example:
        >>> latest([(1.0, "a", 0.0), (2.0, "b", 2.0)], 2.0)
        (1.0, 'a')
    """
    i = bisect.bisect_right(done, (t + EPS, "\U0010ffff", math.inf))
    while i > 0:
        i -= 1
        end, eid, start = done[i]
        if start < t - EPS:
            return end, eid
    return None


@dataclass
class Pending:
    """An event that is input to an agent's next event (``kind``: the edge type it gets).

    Example:
        >>> Pending("e1", 0.5, "message").kind
        'message'
    """

    event_id: str
    t: float
    kind: str
