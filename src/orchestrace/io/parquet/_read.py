"""Reading a dataset: its tables, the traces in it, and graphs compiled straight from the columns.

Example:
    >>> import tempfile, os
    >>> from orchestrace.io.parquet import write_parquet
    >>> from orchestrace.trace.generate import generate_trace
    >>> path = os.path.join(tempfile.mkdtemp(), "run.parquet")
    >>> write_parquet([generate_trace(agents=2, steps=5, seed=1)], path)
    >>> len(trace_ids(path))
    1
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrace.errors import Problem, TraceFormatError, TraceValidationError, _short
from orchestrace.io._columnar import from_batches
from orchestrace.io._common import PathLike, _denied
from orchestrace.io.parquet._check import (
    _EDGE_KINDS,
    _EDGE_MEMBERS,
    _EVENT_KINDS,
    _EVENT_MEMBERS,
    _REWRITE,
    _TRACE_KINDS,
    _check_dataset,
    _check_schema,
    _json_object,
    _located,
    _value_problems,
    _values,
    header_of,
    require_utf8,
)
from orchestrace.io.parquet._layout import (
    _DEFAULTS_COLUMN,
    _EVENT,
    _FILES,
    _TOKENS_FILE,
    _ZERO_DEFAULTS,
    EVENT_COLUMNS,
    _pa,
)
from orchestrace.trace.check import check_trace
from orchestrace.trace.graph import TraceGraph
from orchestrace.trace.model import Edge, Trace
from orchestrace.trace.tokens import TOKEN_FIELDS, TOKENS_KEY, token_problem


def read_token_tables(path: PathLike) -> dict[str, dict[str, dict[str, list[Any]]]]:
    """The token tables of a dataset: ``{trace_id: {event id: record}}`` (empty without any).

    Raises:
        TraceFormatError: ``tokens.parquet`` is damaged, lacks a column, or holds a malformed
            record (the message names the trace and event).
    """
    pa, pq = _pa()
    p = Path(path) / _TOKENS_FILE
    src = str(path)
    if not p.exists():
        return {}
    try:
        table = pq.read_table(p)
    except (pa.ArrowException, OSError) as err:
        raise _read_error(path, _TOKENS_FILE, err) from None
    require_utf8(table, _TOKENS_FILE, src)
    missing = [c for c in ("trace_id", "event_id", *TOKEN_FIELDS) if c not in table.column_names]
    if missing:
        raise TraceFormatError(src, _TOKENS_FILE, f"column {missing[0]!r} is missing", _REWRITE)
    out: dict[str, dict[str, dict[str, list[Any]]]] = {}
    cols = {c: table.column(c).to_pylist() for c in ("trace_id", "event_id", *TOKEN_FIELDS)}
    for i, (tid, eid) in enumerate(zip(cols["trace_id"], cols["event_id"], strict=True)):
        rec = {c: cols[c][i] for c in TOKEN_FIELDS}
        problem = (
            token_problem(rec)
            if isinstance(tid, str) and isinstance(eid, str)
            else ("trace_id and event_id must be strings")
        )
        if problem:
            raise TraceFormatError(
                src, f"{_TOKENS_FILE} row {i} (trace {tid!r}, event {eid!r})", problem, _REWRITE
            )
        out.setdefault(tid, {})[eid] = rec
    return out


def _no_traces(src: str) -> TraceFormatError:
    return TraceFormatError(
        src,
        "traces.parquet",
        "dataset holds no traces",
        "write traces into it (`orchestrace convert IN -o OUT.parquet`)",
    )


def _read_error(path: PathLike, where: str, err: Exception) -> TraceFormatError:
    if isinstance(err, PermissionError) or "Permission denied" in str(err):
        return _denied(str(path))
    why = " ".join(str(err).split())  # Arrow's messages may end in a newline
    return TraceFormatError(str(path), where, f"cannot read Parquet: {_short(why, 200)}", _REWRITE)


def read_tables(
    path: PathLike, columns: list[str] | None = None, trace_id: str | None = None
) -> tuple[Any, Any, Any]:
    """Read the ``(events, edges, traces)`` Arrow tables of a dataset.

    Args:
        path: The dataset directory.
        columns: Event columns to read (``trace_id`` is always read); all by default.
        trace_id: Read only this trace.

    Raises:
        TraceFormatError: Not a dataset, a file is damaged or unreadable, or a column is
            missing or holds the wrong kind of value.
    """
    pa, pq = _pa()
    p = _check_dataset(path)
    src = str(path)
    files: list[Any] = []
    try:
        try:
            # each file opened once: its schema checked, then (without a filter) read from
            # the same handle, without the dataset layer's per-file set-up
            for name, kinds in zip(_FILES, (_EVENT_KINDS, _EDGE_KINDS, _TRACE_KINDS), strict=True):
                files.append(pq.ParquetFile(p / name))
                _check_schema(files[-1].schema_arrow, kinds, name, src)
        except (pa.ArrowException, OSError) as err:
            raise _read_error(path, "dataset", err) from None
        cols = None if columns is None else ["trace_id", *[c for c in columns if c != "trace_id"]]
        try:
            if trace_id is None:
                events, edges, traces = (
                    files[0].read(columns=cols),
                    files[1].read(),
                    files[2].read(),
                )
            else:
                filt = [("trace_id", "=", trace_id)]
                events = pq.read_table(p / _FILES[0], columns=cols, filters=filt)
                edges = pq.read_table(p / _FILES[1], filters=filt)
                traces = pq.read_table(p / _FILES[2], filters=filt)
        except (pa.ArrowException, OSError) as err:
            raise _read_error(path, "dataset", err) from None
        # (rows of a filtered read are named as rows of the trace's own part)
        for name, table in zip(_FILES, (events, edges, traces), strict=True):
            require_utf8(table, name if trace_id is None else f"{name} (trace's rows)", src)
        return events, edges, traces
    finally:
        for f in files:
            f.close()


def parse_parquet(
    path: PathLike, *, partial: bool = False, check: bool = True
) -> list[tuple[str, Trace | None, list[Problem]]]:
    """Read every trace of a dataset, reporting bad values instead of raising.

    Every column is type-checked and every value range-checked as the JSON reader does, so
    what is accepted here can be written back as a valid trace in any format.

    Args:
        path: The dataset directory.
        partial: Accept truncated recordings (see :func:`~orchestrace.trace.check.check_trace`).
        check: Also run ``check_trace`` on each trace that was read.

    Returns:
        ``(trace_id, trace, problems)`` per trace; ``trace`` is ``None`` when its values are bad.

    Raises:
        TraceFormatError: Not a dataset, unreadable, a column missing or of the wrong kind, or
            the tables disagree on how many events and edges each trace has.
    """
    events, edges, traces = read_tables(path)
    src = str(path)
    tokens = read_token_tables(path)
    ev_found = _value_problems(events, _EVENT_KINDS, "events", _EVENT_MEMBERS)
    ed_found = _value_problems(edges, _EDGE_KINDS, "edges", _EDGE_MEMBERS)
    ev_cols = {c: _values(events.column(c), _EVENT_KINDS[c]) for c in ("trace_id", *EVENT_COLUMNS)}
    names = events.schema.names
    integer = _DEFAULTS_COLUMN in names and _pa()[0].types.is_integer(
        events.schema.field(_DEFAULTS_COLUMN).type
    )
    if integer:  # fields the recording left at their default (a foreign column is ignored)
        flags = events.column(_DEFAULTS_COLUMN).to_pylist()
        for k, (c, default) in enumerate(_ZERO_DEFAULTS.items()):
            bit = 1 << k
            ev_cols[c] = [
                default if f is not None and f & bit and v == default else v
                for v, f in zip(ev_cols[c], flags, strict=True)
            ]
    ed_cols = {c: edges.column(c).to_pylist() for c in ("trace_id", "src", "dst", "type")}
    rows = traces.to_pylist()
    if not rows:
        raise _no_traces(src)
    counts = [(r["n_events"], r["n_edges"]) for r in rows]
    if any(not isinstance(a, int) or not isinstance(b, int) or a < 0 or b < 0 for a, b in counts):
        raise TraceFormatError(
            src, "traces.parquet", "n_events and n_edges must be counts >= 0", _REWRITE
        )
    if sum(a for a, _ in counts) != len(ev_cols["id"]) or sum(b for _, b in counts) != len(
        ed_cols["src"]
    ):
        raise TraceFormatError(
            src,
            "traces.parquet",
            "n_events/n_edges do not match the rows of events.parquet/edges.parquet",
            _REWRITE,
        )
    # the events file first, then the edges file (as the column reader checks them)
    for f, col in enumerate((ev_cols["trace_id"], ed_cols["trace_id"])):
        pos = 0
        for row, count in zip(rows, counts, strict=True):
            if col[pos : pos + count[f]].count(row["trace_id"]) != count[f]:
                raise TraceFormatError(
                    src, _FILES[f], "events or edges are not grouped by trace", _REWRITE
                )
            pos += count[f]
    out: list[tuple[str, Trace | None, list[Problem]]] = []
    ev_pos = 0
    ed_pos = 0
    for k, row in enumerate(rows):
        n_ev, n_ed = row["n_events"], row["n_edges"]
        label = row["trace_id"] if isinstance(row["trace_id"], str) else f"#{k}"
        sl = slice(ev_pos, ev_pos + n_ev)
        header, problems = header_of(row)
        if header is not None and row["trace_id"] in tokens:
            header = header.replace(meta={**header.meta, TOKENS_KEY: tokens[row["trace_id"]]})
        problems += _located(ev_found, ev_pos, ev_pos + n_ev)
        problems += _located(ed_found, ed_pos, ed_pos + n_ed)
        attrs: list[Any] = []
        for i, a in enumerate(ev_cols["attrs"][sl]):
            value, problem = _json_object(a, f"$.events[{i}].attrs")
            attrs.append(value)
            if problem:
                problems.append(problem)
        trace: Trace | None = None
        if header is not None and not problems:
            columns = [ev_cols[c][sl] for c in EVENT_COLUMNS[:-1]]
            evs = tuple(_EVENT(*vals, attrs=a) for *vals, a in zip(*columns, attrs, strict=True))
            eds = tuple(
                Edge(s, d, t)
                for s, d, t in zip(
                    ed_cols["src"][ed_pos : ed_pos + n_ed],
                    ed_cols["dst"][ed_pos : ed_pos + n_ed],
                    ed_cols["type"][ed_pos : ed_pos + n_ed],
                    strict=True,
                )
            )
            # every column was type- and range-checked above
            trace = header.replace(events=evs, edges=eds)._mark_decoded()
            if check:
                problems += check_trace(trace, partial=partial)
        out.append((label, trace, problems))
        ev_pos += n_ev
        ed_pos += n_ed
    return out


def read_parquet(path: PathLike, *, partial: bool = True) -> list[Trace]:
    """Read every trace of a dataset, in the order written.

    Args:
        path: The dataset directory.
        partial: Accept traces marked truncated (``meta.partial``); ``False`` checks every
            trace with ``check_trace`` and raises on errors.

    Raises:
        TraceFormatError: Not a dataset, or damaged.
        TraceValidationError: A value is of the wrong type or out of range (lists each).
    """
    out: list[Trace] = []
    for label, trace, problems in parse_parquet(path, partial=partial, check=not partial):
        errors = [p for p in problems if p.severity == "error"]
        if trace is None or errors:
            raise TraceValidationError(errors, source=f"{path}[{label}]")
        out.append(trace)
    return out


_GRAPH_COLUMNS = [
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
]


def trace_ids(path: PathLike) -> list[str]:
    """The ids of a dataset's traces, in the order written (reads only the ``traces`` table).

    Raises:
        TraceFormatError: Not a dataset, or its ``traces`` table is damaged or empty.

    Example:
        >>> import tempfile, os
        >>> from orchestrace.io.parquet import write_parquet
        >>> from orchestrace.trace.generate import generate_trace
        >>> trs = [generate_trace(agents=2, steps=6, seed=s) for s in (1, 2)]
        >>> path = os.path.join(tempfile.mkdtemp(), "two.parquet")
        >>> write_parquet(trs, path)
        >>> trace_ids(path) == [t.trace_id for t in trs]
        True
    """
    pa, pq = _pa()
    p = _check_dataset(path)
    try:
        _check_schema(pq.read_schema(p / _FILES[2]), _TRACE_KINDS, _FILES[2], str(path))
        ids = pq.ParquetFile(p / _FILES[2]).read(columns=["trace_id"]).column("trace_id")
        ids = ids.to_pylist()
    except (pa.ArrowException, OSError) as err:
        raise _read_error(path, _FILES[2], err) from None
    if not ids:
        raise _no_traces(str(path))
    return [x if isinstance(x, str) else f"#{k}" for k, x in enumerate(ids)]


def read_graph(path: PathLike, trace_id: str | None = None) -> tuple[TraceGraph, dict[str, Any]]:
    """Compile one trace of a dataset straight from its columns (no event objects).

    Events are read row group by row group and kept only as compact numpy columns, so the
    peak memory stays within about twice the size of the events table.

    Args:
        path: The dataset directory.
        trace_id: Which trace (required when the dataset holds several).

    Returns:
        ``(graph, header)``: the compiled graph and the trace's row of the ``traces`` table,
        plus ``n_errors``: how many of its events record an ``error``.

    Raises:
        TraceFormatError: Not a dataset, several traces and no ``trace_id``, or unknown id.
    """
    pa, pq = _pa()
    p = _check_dataset(path)
    src = str(path)
    try:
        for name, kinds in zip(_FILES, (_EVENT_KINDS, _EDGE_KINDS, _TRACE_KINDS), strict=True):
            _check_schema(pq.read_schema(p / name), kinds, name, src)
        table = pq.read_table(p / _FILES[2])
    except (pa.ArrowException, OSError) as err:
        raise _read_error(path, _FILES[2], err) from None
    require_utf8(table, _FILES[2], src)
    traces = table.to_pylist()
    for r in traces:
        if not all(isinstance(r[k], int) and r[k] >= 0 for k in ("n_events", "n_edges")):
            raise TraceFormatError(
                src, "traces.parquet", "n_events and n_edges must be counts >= 0", _REWRITE
            )
    try:
        rows_in = [pq.ParquetFile(p / f).metadata.num_rows for f in _FILES[:2]]
    except (pa.ArrowException, OSError) as err:
        raise _read_error(path, "dataset", err) from None
    if rows_in != [sum(r["n_events"] for r in traces), sum(r["n_edges"] for r in traces)]:
        raise TraceFormatError(
            src,
            "traces.parquet",
            "n_events/n_edges do not match the rows of events.parquet/edges.parquet",
            _REWRITE,
        )
    ids = [row["trace_id"] for row in traces]
    if not ids:
        raise _no_traces(src)
    if trace_id is None:
        if len(ids) != 1:
            raise TraceFormatError(
                str(path),
                "traces.parquet",
                f"dataset holds {len(ids)} traces",
                f"pick one with trace_id= (`--trace-id` on the command line; first: {ids[:3]})",
            )
        trace_id = ids[0]
    elif trace_id not in ids:
        raise TraceFormatError(
            str(path),
            "traces.parquet",
            f"no trace {_short(trace_id)!r}",
            f"pick one of {[_short(str(x)) for x in ids[:5]]}",
        )
    k = ids.index(trace_id)
    row = traces[k]
    _, head_problems = header_of(row)
    if head_problems:
        raise TraceValidationError(head_problems, source=f"{path}[{trace_id}]")
    ev_lo = sum(r["n_events"] for r in traces[:k])
    ed_lo = sum(r["n_edges"] for r in traces[:k])

    def rows(file: str, columns: list[str], lo: int, count: int) -> Any:
        """Yield record batches covering rows [lo, lo + count) of ``file``."""
        pf = pq.ParquetFile(p / file, pre_buffer=False)
        pos = 0
        for batch in pf.iter_batches(batch_size=1 << 16, columns=columns, use_threads=False):
            start, stop = max(lo - pos, 0), min(lo + count - pos, batch.num_rows)
            pos += batch.num_rows
            if stop > start:
                part = batch.slice(start, stop - start)
                require_utf8(part, file, src, pos - batch.num_rows + start)
                yield part
            if pos >= lo + count:
                break

    def checked(
        batches: Any, kinds: dict[str, str], what: str, members: dict[str, tuple[str, ...]]
    ) -> Any:
        """Pass the batches on, refusing the first one holding a bad value.

        Every row must belong to the trace (rows are located by position) and ``attrs`` must
        hold JSON objects, as the full reader requires.
        """
        import pyarrow.compute as pc  # noqa: PLC0415  pyarrow is heavy: loaded on first use

        pos = 0
        for batch in batches:
            if "error" in batch.schema.names:
                n_errors[0] += batch.num_rows - batch.column("error").null_count
            same = pc.equal(batch.column("trace_id"), trace_id)
            if batch.num_rows and not pc.all(pc.fill_null(same, False)).as_py():
                raise TraceFormatError(
                    src,
                    _FILES[0 if what == "events" else 1],
                    "events or edges are not grouped by trace",
                    _REWRITE,
                )
            found = _value_problems(batch, kinds, what, members)
            if "attrs" in batch.schema.names:
                for i, text in enumerate(batch.column("attrs").to_pylist()):
                    _, problem = _json_object(text, "$.events[{i}].attrs")  # row: located below
                    if problem is not None:
                        found.append((i, problem))
            if found:
                problems = _located([(r + pos, q) for r, q in found], 0, pos + batch.num_rows)
                raise TraceValidationError(problems, source=f"{path}[{trace_id}]")
            pos += batch.num_rows
            yield batch

    n_errors = [0]

    def edge_ref(k: int, end: str) -> str:
        table = pq.read_table(p / _FILES[1], columns=[end])
        return str(table.column(end)[ed_lo + k].as_py())

    try:
        graph = from_batches(
            checked(
                rows(
                    _FILES[0],
                    [*_GRAPH_COLUMNS, "trace_id", "attrs", "error"],
                    ev_lo,
                    row["n_events"],
                ),
                _EVENT_KINDS,
                "events",
                _EVENT_MEMBERS,
            ),
            checked(
                rows(_FILES[1], ["src", "dst", "type", "trace_id"], ed_lo, row["n_edges"]),
                _EDGE_KINDS,
                "edges",
                _EDGE_MEMBERS,
            ),
            n_events=row["n_events"],
            n_edges=row["n_edges"],
            edge_refs=edge_ref,
        )
    except ValueError as err:
        raise TraceFormatError(
            str(path), "events.parquet", str(err), "fix the values or rewrite the dataset"
        ) from None
    except (pa.ArrowException, OSError, KeyError) as err:
        raise _read_error(path, "dataset", err) from None
    return graph, {**row, "n_errors": n_errors[0]}
