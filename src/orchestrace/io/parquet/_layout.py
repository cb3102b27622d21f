"""The dataset's layout: table files, event columns and the Arrow schemas of every table.

Shared by the batch writer (:func:`orchestrace.io.parquet.write_parquet`), the streaming writer
(:mod:`orchestrace.io.parquet_stream`) and the readers, so that all of them agree on the columns.

Example:
    >>> EVENT_COLUMNS[:4], _FILES[0]
    (('id', 't', 'type', 'agent'), 'events.parquet')
"""

from __future__ import annotations

from itertools import repeat
from operator import attrgetter, is_
from typing import Any

import msgspec
import numpy as np

from orchestrace.trace._tables import repeat_string
from orchestrace.trace.model import Event

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


_ATTR = {c: ("from_" if c == "from" else c) for c in EVENT_COLUMNS}
#: Float fields of ``Event`` that default to ``0.0``, with the default object itself. The
#: native JSON writer omits a field only when it holds that very object, so the ``defaults``
#: column (int8, bit ``k`` for the ``k``-th of these) records which ones a recording left at
#: their default: the reader gives back exactly what was written. A dataset without the column
#: reads every value as a number given explicitly.
_ZERO_DEFAULTS: dict[str, float] = {
    f.encode_name: f.default
    for f in msgspec.structs.fields(Event)
    if isinstance(f.default, float) and f.default == 0.0
}
_DEFAULTS_COLUMN = "defaults"


def _defaults_of(events: Any) -> list[int]:
    """The ``defaults`` column of ``events``: which zero-default fields hold the default object."""
    out: list[int] = _defaults_array(events).tolist()
    return out


def _defaults_array(events: Any) -> np.ndarray:
    """:func:`_defaults_of` as an int8 array (one identity test per field, in C)."""
    events = events if isinstance(events, list | tuple) else list(events)
    return _defaults_of_columns(
        {c: map(attrgetter(_ATTR[c]), events) for c in _ZERO_DEFAULTS}, len(events)
    )


def _defaults_of_columns(columns: dict[str, Any], n: int) -> np.ndarray:
    """The ``defaults`` column from the values of the zero-default fields (``n`` of each)."""
    out = np.zeros(n, dtype=np.int8)
    for k, (c, d) in enumerate(_ZERO_DEFAULTS.items()):
        same = map(is_, columns[c], repeat(d))
        out |= np.fromiter(same, dtype=bool, count=n).astype(np.int8) << k
    return out


_FILES = ("events.parquet", "edges.parquet", "traces.parquet")
_TOKENS_FILE = "tokens.parquet"  # present only when some trace records token ids
_EVENT: Any = Event  # built positionally from columns in field order
# rows per row group: small groups let readers stream a trace in bounded memory
_ROW_GROUP = 1 << 16


def _pa() -> Any:
    try:
        import pyarrow as pa  # noqa: PLC0415  pyarrow is heavy: loaded on first use
        import pyarrow.parquet as pq  # noqa: PLC0415  pyarrow is heavy: loaded on first use
    except ImportError:  # pragma: no cover - pyarrow is a core dependency
        raise ImportError("Parquet support needs pyarrow: pip install 'pyarrow>=15'") from None
    return pa, pq


def _repeated(value: str, n: int) -> Any:
    """``n`` copies of the string ``value`` as an Arrow string column, made in C.

    The same column as ``pa.array([value] * n, pa.string())`` (which encodes the string once
    per row: 0.1-0.2 s per million rows) and the same error for a string that is not UTF-8.
    """
    pa, _ = _pa()
    return repeat_string(pa, value, n)


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
            (_DEFAULTS_COLUMN, pa.int8()),
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
