"""A trace's events and edges as Arrow tables or pandas DataFrames.

The tables have the columns of a Parquet dataset's ``events`` and ``edges`` tables (see
:mod:`orchestrace.io.parquet`): ``trace_id`` first, then every :class:`Event` field (``from``
for ``Event.from_``; ``attrs`` as JSON text), one row per event in recording order. The
DataFrames have the same columns, with ``step`` as a nullable ``Int64``, ``trusted`` as a
nullable ``boolean`` and ``attrs`` as the dicts themselves.

pyarrow and pandas are imported only when a table is asked for.

Example:
    >>> from orchestrace.trace.generate import generate_trace
    >>> tr = generate_trace(agents=3, steps=20, seed=0)
    >>> tables = to_arrow(tr)
    >>> tables.events.num_rows, tables.edges.num_rows == len(tr.edges)
    (20, True)
    >>> events, edges = to_pandas(tr)
    >>> events.groupby("agent")["dur"].sum().round(3).to_dict() == {
    ...     a: round(sum(e.dur for e in tr.events if e.agent == a), 3)
    ...     for a in {e.agent for e in tr.events}}
    True
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import partial
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from orchestrace.errors import TraceError
from orchestrace.trace.model import Event

if TYPE_CHECKING:
    from orchestrace.trace.model import Trace

__all__ = ["EDGE_COLUMNS", "EVENT_COLUMNS", "TraceTables", "repeat_string", "to_arrow", "to_pandas"]

#: Columns of the events table, in order: the trace id, then the event's fields as JSON names
#: them (the Parquet dataset's order).
EVENT_COLUMNS = ("trace_id", *(f.encode_name for f in msgspec.structs.fields(Event)))
#: Columns of the edges table, in order.
EDGE_COLUMNS = ("trace_id", "src", "dst", "type")
_INT = ("step", "tokens_in", "tokens_out")
_FLOAT = ("t", "dur", "cost")


class TraceTables(NamedTuple):
    """The events and edges tables of a trace (unpack it, or use the attributes).

    Attributes:
        events: One row per event (columns :data:`EVENT_COLUMNS`).
        edges: One row per edge (columns :data:`EDGE_COLUMNS`).
    """

    events: Any
    edges: Any


def _pyarrow() -> Any:
    try:
        import pyarrow as pa  # noqa: PLC0415  pyarrow is heavy: loaded on first use
    except ImportError:  # pragma: no cover - pyarrow is a core dependency
        raise ImportError("Arrow tables need pyarrow: pip install 'pyarrow>=15'") from None
    return pa


def _pandas() -> Any:
    try:
        pd = importlib.import_module("pandas")
    except ImportError:
        raise ImportError(
            "DataFrames need pandas: pip install 'orchestrace[viewer]' (or pip install pandas)"
        ) from None
    return pd


def _schemas(pa: Any) -> tuple[Any, Any]:
    kinds = {c: pa.string() for c in EVENT_COLUMNS}
    kinds.update({c: pa.int64() for c in _INT})
    kinds.update({c: pa.float64() for c in _FLOAT})
    kinds["trusted"] = pa.bool_()
    events = pa.schema([(c, kinds[c]) for c in EVENT_COLUMNS])
    edges = pa.schema([(c, pa.string()) for c in EDGE_COLUMNS])
    return events, edges


def _list_of(value: str, n: int) -> list[str]:
    return [value] * n


def _columns(trace: Trace, repeat: Callable[[str, int], Any] = _list_of) -> dict[str, Any]:
    """The events' columns; ``trace_id`` made by ``repeat(trace_id, n)``."""
    ev = trace.events
    cols: dict[str, Any] = {"trace_id": repeat(trace.trace_id, len(ev))}
    for c in EVENT_COLUMNS[1:]:
        cols[c] = list(map(attrgetter("from_" if c == "from" else c), ev))
    return cols


def _edge_columns(trace: Trace, repeat: Callable[[str, int], Any] = _list_of) -> dict[str, Any]:
    """The edges' columns; ``trace_id`` made by ``repeat(trace_id, n)``."""
    ed = trace.edges
    return {
        "trace_id": repeat(trace.trace_id, len(ed)),
        "src": list(map(attrgetter("src"), ed)),
        "dst": list(map(attrgetter("dst"), ed)),
        "type": list(map(attrgetter("type"), ed)),
    }


def repeat_string(pa: Any, value: str, n: int) -> Any:
    """``n`` copies of ``value`` as an Arrow string column, made in C (not from a list).

    A string column's offsets are 32-bit: when the copies hold more than 2**31 - 1 bytes in
    all, they come as a chunked column of several arrays (``pa.repeat`` does not check).
    """
    scalar = pa.scalar(value, pa.string())
    size = len(value.encode())
    per_chunk = _MAX_STRING_BYTES // size if size else n
    if n <= per_chunk:
        return pa.repeat(scalar, n)
    return pa.chunked_array(
        [pa.repeat(scalar, min(per_chunk, n - lo)) for lo in range(0, n, per_chunk)],
        pa.string(),
    )


_MAX_STRING_BYTES = 2**31 - 1


def to_arrow(trace: Trace) -> TraceTables:
    """The events and edges of ``trace`` as ``pyarrow.Table`` objects.

    Raises:
        TraceError: An event's ``attrs`` cannot be written as JSON (names the event).
    """
    pa = _pyarrow()
    ev_schema, ed_schema = _schemas(pa)
    in_c = partial(repeat_string, pa)  # the trace_id columns made in C, not from lists
    cols = _columns(trace, in_c)
    enc = msgspec.json.Encoder()
    attrs: list[str | None] = []
    for e, a in zip(trace.events, cols["attrs"], strict=True):
        try:
            attrs.append(None if a is None else enc.encode(a).decode())
        except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as err:
            raise TraceError(
                f"event {e.id[:80]!r}: attrs cannot be written as JSON ({str(err)[:120]}); "
                "keep attrs JSON-serialisable"
            ) from None
    cols["attrs"] = attrs
    events = pa.table(cols, schema=ev_schema)
    edges = pa.table(_edge_columns(trace, in_c), schema=ed_schema)
    return TraceTables(events, edges)


def to_pandas(trace: Trace) -> TraceTables:
    """The events and edges of ``trace`` as pandas DataFrames.

    ``attrs`` holds the dicts (or ``None``); ``step`` is ``Int64`` and ``trusted`` is
    ``boolean``, both nullable.

    Raises:
        ImportError: pandas is not installed (the message says how to install it).
    """
    pd = _pandas()
    cols = _columns(trace)
    events = pd.DataFrame(
        {
            c: pd.array(cols[c], dtype=_PANDAS_DTYPES[c]) if c in _PANDAS_DTYPES else cols[c]
            for c in EVENT_COLUMNS
        },
        columns=list(EVENT_COLUMNS),
    )
    for c in EVENT_COLUMNS:
        if c not in _PANDAS_DTYPES:
            events[c] = events[c].astype(object)
    edges = pd.DataFrame(_edge_columns(trace), columns=list(EDGE_COLUMNS), dtype=object)
    return TraceTables(events, edges)


_PANDAS_DTYPES = {
    "t": "float64",
    "dur": "float64",
    "cost": "float64",
    "tokens_in": "int64",
    "tokens_out": "int64",
    "step": "Int64",
    "trusted": "boolean",
}
