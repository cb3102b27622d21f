"""Checking and compiling a dataset's traces column-wise, without event objects.

:func:`scan_parquet` is the columnar twin of :func:`~orchestrace.io.parquet.parse_parquet`:
the same checks in the same order with the same messages (types and ranges of every column,
grouping by trace, the ``traces`` rows, ``attrs`` as JSON objects, then the rules of
:func:`~orchestrace.trace.check.check_graph`), but each trace arrives as a compiled
:class:`~orchestrace.trace.graph.TraceGraph` built from Arrow columns. Only the non-null
``attrs`` values are decoded one by one (they are what the rule is about); nothing else
becomes a Python object per event, so ``orchestrace validate`` and ``orchestrace analyze`` of
a dataset cost about as much as reading its tables.

Example:
    >>> import tempfile, os
    >>> from orchestrace.io.parquet import write_parquet
    >>> from orchestrace.trace.generate import generate_trace
    >>> path = os.path.join(tempfile.mkdtemp(), "run.parquet")
    >>> write_parquet([generate_trace(agents=3, steps=20, seed=1)], path)
    >>> [(s.label == s.header.trace_id, s.graph.n, s.problems) for s in scan_parquet(path)]
    [(True, 20, [])]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from orchestrace.errors import Problem, TraceFormatError
from orchestrace.io._columnar import from_batches
from orchestrace.io.parquet._check import (
    _EDGE_KINDS,
    _EDGE_MEMBERS,
    _EVENT_KINDS,
    _EVENT_MEMBERS,
    _REWRITE,
    _json_object,
    _located,
    _value_problems,
    header_of,
)
from orchestrace.io.parquet._layout import _pa
from orchestrace.io.parquet._read import _no_traces, read_tables, read_token_tables
from orchestrace.trace.graph import TraceGraph
from orchestrace.trace.model import Trace
from orchestrace.trace.tokens import TOKENS_KEY

__all__ = ["ScannedTrace", "scan_parquet"]

#: Event columns the graph and the checks read (``from``, ``content``, ``content_ref`` and
#: ``trusted`` have their types checked from the schema and are otherwise not needed).
GRAPH_COLUMNS = [
    "id",
    "t",
    "dur",
    "type",
    "agent",
    "to",
    "role",
    "tool",
    "decision",
    "step",
    "tokens_in",
    "tokens_out",
    "cost",
    "error",
    "attrs",
]


@dataclass
class ScannedTrace:
    """One trace of a dataset, checked and compiled from its columns.

    Attributes:
        label: The trace id (``#k`` for a row without a usable one).
        header: The trace's header fields as an event-less trace (``None`` when unusable).
        graph: The compiled graph, ``None`` when a value of the trace is bad.
        problems: As :func:`~orchestrace.io.parquet.parse_parquet` reports them.
        n_events: Rows of the trace in ``events.parquet``.
        n_errors: Events of the trace that record an ``error``.
    """

    label: str
    header: Trace | None
    graph: TraceGraph | None
    problems: list[Problem] = field(default_factory=list)
    n_events: int = 0
    n_errors: int = 0


def scan_parquet(
    path: Any,
    *,
    partial: bool = False,
    check: bool = True,
    all_columns: bool = True,
    trace_id: str | None = None,
) -> Iterator[ScannedTrace]:
    """Check every trace of a dataset column-wise and compile its graph.

    Reports exactly what :func:`~orchestrace.io.parquet.parse_parquet` reports (with
    ``check``, the problems of ``check_trace``), raising the same errors for a damaged
    dataset, but builds no event objects.

    Args:
        path: The dataset directory.
        partial: Accept truncated recordings (see :func:`~orchestrace.trace.check.check_trace`).
        check: Also run :func:`~orchestrace.trace.check.check_graph` on each trace.
        all_columns: Read every event column, so that a damaged column is reported even
            when no check reads it (``False`` reads only what the graph needs).
        trace_id: Only this trace (the dataset-wide checks still run).

    Yields:
        One :class:`ScannedTrace` per trace, in the order written.

    Raises:
        TraceFormatError: Not a dataset, unreadable, a column missing or of the wrong kind,
            or the tables disagree on how many events and edges each trace has.
    """
    pa, _ = _pa()
    import pyarrow.compute as pc

    from orchestrace.trace.check import check_graph

    events, edges, traces = read_tables(path, columns=None if all_columns else GRAPH_COLUMNS)
    src = str(path)
    tokens = read_token_tables(path)
    ev_found = _value_problems(events, _EVENT_KINDS, "events", _EVENT_MEMBERS)
    ed_found = _value_problems(edges, _EDGE_KINDS, "edges", _EDGE_MEMBERS)
    rows = traces.to_pylist()
    if not rows:
        raise _no_traces(src)
    counts = [(r["n_events"], r["n_edges"]) for r in rows]
    if any(not isinstance(a, int) or not isinstance(b, int) or a < 0 or b < 0 for a, b in counts):
        raise TraceFormatError(
            src, "traces.parquet", "n_events and n_edges must be counts >= 0", _REWRITE
        )
    if sum(a for a, _ in counts) != events.num_rows or sum(b for _, b in counts) != edges.num_rows:
        raise TraceFormatError(
            src,
            "traces.parquet",
            "n_events/n_edges do not match the rows of events.parquet/edges.parquet",
            _REWRITE,
        )
    ev_tid = events.column("trace_id")
    ed_tid = edges.column("trace_id")
    for k, row in enumerate(rows):
        n_ev, n_ed = row["n_events"], row["n_edges"]
        tid = row["trace_id"]
        ev_pos, ed_pos = sum(a for a, _ in counts[:k]), sum(b for _, b in counts[:k])
        if not _all_equal(pc, pa, ev_tid.slice(ev_pos, n_ev), tid) or not _all_equal(
            pc, pa, ed_tid.slice(ed_pos, n_ed), tid
        ):
            raise TraceFormatError(
                src, "events.parquet", "events or edges are not grouped by trace", _REWRITE
            )
    ev_pos = ed_pos = 0
    for k, row in enumerate(rows):
        n_ev, n_ed = row["n_events"], row["n_edges"]
        label = row["trace_id"] if isinstance(row["trace_id"], str) else f"#{k}"
        if trace_id is not None and label != trace_id:
            ev_pos += n_ev
            ed_pos += n_ed
            continue
        header, problems = header_of(row)
        if header is not None and row["trace_id"] in tokens:
            header = header.replace(meta={**header.meta, TOKENS_KEY: tokens[row["trace_id"]]})
        problems += _located(ev_found, ev_pos, ev_pos + n_ev)
        problems += _located(ed_found, ed_pos, ed_pos + n_ed)
        ev = events.slice(ev_pos, n_ev)
        problems += _attrs_problems(pc, ev.column("attrs"))
        n_errors = n_ev - ev.column("error").null_count
        graph: TraceGraph | None = None
        if header is not None and not problems:
            cols = {c: ev.column(c) for c in GRAPH_COLUMNS if c not in ("error", "attrs")}
            ed = edges.slice(ed_pos, n_ed)
            try:
                graph = from_batches(
                    [cols],
                    [{c: ed.column(c) for c in ("src", "dst", "type")}],
                    n_events=n_ev,
                    n_edges=n_ed,
                )
            except ValueError as err:  # every value was checked above: a number too large
                raise TraceFormatError(
                    src, "events.parquet", str(err), "fix the values or rewrite the dataset"
                ) from None
            if check:
                problems += check_graph(graph, header, partial=partial)
        yield ScannedTrace(label, header, graph, problems, n_ev, n_errors)
        ev_pos += n_ev
        ed_pos += n_ed


def _all_equal(pc: Any, pa: Any, column: Any, value: Any) -> bool:
    """Every row of ``column`` holds ``value`` (``None``: every row is null)."""
    if len(column) == 0:
        return True
    if value is None:
        return bool(column.null_count == len(column))
    same = pc.equal(pc.cast(column, pa.string()), pa.scalar(value, pa.string()))
    return bool(pc.all(pc.fill_null(same, False)).as_py())


def _attrs_problems(pc: Any, column: Any) -> list[Problem]:
    """``attrs`` values that are not JSON objects; only the non-null ones are decoded."""
    if column.null_count == len(column):
        return []
    valid = pc.is_valid(column).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(valid)
    texts = pc.filter(column, pc.is_valid(column)).to_pylist()
    out = []
    for i, text in zip(rows.tolist(), texts, strict=True):
        _, problem = _json_object(text, f"$.events[{i}].attrs")
        if problem is not None:
            out.append(problem)
    return out
