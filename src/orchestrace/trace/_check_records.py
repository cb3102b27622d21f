"""The format checks of a trace's records: header, events present, field types, totals, cut-off.

These rules read the :class:`~orchestrace.trace.model.Trace` itself. A trace built in Python
(its constructor checks nothing) may hold anything in any field; :func:`check_fields` reports
each wrong type so that the checks after it, which compile and read the fields, never meet one.
Public through :mod:`orchestrace.trace.check`.

Example:
    >>> from orchestrace.trace.model import Trace
    >>> [p.code for p in check_header(Trace(trace_id="", task_id="demo", events=()))]
    ['missing-field']
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Iterator
from itertools import chain
from operator import attrgetter
from typing import Annotated, Any

import msgspec
import numpy as np

from orchestrace.errors import Problem, _short
from orchestrace.trace._check_base import (
    DECISION_NAMES,
    EDGE_NAMES,
    EVENT_NAMES,
    INT_FIELDS,
    MAX_FLOAT,
    OPTIONAL_STR,
    TOPOLOGY_NAMES,
    Ctx,
    all_known,
    capped,
    ev_path,
    event_id,
    is_number,
    is_text,
    known,
    not_plain,
    run_alone,
    wrong,
)
from orchestrace.trace.graph import TraceGraph
from orchestrace.trace.model import (
    MAX_INT,
    SCHEMA_VERSION,
    Decision,
    Edge,
    EdgeType,
    Event,
    EventType,
    Topology,
    Trace,
)

__all__ = ["check_fields", "check_header", "check_nonempty", "check_partial", "check_totals"]


def check_header(
    trace: Trace,
    *,
    partial: bool = False,
    known_ids: Iterable[str] = (),
    graph: TraceGraph | None = None,
) -> list[Problem]:
    """The header: ids are non-empty strings, fields have their types, the version is known.

    ``trace_id`` and ``task_id`` are non-empty strings, ``schema_version`` a version this
    reader understands, ``topology`` a known one, ``system`` a string and ``meta`` a dict.

    Example:
        >>> from orchestrace import Edge, Event, Trace
        >>> tr = Trace(trace_id="t1", task_id="demo", events=(), schema_version="2.0")
        >>> [p.code for p in check_header(tr)]
        ['schema-version']
    """
    return run_alone(_header, trace, partial, known_ids, graph)


def _header(ctx: Ctx) -> Iterator[Problem]:
    tr = ctx.trace
    for name in ("trace_id", "task_id"):
        value = getattr(tr, name)
        if not is_text(value):
            yield Problem(
                "wrong-type",
                f"{name} is {wrong(value)}, {_not_a_string(value)}",
                f"set {name} to a non-empty string",
                path=f"$.{name}",
            )
        elif not value:
            yield Problem(
                "missing-field",
                f"{name} is empty",
                f"set {name} to a non-empty string",
                path=f"$.{name}",
            )
    for name, kind, what in (
        ("schema_version", str, "a string"),
        ("system", str | None, "a string"),
        ("meta", dict, "a dict (a JSON object)"),
    ):
        value = getattr(tr, name)
        if not isinstance(value, kind) or (isinstance(value, str) and not is_text(value)):
            yield Problem(
                "wrong-type",
                f"{name} is {wrong(value)}, "
                + (not_plain(value, "string") if isinstance(value, str) else f"not {what}"),
                f"make {name} {what}",
                path=f"$.{name}",
            )
    major = str(tr.schema_version).split(".", 1)[0]
    if isinstance(tr.schema_version, str) and major != SCHEMA_VERSION.split(".", 1)[0]:
        yield Problem(
            "schema-version",
            f"schema_version {_short(str(tr.schema_version))!r} is not supported "
            f"(this reader understands {SCHEMA_VERSION.split('.')[0]}.x)",
            "convert the trace with a matching orchestrace version",
            path="$.schema_version",
        )
    if tr.topology is not None and not known(tr.topology, TOPOLOGY_NAMES):
        yield Problem(
            "unknown-value",
            *_unknown_name("topology", tr.topology, TOPOLOGY_NAMES, Topology),
            path="$.topology",
        )


def check_nonempty(
    trace: Trace,
    *,
    partial: bool = False,
    known_ids: Iterable[str] = (),
    graph: TraceGraph | None = None,
) -> list[Problem]:
    """A trace has at least one event (a cut-off recording checked with ``partial`` may not).

    Example:
        >>> from orchestrace import Edge, Event, Trace
        >>> print(check_nonempty(Trace(trace_id="t1", task_id="demo", events=()))[0])
        $.events: trace has no events; record at least one event
    """
    return run_alone(_nonempty, trace, partial, known_ids, graph)


def _nonempty(ctx: Ctx) -> Iterator[Problem]:
    events: object = ctx.trace.events  # (a trace built in Python may hold anything)
    if ctx.graph_only:
        n = ctx.graph.n
    elif isinstance(events, tuple | list):
        n = len(events)
    else:
        return  # check_fields reports what events is
    if n == 0 and not ctx.cut_off:
        yield Problem(
            "no-events", "trace has no events", "record at least one event", path="$.events"
        )


def check_fields(
    trace: Trace,
    *,
    partial: bool = False,
    known_ids: Iterable[str] = (),
    graph: TraceGraph | None = None,
) -> list[Problem]:
    """Events and edges are records whose fields have their types, with known names.

    Type and decision names are known; ids and agents are non-empty strings; every field
    holds its type (numbers, integers in range, strings, ``trusted`` a bool, ``attrs`` a
    dict). A trace decoded from a file passes by construction (the decoder enforced it).

    Example:
        >>> from orchestrace import Edge, Event, Trace
        >>> e = Event(id="e1", t="soon", type="thinking", agent="a")
        >>> [str(p) for p in check_fields(Trace(trace_id="t1", task_id="demo", events=(e,)))]
        ... # doctest: +NORMALIZE_WHITESPACE
        ["$.events[0].type (event 'e1'): unknown event type 'thinking'; use one of: ...",
         "$.events[0].t (event 'e1'): t is 'soon', not a number; record t as a finite number >= 0"]
    """
    return run_alone(_fields, trace, partial, known_ids, graph)


def _fields(ctx: Ctx) -> Iterator[Problem]:
    if ctx.trusted:  # the decoder enforced all of this
        return
    if ctx.graph_only:  # column compilation rejected unknown names; check emptiness
        g = ctx.graph
        empty_agents = np.array([not a for a in g.names] or [False], dtype=bool)
        bad = empty_agents[g.agent_code] if g.n else np.zeros(0, bool)
        if isinstance(g.ids, list):
            bad = bad | np.fromiter((not x for x in g.ids), dtype=bool, count=g.n)
        else:
            import pyarrow.compute as pc  # noqa: PLC0415  only columnar graphs hold Arrow ids

            lengths = pc.utf8_length(g.ids).fill_null(0).to_numpy(zero_copy_only=False)
            bad = bad | (np.asarray(lengths) == 0)
        for i in np.flatnonzero(bad)[:1].tolist():
            yield Problem(
                "empty-id",
                "event id or agent is empty",
                "give every event a unique non-empty id and an agent",
                path=ev_path(i),
            )
        return
    tr = ctx.trace
    fields: tuple[tuple[str, object, type[Any]], ...] = (
        ("events", tr.events, Event),
        ("edges", tr.edges, Edge),
    )
    records = True
    for name, items, kind in fields:
        if not isinstance(items, tuple | list):
            records = False
            yield Problem(
                "wrong-type",
                f"{name} is {wrong(items)}, not a sequence of {kind.__name__} records",
                f"pass {name} as a tuple of {kind.__name__}(...) records",
                path=f"$.{name}",
            )
        elif not set(map(type, items)) <= {kind}:  # (one C-level pass)
            bad = [(i, x) for i, x in enumerate(items) if not isinstance(x, kind)]
            records = records and not bad
            yield from capped(
                (
                    Problem(
                        "wrong-type",
                        f"{name}[{i}] is {wrong(x)}, not an {kind.__name__}",
                        f"build it with {kind.__name__}(...), or load the trace from a file",
                        path=f"$.{name}[{i}]",
                    )
                    for i, x in bad
                ),
                "wrong-type",
            )
    if not records:
        return  # the fields below are those of records
    yield from capped(_event_fields(tr.events), "unknown-type")
    yield from capped(_edge_fields(tr.edges), "unknown-type")


def _event_fields(events: Iterable[Event]) -> Iterator[Problem]:
    events = list(events)
    if not all_known(list(map(_get_type, events)), EVENT_NAMES):
        for i, e in enumerate(events):
            if not known(e.type, EVENT_NAMES):
                yield Problem(
                    "unknown-type",
                    *_unknown_name("event type", e.type, EVENT_NAMES, EventType),
                    path=ev_path(i, "type"),
                    event_id=event_id(e),
                )
    if not all_known(list(map(_get_decision, events)), _DECISIONS_OR_NONE):
        for i, e in enumerate(events):
            if e.decision is not None and not known(e.decision, DECISION_NAMES):
                yield Problem(
                    "unknown-value",
                    *_unknown_name("decision", e.decision, DECISION_NAMES, Decision),
                    path=ev_path(i, "decision"),
                    event_id=event_id(e),
                )
    plain = _shaped(events, list[_EventShape]) and _plain_numbers(events)
    suspect = set() if plain else _suspect_fields(events)
    if not suspect:
        return
    for i, e in enumerate(events):
        for name, code, fix in (
            ("id", "empty-id", "give every event a unique non-empty id"),
            ("agent", "empty-agent", "name the agent (or tool) that produced the event"),
        ):
            if name not in suspect:
                continue
            value = getattr(e, name)
            if not is_text(value):
                yield Problem(
                    "wrong-type",
                    f"event {name} is {wrong(value)}, {_not_a_string(value)}",
                    fix,
                    path=ev_path(i, name),
                    event_id=event_id(e) if name != "id" else None,
                )
            elif not value:
                yield Problem(
                    code,
                    f"event {name} is empty",
                    fix,
                    path=ev_path(i, name),
                    event_id=event_id(e) if name != "id" else None,
                )
        yield from _typed_fields(i, e, suspect)


class _EventShape(msgspec.Struct, gc=False):
    """The types (and integer ranges) of an event's fields, validated in C by msgspec."""

    id: Annotated[str, msgspec.Meta(min_length=1)]
    agent: Annotated[str, msgspec.Meta(min_length=1)]
    t: float
    dur: float
    cost: float
    tokens_in: Annotated[int, msgspec.Meta(ge=-MAX_INT - 1, le=MAX_INT)]
    tokens_out: Annotated[int, msgspec.Meta(ge=-MAX_INT - 1, le=MAX_INT)]
    step: Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)] | None
    role: str | None
    from_: str | None
    to: str | None
    tool: str | None
    content: str | None
    content_ref: str | None
    error: str | None
    trusted: bool | None
    attrs: dict[str, Any] | None


class _EdgeShape(msgspec.Struct, gc=False):
    """The types of an edge's ends."""

    src: str
    dst: str


def _shaped(records: list[Any], shape: Any) -> bool:
    """Fast path: every record's fields have their types (one C-level pass by msgspec)."""
    try:
        msgspec.convert(records, shape, from_attributes=True, strict=True)
    except msgspec.ValidationError:
        return False  # the slow pass finds which fields of which records
    return True


# the types event fields may hold, by groups checked in one pass each (the slow per-event
# pass then looks only at the fields of a group that failed)
_NONE = type(None)
_FIELD_GROUPS: tuple[tuple[tuple[str, ...], frozenset[type]], ...] = (
    (("id", "agent"), frozenset({str})),
    (("t", "dur", "cost"), frozenset({float})),
    (("tokens_in", "tokens_out"), frozenset({int})),
    (("step",), frozenset({int, _NONE})),
    (OPTIONAL_STR, frozenset({str, _NONE})),
    (("trusted",), frozenset({bool, _NONE})),
    (("attrs",), frozenset({dict, _NONE})),
)


_get_type, _get_decision = attrgetter("type"), attrgetter("decision")
_DECISIONS_OR_NONE = DECISION_NAMES | {None}


def _unknown_name(what: str, value: object, members: frozenset[Any], kind: Any) -> tuple[str, str]:
    """The message and the fix for a value that is not one of the names of ``kind``."""
    if isinstance(value, str) and value in members:  # a name, as a str subclass
        return f"{what} {wrong(value)} is {not_plain(value, 'string')}", "record it as str(value)"
    return f"unknown {what} {_short(str(value))!r}", f"use one of: {', '.join(kind)}"


def _not_a_string(value: object) -> str:
    return not_plain(value, "string") if isinstance(value, str) else "not a string"


def _plain_numbers(events: list[Event]) -> bool:
    """Every time, duration and cost is a float, or an int a float holds exactly (C passes).

    msgspec's fast path takes a ``Decimal`` for a float, which the JSON encoder writes as a
    string, and any int, which a float column (or JSON read back) may not hold exactly; other
    objects in any field are the writers' encoding check to name.
    """
    for name in ("t", "dur", "cost"):
        values = list(map(attrgetter(name), events))
        kinds = set(map(type, values))
        if not kinds <= _NUMBER_TYPES:
            return False
        if int in kinds and not all(map(_exact_float, filter(_is_int, values))):
            return False
    return True


def _is_int(value: object) -> bool:
    return type(value) is int


def _exact_float(value: int) -> bool:
    """Whether a float holds the int ``value`` exactly (``2**53 + 1`` it does not)."""
    try:
        return int(float(value)) == value
    except OverflowError:
        return False


_NUMBER_TYPES = frozenset({float, int})


def _suspect_fields(events: list[Event]) -> set[str]:
    """Fields some event may hold wrongly (C-level passes over all events, one per group)."""
    suspect: set[str] = set()
    for names, types in _FIELD_GROUPS:
        get = attrgetter(*names)
        values = list(chain.from_iterable(map(get, events)) if len(names) > 1 else map(get, events))
        if not set(map(type, values)) <= types:
            fine = False  # (an int where a float goes is fine, but the slow pass says so)
        elif names[0] == "id":
            fine = all(values)
        elif names[0] in INT_FIELDS:
            ints = [v for v in values if v is not None]
            low = 0 if names[0] == "step" else -MAX_INT - 1
            fine = not ints or (min(ints) >= low and max(ints) <= MAX_INT)
        else:
            fine = True
        if not fine:
            suspect.update(names)
    return suspect


def _typed_fields(i: int, e: Event, suspect: set[str]) -> Iterator[Problem]:
    """Problems of the suspect number, integer and optional fields of event ``i``."""
    for name in ("t", "dur", "cost"):
        found = _number_problem(name, getattr(e, name)) if name in suspect else None
        if found is not None:
            yield Problem(*found, path=ev_path(i, name), event_id=event_id(e))
    for name in INT_FIELDS:
        value = getattr(e, name)
        if name not in suspect or (value is None and name == "step"):
            continue
        problem = _int_problem(name, value)
        if problem is not None:
            code, message = problem
            yield Problem(
                code,
                message,
                f"record {name} as an integer from 0 to 2^63-1",
                path=ev_path(i, name),
                event_id=event_id(e),
            )
    for attr in OPTIONAL_STR:
        value = getattr(e, attr)
        if attr in suspect and value is not None and not is_text(value):
            name = "from" if attr == "from_" else attr
            yield Problem(
                "wrong-type",
                f"{name} is {wrong(value)}, {_not_a_string(value)}",
                f"record {name} as a string, or leave it out",
                path=ev_path(i, name),
                event_id=event_id(e),
            )
    for name, kind, what in (("trusted", bool, "true or false"), ("attrs", dict, "a dict")):
        value = getattr(e, name)
        if name in suspect and value is not None and not isinstance(value, kind):
            yield Problem(
                "wrong-type",
                f"{name} is {wrong(value)}, not {what}",
                f"record {name} as {what}, or leave it out",
                path=ev_path(i, name),
                event_id=event_id(e),
            )


def _int_problem(name: str, value: object) -> tuple[str, str] | None:
    """``(code, message)`` of a token count or step no file holds exactly, or None."""
    if not isinstance(value, int) or isinstance(value, bool):
        return "wrong-type", f"{name} is {_short(repr(value), 40)}, not an integer"
    if not is_number(value):  # an int subclass the encoder refuses
        return "wrong-type", f"{name} is {wrong(value)}, {not_plain(value, 'integer')}"
    if value > MAX_INT or value < -MAX_INT - 1 or (value < 0 and name == "step"):
        return "out-of-range", f"{name} is {_short(str(value), 40)}, outside 0 to 2^63-1"
    return None


def _number_problem(name: str, value: object) -> tuple[str, str, str] | None:
    """``(code, message, fix)`` of a time, duration or cost no file holds exactly, or None.

    (An infinite or negative float is ``check_numbers``' to report.)
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        return (
            "wrong-type",
            f"{name} is {wrong(value)}, not a number",
            (f"record {name} as a finite number >= 0"),
        )
    if not is_number(value):
        return (
            "wrong-type",
            f"{name} is {wrong(value)}, {not_plain(value, 'number')}",
            (f"record {name} as a Python float (float(value) converts it)"),
        )
    if isinstance(value, int) and not -MAX_FLOAT <= value <= MAX_FLOAT:
        return (
            "out-of-range",
            f"{name} is {wrong(value)}, beyond the largest float",
            (f"record {name} as a finite number >= 0"),
        )
    if isinstance(value, int) and not _exact_float(value):
        return (
            "out-of-range",
            f"{name} is {wrong(value)}, an integer no float holds exactly (beyond 2^53)",
            f"record {name} as a float (float(value) rounds it), in seconds or units that "
            "keep it below 2^53",
        )
    return None


def _edge_fields(edges: Iterable[Edge]) -> Iterator[Problem]:
    edges = list(edges)
    if _shaped(edges, list[_EdgeShape]) and all_known(list(map(_get_type, edges)), EDGE_NAMES):
        return
    for k, e in enumerate(edges):
        for end in ("src", "dst"):
            value = getattr(e, end)
            if not is_text(value):
                yield Problem(
                    "wrong-type",
                    f"{end} is {wrong(value)}, "
                    + (not_plain(value, "string") if isinstance(value, str) else "not an event id"),
                    "make src and dst the ids (strings) of two events",
                    path=f"$.edges[{k}].{end}",
                )
        if not known(e.type, EDGE_NAMES):
            yield Problem(
                "unknown-type",
                *_unknown_name("edge type", e.type, EDGE_NAMES, EdgeType),
                path=f"$.edges[{k}].type",
            )


def check_totals(
    trace: Trace,
    *,
    partial: bool = False,
    known_ids: Iterable[str] = (),
    graph: TraceGraph | None = None,
) -> list[Problem]:
    """Costs, rewards and metrics map names to finite numbers; costs are not negative.

    A ``costs`` without ``tokens`` or ``wall_clock_s`` gets a warning (the public schema
    requires both).

    Example:
        >>> from orchestrace import Edge, Event, Trace
        >>> tr = Trace(trace_id="t1", task_id="demo", events=(), costs={"tokens": -1.0})
        >>> [(p.code, p.severity) for p in check_totals(tr)]
        [('missing-cost', 'warning'), ('negative-value', 'error')]
    """
    return run_alone(_totals, trace, partial, known_ids, graph)


def _totals(ctx: Ctx) -> Iterator[Problem]:
    tr = ctx.trace
    raw: tuple[tuple[str, object, bool], ...] = (
        ("costs", tr.costs, True),
        ("rewards", tr.rewards, False),
        ("metrics", tr.metrics, False),
    )
    sections: list[tuple[str, dict[str, object], bool]] = []
    for section, values, nonneg in raw:
        if not isinstance(values, dict):
            yield Problem(
                "wrong-type",
                f"{section} is {wrong(values)}, not a dict",
                f"make {section} a dict of names to numbers",
                path=f"$.{section}",
            )
        elif not all(is_text(k) for k in values):
            key = next(k for k in values if not is_text(k))
            yield Problem(
                "wrong-type",
                f"{section} has the key {wrong(key)}, not a string",
                f"name every entry of {section} with a string",
                path=f"$.{section}",
            )
        else:
            sections.append((section, values, nonneg))
    if len(sections) < len(raw):
        return
    for key in ("tokens", "wall_clock_s"):
        if key not in sections[0][1]:
            yield Problem(
                "missing-cost",
                f"costs has no {key!r}",
                f"record costs.{key} (the public schema requires it)",
                path="$.costs",
                severity="warning",
            )
    for section, values, nonneg in sections:
        for key, value in values.items():
            plain = is_number(value) or isinstance(value, bool)
            if not plain and isinstance(value, numbers.Number):
                yield Problem(
                    "wrong-type",
                    f"{section}.{_short(key)} is {wrong(value)}, {not_plain(value, 'number')}",
                    "record it as a Python float (float(value) converts it)",
                    path=f"$.{section}.{_short(key)}",
                )
            elif not is_number(value) or not abs(value) <= MAX_FLOAT:
                yield Problem(
                    "non-finite",
                    f"{section}.{_short(key)} is {_short(repr(value))}",
                    "record a finite number",
                    path=f"$.{section}.{_short(key)}",
                )
            elif isinstance(value, int) and not _exact_float(value):
                yield Problem(
                    "out-of-range",
                    f"{section}.{_short(key)} is {_short(repr(value))}, an integer no float "
                    "holds exactly (beyond 2^53)",
                    "record it as a float (float(value) rounds it)",
                    path=f"$.{section}.{_short(key)}",
                )
            elif nonneg and value < 0:
                yield Problem(
                    "negative-value",
                    f"costs.{_short(key)} is negative ({value})",
                    "record costs as numbers >= 0",
                    path=f"$.costs.{_short(key)}",
                )


def check_partial(
    trace: Trace,
    *,
    partial: bool = False,
    known_ids: Iterable[str] = (),
    graph: TraceGraph | None = None,
) -> list[Problem]:
    """A trace whose recording was cut off says so (``meta.partial``).

    That is an error, or a warning when ``partial`` accepts a truncated recording.

    Example:
        >>> from orchestrace import Edge, Event, Trace
        >>> tr = Trace(trace_id="t1", task_id="demo", events=(), meta={"partial": True})
        >>> [p.severity for p in check_partial(tr)]
        ['error']
        >>> [p.severity for p in check_partial(tr, partial=True)]
        ['warning']
    """
    return run_alone(_partial, trace, partial, known_ids, graph)


def _partial(ctx: Ctx) -> Iterator[Problem]:
    meta = ctx.trace.meta
    if isinstance(meta, dict) and meta.get("partial"):
        detail = meta.get("truncated", "the recording stopped before the trace was closed")
        yield Problem(
            "truncated",
            f"trace is truncated: {_short(str(detail), 200)}",
            "every complete event was kept; validate with --partial to accept it"
            if not ctx.partial
            else "this is the complete part of an interrupted recording",
            path="$",
            severity="warning" if ctx.partial else "error",
        )
