"""``check_trace``: every rule a trace must follow, as small public ``check_*`` functions.

Each check is callable alone, like the checks of Gymnasium's environment checker::

    check_ids(trace, *, partial=False, known_ids=(), graph=None) -> list[Problem]

and returns :class:`~orchestrace.errors.Problem` records that name the place (JSON path and
event id) and the fix; a good trace gives ``[]``, not even warnings. Every check takes the same
keywords, used by those it concerns: ``partial`` accepts a recording cut off before it closed
(``meta.partial``), ``known_ids`` names events that exist but were dropped, and ``graph`` checks
a compiled graph (a Parquet dataset's, say) with ``trace`` supplying only the header fields.
:func:`check_trace` runs :data:`CHECKS` in order, stopping after :func:`check_fields` when the
fields are malformed (the rules after it read them). Checks are vectorised over the compiled
graph, so a 1,000,000-event trace is checked in well under a second.

Malformed data always yields problems, never an exception: a trace built in Python (whose
constructor checks nothing) gets its field types checked by :func:`check_fields`. An exception
escaping a check is therefore a bug in the check, and the runner raises it as a
:class:`CheckInternalError` naming the check, never as a problem of the user's trace.

Documents that do not decode as a trace at all go through
:func:`orchestrace.trace.diagnose.check_structure`.

The rules live in two private modules by what they read: ``_check_records`` (the header,
the records' fields, totals, truncation) and ``_check_graph`` (ids, numbers, edges, cycles,
spawns and times on the compiled graph); this module orders them and is their public home.

Example:
    >>> from orchestrace import Edge, EdgeType
    >>> from orchestrace.trace.build import TraceBuilder
    >>> b = TraceBuilder(task_id="demo")
    >>> a = b.add("message", "lead", to="w1")
    >>> tr = b.build()
    >>> check_trace(tr)
    []
    >>> bad = tr.replace(edges=(*tr.edges, Edge("e1", "e9", EdgeType.CAUSAL)))
    >>> print(check_trace(bad)[0])
    $.edges[0].dst: edge points to unknown event 'e9'; add an event with id 'e9' or remove the edge
    >>> check_edges(bad, known_ids=["e9"])
    []
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import replace

from orchestrace.errors import (
    ConfigError,
    OrchestraceError,
    Problem,
    TraceValidationError,
    _short,
)
from orchestrace.trace._check_base import Check
from orchestrace.trace._check_graph import (
    check_acyclic,
    check_edge_times,
    check_edges,
    check_ids,
    check_numbers,
    check_spawns,
)
from orchestrace.trace._check_records import (
    check_fields,
    check_header,
    check_nonempty,
    check_partial,
    check_totals,
)
from orchestrace.trace.graph import TraceGraph
from orchestrace.trace.model import Trace

__all__ = [
    "CHECKS",
    "LEVELS",
    "SEMANTIC_CHECKS",
    "Check",
    "CheckInternalError",
    "check_acyclic",
    "check_edge_times",
    "check_edges",
    "check_fields",
    "check_graph",
    "check_header",
    "check_ids",
    "check_nonempty",
    "check_numbers",
    "check_partial",
    "check_spawns",
    "check_totals",
    "check_trace",
    "is_valid",
    "validate",
]


class CheckInternalError(RuntimeError):
    """A check failed with an exception: a bug in orchestrace, not a problem of the trace.

    Malformed traces get problems, never exceptions; this error names the check that broke so
    the failure can be reported. ``__cause__`` holds the original exception.

    Attributes:
        check: Name of the check that failed.
    """

    def __init__(self, check: str, err: BaseException) -> None:
        self.check = check
        super().__init__(
            f"internal error in {check}: {type(err).__name__}: {_short(str(err), 200)}; "
            "this is a bug in orchestrace, not a problem of the trace: please report it "
            "(with the trace, or how it was made) to the orchestrace issue tracker"
        )


#: The checks ``check_trace`` runs, in order.
CHECKS: tuple[Check, ...] = (
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
SEMANTIC_CHECKS: frozenset[Check] = frozenset(
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
        ConfigError: An unknown ``level``, or ``trace`` is not a Trace.
        CheckInternalError: A check failed with an exception (a bug in orchestrace).
    """
    if not isinstance(trace, Trace):
        raise ConfigError(
            f"check_trace takes a Trace, not a {type(trace).__name__}; read one with "
            "orchestrace.io.load or build one with TraceBuilder"
        )
    audit = None if level is None else _level_checker(level)
    out = _run(trace, partial=partial, known_ids=frozenset(known_ids), imported=imported)
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

    Returns:
        Problems, as :func:`check_trace` gives them.

    Raises:
        CheckInternalError: A check failed with an exception (a bug in orchestrace).
    """
    head = header if header is not None else Trace(trace_id="?", task_id="?", events=())
    return _run(head, partial=partial, graph=graph)


def _run(
    trace: Trace,
    *,
    partial: bool = False,
    known_ids: frozenset[str] = frozenset(),
    imported: bool = False,
    graph: TraceGraph | None = None,
) -> list[Problem]:
    out: list[Problem] = []
    for check in CHECKS:
        try:
            found = check(trace, partial=partial, known_ids=known_ids, graph=graph)
        except (OrchestraceError, MemoryError, RecursionError):
            raise  # raised on purpose, or the machine's limits: not a bug of the check
        except Exception as err:
            # malformed data yields problems, so an exception is a bug inside the check
            raise CheckInternalError(check.__name__, err) from err
        if imported and check in SEMANTIC_CHECKS:
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
