"""Parquet datasets: ``events``, ``edges`` and ``traces`` tables, readable without orchestrace.

A dataset is a directory (conventionally named ``*.parquet``) holding three files::

    run.parquet/
      events.parquet   trace_id, id, t, type, agent, dur, role, from, to, tool, decision, step,
                       content, content_ref, trusted, tokens_in, tokens_out, cost, error,
                       attrs (JSON text)
      edges.parquet    trace_id, src, dst, type
      traces.parquet   trace_id, task_id, system, topology, schema_version, rewards, costs,
                       metrics (map<string, double>), meta (JSON text), n_events, n_edges
      tokens.parquet   (only when a trace records token ids) trace_id, event_id, prompt_ids,
                       completion_ids (list<int64>), logprobs (list<double>), mask (list<int8>):
                       the token table of trainable LLM calls (see orchestrace.trace.tokens)
      _orchestrace.json  marks the directory as written by orchestrace

A dataset is written into a temporary sibling and renamed into place; an existing one is
replaced only with ``overwrite=True`` and only when orchestrace wrote it (the three tables, and
the marker, and nothing else): see :mod:`orchestrace.io._output`.

Query it with DuckDB (``SELECT type, count(*) FROM 'run.parquet/events.parquet' GROUP BY 1``)
or pyarrow. Many traces fit in one dataset; rows keep recording order, so traces round-trip
losslessly. :func:`read_graph` compiles a trace straight from the columns, without event
objects, for analysing traces too large to hold as objects.

Example:
    >>> import tempfile, os
    >>> from orchestrace.trace.generate import generate_trace
    >>> tr = generate_trace(agents=4, steps=40, seed=2)
    >>> path = os.path.join(tempfile.mkdtemp(), "run.parquet")
    >>> write_parquet([tr], path)
    >>> read_parquet(path) == [tr]
    True
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterable
from dataclasses import replace
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec

from orchestrace.errors import Problem, TraceFormatError, TraceValidationError, _short
from orchestrace.io._columnar import from_batches
from orchestrace.io._common import PathLike, _denied
from orchestrace.io._output import OutputError, replace_dir
from orchestrace.trace.graph import TraceGraph
from orchestrace.trace.model import MAX_INT, Decision, Edge, EdgeType, Event, EventType, Trace
from orchestrace.trace.tokens import TOKEN_FIELDS, TOKENS_KEY, is_token_table, token_problem

__all__ = [
    "EVENT_COLUMNS",
    "header_of",
    "parse_parquet",
    "read_graph",
    "read_parquet",
    "read_tables",
    "read_token_tables",
    "trace_ids",
    "write_parquet",
]

#: Event columns in file order (``from`` is the JSON name of ``Event.from_``).
EVENT_COLUMNS = (
    "id",
    "t",
    "type",
    "agent",
    "dur",
    "role",
    "from",
    "to",
    "tool",
    "decision",
    "step",
    "content",
    "content_ref",
    "trusted",
    "tokens_in",
    "tokens_out",
    "cost",
    "error",
    "attrs",
)
assert tuple(f.encode_name for f in msgspec.structs.fields(Event)) == EVENT_COLUMNS
_ATTR = {c: ("from_" if c == "from" else c) for c in EVENT_COLUMNS}
_FILES = ("events.parquet", "edges.parquet", "traces.parquet")
_TOKENS_FILE = "tokens.parquet"  # present only when some trace records token ids
_EVENT: Any = Event  # built positionally from columns in field order
# rows per row group: small groups let readers stream a trace in bounded memory
_ROW_GROUP = 1 << 16


def _pa() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is a core dependency
        raise ImportError("Parquet support needs pyarrow: pip install 'pyarrow>=15'") from None
    return pa, pq


def _schemas() -> tuple[Any, Any, Any]:
    pa, _ = _pa()
    s = pa.string()
    events = pa.schema(
        [
            ("trace_id", s),
            ("id", s),
            ("t", pa.float64()),
            ("type", s),
            ("agent", s),
            ("dur", pa.float64()),
            ("role", s),
            ("from", s),
            ("to", s),
            ("tool", s),
            ("decision", s),
            ("step", pa.int64()),
            ("content", s),
            ("content_ref", s),
            ("trusted", pa.bool_()),
            ("tokens_in", pa.int64()),
            ("tokens_out", pa.int64()),
            ("cost", pa.float64()),
            ("error", s),
            ("attrs", s),
        ]
    )
    edges = pa.schema([("trace_id", s), ("src", s), ("dst", s), ("type", s)])
    m = pa.map_(s, pa.float64())
    traces = pa.schema(
        [
            ("trace_id", s),
            ("task_id", s),
            ("system", s),
            ("topology", s),
            ("schema_version", s),
            ("rewards", m),
            ("costs", m),
            ("metrics", m),
            ("meta", s),
            ("n_events", pa.int64()),
            ("n_edges", pa.int64()),
        ]
    )
    return events, edges, traces


def write_parquet(traces: Iterable[Trace], path: PathLike, *, overwrite: bool = False) -> None:
    """Write traces as a Parquet dataset directory.

    The dataset is built in a temporary sibling directory and renamed into place when
    complete. An existing dataset is replaced only with ``overwrite=True``, and only when it
    is one orchestrace wrote (the three tables and nothing else); any other directory is
    refused.

    Args:
        traces: The traces.
        path: The dataset directory (conventionally ``*.parquet``).
        overwrite: Replace an existing dataset.

    Raises:
        OutputError: The output exists (without ``overwrite``), is not ours, the path cannot
            hold it, or writing failed (the temporary directory is removed and the previous
            dataset kept).
    """
    pa, _ = _pa()
    with replace_dir(path, force=overwrite) as tmp:
        try:
            _write_tables(traces, tmp)
        except pa.ArrowException as err:
            if isinstance(err, OSError):
                raise
            raise OutputError(
                path,
                f"cannot write {path}: {str(err)[:200]}; write these traces as .json or "
                ".jsonl instead",
            ) from None


def _write_tables(traces: Iterable[Trace], tmp: Path) -> None:
    pa, pq = _pa()
    ev_schema, ed_schema, tr_schema = _schemas()
    enc = msgspec.json.Encoder()
    ev_writer = pq.ParquetWriter(tmp / _FILES[0], ev_schema)
    ed_writer = pq.ParquetWriter(tmp / _FILES[1], ed_schema)
    rows: dict[str, list[Any]] = {f.name: [] for f in tr_schema}
    tok_rows: dict[str, list[Any]] = {c: [] for c in ("trace_id", "event_id", *TOKEN_FIELDS)}
    try:
        for tr in traces:
            meta = tr.meta
            if is_token_table(meta.get(TOKENS_KEY)):  # the side table goes to tokens.parquet
                meta = {k: v for k, v in meta.items() if k != TOKENS_KEY}
                for eid, rec in tr.meta[TOKENS_KEY].items():
                    tok_rows["trace_id"].append(tr.trace_id)
                    tok_rows["event_id"].append(eid)
                    for c in TOKEN_FIELDS:
                        tok_rows[c].append(rec[c])
            ev = tr.events
            cols: dict[str, Any] = {"trace_id": [tr.trace_id] * len(ev)}
            for c in EVENT_COLUMNS:
                values = list(map(attrgetter(_ATTR[c]), ev))
                if c == "attrs":
                    values = [None if v is None else enc.encode(v).decode() for v in values]
                cols[c] = values
            ev_writer.write_table(pa.table(cols, schema=ev_schema), row_group_size=_ROW_GROUP)
            ed = tr.edges
            ed_writer.write_table(
                pa.table(
                    {
                        "trace_id": [tr.trace_id] * len(ed),
                        "src": list(map(attrgetter("src"), ed)),
                        "dst": list(map(attrgetter("dst"), ed)),
                        "type": list(map(attrgetter("type"), ed)),
                    },
                    schema=ed_schema,
                ),
                row_group_size=_ROW_GROUP,
            )
            for key, value in (
                ("trace_id", tr.trace_id),
                ("task_id", tr.task_id),
                ("system", tr.system),
                ("topology", tr.topology),
                ("schema_version", tr.schema_version),
                ("rewards", list(tr.rewards.items())),
                ("costs", list(tr.costs.items())),
                ("metrics", list(tr.metrics.items())),
                ("meta", enc.encode(meta).decode()),
                ("n_events", len(ev)),
                ("n_edges", len(ed)),
            ):
                rows[key].append(value)
    finally:
        ev_writer.close()
        ed_writer.close()
    pq.write_table(pa.table(rows, schema=tr_schema), tmp / _FILES[2])
    if tok_rows["trace_id"]:
        pq.write_table(pa.table(tok_rows, schema=_token_schema()), tmp / _TOKENS_FILE)


def _token_schema() -> Any:
    pa, _ = _pa()
    return pa.schema(
        [
            ("trace_id", pa.string()),
            ("event_id", pa.string()),
            ("prompt_ids", pa.list_(pa.int64())),
            ("completion_ids", pa.list_(pa.int64())),
            ("logprobs", pa.list_(pa.float64())),
            ("mask", pa.list_(pa.int8())),
        ]
    )


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


_REWRITE = "rewrite the dataset with `orchestrace convert`"
# what each column must hold: "str", "float" (integers accepted), "int" or "bool"
_EVENT_KINDS: dict[str, str] = {
    "trace_id": "str",
    "id": "str",
    "t": "float",
    "type": "str",
    "agent": "str",
    "dur": "float",
    "role": "str",
    "from": "str",
    "to": "str",
    "tool": "str",
    "decision": "str",
    "step": "int",
    "content": "str",
    "content_ref": "str",
    "trusted": "bool",
    "tokens_in": "int",
    "tokens_out": "int",
    "cost": "float",
    "error": "str",
    "attrs": "str",
}
_EDGE_KINDS = {"trace_id": "str", "src": "str", "dst": "str", "type": "str"}
_TRACE_KINDS = {
    "trace_id": "str",
    "task_id": "str",
    "system": "str",
    "topology": "str",
    "schema_version": "str",
    "rewards": "map",
    "costs": "map",
    "metrics": "map",
    "meta": "str",
    "n_events": "int",
    "n_edges": "int",
}
# columns that may not hold nulls (the model's fields without a None default)
_NOT_NULL = {
    "trace_id",
    "id",
    "t",
    "type",
    "agent",
    "dur",
    "tokens_in",
    "tokens_out",
    "cost",
    "src",
    "dst",
    "task_id",
    "schema_version",
    "n_events",
    "n_edges",
}
_NAMES = {"str": "a string", "float": "a number", "int": "an integer", "bool": "a boolean"}


def _kind_ok(typ: Any, kind: str) -> bool:
    pa, _ = _pa()
    t = pa.types
    if t.is_null(typ):
        return True  # every value is null: the null checks decide
    if t.is_dictionary(typ):
        typ = typ.value_type
    if kind == "str":
        return bool(t.is_string(typ) or t.is_large_string(typ))
    if kind == "float":
        return bool(t.is_floating(typ) or t.is_integer(typ))
    if kind == "int":
        return bool(t.is_integer(typ))
    if kind == "bool":
        return bool(t.is_boolean(typ))
    if kind == "map":
        return bool(
            t.is_map(typ) and _kind_ok(typ.key_type, "str") and _kind_ok(typ.item_type, "float")
        )
    return False


def _check_schema(schema: Any, kinds: dict[str, str], file: str, src: str) -> None:
    """Refuse a table whose columns are missing or hold the wrong kind of value."""
    for name, kind in kinds.items():
        idx = schema.get_field_index(name)
        if idx < 0:
            raise TraceFormatError(src, file, f"column `{name}` is missing", _REWRITE)
        typ = schema.field(idx).type
        if not _kind_ok(typ, kind):
            what = _NAMES.get(kind, "a map of names to numbers")
            raise TraceFormatError(
                src,
                f"{file} column `{name}`",
                f"holds {typ} values, expected {what} per row",
                f"store `{name}` as {what}, or {_REWRITE}",
            )


def _where(mask: Any, limit: int = 100) -> list[int]:
    """Row numbers where a boolean Arrow array is true (nulls count as false)."""
    import numpy as np
    import pyarrow.compute as pc

    arr = pc.fill_null(mask, False).to_numpy(zero_copy_only=False)
    return [int(i) for i in np.flatnonzero(arr)[:limit]]


def _value_problems(
    table: Any, kinds: dict[str, str], what: str, members: dict[str, tuple[str, ...]]
) -> list[tuple[int, Problem]]:
    """``(row, problem)`` for every bad value of ``table``; paths hold ``{i}`` for the row."""
    pa, _ = _pa()
    import pyarrow.compute as pc

    found: list[tuple[int, Problem]] = []
    names = set(table.schema.names)

    def add(rows: list[int], name: str, code: str, message: Any, fix: str) -> None:
        for r in rows:
            text = message(r) if callable(message) else message
            found.append((r, Problem(code, text, fix, path=f"$.{what}[{{i}}].{name}")))

    for name, kind in kinds.items():
        if name not in names or name == "trace_id":
            continue
        col = table.column(name)
        label = kind if kind != "str" else "str"
        if name in _NOT_NULL and col.null_count:
            add(
                _where(pc.is_null(col)),
                name,
                "wrong-type",
                f"expected {label}, got null",
                f"make the value a {label}",
            )
        if pa.types.is_null(col.type):
            continue
        if kind == "float":
            values = pc.cast(col, pa.float64())
            bad = pc.or_(pc.invert(pc.is_finite(values)), pc.less(values, 0))

            def describe(r: int, values: Any = values, name: str = name) -> str:
                v = values[r].as_py()
                return (
                    f"{name} is negative {v!r}"
                    if v < 0
                    else f"{name} is not a finite number: {v!r}"
                )

            add(
                _where(bad),
                name,
                "negative-value",
                describe,
                f"record {name} as a finite number >= 0",
            )
        elif kind == "int":
            if pa.types.is_unsigned_integer(col.type):
                bad = pc.greater(col, pa.scalar(MAX_INT, pa.uint64()))
            else:
                bad = pc.less(col, 0)

            def describe_int(r: int, col: Any = col) -> str:
                return (
                    f"value out of range: {col[r].as_py()} (expected an integer from 0 to 2^63-1)"
                )

            add(
                _where(bad),
                name,
                "out-of-range",
                describe_int,
                "record an integer from 0 to 2^63-1",
            )
        elif kind == "str":
            values = pc.cast(col, pa.string())
            if name in ("id", "agent", "src", "dst", "trace_id", "task_id"):
                add(
                    _where(pc.equal(pc.utf8_length(values), 0)),
                    name,
                    "invalid-value",
                    f"{name} is empty",
                    f"give `{name}` a non-empty string",
                )
            if name in members:
                allowed = pa.array(members[name], pa.string())
                unknown = pc.and_(
                    pc.invert(pc.is_in(values, value_set=allowed)), pc.is_valid(values)
                )

                label = {"events": "event type", "edges": "edge type"}[what]
                label = label if name == "type" else name

                def describe_enum(r: int, values: Any = values, label: str = label) -> str:
                    return f"unknown {label} {_short(str(values[r].as_py()))!r}"

                add(
                    _where(unknown),
                    name,
                    "unknown-type" if name == "type" else "unknown-value",
                    describe_enum,
                    f"use one of: {', '.join(members[name])}",
                )
    return found


_EVENT_MEMBERS: dict[str, tuple[str, ...]] = {
    "type": tuple(m.value for m in EventType),
    "decision": tuple(m.value for m in Decision),
}
_EDGE_MEMBERS: dict[str, tuple[str, ...]] = {"type": tuple(m.value for m in EdgeType)}


def _values(col: Any, kind: str) -> list[Any]:
    """A checked column as Python values of the model's types (floats stay floats)."""
    pa, _ = _pa()
    if kind == "float" and not pa.types.is_floating(col.type) and not pa.types.is_null(col.type):
        col = col.cast(pa.float64())
    elif kind == "int" and pa.types.is_integer(col.type):
        col = col.cast(pa.int64(), safe=False)  # out-of-range rows are reported, not built
    return list(col.to_pylist())


def _located(found: list[tuple[int, Problem]], lo: int, hi: int) -> list[Problem]:
    """The problems of rows ``lo <= row < hi``, with paths indexed within their trace."""
    return [
        replace(p, path=p.path.format(i=r - lo))
        for r, p in sorted(found, key=lambda x: x[0])
        if lo <= r < hi
    ]


def _json_object(text: Any, path: str) -> tuple[dict[str, Any] | None, Problem | None]:
    """Decode a JSON-object column value; ``(value, None)`` or ``(None, problem)``."""
    if text is None:
        return None, None
    try:
        value = msgspec.json.decode(text)  # as the JSON reader: no NaN or Infinity
    except (msgspec.DecodeError, RecursionError):
        return None, Problem("malformed-json", "column holds invalid JSON", _REWRITE, path=path)
    if not isinstance(value, dict):
        return None, Problem(
            "wrong-type",
            f"expected object, got {_json_kind(value)}",
            "store a JSON object (or null) here",
            path=path,
        )
    return value, None


def _json_kind(value: Any) -> str:
    return {list: "array", str: "str", bool: "bool", int: "int", float: "float"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def header_of(row: dict[str, Any]) -> tuple[Trace | None, list[Problem]]:
    """Type-check one row of the ``traces`` table; return it as an event-less trace.

    Returns:
        ``(header, problems)``: ``header`` is ``None`` when the row is unusable.
    """
    meta, problem = _json_object(row.get("meta"), "$.meta")
    problems = [problem] if problem else []
    head = {
        k: row.get(k)
        for k in ("trace_id", "task_id", "system", "topology", "schema_version")
        if row.get(k) is not None
    }
    for k in ("rewards", "costs", "metrics"):
        values = dict(row.get(k) or [])
        head[k] = values
        for key, value in values.items():
            if value is None or not math.isfinite(value):
                problems.append(
                    Problem(
                        "non-finite",
                        f"{k}.{_short(str(key))} is {value!r}",
                        "record a finite number",
                        path=f"$.{k}.{_short(str(key))}",
                    )
                )
    head["meta"] = meta or {}
    header: Trace | None = None
    try:
        header = msgspec.convert({**head, "events": [], "edges": []}, Trace)
    except msgspec.ValidationError as err:
        from orchestrace.trace.check import problem_from_msgspec

        problems.append(problem_from_msgspec(err, "$", where="trace"))
    return (header if not problems else None), problems


def _check_dataset(path: PathLike) -> Path:
    p = Path(path)
    src = str(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise TraceFormatError(src, "dataset", "no such dataset", "check the path") from None
    except PermissionError:
        raise _denied(src) from None
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise TraceFormatError(src, "dataset", f"cannot open: {reason}", "check the path") from None
    if not stat.S_ISDIR(st.st_mode):
        raise TraceFormatError(
            src,
            "dataset",
            "not a Parquet dataset directory",
            "pass the directory written by `orchestrace convert --to parquet`",
        )
    try:
        names = set(os.listdir(p))
    except OSError:
        names = None  # reported below, file by file
    if names is not None and not names & set(_FILES):
        raise TraceFormatError(
            src,
            "dataset",
            "the directory is empty, not a Parquet dataset"
            if not names
            else f"not a Parquet dataset (the directory holds none of {', '.join(_FILES)})",
            "pass the directory written by `orchestrace convert --to parquet`, or a trace file",
        )
    for name in _FILES:
        try:
            mode = (p / name).stat().st_mode
        except FileNotFoundError:
            raise TraceFormatError(src, name, "file missing from the dataset", _REWRITE) from None
        except PermissionError:
            raise _denied(str(p / name)) from None
        except OSError as err:
            raise TraceFormatError(
                src, name, f"cannot open: {err.strerror or err}", _REWRITE
            ) from None
        if not stat.S_ISREG(mode):
            raise TraceFormatError(src, name, "is not a regular file", _REWRITE)
        if not os.access(p / name, os.R_OK):
            raise _denied(str(p / name))
    return p


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
    return TraceFormatError(
        str(path), where, f"cannot read Parquet: {_short(str(err), 200)}", _REWRITE
    )


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
    try:
        for name, kinds in zip(_FILES, (_EVENT_KINDS, _EDGE_KINDS, _TRACE_KINDS), strict=True):
            _check_schema(pq.read_schema(p / name), kinds, name, src)
    except (pa.ArrowException, OSError) as err:
        raise _read_error(path, "dataset", err) from None
    filt = [("trace_id", "=", trace_id)] if trace_id is not None else None
    cols = None if columns is None else ["trace_id", *[c for c in columns if c != "trace_id"]]
    try:
        events = pq.read_table(p / _FILES[0], columns=cols, filters=filt)
        edges = pq.read_table(p / _FILES[1], filters=filt)
        traces = pq.read_table(p / _FILES[2], filters=filt)
    except (pa.ArrowException, OSError) as err:
        raise _read_error(path, "dataset", err) from None
    return events, edges, traces


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
    from orchestrace.trace.check import check_trace

    events, edges, traces = read_tables(path)
    src = str(path)
    tokens = read_token_tables(path)
    ev_found = _value_problems(events, _EVENT_KINDS, "events", _EVENT_MEMBERS)
    ed_found = _value_problems(edges, _EDGE_KINDS, "edges", _EDGE_MEMBERS)
    ev_cols = {c: _values(events.column(c), _EVENT_KINDS[c]) for c in ("trace_id", *EVENT_COLUMNS)}
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
    out: list[tuple[str, Trace | None, list[Problem]]] = []
    ev_pos = 0
    ed_pos = 0
    for k, row in enumerate(rows):
        n_ev, n_ed = row["n_events"], row["n_edges"]
        label = row["trace_id"] if isinstance(row["trace_id"], str) else f"#{k}"
        if (
            ev_cols["trace_id"][ev_pos : ev_pos + n_ev].count(row["trace_id"]) != n_ev
            or ed_cols["trace_id"][ed_pos : ed_pos + n_ed].count(row["trace_id"]) != n_ed
        ):
            raise TraceFormatError(
                src, "events.parquet", "events or edges are not grouped by trace", _REWRITE
            )
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
        ids = pq.read_table(p / _FILES[2], columns=["trace_id"]).column("trace_id").to_pylist()
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
        traces = pq.read_table(p / _FILES[2]).to_pylist()
    except (pa.ArrowException, OSError) as err:
        raise _read_error(path, _FILES[2], err) from None
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
                yield batch.slice(start, stop - start)
            if pos >= lo + count:
                break

    def checked(
        batches: Any, kinds: dict[str, str], what: str, members: dict[str, tuple[str, ...]]
    ) -> Any:
        """Pass the batches on, refusing the first one holding a bad value.

        Every row must belong to the trace (rows are located by position) and ``attrs`` must
        hold JSON objects, as the full reader requires.
        """
        import pyarrow.compute as pc

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
                    _, problem = _json_object(text, f"$.events[{i}].attrs")
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
