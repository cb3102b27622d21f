"""``check_trace``: every rule a trace must follow, as small named ``check_*`` functions.

Each check yields :class:`~orchestrace.errors.Problem` records that name the place (JSON path
and event id) and the fix. Checks are vectorised over the compiled graph so a 1,000,000-event
trace is checked in well under a second. A good trace yields nothing, not even warnings.

:func:`check_structure` is the slow path for documents that do not decode as a trace: it
reports every missing field, wrong type and unknown value it finds, then runs the semantic
checks on whatever could be salvaged.

Example:
    >>> from orchestrace.trace.build import TraceBuilder
    >>> b = TraceBuilder(task_id="demo")
    >>> a = b.add("message", "lead", to="w1")
    >>> tr = b.build()
    >>> check_trace(tr)
    []
    >>> bad = tr.replace(edges=(*tr.edges, Edge("e1", "e9", EdgeType.CAUSAL)))
    >>> print(check_trace(bad)[0])
    $.edges[0].dst: edge points to unknown event 'e9'; add an event with id 'e9' or remove the edge
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec
import numpy as np

from orchestrace.errors import ConfigError, Problem, TraceValidationError, _short
from orchestrace.trace.enums import EVENT_CODE
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

__all__ = [
    "CHECKS",
    "LEVELS",
    "SEMANTIC_CHECKS",
    "check_graph",
    "check_structure",
    "check_trace",
    "is_valid",
    "validate",
]

_MAX_PER_CHECK = 100
_INT_FIELDS = ("step", "tokens_in", "tokens_out")
_EVENT_TYPES = frozenset(EventType)
_EDGE_TYPES = frozenset(EdgeType)
_DECISIONS = frozenset(Decision)
_SPAWN = EVENT_CODE[EventType.SPAWN]
_RETURN = EVENT_CODE[EventType.RETURN]
_TOOL_RESULT = EVENT_CODE[EventType.TOOL_RESULT]
# tolerance for "effect before cause" time comparisons (float rounding of recorded times)
_EPS = 1e-6


@dataclass
class _Ctx:
    """What the checks share: the trace header, its compiled graph, options.

    In graph-only mode (``check_graph``) ``trace`` carries the header fields and no events;
    the event checks read the graph's columns instead.
    """

    trace: Trace
    partial: bool = False
    known_ids: frozenset[str] = frozenset()
    imported: bool = False
    _graph: TraceGraph | None = field(default=None, repr=False)
    graph_only: bool = False

    @property
    def graph(self) -> TraceGraph:
        if self._graph is None:
            self._graph = self.trace.graph
        return self._graph

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


def _ev(i: int, fld: str | None = None) -> str:
    return f"$.events[{i}]" + (f".{fld}" if fld else "")


def _capped(problems: Iterable[Problem], code: str) -> Iterator[Problem]:
    """Yield at most ``_MAX_PER_CHECK`` problems, then one line saying how many more."""
    extra = 0
    last: Problem | None = None
    for k, p in enumerate(problems):
        if k < _MAX_PER_CHECK:
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


# ---------------------------------------------------------------------- the checks
def check_header(ctx: _Ctx) -> Iterator[Problem]:
    """trace_id and task_id are non-empty; schema_version is one this reader understands."""
    tr = ctx.trace
    for name in ("trace_id", "task_id"):
        value = getattr(tr, name)
        if not isinstance(value, str) or not value:
            yield Problem(
                "missing-field",
                f"{name} is empty",
                f"set {name} to a non-empty string",
                path=f"$.{name}",
            )
    major = str(tr.schema_version).split(".", 1)[0]
    if major != SCHEMA_VERSION.split(".", 1)[0]:
        yield Problem(
            "schema-version",
            f"schema_version {_short(str(tr.schema_version))!r} is not supported "
            f"(this reader understands {SCHEMA_VERSION.split('.')[0]}.x)",
            "convert the trace with a matching orchestrace version",
            path="$.schema_version",
        )
    if tr.topology is not None and tr.topology not in set(Topology):
        yield Problem(
            "unknown-value",
            f"unknown topology {_short(str(tr.topology))!r}",
            f"use one of: {', '.join(Topology)}",
            path="$.topology",
        )


def check_nonempty(ctx: _Ctx) -> Iterator[Problem]:
    """A trace has at least one event."""
    n = ctx.graph.n if ctx.graph_only else len(ctx.trace.events)
    if n == 0 and not ctx.cut_off:
        yield Problem(
            "no-events", "trace has no events", "record at least one event", path="$.events"
        )


def check_fields(ctx: _Ctx) -> Iterator[Problem]:
    """Event and edge types are known; ids and agents are non-empty strings."""
    if ctx.trusted:  # the decoder enforced all of this
        return
    if ctx.graph_only:  # column compilation rejected unknown names; check emptiness
        g = ctx.graph
        empty_agents = np.array([not a for a in g.names] or [False], dtype=bool)
        bad = empty_agents[g.agent_code] if g.n else np.zeros(0, bool)
        if isinstance(g.ids, list):
            bad = bad | np.fromiter((not x for x in g.ids), dtype=bool, count=g.n)
        else:
            import pyarrow.compute as pc

            lengths = pc.utf8_length(g.ids).fill_null(0).to_numpy(zero_copy_only=False)
            bad = bad | (np.asarray(lengths) == 0)
        for i in np.flatnonzero(bad)[:1].tolist():
            yield Problem(
                "empty-id",
                "event id or agent is empty",
                "give every event a unique non-empty id and an agent",
                path=_ev(i),
            )
        return
    events = ctx.trace.events

    def bad_events() -> Iterator[Problem]:
        if not {e.type for e in events} <= _EVENT_TYPES:
            for i, e in enumerate(events):
                if e.type not in _EVENT_TYPES:
                    yield Problem(
                        "unknown-type",
                        f"unknown event type {_short(str(e.type))!r}",
                        f"use one of: {', '.join(EventType)}",
                        path=_ev(i, "type"),
                        event_id=e.id,
                    )
        decisions = {e.decision for e in events} - {None}
        if not decisions <= _DECISIONS:
            for i, e in enumerate(events):
                if e.decision is not None and e.decision not in _DECISIONS:
                    yield Problem(
                        "unknown-value",
                        f"unknown decision {_short(str(e.decision))!r}",
                        f"use one of: {', '.join(Decision)}",
                        path=_ev(i, "decision"),
                        event_id=e.id,
                    )
        for i, e in enumerate(events):
            if not isinstance(e.id, str) or not e.id:
                yield Problem(
                    "empty-id",
                    "event id is empty",
                    "give every event a unique non-empty id",
                    path=_ev(i, "id"),
                )
            if not isinstance(e.agent, str) or not e.agent:
                yield Problem(
                    "empty-agent",
                    "event agent is empty",
                    "name the agent (or tool) that produced the event",
                    path=_ev(i, "agent"),
                    event_id=e.id,
                )
            for name in _INT_FIELDS:
                value = getattr(e, name)
                if value is None and name == "step":
                    continue
                if not isinstance(value, int) or isinstance(value, bool):
                    yield Problem(
                        "wrong-type",
                        f"{name} is {_short(repr(value), 40)}, not an integer",
                        f"record {name} as an integer from 0 to 2^63-1",
                        path=_ev(i, name),
                        event_id=e.id,
                    )
                elif value > MAX_INT or (value < 0 and name == "step"):
                    yield Problem(
                        "out-of-range",
                        f"{name} is {_short(str(value), 40)}, outside 0 to 2^63-1",
                        f"record {name} as an integer from 0 to 2^63-1",
                        path=_ev(i, name),
                        event_id=e.id,
                    )

    yield from _capped(bad_events(), "unknown-type")
    edges = ctx.trace.edges
    if not {e.type for e in edges} <= _EDGE_TYPES:
        yield from _capped(
            (
                Problem(
                    "unknown-type",
                    f"unknown edge type {_short(str(e.type))!r}",
                    f"use one of: {', '.join(EdgeType)}",
                    path=f"$.edges[{k}].type",
                )
                for k, e in enumerate(edges)
                if e.type not in _EDGE_TYPES
            ),
            "unknown-type",
        )


def check_ids(ctx: _Ctx) -> Iterator[Problem]:
    """Event ids are unique."""
    g = ctx.graph
    if g.ids_unique():
        return
    ids = g.ids
    id_list = ids if isinstance(ids, list) else ids.to_pylist()
    first: dict[str, int] = {}

    def dups() -> Iterator[Problem]:
        for i, k in enumerate(id_list):
            j = first.setdefault(k, i)
            if j != i:
                yield Problem(
                    "duplicate-id",
                    f"duplicate event id {_short(k)!r} (first used at $.events[{j}])",
                    "give every event a unique id",
                    path=_ev(i, "id"),
                    event_id=k,
                )

    yield from _capped(dups(), "duplicate-id")


def check_numbers(ctx: _Ctx) -> Iterator[Problem]:
    """Times, durations, costs and token counts are finite and not negative."""
    if ctx.trusted:  # the decoder enforced ranges; JSON has no NaN or infinity
        return
    g = ctx.graph
    cols = (
        ("t", g.t),
        ("dur", g.dur),
        ("cost", g.cost),
        ("tokens_in", g.tokens_in),
        ("tokens_out", g.tokens_out),
    )

    def found() -> Iterator[Problem]:
        for name, arr in cols:
            bad = (arr < 0) if arr.dtype.kind == "i" else ~np.isfinite(arr) | (arr < 0)
            if not bad.any():
                continue
            for i in np.flatnonzero(bad).tolist():
                value = arr[i].item()
                negative = value < 0
                yield Problem(
                    "negative-value" if negative else "non-finite",
                    f"{name} is {'negative' if negative else 'not a finite number:'} {value!r}",
                    f"record {name} as a finite number >= 0"
                    + (" (seconds since the trace start)" if name == "t" else ""),
                    path=_ev(i, name),
                    event_id=g.id_at(i),
                )

    yield from _capped(found(), "negative-value")


def check_edges(ctx: _Ctx) -> Iterator[Problem]:
    """Every edge joins two events that exist."""
    g = ctx.graph
    bad = np.flatnonzero((g.src < 0) | (g.dst < 0))
    if not len(bad):
        return

    def found() -> Iterator[Problem]:
        for k in bad.tolist():
            for end, idx in (("src", g.src[k]), ("dst", g.dst[k])):
                target = g.edge_ref(k, end)
                if idx >= 0 or target in ctx.known_ids:
                    continue
                yield Problem(
                    "dangling-edge",
                    f"edge points to unknown event {_short(str(target))!r}",
                    f"add an event with id {_short(str(target))!r} or remove the edge"
                    + (
                        " (a truncated trace may lack it: validate with --partial)"
                        if ctx.truncated and not ctx.partial
                        else ""
                    ),
                    path=f"$.edges[{k}].{end}",
                    severity="warning" if ctx.cut_off else "error",
                )

    yield from _capped(found(), "dangling-edge")


def check_acyclic(ctx: _Ctx) -> Iterator[Problem]:
    """The edges form a DAG: no event depends on itself, directly or through others."""
    g = ctx.graph
    cycle = g.find_cycle()
    if cycle is None:
        return
    names = " -> ".join(repr(_short(g.id_at(i), 40)) for i in cycle[:8])
    if len(cycle) > 8:
        names += " -> ..."
    yield Problem(
        "causal-cycle",
        f"causal cycle through events {names}",
        "remove or reverse one edge of the cycle: an event cannot depend on itself",
        path=_ev(cycle[0]),
        event_id=g.id_at(cycle[0]),
    )


def check_spawns(ctx: _Ctx) -> Iterator[Problem]:
    """A ``return`` comes from a spawned agent; a child acts no earlier than its spawn."""
    g = ctx.graph
    is_spawn = g.type_code == _SPAWN
    for i in np.flatnonzero(is_spawn & (g.to_code < 0)).tolist():
        yield Problem(
            "missing-field",
            "spawn event has no `to` (the spawned agent)",
            "set `to` to the id of the new agent",
            path=_ev(i, "to"),
            event_id=g.id_at(i),
        )
    names = g.names
    n_names = len(g.names)
    spawned_at = np.full(n_names, np.inf)
    sp = np.flatnonzero(is_spawn & (g.to_code >= 0))
    np.minimum.at(spawned_at, g.to_code[sp], g.t[sp])

    def found() -> Iterator[Problem]:
        ret_idx = np.flatnonzero(g.type_code == _RETURN)
        orphan = ret_idx[~np.isfinite(spawned_at[g.agent_code[ret_idx]])]
        for i in orphan.tolist():
            agent = names[g.agent_code[i]]
            yield Problem(
                "return-without-spawn",
                f"agent {_short(agent)!r} returns but no spawn event creates it",
                f"add a spawn event (to={_short(agent)!r}) before it, or record a message instead",
                path=_ev(i),
                event_id=g.id_at(i),
            )
        if not len(sp):
            return
        acting = np.flatnonzero(g.type_code != _TOOL_RESULT)
        limit = spawned_at[g.agent_code[acting]]
        early = acting[np.isfinite(limit) & (g.t[acting] < limit - _EPS)]
        reported: set[int] = set()
        for i in early.tolist():
            c = int(g.agent_code[i])
            if c in reported:
                continue
            reported.add(c)
            mine = sp[g.to_code[sp] == c]
            s = int(mine[np.argmin(g.t[mine])])
            yield Problem(
                "event-before-spawn",
                f"agent {_short(names[c])!r} acts at t={g.t[i]} before its spawn "
                f"({_short(g.id_at(s))!r} at t={g.t[s]})",
                "fix the timestamps, or move the spawn event earlier",
                path=_ev(i, "t"),
                event_id=g.id_at(i),
            )

    yield from _capped(found(), "return-without-spawn")


def check_edge_times(ctx: _Ctx) -> Iterator[Problem]:
    """Warn when an edge's destination starts before its source starts (effect before cause)."""
    g = ctx.graph
    ok = (g.src >= 0) & (g.dst >= 0)
    src, dst = g.src[ok], g.dst[ok]
    back = np.flatnonzero(g.t[dst] < g.t[src] - _EPS)
    if not len(back):
        return
    where = np.flatnonzero(ok)[back]

    def found() -> Iterator[Problem]:
        for k in where.tolist():
            yield Problem(
                "edge-backwards-in-time",
                f"{_short(g.edge_ref(k, 'dst'))!r} starts before {_short(g.edge_ref(k, 'src'))!r}, "
                "which it depends on",
                "check the timestamps of both events or the edge direction",
                path=f"$.edges[{k}]",
                severity="warning",
            )

    yield from _capped(found(), "edge-backwards-in-time")


def check_totals(ctx: _Ctx) -> Iterator[Problem]:
    """Costs, rewards and metrics are finite numbers; costs are not negative."""
    tr = ctx.trace
    for key in ("tokens", "wall_clock_s"):
        if key not in tr.costs:
            yield Problem(
                "missing-cost",
                f"costs has no {key!r}",
                f"record costs.{key} (the public schema requires it)",
                path="$.costs",
                severity="warning",
            )
    for section, values, nonneg in (
        ("costs", tr.costs, True),
        ("rewards", tr.rewards, False),
        ("metrics", tr.metrics, False),
    ):
        for key, value in values.items():
            if (
                not isinstance(value, int | float)
                or isinstance(value, bool)
                or not math.isfinite(value)
            ):
                yield Problem(
                    "non-finite",
                    f"{section}.{_short(key)} is {_short(repr(value))}",
                    "record a finite number",
                    path=f"$.{section}.{_short(key)}",
                )
            elif nonneg and value < 0:
                yield Problem(
                    "negative-value",
                    f"costs.{_short(key)} is negative ({value})",
                    "record costs as numbers >= 0",
                    path=f"$.costs.{_short(key)}",
                )


def check_partial(ctx: _Ctx) -> Iterator[Problem]:
    """A trace whose recording was cut off says so (``meta.partial``)."""
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


#: The checks ``check_trace`` runs, in order.
CHECKS: tuple[Callable[[_Ctx], Iterator[Problem]], ...] = (
    check_header,
    check_nonempty,
    check_fields,
    check_ids,
    check_numbers,
    check_edges,
    check_acyclic,
    check_spawns,
    check_edge_times,
    check_totals,
    check_partial,
)


#: Checks of orchestrace's own rules on the events' meaning, beyond any file format's schema:
#: for an imported trace their errors are ``"semantic"`` problems (listed, not fatal).
SEMANTIC_CHECKS: frozenset[Callable[[_Ctx], Iterator[Problem]]] = frozenset(
    {check_ids, check_edges, check_acyclic, check_spawns, check_edge_times, check_totals}
)


#: Extra check levels of :func:`check_trace`: name -> ``"module:function"`` (or the function)
#: giving the problems of a trace. Resolved only when asked for, so this module never imports
#: the layers above it: ``security`` is the trace audit of :mod:`orchestrace.safety.audit`.
LEVELS: dict[str, str | Callable[[Trace], list[Problem]]] = {
    "security": "orchestrace.safety.audit:audit_trace",
}


def _level_checker(level: str) -> Callable[[Trace], list[Problem]]:
    found = LEVELS.get(level)
    if found is None:
        raise ConfigError(
            f"unknown check level {level!r}; use one of: {', '.join(sorted(LEVELS))} "
            "(or leave level out for the format rules alone)"
        )
    if isinstance(found, str):
        import importlib

        module, _, name = found.partition(":")
        fn: Callable[[Trace], list[Problem]] = getattr(importlib.import_module(module), name)
        return fn
    return found


def check_trace(
    trace: Trace,
    *,
    partial: bool = False,
    known_ids: Iterable[str] = (),
    imported: bool = False,
    level: str | None = None,
) -> list[Problem]:
    """Run every check on ``trace``; return the problems found (errors, then warnings).

    Args:
        trace: The trace.
        partial: Accept a truncated recording (``meta.partial``): its truncation, a missing
            first event and edges to events never written become warnings. A complete trace
            is checked in full either way.
        known_ids: Ids of events that exist but were dropped (edges to them are not dangling).
        imported: The trace was imported from a format with its own schema (the survey
            schema, OTel...): errors of :data:`SEMANTIC_CHECKS` become ``"semantic"`` problems.
        level: Also run the checks of a :data:`LEVELS` entry: ``"security"`` adds the trace
            audit (spoofed senders, capabilities, taint, forged aggregates and answers) once
            the trace passes the format rules.

    Returns:
        Problems, each naming the place and the fix. Empty for a good trace.

    Raises:
        ConfigError: An unknown ``level``.
    """
    audit = None if level is None else _level_checker(level)
    out = _run(_Ctx(trace, partial=partial, known_ids=frozenset(known_ids), imported=imported))
    if audit is not None and not any(p.severity == "error" for p in out):
        out.extend(audit(trace))
    return out


def check_graph(
    graph: TraceGraph, header: Trace | None = None, *, partial: bool = False
) -> list[Problem]:
    """Run the checks on a columnar graph (e.g. from :func:`~orchestrace.io.read_graph`).

    Args:
        graph: The compiled trace.
        header: A trace holding the header fields (its events are ignored), when known.
        partial: As in :func:`check_trace`.
    """
    head = header if header is not None else Trace(trace_id="?", task_id="?", events=())
    ctx = _Ctx(head, partial=partial, _graph=graph, graph_only=True)
    return _run(ctx)


def _run(ctx: _Ctx) -> list[Problem]:
    out: list[Problem] = []
    for check in CHECKS:
        try:
            found = list(check(ctx))
        except (
            AttributeError,
            TypeError,
            ValueError,
            KeyError,
        ) as err:  # a field of the wrong type
            found = [
                Problem(
                    "invalid-value",
                    f"{check.__name__} could not run: {_short(str(err), 200)}",
                    "check field types against `orchestrace schema`",
                )
            ]
        if ctx.imported and check in SEMANTIC_CHECKS:
            found = [replace(p, severity="semantic") if p.severity == "error" else p for p in found]
        out.extend(found)
        if check is check_fields and any(p.severity == "error" for p in found):
            break  # the other checks need well-typed fields
    out.sort(key=lambda p: _RANK[p.severity])
    return out


_RANK = {"error": 0, "semantic": 1, "warning": 2}


def is_valid(trace: Trace, *, partial: bool = False) -> bool:
    """``True`` when :func:`check_trace` finds no errors (warnings allowed)."""
    return not any(p.severity == "error" for p in check_trace(trace, partial=partial))


def validate(trace: Trace, *, partial: bool = False, source: str | None = None) -> Trace:
    """Return ``trace`` unchanged when valid.

    Raises:
        TraceValidationError: Listing every error found.
    """
    problems = check_trace(trace, partial=partial)
    if any(p.severity == "error" for p in problems):
        raise TraceValidationError(problems, source=source)
    return trace


# ---------------------------------------------------------------------- structural path
_MSG = re.compile(r"^(?P<msg>.*?)(?: - at `(?P<path>\$[^`]*)`)?$", re.S)
_FIELD = re.compile(r"`([^`]*)`")
_BOUND = re.compile(r"^Expected `(\w+)` (<=|>=|<|>) (\S+)$")
_EVENT_INDEX = re.compile(r"\$\.events\[(\d+)\]")
_EDGE_INDEX = re.compile(r"\$\.edges\[(\d+)\]")


def _clip(text: str, limit: int = 300) -> str:
    text = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    if len(text) > limit:
        text = f"{text[: limit // 2]}...({len(text)} chars)...{text[-limit // 4 :]}"
    return text


def _enum_for(path: str) -> type[Any] | None:
    if path.endswith(".decision"):
        return Decision
    if path.endswith(".topology"):
        return Topology
    if path.endswith(".type"):
        return EdgeType if "$.edges[" in path else EventType
    return None


def problem_from_msgspec(err: Exception, prefix: str, *, where: str = "event") -> Problem:
    """Turn a msgspec validation message into a :class:`Problem` with a fix."""
    m = _MSG.match(str(err))
    msg = (m.group("msg") if m else str(err)).strip()
    sub = (m.group("path") or "$") if m else "$"
    path = prefix + sub[1:]
    names = _FIELD.findall(msg)
    if msg.startswith("Object missing required field") and names:
        required = {
            "event": "id, t, type and agent",
            "edge": "src, dst and type",
            "trace": "trace_id, task_id and events",
        }.get(where, "")
        return Problem(
            "missing-field",
            f"missing required field `{names[0]}`",
            f"add `{names[0]}` (every {where} needs {required})",
            path=path,
        )
    if msg.startswith("Object contains unknown field") and names:
        home = "attrs" if where == "event" else "meta"
        return Problem(
            "unknown-field",
            f"unknown field `{_clip(names[0], 60)}`",
            f"remove it, or move it under `{home}`",
            path=path,
        )
    if msg.startswith("Invalid enum value"):
        enum = _enum_for(path)
        value = msg[len("Invalid enum value") :].strip()
        what = "event type" if enum is EventType else "edge type" if enum is EdgeType else "value"
        choices = (
            f"use one of: {', '.join(str(x) for x in enum)}" if enum else "see `orchestrace schema`"
        )
        return Problem(
            "unknown-type" if enum in (EventType, EdgeType) else "unknown-value",
            f"unknown {what} {_clip(value, 80)}",
            choices,
            path=path,
        )
    if msg.startswith("Number out of range"):
        return Problem(
            "out-of-range",
            "number out of range (beyond the largest float)",
            "record a finite number",
            path=path,
        )
    bound = _BOUND.match(msg)
    if bound:
        kind, op, limit = bound.groups()
        kind = {"int": "an integer", "float": "a number", "str": "a string"}.get(kind, kind)
        if limit == str(MAX_INT):
            limit = f"{limit} (2^63-1)"
        return Problem(
            "out-of-range",
            f"value out of range: expected {kind} {op} {limit}",
            f"record {kind} {op} {limit}",
            path=path,
        )
    if msg.startswith("Expected") and len(names) >= 2:
        return Problem(
            "wrong-type",
            f"expected {names[0]}, got {names[1]}",
            f"make the value a {names[0]}",
            path=path,
        )
    return Problem(
        "invalid-value", _clip(msg), "see `orchestrace schema` for the expected form", path=path
    )


@dataclass
class _Converted:
    """Items that converted, where each sat in the document, and what was dropped."""

    good: list[Any] = field(default_factory=list)
    index: list[int] = field(default_factory=list)
    bad_ids: list[str] = field(default_factory=list)
    bad_targets: set[str] = field(default_factory=set)


def _convert_each(
    items: list[Any], kind: type[Any], prefix: str, where: str, problems: list[Problem]
) -> _Converted:
    out = _Converted()
    for i, item in enumerate(items):
        try:
            out.good.append(msgspec.convert(item, kind))
            out.index.append(i)
        except msgspec.ValidationError as err:
            problems.append(problem_from_msgspec(err, f"{prefix}[{i}]", where=where))
            if isinstance(item, dict):
                if isinstance(item.get("id"), str):
                    out.bad_ids.append(item["id"])
                if isinstance(item.get("to"), str):
                    out.bad_targets.add(item["to"])
    return out


def _renumber(problem: Problem, events: list[int], edges: list[int]) -> Problem:
    """Point a problem found on the salvaged trace at the document's own indices."""

    def fix(text: str) -> str:
        text = _EVENT_INDEX.sub(lambda m: f"$.events[{events[int(m.group(1))]}]", text)
        return _EDGE_INDEX.sub(lambda m: f"$.edges[{edges[int(m.group(1))]}]", text)

    if "$.events[" not in problem.path + problem.message and "$.edges[" not in problem.path:
        return problem
    return replace(problem, path=fix(problem.path), message=fix(problem.message))


def _knock_on(problem: Problem, trace: Trace, dropped_targets: set[str]) -> bool:
    """Whether ``problem`` only follows from a malformed spawn (or other event) being dropped."""
    if problem.code not in ("return-without-spawn", "event-before-spawn") or not dropped_targets:
        return False
    m = _EVENT_INDEX.match(problem.path)
    if m is None or int(m.group(1)) >= len(trace.events):
        return False
    return trace.events[int(m.group(1))].agent in dropped_targets


def check_structure(
    obj: Any, *, partial: bool = False, semantic: bool = True
) -> tuple[Trace | None, list[Problem]]:
    """Check a decoded JSON value that did not decode as a :class:`Trace`.

    Reports every structural problem (one per bad event or edge), then, with ``semantic``,
    runs :func:`check_trace` on the events and edges that were well formed.

    Returns:
        ``(trace, problems)``: the salvaged trace (``None`` when the top level is unusable)
        and every problem found.
    """
    problems: list[Problem] = []
    if not isinstance(obj, dict):
        kind = type(obj).__name__
        return None, [
            Problem(
                "not-an-object",
                f"top-level JSON value is a {kind}, not an object",
                "a trace file holds one JSON object; store many traces as JSONL",
                path="$",
            )
        ]
    events_raw = obj.get("events")
    edges_raw = obj.get("edges", [])
    for name, value in (("events", events_raw), ("edges", edges_raw)):
        if value is not None and not isinstance(value, list):
            problems.append(
                Problem(
                    "wrong-type",
                    f"{name} is a {type(value).__name__}, not an array",
                    f"make `{name}` a JSON array",
                    path=f"$.{name}",
                )
            )
    if events_raw is None:
        problems.append(
            Problem(
                "missing-field",
                "missing required field `events`",
                "add `events` (every trace needs trace_id, task_id and events)",
                path="$",
            )
        )
    events_list = events_raw if isinstance(events_raw, list) else []
    edges_list = edges_raw if isinstance(edges_raw, list) else []
    ev = _convert_each(events_list, Event, "$.events", "event", problems)
    ed = _convert_each(edges_list, Edge, "$.edges", "edge", problems)
    events, bad_ids = ev.good, ev.bad_ids
    edges = ed.good
    head = {k: v for k, v in obj.items() if k not in ("events", "edges")}
    header: Trace | None = None
    try:
        header = msgspec.convert({**head, "events": [], "edges": []}, Trace)
    except msgspec.ValidationError as err:
        problems.append(problem_from_msgspec(err, "$", where="trace"))
    if header is None:
        return None, problems
    trace = header.replace(events=tuple(events), edges=tuple(edges))._mark_decoded()
    if semantic:
        found = check_trace(trace, partial=partial, known_ids=bad_ids)
        if events_list:  # events exist, they were just malformed
            found = [p for p in found if p.code != "no-events"]
        found = [p for p in found if not _knock_on(p, trace, ev.bad_targets)]
        problems.extend(_renumber(p, ev.index, ed.index) for p in found)
    problems.sort(key=lambda p: p.severity != "error")
    return trace, problems
