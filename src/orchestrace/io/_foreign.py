"""Reading the values of other frameworks' exports: times, counts, text, and causal order.

Shared by the Agents SDK and LangGraph mappers, which read the same kinds of values (ISO or
epoch times, token counts, JSON payloads), chain an agent's events the same way (each event
follows the agent's latest finished one and takes the inputs fed to it), name roles the same way
and start an agent with a ``spawn`` the first time and a ``message`` after that.

Example:
    >>> parse_time("2025-01-01T00:00:01Z"), count(-3), text({"a": 1})
    (1735689601.0, 0, '{"a":1}')
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import msgspec

from orchestrace.trace.enums import DecisionName
from orchestrace.trace.model import Event

__all__ = [
    "EPS",
    "Pending",
    "agent_role",
    "ancestors",
    "count",
    "first_event_since",
    "handover",
    "is_fresh",
    "latest",
    "parse_time",
    "take_inputs",
    "text",
]

#: Seconds under which two times count as the same instant.
EPS = 1e-6

_T = TypeVar("_T")


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


def take_inputs(
    done: Mapping[str, list[tuple[float, str, float]]],
    pending: dict[str, list[Pending]],
    agent: str,
    t: float,
) -> tuple[tuple[float, str] | None, list[Pending]]:
    """What ``agent``'s event at ``t`` follows: its latest finished event and the inputs fed to it.

    The inputs taken (those fed by ``t``) are removed from ``pending``.

    Example:
        >>> pending = {"a": [Pending("m", 0.5, "message"), Pending("n", 3.0, "message")]}
        >>> prev, take = take_inputs({"a": [(1.0, "e1", 0.0)]}, pending, "a", 2.0)
        >>> prev, [p.event_id for p in take], [p.event_id for p in pending["a"]]
        ((1.0, 'e1'), ['m'], ['n'])
    """
    prev = latest(done.get(agent, []), t)
    take = [p for p in pending.get(agent, []) if p.t <= t + EPS]
    if take:
        pending[agent] = [p for p in pending[agent] if p not in take]
    return prev, take


def agent_role(agent: str, leads: Collection[str | None], spawners: Collection[str]) -> str:
    """``orchestrator`` for a lead agent, ``manager`` for one that has spawned another, else ``worker``.

    Example:
        >>> agent_role("lead", ("lead", "wf"), set()), agent_role("b", ("lead",), {"b"})
        ('orchestrator', 'manager')
    """
    if agent in leads:
        return "orchestrator"
    return "manager" if agent in spawners else "worker"


def is_fresh(acted: Mapping[str, float], sender: str, child: str, t: float) -> bool:
    """Whether ``sender`` starting ``child`` at ``t`` spawns it: ``child`` had not acted before.

    Example:
        >>> is_fresh({"b": 1.0}, "a", "b", 2.0), is_fresh({}, "a", "b", 2.0)
        (False, True)
    """
    first = acted.get(child)
    return child != sender and (first is None or first >= t - EPS)


def first_event_since(
    events_of: Mapping[str, list[tuple[float, str]]], agent: str, t: float
) -> str | None:
    """The id of ``agent``'s earliest event at or after ``t``, if it has one.

    Example:
        >>> first_event_since({"b": [(3.0, "x"), (2.0, "y"), (0.0, "z")]}, "b", 1.0)
        'y'
    """
    mine = [(et, e) for et, e in events_of.get(agent, []) if et >= t - EPS]
    return min(mine)[1] if mine else None


def handover(
    eid: str, t: float, sender: str, child: str, fresh: bool, decision: DecisionName, **fields: Any
) -> Event:
    """The event by which ``sender`` starts ``child``: a ``spawn`` when fresh, else a ``message``.

    Example:
        >>> ev = handover("h", 1.0, "a", "b", False, "delegate")
        >>> ev.type, ev.from_, ev.to, ev.decision
        ('message', 'a', 'b', 'delegate')
    """
    return Event(
        id=eid,
        t=t,
        type="spawn" if fresh else "message",
        agent=sender,
        from_=None if fresh else sender,
        to=child,
        decision=decision,
        **fields,
    )


def ancestors(
    records: Mapping[str, _T], rid: str | None, parent: Callable[[_T], str | None]
) -> Iterator[_T]:
    """The record ``rid`` and its ancestors, nearest first (stops at an unknown id or a cycle).

    Example:
        >>> up = {"a": None, "b": "a", "c": "b"}
        >>> list(ancestors({k: k for k in up}, "c", up.get))
        ['c', 'b', 'a']
    """
    seen: set[str] = set()
    while rid is not None and rid in records and rid not in seen:
        seen.add(rid)
        r = records[rid]
        yield r
        rid = parent(r)
