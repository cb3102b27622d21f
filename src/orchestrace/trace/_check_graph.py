"""The format checks on a trace's compiled graph: ids, numbers, edges, cycles, spawns, times.

These rules read the columns of the :class:`~orchestrace.trace.graph.TraceGraph` (the
trace's own, or a Parquet dataset's), vectorised, so a 1,000,000-event trace is checked in well
under a second. They read well-typed fields: :func:`~orchestrace.trace.check.check_trace`
runs :func:`~orchestrace.trace.check.check_fields` before them, and one called alone on a
trace whose fields are malformed returns check_fields' errors instead of failing. Public
through :mod:`orchestrace.trace.check`.

Example:
    >>> from orchestrace.trace.model import Event, Trace
    >>> e = Event(id="e1", t=0.0, type="message", agent="a")
    >>> [p.code for p in check_ids(Trace(trace_id="t1", task_id="demo", events=(e, e)))]
    ['duplicate-id']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from orchestrace.errors import Problem, _short
from orchestrace.trace._check_base import (
    EPS,
    RETURN,
    SPAWN,
    TOOL_RESULT,
    Ctx,
    capped,
    ev_path,
    run_alone,
)
from orchestrace.trace._check_records import check_fields
from orchestrace.trace.graph import TraceGraph
from orchestrace.trace.model import Trace

__all__ = [
    "check_acyclic",
    "check_edge_times",
    "check_edges",
    "check_ids",
    "check_numbers",
    "check_spawns",
]


def _alone(
    rule: Callable[[Ctx], Iterator[Problem]],
    trace: Trace,
    partial: bool,
    known_ids: Iterable[str],
    graph: TraceGraph | None,
) -> list[Problem]:
    """Run ``rule`` alone; when it fails on malformed fields, those fields are the problems."""
    try:
        return run_alone(rule, trace, partial, known_ids, graph)
    except Exception:
        found = [p for p in check_fields(trace, graph=graph) if p.severity == "error"]
        if found:
            return found
        raise  # the fields are fine: the failure is the rule's own


#: Rows per slice where a check compares whole columns: its scratch memory stays a few
#: megabytes however long the trace (whole-column temporaries took 29 and 34 bytes per event).
_SLICE = 1 << 20


def _early_events(g: TraceGraph, spawned_at: np.ndarray) -> Iterator[int]:
    """Indices, in order, of events (not tool results) before their agent's first spawn."""
    for lo in range(0, len(g.t), _SLICE):
        part = slice(lo, lo + _SLICE)
        limit = spawned_at[g.agent_code[part]]
        early = (g.type_code[part] != TOOL_RESULT) & np.isfinite(limit)
        early &= g.t[part] < limit - EPS
        yield from (np.flatnonzero(early) + lo).tolist()


def check_ids(
    trace: Trace,
    *,
    partial: bool = False,
    known_ids: Iterable[str] = (),
    graph: TraceGraph | None = None,
) -> list[Problem]:
    """Event ids are unique.

    Example:
        >>> from orchestrace import Edge, Event, Trace
        >>> e = Event(id="e1", t=0.0, type="message", agent="a")
        >>> print(check_ids(Trace(trace_id="t1", task_id="demo", events=(e, e)))[0])
        $.events[1].id: duplicate event id 'e1' (first used at $.events[0]); give every event ...
    """
    return _alone(_ids, trace, partial, known_ids, graph)


def _ids(ctx: Ctx) -> Iterator[Problem]:
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
                    path=ev_path(i, "id"),
                    event_id=k,
                )

    yield from capped(dups(), "duplicate-id")


def check_numbers(
    trace: Trace,
    *,
    partial: bool = False,
    known_ids: Iterable[str] = (),
    graph: TraceGraph | None = None,
) -> list[Problem]:
    """Times, durations, costs and token counts are finite and not negative.

    Example:
        >>> from orchestrace import Edge, Event, Trace
        >>> e = Event(id="e1", t=-1.0, type="message", agent="a")
        >>> [p.code for p in check_numbers(Trace(trace_id="t1", task_id="demo", events=(e,)))]
        ['negative-value']
    """
    return _alone(_numbers, trace, partial, known_ids, graph)


def _numbers(ctx: Ctx) -> Iterator[Problem]:
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
                    path=ev_path(i, name),
                    event_id=g.id_at(i),
                )

    yield from capped(found(), "negative-value")


def check_edges(
    trace: Trace,
    *,
    partial: bool = False,
    known_ids: Iterable[str] = (),
    graph: TraceGraph | None = None,
) -> list[Problem]:
    """Every edge joins two events that exist.

    Edges to ``known_ids`` (events that exist but were dropped) are not dangling; with
    ``partial``, a truncated trace's edges to events never written are warnings.

    Example:
        >>> from orchestrace import Edge, Event, Trace
        >>> e = Event(id="e1", t=0.0, type="message", agent="a")
        >>> to_e9 = (Edge("e1", "e9", "causal"),)
        >>> tr = Trace(trace_id="t1", task_id="demo", events=(e,), edges=to_e9)
        >>> [p.code for p in check_edges(tr)], check_edges(tr, known_ids=["e9"])
        (['dangling-edge'], [])
    """
    return _alone(_edges, trace, partial, known_ids, graph)


def _edges(ctx: Ctx) -> Iterator[Problem]:
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

    yield from capped(found(), "dangling-edge")


def check_acyclic(
    trace: Trace,
    *,
    partial: bool = False,
    known_ids: Iterable[str] = (),
    graph: TraceGraph | None = None,
) -> list[Problem]:
    """The edges form a DAG: no event depends on itself, directly or through others.

    Example:
        >>> from orchestrace import Edge, Event, Trace
        >>> a, b = (Event(id=k, t=0.0, type="message", agent="a") for k in ("e1", "e2"))
        >>> loop = (Edge("e1", "e2", "causal"), Edge("e2", "e1", "causal"))
        >>> tr = Trace(trace_id="t1", task_id="demo", events=(a, b), edges=loop)
        >>> print(check_acyclic(tr)[0])
        $.events[0]: causal cycle through events 'e1' -> 'e2' -> 'e1'; remove or reverse one ...
    """
    return _alone(_acyclic, trace, partial, known_ids, graph)


def _acyclic(ctx: Ctx) -> Iterator[Problem]:
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
        path=ev_path(cycle[0]),
        event_id=g.id_at(cycle[0]),
    )


def check_spawns(
    trace: Trace,
    *,
    partial: bool = False,
    known_ids: Iterable[str] = (),
    graph: TraceGraph | None = None,
) -> list[Problem]:
    """A ``return`` comes from a spawned agent; a child acts no earlier than its spawn.

    Example:
        >>> from orchestrace import Edge, Event, Trace
        >>> r = Event(id="e1", t=0.0, type="return", agent="w1", to="lead")
        >>> [p.code for p in check_spawns(Trace(trace_id="t1", task_id="demo", events=(r,)))]
        ['return-without-spawn']
    """
    return _alone(_spawns, trace, partial, known_ids, graph)


def _spawns(ctx: Ctx) -> Iterator[Problem]:
    g = ctx.graph
    spawns = np.flatnonzero(g.type_code == SPAWN)
    # only the spawns' targets (not a column of every event), coded after the graph's names
    to, names = g.to_codes_at(spawns)
    for i in spawns[to < 0].tolist():
        yield Problem(
            "missing-field",
            "spawn event has no `to` (the spawned agent)",
            "set `to` to the id of the new agent",
            path=ev_path(i, "to"),
            event_id=g.id_at(i),
        )
    n_names = len(names)
    spawned_at = np.full(n_names, np.inf)
    sp, sp_to = spawns[to >= 0], to[to >= 0]
    del spawns, to
    np.minimum.at(spawned_at, sp_to, g.t[sp])

    def found() -> Iterator[Problem]:
        ret_idx = np.flatnonzero(g.type_code == RETURN)
        orphan = ret_idx[~np.isfinite(spawned_at[g.agent_code[ret_idx]])]
        for i in orphan.tolist():
            agent = names[g.agent_code[i]]
            yield Problem(
                "return-without-spawn",
                f"agent {_short(agent)!r} returns but no spawn event creates it",
                f"add a spawn event (to={_short(agent)!r}) before it, or record a message instead",
                path=ev_path(i),
                event_id=g.id_at(i),
            )
        if not len(sp):
            return
        reported: set[int] = set()
        for i in _early_events(g, spawned_at):
            c = int(g.agent_code[i])
            if c in reported:
                continue
            reported.add(c)
            mine = sp[sp_to == c]
            s = int(mine[np.argmin(g.t[mine])])
            yield Problem(
                "event-before-spawn",
                f"agent {_short(names[c])!r} acts at t={g.t[i]} before its spawn "
                f"({_short(g.id_at(s))!r} at t={g.t[s]})",
                "fix the timestamps, or move the spawn event earlier",
                path=ev_path(i, "t"),
                event_id=g.id_at(i),
            )

    yield from capped(found(), "return-without-spawn")


def check_edge_times(
    trace: Trace,
    *,
    partial: bool = False,
    known_ids: Iterable[str] = (),
    graph: TraceGraph | None = None,
) -> list[Problem]:
    """Warn when an edge's destination starts before its source starts (effect before cause).

    Example:
        >>> from orchestrace import Edge, Event, Trace
        >>> a = Event(id="e1", t=2.0, type="message", agent="a")
        >>> b = Event(id="e2", t=1.0, type="message", agent="b")
        >>> after = (Edge("e1", "e2", "message"),)
        >>> tr = Trace(trace_id="t1", task_id="demo", events=(a, b), edges=after)
        >>> [(p.code, p.severity) for p in check_edge_times(tr)]
        [('edge-backwards-in-time', 'warning')]
    """
    return _alone(_edge_times, trace, partial, known_ids, graph)


def _edge_times(ctx: Ctx) -> Iterator[Problem]:
    g = ctx.graph
    t = g.t
    parts = []
    if len(t):
        for lo in range(0, len(g.src), _SLICE):
            src, dst = g.src[lo : lo + _SLICE], g.dst[lo : lo + _SLICE]
            ok = (src >= 0) & (dst >= 0)  # (a dangling end, -1, is read as 0 and masked out)
            late = t[np.where(ok, src, 0)] - EPS
            parts.append(np.flatnonzero(ok & (t[np.where(ok, dst, 0)] < late)) + lo)
    where = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if not len(where):
        return

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

    yield from capped(found(), "edge-backwards-in-time")
