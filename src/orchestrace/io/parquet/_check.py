"""Checking a dataset as read: the directory, each table's schema, and the values of its columns.

Every problem names the file, the row and the column, and says how to fix it (usually: rewrite
the dataset with ``orchestrace convert``); checks run on whole columns, never row by row.

Example:
    >>> _json_object('{"a": 1}', "$.meta"), _json_kind([1])
    (({'a': 1}, None), 'array')
"""

from __future__ import annotations

import math
import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from orchestrace.errors import Problem, TraceFormatError, _short
from orchestrace.io._common import PathLike, _denied
from orchestrace.io.parquet._layout import _DEFAULTS_COLUMN, _FILES, _pa
from orchestrace.trace.diagnose import problem_from_msgspec
from orchestrace.trace.model import MAX_INT, Decision, EdgeType, EventType, Trace

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
    """Refuse a table whose columns are missing, unknown or hold the wrong kind of value.

    An unknown column is refused as a JSON trace's unknown field is: no reader would keep
    its values (a conversion would drop them).
    """
    known = {*kinds, _DEFAULTS_COLUMN} if kinds is _EVENT_KINDS else set(kinds)
    extra = [n for n in schema.names if n not in known]
    if extra:
        raise TraceFormatError(
            src,
            f"{file} column `{_short(str(extra[0]), 60)}`",
            "is not a column of a trace dataset",
            "drop it, or keep its values in " + ("`attrs`" if kinds is _EVENT_KINDS else "`meta`")
            if kinds is not _EDGE_KINDS
            else "drop it (an edge holds its trace_id, src, dst and type only)",
        )
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


def require_utf8(data: Any, file: str, src: str, first_row: int = 0) -> None:
    """Refuse a table or batch holding a string that is not UTF-8 text.

    Arrow reads a Parquet string as the bytes stored, unchecked; a string column written by
    another tool may hold bytes no reader can decode. One C pass over the strings (a
    dictionary column's distinct values only); the first bad one is named by column and row
    (``first_row``: the row of the file where ``data`` starts).

    Raises:
        TraceFormatError: Naming the file, the column and the row.
    """
    pa, _ = _pa()
    try:
        data.validate(full=True)
        return
    except pa.ArrowInvalid as err:
        damage = " ".join(str(err).split())
    for name in data.schema.names:
        col = data.column(name)
        try:
            col.validate(full=True)
        except pa.ArrowInvalid:
            row = _first_undecodable(col)
            at = "" if row is None else f", row {first_row + row}"
            raise TraceFormatError(
                src,
                f"{file} column `{name}`{at}",
                "holds bytes that are not UTF-8 text",
                f"store the value as UTF-8 text, or {_REWRITE}",
            ) from None
    raise TraceFormatError(src, file, f"damaged: {_short(damage, 200)}", _REWRITE)


def _first_undecodable(col: Any) -> int | None:
    """The first row of ``col`` (an array or a chunked one) whose value Python cannot decode."""
    chunks = getattr(col, "chunks", [col])
    base = 0
    for chunk in chunks:
        for r in range(len(chunk)):
            try:
                chunk[r].as_py()
            except UnicodeDecodeError:
                return base + r
        base += len(chunk)
    return None


def _where(mask: Any) -> list[int]:
    """Row numbers where a boolean Arrow array is true (nulls count as false).

    Every one: the object checks of a JSON trace report each bad value, and so do these.
    """
    import pyarrow.compute as pc  # noqa: PLC0415  pyarrow is heavy: loaded on first use

    arr = pc.fill_null(mask, False).to_numpy(zero_copy_only=False)
    return [int(i) for i in np.flatnonzero(arr)]


def _value_problems(
    table: Any, kinds: dict[str, str], what: str, members: dict[str, tuple[str, ...]]
) -> list[tuple[int, Problem]]:
    """``(row, problem)`` for every bad value of ``table``; paths hold ``{i}`` for the row."""
    pa, _ = _pa()
    import pyarrow.compute as pc  # noqa: PLC0415  pyarrow is heavy: loaded on first use

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
            # integers become the nearest double, as a JSON trace's integer ``t`` does; the
            # problems are check_numbers' own (what check_trace says of a trace in memory)
            values = pc.cast(col, pa.float64(), safe=False)
            finite = pc.is_finite(values)
            fix = f"record {name} as a finite number >= 0" + (
                " (seconds since the trace start)" if name == "t" else ""
            )

            for r in _where(pc.or_(pc.invert(finite), pc.less(values, 0))):  # (in row order)
                v = values[r].as_py()
                negative = v < 0  # (-inf too, as check_numbers says it)
                found.append(
                    (
                        r,
                        Problem(
                            "negative-value" if negative else "non-finite",
                            f"{name} is {'negative' if negative else 'not a finite number:'} {v!r}",
                            fix,
                            path=f"$.{what}[{{i}}].{name}",
                        ),
                    )
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
        col = col.cast(pa.float64(), safe=False)  # the nearest double, as JSON decodes it
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
    """Decode a JSON-object column value; ``(value, None)`` or ``(None, problem)``.

    A null, whether the cell's or the JSON text ``null``, is ``(None, None)``: a JSON trace
    may write ``"attrs": null`` too.
    """
    if text is None:
        return None, None
    try:
        value = msgspec.json.decode(text)  # as the JSON reader: no NaN or Infinity
    except (msgspec.DecodeError, RecursionError):
        return None, Problem("malformed-json", "column holds invalid JSON", _REWRITE, path=path)
    if value is None:
        return None, None
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
    # a null where the header needs a string is named by the type check below
    head: dict[str, Any] = {
        k: row.get(k)
        for k in ("trace_id", "task_id", "system", "topology", "schema_version")
        if row.get(k) is not None or k in ("trace_id", "task_id", "schema_version")
    }
    for k in ("rewards", "costs", "metrics"):
        values = dict(row.get(k) or [])
        kept: dict[Any, float] = {}
        head[k] = kept
        for key, value in values.items():
            if value is None or not math.isfinite(value):
                problems.append(
                    Problem(
                        "non-finite",
                        f"{k}.{_short(str(key))} is {'null' if value is None else repr(value)}",
                        "record a finite number",
                        path=f"$.{k}.{_short(str(key))}",
                    )
                )
            else:  # (a value named above is not named again by the type check)
                kept[key] = value
    head["meta"] = meta or {}
    header: Trace | None = None
    try:
        header = msgspec.convert({**head, "events": [], "edges": []}, Trace)
    except msgspec.ValidationError as err:
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
