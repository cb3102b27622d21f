"""Compile a :class:`~orchestrace.trace.graph.TraceGraph` from columns: Arrow arrays, Parquet.

This is how a Parquet dataset is analysed without ever creating event objects
(:func:`orchestrace.io.read_graph`): the ``events`` and ``edges`` tables arrive in batches
(row groups) and only compact numpy columns are kept, which keeps a 1,000,000-event analysis
within about twice the memory of its Arrow table. Type and decision names become the integer
codes of :mod:`orchestrace.trace.enums`; agent, role and tool names go to the graph's name
tables; edge ends map to event indices through a dense integer table when ids have the form
``prefix + decimal``, else through Arrow's ``index_in``.

Example:
    >>> g = from_columns(["e1", "e2"], [0.0, 1.0], [1.0, 2.0], ["spawn", "return"],
    ...                  ["lead", "w1"], ["e1"], ["e2"], ["spawn"], to=["w1", "lead"])
    >>> g.critical_path().ids, g.names
    (('e1', 'e2'), ['lead', 'w1'])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from orchestrace.trace._ids import dense_table, lookup_ints
from orchestrace.trace._names import NameTable
from orchestrace.trace.enums import DECISIONS, EDGE_TYPES, EVENT_TYPES
from orchestrace.trace.graph import COLUMNS, TraceGraph

__all__ = ["from_batches", "from_columns", "skip_pandas_probe", "string_array"]

EdgeRefs = Callable[[int, str], str] | tuple[Any, Any]


def from_columns(
    ids: Any,
    t: Any,
    dur: Any,
    types: Any,
    agents: Any,
    edge_src: Any,
    edge_dst: Any,
    edge_types: Any,
    **optional: Any,
) -> TraceGraph:
    """Compile columnar data (pyarrow arrays or sequences) without building events.

    Args:
        ids: Event ids.
        t: Start times.
        dur: Durations.
        types: Event type names.
        agents: Producing agent of each event.
        edge_src: Edge source ids.
        edge_dst: Edge destination ids.
        edge_types: Edge type names.
        **optional: Any of ``to``, ``role``, ``tool``, ``decision`` (strings, null for
            unset), ``step`` (ints, null for unset), ``tokens_in``, ``tokens_out``,
            ``cost``.

    Returns:
        The compiled graph.

    Raises:
        ValueError: A type or decision name is unknown (the message names it), or a number
            does not fit its 64-bit column.
    """
    batch = {"id": ids, "t": t, "dur": dur, "type": types, "agent": agents, **optional}
    edges = {"src": edge_src, "dst": edge_dst, "type": edge_types}
    return from_batches([batch], [edges], edge_refs=(edge_src, edge_dst))


def from_batches(
    event_batches: Iterable[Any],
    edge_batches: Iterable[Any],
    *,
    n_events: int | None = None,
    n_edges: int | None = None,
    edge_refs: EdgeRefs | None = None,
) -> TraceGraph:
    """Compile columns arriving in batches (e.g. Parquet row groups), in bounded memory.

    Each event batch is a mapping (or ``pyarrow.RecordBatch``) with the event columns named
    as in the Parquet ``events`` table (``id``, ``t``, ``dur``, ``type``, ``agent`` and
    optionally ``to``, ``role``, ``tool``, ``decision``, ``step``, ``tokens_in``,
    ``tokens_out``, ``cost``); each edge batch has ``src``, ``dst`` and ``type``. Only
    compact numpy columns are kept; with ``n_events``/``n_edges`` they are allocated once.

    Args:
        event_batches: Event column batches, in event order.
        edge_batches: Edge column batches, read after all events.
        n_events: Number of events, when known.
        n_edges: Number of edges, when known.
        edge_refs: Where messages find edge ``k``'s id strings: ``f(k, "src"|"dst")``, or
            the ``(src, dst)`` columns. By default the edge batches' own columns are kept.

    Returns:
        The compiled graph.

    Raises:
        ValueError: A type or decision name is unknown (the message names it), or a number
            does not fit its 64-bit column.
        TypeError: A batch has a column no event has.
    """
    # pyarrow loads only when columns are compiled, so `import orchestrace` stays light
    import pyarrow as pa  # noqa: PLC0415  pyarrow is heavy: loaded on first use
    import pyarrow.compute as pc  # noqa: PLC0415  pyarrow is heavy: loaded on first use

    pool = pa.default_memory_pool()

    def arr(x: Any) -> Any:
        try:
            out = x if _is_arrow(x) else pa.array(x, pa.string() if not len(x) else None)
        except OverflowError:
            raise ValueError("a number does not fit a 64-bit column (2^63-1 at most)") from None
        return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out

    def numeric(x: Any, dtype: Any, missing: Any) -> np.ndarray:
        a = arr(x)
        if pa.types.is_string(a.type) or pa.types.is_large_string(a.type):
            # Arrow would read "1_0" or another script's digits as a number: none is one here
            raise ValueError(f"a number column holds strings ({a.type})")
        if a.null_count:
            a = a.fill_null(missing)
        if (
            dtype is not np.float64
            and pa.types.is_unsigned_integer(a.type)
            and len(a)
            and pc.max(a).as_py() >= 2**63
        ):
            raise ValueError("a number does not fit a 64-bit column (2^63-1 at most)")
        return np.asarray(a.to_numpy(zero_copy_only=False), dtype=dtype)

    member_sets = {
        "event type": string_array([m.value for m in EVENT_TYPES]),
        "edge type": string_array([m.value for m in EDGE_TYPES]),
        "decision": string_array([m.value for m in DECISIONS]),
    }

    def encoded(x: Any) -> tuple[Any, np.ndarray]:
        """``(dictionary, indices)`` of a string column; -1 indexes a null."""
        a = arr(x)
        if not pa.types.is_dictionary(a.type):
            a = pc.dictionary_encode(pc.cast(a, pa.string()))
        dictionary = pc.cast(a.dictionary, pa.string())
        return dictionary, numeric(a.indices, np.int64, -1)

    def enum_codes(x: Any, what: str, dtype: Any) -> np.ndarray:
        dictionary, idx = encoded(x)
        codes = numeric(pc.index_in(dictionary, value_set=member_sets[what]), np.int64, -1)
        unknown = np.flatnonzero(codes < 0)
        if len(unknown) and np.isin(idx, unknown).any():
            used = np.zeros(len(codes), dtype=bool)
            used[idx[idx >= 0]] = True
            first = _first_use(idx, len(codes))
            bad_codes = unknown[used[unknown]]
            bad_codes = bad_codes[np.argsort(first[bad_codes], kind="stable")]
            bad = [dictionary[int(k)].as_py() for k in bad_codes[:5]]
            choices = member_sets[what].to_pylist()
            raise ValueError(f"unknown {what} {bad}; use one of {choices}")
        return np.asarray(np.append(codes, -1).astype(dtype)[idx])

    def string_codes(x: Any, table: NameTable) -> np.ndarray:
        # names get codes in order of first use, as a row-by-row pass would give them
        dictionary, idx = encoded(x)
        values = dictionary.to_pylist()
        remap = np.full(len(values) + 1, -1, dtype=np.int32)
        if all(v in table for v in values):  # no new name: the order of use does not matter
            remap[:-1] = [table[v] for v in values]
            return np.asarray(remap[idx])
        first = _first_use(idx, len(values))
        used = np.flatnonzero(first < len(idx))
        used = used[np.argsort(first[used], kind="stable")]
        remap[used] = [table[values[k]] for k in used.tolist()]
        return np.asarray(remap[idx])

    def as_dict(raw: Any) -> dict[str, Any]:
        if hasattr(raw, "schema"):
            return {k: raw.column(k) for k in raw.schema.names}
        return dict(raw)

    # ---- events
    names, roles, tools = NameTable(), NameTable(), NameTable()
    tables = {
        "to": ("to_code", names),
        "role": ("role_code", roles),
        "tool": ("tool_code", tools),
    }
    grow = _Columns(COLUMNS, n_events)
    id_parts: list[Any] = []
    for raw in event_batches:
        batch = as_dict(raw)
        id_parts.append(pc.cast(arr(batch["id"]), pa.string()))
        got = {
            "t": numeric(batch["t"], np.float64, np.nan),
            "dur": numeric(batch["dur"], np.float64, 0.0),
            "type_code": enum_codes(batch["type"], "event type", np.int8),
            "agent_code": string_codes(batch["agent"], names),
        }
        for key, value in batch.items():
            if value is None or key in ("id", "t", "dur", "type", "agent", "trace_id"):
                continue
            if key in tables:
                col, table = tables[key]
                got[col] = string_codes(value, table)
            elif key == "decision":
                got["decision_code"] = enum_codes(value, "decision", np.int8)
            elif key in ("step", "tokens_in", "tokens_out", "cost"):
                dtype, missing = COLUMNS[key]
                got[key] = numeric(value, dtype, missing)
            elif key not in ("from", "content", "content_ref", "trusted", "error", "attrs"):
                raise TypeError(f"unknown column {key!r}")
        grow.append(got, len(id_parts[-1]))
        del got, batch, raw
        pool.release_unused()  # the batch is compiled: its memory goes back at once
    cols = grow.finish()
    n = sum(map(len, id_parts))

    # ---- edges: ids of the form prefix+integer map through a dense table (parsed a batch
    # at a time: the whole column's parse took 23 bytes per event of scratch memory)
    first = next((part[0].as_py() for part in id_parts if len(part)), "")
    prefix = first.rstrip("0123456789")
    id_ints = _parts_int_ids(id_parts, prefix) if n >= 1024 else None
    dense = dense_table(id_ints, n) if id_ints is not None else None
    del id_ints
    ids_arr = pa.concat_arrays(id_parts) if id_parts else string_array([])
    del id_parts
    edge_cols = _Columns(
        {"src": (np.int64, -1), "dst": (np.int64, -1), "code": (np.int8, 0)}, n_edges
    )
    kept: list[tuple[Any, Any]] = []
    for raw in edge_batches:
        batch = as_dict(raw)
        src_b = pc.cast(arr(batch["src"]), pa.string())
        dst_b = pc.cast(arr(batch["dst"]), pa.string())
        got = {"code": enum_codes(batch["type"], "edge type", np.int8)}
        for key, refs in (("src", src_b), ("dst", dst_b)):
            ints = _arrow_int_ids(refs, prefix) if dense is not None else None
            got[key] = (
                lookup_ints(dense[0], ints)
                if dense is not None and ints is not None
                else (_index_in(refs, ids_arr) if len(refs) else np.zeros(0, np.int64))
            )
        edge_cols.append(got, len(src_b))
        if edge_refs is None:
            kept.append((src_b, dst_b))
        del got, batch, raw, src_b, dst_b
    ecols = edge_cols.finish()
    unique = dense[1] if dense is not None else None
    del dense
    pool.release_unused()
    refs_out: Any = edge_refs
    if edge_refs is None:
        refs_out = (
            pa.concat_arrays([a for a, _ in kept]) if kept else string_array([]),
            pa.concat_arrays([b for _, b in kept]) if kept else string_array([]),
        )
    return TraceGraph(
        ids_arr,
        cols,
        names,
        roles,
        tools,
        ecols["src"],
        ecols["dst"],
        ecols["code"],
        edge_refs=refs_out,
        unique=unique,
    )


def string_array(values: list[str]) -> Any:
    """A ``pyarrow`` string array of ``values``, built from its buffers.

    ``pyarrow.array`` of Python values asks pandas whether they are pandas objects, which
    imports pandas (a third of a second) the first time; strings need no such question.

    Example:
        >>> string_array(["a", "bc"]).to_pylist()
        ['a', 'bc']
    """
    import pyarrow as pa  # noqa: PLC0415  pyarrow is heavy: loaded on first use

    data = [v.encode() for v in values]
    offsets = np.zeros(len(data) + 1, dtype=np.int32)
    np.cumsum([len(d) for d in data], out=offsets[1:])
    return pa.StringArray.from_buffers(
        len(data), pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(data))
    )


def skip_pandas_probe() -> None:
    """Let ``pyarrow`` take pandas as absent until something really converts to pandas.

    ``pyarrow`` checks once per process whether pandas is importable, the first time it
    converts a Python value (a fill value, a scalar to compare with): that imports pandas,
    0.2-0.5 s, although the columnar commands never use it. This makes the check find no
    pandas, so the check costs nothing; converting a table to pandas
    (``Table.to_pandas``) still imports and uses it. Only for a command-line process: the
    check's answer also decides whether ``pyarrow`` recognises pandas objects passed to it.

    Example:
        >>> import subprocess, sys
        >>> code = ("import sys, pyarrow as pa; from orchestrace.io._columnar import "
        ...         "skip_pandas_probe; skip_pandas_probe(); pa.scalar(1); "
        ...         "print('pandas' in sys.modules)")
        >>> run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        >>> run.stdout.strip()
        'False'
    """
    import sys  # noqa: PLC0415  only this process-wide step needs it

    if "pandas" in sys.modules:
        return
    import pyarrow as pa  # noqa: PLC0415  pyarrow is heavy: loaded on first use

    class _Absent:
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
            if name == "pandas" or name.startswith("pandas."):
                raise ImportError("pandas is not needed here")

    finder = _Absent()
    sys.meta_path.insert(0, finder)
    try:
        pa.scalar(0)  # the first Python value converted runs pyarrow's check
    finally:
        sys.meta_path.remove(finder)


def _first_use(idx: np.ndarray, size: int) -> np.ndarray:
    """Row of the first use of each code ``0..size-1`` in ``idx`` (``len(idx)``: unused)."""
    first = np.full(size + 1, len(idx), dtype=np.int64)
    rows = np.arange(len(idx) - 1, -1, -1, dtype=np.int64)
    first[idx[::-1]] = rows  # the last write to a slot is its first row
    return first[:size]


def _is_arrow(x: Any) -> bool:
    return type(x).__module__.startswith("pyarrow")


def _index_in(values: Any, ids: Any) -> np.ndarray:
    """Map each string of the Arrow array ``values`` to its position in ``ids`` (-1: absent)."""
    import pyarrow as pa  # noqa: PLC0415  lazy: see from_batches
    import pyarrow.compute as pc  # noqa: PLC0415  pyarrow is heavy: loaded on first use

    id_arr = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    out = pc.index_in(values, value_set=id_arr)
    return np.asarray(out.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


def _arrow_int_ids(values: Any, prefix: str) -> np.ndarray | None:
    """Arrow twin of :func:`~orchestrace.trace._ids.int_ids`: parse ``prefix + canonical decimal`` strings, else None."""
    import pyarrow as pa  # noqa: PLC0415  lazy: see from_batches
    import pyarrow.compute as pc  # noqa: PLC0415  pyarrow is heavy: loaded on first use

    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if values.null_count or not pc.all(pc.starts_with(values, prefix)).as_py():
        return None
    digits = pc.utf8_slice_codeunits(values, start=len(prefix)) if prefix else values
    # non-empty ASCII digits only (ascii_is_decimal is false for "" and for any other byte)
    if not pc.all(pc.ascii_is_decimal(digits)).as_py():
        return None
    lengths = pc.binary_length(digits)
    if pc.max(lengths).as_py() > 18:
        return None
    # canonical: no leading zero (then the digit count is the decimal width)
    leading_zero = pc.and_(pc.starts_with(digits, "0"), pc.greater(lengths, 1))
    if pc.any(leading_zero).as_py():
        return None
    try:
        return np.asarray(pc.cast(digits, pa.int64()).to_numpy(zero_copy_only=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _parts_int_ids(parts: list[Any], prefix: str) -> np.ndarray | None:
    """:func:`_arrow_int_ids` of the Arrow arrays ``parts`` taken as one column."""
    out = []
    for part in parts:
        got = _arrow_int_ids(part, prefix)
        if got is None:
            return None
        out.append(got)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


class _Columns:
    """Numpy columns filled batch by batch (preallocated when the total is known)."""

    def __init__(self, spec: dict[str, tuple[Any, Any]], total: int | None) -> None:
        self.spec = spec
        self.total = total
        self.pos = 0
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in spec}
        self.full = (
            {k: np.empty(total, dtype=d) for k, (d, _) in spec.items()}
            if total is not None
            else None
        )

    def append(self, got: dict[str, np.ndarray], count: int) -> None:
        for key, (dtype, missing) in self.spec.items():
            if self.full is not None:
                if self.pos + count > len(self.full[key]):
                    raise ValueError(f"more rows than the {self.total} announced")
                if key in got:
                    self.full[key][self.pos : self.pos + count] = got[key]
                else:
                    self.full[key][self.pos : self.pos + count] = 0 if missing is None else missing
            else:
                value = got.get(key)
                self.parts[key].append(
                    value if value is not None else np.full(count, missing, dtype=dtype)
                )
        self.pos += count

    def finish(self) -> dict[str, np.ndarray]:
        if self.full is not None:
            if self.pos != self.total:
                raise ValueError(f"expected {self.total} rows, got {self.pos}")
            return self.full
        return {
            k: (v[0] if len(v) == 1 else np.concatenate(v)) if v else np.zeros(0, self.spec[k][0])
            for k, v in self.parts.items()
        }
