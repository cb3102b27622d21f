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
from orchestrace.io._columnar import from_batches, string_array
from orchestrace.io.parquet._check import (
    _EDGE_KINDS,
    _EDGE_MEMBERS,
    _EVENT_KINDS,
    _EVENT_MEMBERS,
    _NOT_NULL,
    _REWRITE,
    _TRACE_KINDS,
    _check_dataset,
    _check_schema,
    _json_object,
    _located,
    _value_problems,
    header_of,
    require_utf8,
)
from orchestrace.io.parquet._layout import _FILES, _pa
from orchestrace.io.parquet._read import (
    _GRAPH_COLUMNS,
    _no_traces,
    _read_error,
    read_token_tables,
)
from orchestrace.trace.check import check_graph
from orchestrace.trace.graph import TraceGraph
from orchestrace.trace.model import MAX_INT, Trace
from orchestrace.trace.tokens import TOKENS_KEY

__all__ = ["ScannedTrace", "scan_parquet"]

#: Event columns the graph and the checks read (``from``, ``content``, ``content_ref`` and
#: ``trusted`` have their types checked from the schema and are otherwise not needed).
GRAPH_COLUMNS = [*_GRAPH_COLUMNS, "error", "attrs"]
#: String columns with few distinct values: read as Arrow dictionaries (codes into the row
#: group's distinct values), so that checks and name tables work on the distinct values.
DICTIONARY_COLUMNS = ("trace_id", "type", "agent", "role", "from", "to", "tool", "decision")


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
    dataset, but builds no event objects. The tables are read batch by batch (a row group
    at a time): what stays in memory is the compiled graph of the current trace, about 100
    bytes per event and edge.

    Args:
        path: The dataset directory.
        partial: Accept truncated recordings (see :func:`~orchestrace.trace.check.check_trace`).
        check: Also run :func:`~orchestrace.trace.check.check_graph` on each trace.
        all_columns: Read every event column, so that a damaged column is reported even
            when no check reads it (``False`` reads only what the graph needs).
        trace_id: Only this trace (the dataset-wide checks still run).

    Yields:
        One :class:`ScannedTrace` per trace, in the order written. A damage found while
        streaming raises the error the object reader raises, so collect the traces before
        reporting them when that matters.

    Raises:
        TraceFormatError: Not a dataset, unreadable, a column missing or of the wrong kind,
            or the tables disagree on how many events and edges each trace has.
    """
    pa, pq = _pa()
    import pyarrow.compute as pc  # noqa: PLC0415  pyarrow is heavy: loaded on first use

    p = _check_dataset(path)
    src = str(path)
    try:
        schemas = [pq.read_schema(p / name) for name in _FILES]
        for name, kinds, schema in zip(
            _FILES, (_EVENT_KINDS, _EDGE_KINDS, _TRACE_KINDS), schemas, strict=True
        ):
            _check_schema(schema, kinds, name, src)
        files = [
            pq.ParquetFile(
                p / name,
                pre_buffer=False,
                read_dictionary=[c for c in DICTIONARY_COLUMNS if c in schema.names],
            )
            for name, schema in zip(_FILES[:2], schemas[:2], strict=True)
        ]
        traces = pq.ParquetFile(p / _FILES[2]).read()  # (read_table loads pyarrow.dataset)
    except (pa.ArrowException, OSError) as err:
        raise _read_error(path, "dataset", err) from None
    require_utf8(traces, _FILES[2], src)
    tokens = read_token_tables(path)
    rows = traces.to_pylist()
    if not rows:
        raise _no_traces(src)
    counts = [(r["n_events"], r["n_edges"]) for r in rows]
    if any(not isinstance(a, int) or not isinstance(b, int) or a < 0 or b < 0 for a, b in counts):
        raise TraceFormatError(
            src, "traces.parquet", "n_events and n_edges must be counts >= 0", _REWRITE
        )
    n_rows = [f.metadata.num_rows for f in files]
    if sum(a for a, _ in counts) != n_rows[0] or sum(b for _, b in counts) != n_rows[1]:
        raise TraceFormatError(
            src,
            "traces.parquet",
            "n_events/n_edges do not match the rows of events.parquet/edges.parquet",
            _REWRITE,
        )
    ids = [r["trace_id"] for r in rows]
    for k, f in enumerate(files):
        stream = _Rows(pa, f, ["trace_id"], path, _FILES[k])
        for tid, c in zip(ids, (n[k] for n in counts), strict=True):
            for batch in stream.take(c):
                if not _all_equal(pc, pa, batch.column(0), tid):
                    raise TraceFormatError(
                        src, _FILES[k], "events or edges are not grouped by trace", _REWRITE
                    )
    ev_columns = [n for n in schemas[0].names if all_columns or n in GRAPH_COLUMNS]
    ev_columns = [n for n in ev_columns if n in _EVENT_KINDS]
    if not ev_columns:
        ev_columns.insert(0, "trace_id")
    ev_rows = _Rows(pa, files[0], ev_columns, path, _FILES[0])
    ed_rows = _Rows(pa, files[1], ["src", "dst", "type"], path, _FILES[1])
    ed_lo = 0
    for k, row in enumerate(rows):
        n_ev, n_ed = row["n_events"], row["n_edges"]
        label = row["trace_id"] if isinstance(row["trace_id"], str) else f"#{k}"
        wanted = trace_id is None or label == trace_id
        header, problems = header_of(row)
        if header is not None and row["trace_id"] in tokens:
            header = header.replace(meta={**header.meta, TOKENS_KEY: tokens[row["trace_id"]]})
        ev_found: list[tuple[int, Problem]] = []
        ed_found: list[tuple[int, Problem]] = []
        attrs: list[Problem] = []
        n_errors = [0]

        def events(
            stream: Iterator[Any],
            found: list[tuple[int, Problem]],
            attrs: list[Problem],
            n_errors: list[int],
        ) -> Iterator[dict[str, Any]]:
            pos = 0
            for batch in stream:
                if not _values_ok(pa, pc, batch, _EVENT_KINDS, _EVENT_MEMBERS):
                    bad = _value_problems(batch, _EVENT_KINDS, "events", _EVENT_MEMBERS)
                    _add_at(found, pos, bad)
                attrs += _attrs_problems(pc, batch.column("attrs"), pos)
                n_errors[0] += batch.num_rows - batch.column("error").null_count
                pos += batch.num_rows
                if not found and not attrs:
                    yield {c: batch.column(c) for c in _GRAPH_COLUMNS}

        def edges(
            stream: Iterator[Any], found: list[tuple[int, Problem]]
        ) -> Iterator[dict[str, Any]]:
            pos = 0
            for batch in stream:
                if not _values_ok(pa, pc, batch, _EDGE_KINDS, _EDGE_MEMBERS):
                    bad = _value_problems(batch, _EDGE_KINDS, "edges", _EDGE_MEMBERS)
                    _add_at(found, pos, bad)
                pos += batch.num_rows
                if not found:
                    yield {c: batch.column(c) for c in ("src", "dst", "type")}

        ev_stream = ev_rows.take(n_ev)
        ed_stream = ed_rows.take(n_ed)
        graph: TraceGraph | None = None
        if wanted and header is not None and not problems:
            try:
                graph = from_batches(
                    events(ev_stream, ev_found, attrs, n_errors),
                    edges(ed_stream, ed_found),
                    n_events=n_ev,
                    n_edges=n_ed,
                    edge_refs=_EdgeRefs(pq, p / _FILES[1], ed_lo),
                )
            except ValueError as err:
                if not (ev_found or attrs or ed_found):  # every value was checked: too large
                    raise TraceFormatError(
                        src, "events.parquet", str(err), "fix the values or rewrite the dataset"
                    ) from None
                graph = None
        # what was not read yet (after a bad value, or for a trace not compiled)
        for _ in events(ev_stream, ev_found, attrs, n_errors):
            pass
        for _ in edges(ed_stream, ed_found):
            pass
        ed_lo += n_ed
        if not wanted:
            continue
        problems += _located(ev_found, 0, n_ev)
        problems += _located(ed_found, 0, n_ed)
        problems += attrs
        if problems:
            graph = None
        elif graph is not None and check:
            problems += check_graph(graph, header, partial=partial)
        yield ScannedTrace(label, header, graph, problems, n_ev, n_errors[0])


def _add_at(out: list[tuple[int, Problem]], pos: int, found: list[tuple[int, Problem]]) -> None:
    """Add a batch's problems, their rows moved to the trace's (the batch starts at ``pos``)."""
    out.extend((r + pos, q) for r, q in found)


class _Rows:
    """A Parquet file's rows, read batch by batch and handed out in consecutive ranges."""

    def __init__(self, pa: Any, file: Any, columns: list[str], path: Any, name: str) -> None:
        self._pa = pa
        self._path = path
        self._name = name
        self._batches = file.iter_batches(batch_size=1 << 16, columns=columns, use_threads=False)
        self._left: Any = None
        self._read = 0  # rows read so far

    def _next(self) -> Any:
        try:
            batch = next(self._batches)
        except StopIteration:
            return None
        except (self._pa.ArrowException, OSError) as err:
            raise _read_error(self._path, "dataset", err) from None
        require_utf8(batch, self._name, str(self._path), self._read)
        self._read += batch.num_rows
        return batch

    def take(self, count: int) -> Iterator[Any]:
        """Batches covering the next ``count`` rows (drain it before the next call)."""
        while count > 0:
            batch = self._left if self._left is not None else self._next()
            self._left = None
            if batch is None:
                return
            if batch.num_rows > count:
                self._left = batch.slice(count)
                batch = batch.slice(0, count)
            count -= batch.num_rows
            yield batch


class _EdgeRefs:
    """Edge ends as written, read from the edges table only when a message names one."""

    def __init__(self, pq: Any, file: Any, lo: int) -> None:
        self._pq, self._file, self._lo = pq, file, lo
        self._cols: dict[str, Any] = {}

    def __call__(self, k: int, end: str) -> str:
        if end not in self._cols:
            self._cols[end] = self._pq.ParquetFile(self._file).read(columns=[end]).column(end)
        return str(self._cols[end][self._lo + k].as_py())


def _all_equal(pc: Any, pa: Any, column: Any, value: Any) -> bool:
    """Every row of ``column`` holds ``value`` (``None``: every row is null)."""
    if len(column) == 0:
        return True
    if value is None:
        return bool(column.null_count == len(column))
    if column.null_count:
        return False
    target = string_array([value])[0]
    if pa.types.is_dictionary(column.type):
        same = pc.equal(pc.cast(column.dictionary, pa.string()), target)
        hits = np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool)
        codes = np.asarray(column.indices.to_numpy(zero_copy_only=False))
        return bool(hits[codes].all())
    same = pc.equal(pc.cast(column, pa.string()), target)
    return bool(pc.all(same).as_py())


def _values_ok(
    pa: Any, pc: Any, batch: Any, kinds: dict[str, str], members: dict[str, tuple[str, ...]]
) -> bool:
    """Whether no value of ``batch`` can be bad: when ``False``, ``_value_problems`` says which.

    The same rules as ``_value_problems``, each asked once per column of the batch (or of
    a dictionary column's distinct values) instead of per row; a column that might hold a
    bad value (a null in a required column, an empty name) answers ``False``.
    """
    names = set(batch.schema.names)
    for name, kind in kinds.items():
        if name not in names or name == "trace_id":
            continue
        col = batch.column(name)
        if col.null_count and name in _NOT_NULL:
            return False
        typ = col.type
        if pa.types.is_null(typ) or col.null_count == len(col):
            continue
        if kind in ("float", "int"):
            if pa.types.is_floating(typ):
                v = (col.drop_null() if col.null_count else col).to_numpy(zero_copy_only=False)
                if not bool(np.all((v >= 0) & (v < np.inf))):
                    return False
            elif pa.types.is_unsigned_integer(typ):
                if kind == "int" and pc.max(col).as_py() > MAX_INT:
                    return False
            elif pc.min(col).as_py() < 0:
                return False
        elif kind == "str":
            values = col.dictionary if pa.types.is_dictionary(typ) else col
            named = name in ("id", "agent", "src", "dst", "trace_id", "task_id")
            if named and len(values) and pc.min(pc.binary_length(values)).as_py() == 0:
                return False
            if name in members:
                if values.null_count:
                    return False
                allowed = string_array(list(members[name]))
                if not pc.all(pc.is_in(pc.cast(values, pa.string()), value_set=allowed)).as_py():
                    return False
    return True


def _attrs_problems(pc: Any, column: Any, pos: int = 0) -> list[Problem]:
    """``attrs`` values that are not JSON objects; only the non-null ones are decoded."""
    if column.null_count == len(column):
        return []
    valid = pc.is_valid(column).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(valid)
    texts = pc.filter(column, pc.is_valid(column)).to_pylist()
    out = []
    for i, text in zip((rows + pos).tolist(), texts, strict=True):
        _, problem = _json_object(text, f"$.events[{i}].attrs")
        if problem is not None:
            out.append(problem)
    return out
