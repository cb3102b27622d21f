"""What the format checks share: their signature, their context and small helpers.

Every ``check_*`` of :mod:`orchestrace.trace.check` is a public function with the
:class:`Check` signature; it builds a :class:`Ctx` and runs its rule, a generator of
problems over the context. The rules live in ``_check_records`` (the records' header and
fields) and ``_check_graph`` (the compiled graph's ids, numbers and edges).

Example:
    >>> from orchestrace.trace.model import Trace
    >>> ctx = Ctx(Trace(trace_id="t1", task_id="demo", events=(), meta={"partial": True}))
    >>> ctx.truncated, ctx.cut_off, ev_path(3, "t")
    (True, False, '$.events[3].t')
"""

from __future__ import annotations

import enum
import numbers
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

from orchestrace.errors import Problem, _short
from orchestrace.trace.enums import EVENT_CODE
from orchestrace.trace.graph import TraceGraph
from orchestrace.trace.model import Decision, EdgeType, Event, EventType, Topology, Trace

__all__ = ["Check", "Ctx"]

MAX_PER_CHECK = 100
INT_FIELDS = ("step", "tokens_in", "tokens_out")
EVENT_NAMES = frozenset(EventType)
EDGE_NAMES = frozenset(EdgeType)
DECISION_NAMES = frozenset(Decision)
TOPOLOGY_NAMES = frozenset(Topology)
SPAWN = EVENT_CODE[EventType.SPAWN]
RETURN = EVENT_CODE[EventType.RETURN]
TOOL_RESULT = EVENT_CODE[EventType.TOOL_RESULT]
MAX_FLOAT = sys.float_info.max
# the optional string fields of an event (attribute names)
OPTIONAL_STR = ("role", "from_", "to", "tool", "content", "content_ref", "error")
# tolerance for "effect before cause" time comparisons (float rounding of recorded times)
EPS = 1e-6


class Check(Protocol):
    """The signature every ``check_*`` function has (see the module docstring)."""

    __name__: str

    def __call__(
        self,
        trace: Trace,
        *,
        partial: bool = False,
        known_ids: Iterable[str] = (),
        graph: TraceGraph | None = None,
    ) -> list[Problem]:
        """The problems of ``trace`` this check finds."""
        ...


@dataclass(frozen=True)
class Ctx:
    """What a check reads: the trace header, its compiled graph, options.

    In graph-only mode (a ``graph`` was given) ``trace`` carries the header fields and no
    events; the event checks read the graph's columns instead.
    """

    trace: Trace
    partial: bool = False
    known_ids: frozenset[str] = frozenset()
    given_graph: TraceGraph | None = None

    @property
    def graph_only(self) -> bool:
        """The checks read a given graph, not the trace's events."""
        return self.given_graph is not None

    @property
    def graph(self) -> TraceGraph:
        """The compiled graph (the trace's cached one unless a graph was given)."""
        return self.given_graph if self.given_graph is not None else self.trace.graph

    @property
    def truncated(self) -> bool:
        """The trace is marked as a recording cut off before it closed (``meta.partial``)."""
        meta = self.trace.meta
        return isinstance(meta, dict) and bool(meta.get("partial"))

    @property
    def cut_off(self) -> bool:
        """``partial`` was asked for and the trace is truncated.

        Only such a trace may lack events its edges point to; a complete trace never may.
        """
        return self.partial and self.truncated

    @property
    def trusted(self) -> bool:
        """Types and ranges were enforced while decoding."""
        return self.trace.decoded and not self.graph_only


def run_alone(
    rule: Callable[[Ctx], Iterator[Problem]],
    trace: Trace,
    partial: bool,
    known_ids: Iterable[str],
    graph: TraceGraph | None,
) -> list[Problem]:
    return list(rule(Ctx(trace, partial, frozenset(known_ids), graph)))


def ev_path(i: int, fld: str | None = None) -> str:
    return f"$.events[{i}]" + (f".{fld}" if fld else "")


def event_id(e: Event) -> str | None:
    """The event's id, when it is one (a string) to name the event by."""
    return e.id if isinstance(e.id, str) else None


def wrong(value: object) -> str:
    """A bounded rendering of a value of the wrong type."""
    return _short(repr(value), 40)


def numeric(value: object) -> bool:
    """Any real number (numpy's and ``Fraction`` included), never a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """A number the writers can write: a Python int or float, or a member of a number enum.

    numpy's scalars and other subclasses are not: the JSON encoder refuses them.
    """
    return type(value) is int or type(value) is float or (numeric(value) and _enum(value))


def is_text(value: object) -> TypeGuard[str]:
    """A string the writers can write: a ``str``, or a member of a string enum (its value).

    ``numpy.str_`` and other subclasses are not: the JSON encoder refuses them.
    """
    return type(value) is str or (isinstance(value, str) and _enum(value))


_NONE = type(None)


def _enum(value: object) -> bool:
    return isinstance(value, enum.Enum)


def not_plain(value: object, what: str) -> str:
    """The end of a message for a value of a subclass the writers cannot encode."""
    kind = type(value)
    return f"a {kind.__module__}.{kind.__qualname__}, not a plain Python {what}"


def known(value: object, members: frozenset[Any]) -> bool:
    return is_text(value) and value in members


def all_known(values: Iterable[object], members: frozenset[Any]) -> bool:
    """Fast path: every value is a known name (values of any type, hashable or not).

    A name is a plain ``str`` or a string enum's member (a ``numpy.str_`` equal to a name is
    not: the writers cannot encode it).
    """
    values = values if isinstance(values, list) else list(values)
    try:
        if not set(values) <= members:
            return False
    except TypeError:  # an unhashable value: not a name; the slow path reports it
        return False
    return all(t is str or t is _NONE or issubclass(t, enum.Enum) for t in set(map(type, values)))


def capped(problems: Iterable[Problem], code: str) -> Iterator[Problem]:
    """Yield at most ``MAX_PER_CHECK`` problems, then one line saying how many more."""
    extra = 0
    last: Problem | None = None
    for k, p in enumerate(problems):
        if k < MAX_PER_CHECK:
            yield p
        else:
            extra += 1
            last = p
    if extra and last is not None:
        yield Problem(
            code,
            f"{extra} more problem(s) of this kind not listed",
            "fix the ones above and validate again",
            path="$",
            severity=last.severity,
        )
