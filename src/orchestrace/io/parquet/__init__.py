"""Parquet datasets: ``events``, ``edges`` and ``traces`` tables, readable without orchestrace.

A dataset is a directory (conventionally named ``*.parquet``) holding three files::

    run.parquet/
      events.parquet   trace_id, id, t, type, agent, dur, role, from, to, tool, decision, step,
                       content, content_ref, trusted, tokens_in, tokens_out, cost, error,
                       attrs (JSON text), defaults (int8: bit 0 ``dur``, bit 1 ``cost``
                       left at their default 0.0, which native JSON omits)
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

from collections.abc import Iterable, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec

from orchestrace._collector import paused
from orchestrace.io._common import PathLike
from orchestrace.io._output import OutputError, replace_dir
from orchestrace.io._writable import require_writable
from orchestrace.io.parquet._check import header_of
from orchestrace.io.parquet._layout import _ATTR as _ATTR  # the streaming writer's too
from orchestrace.io.parquet._layout import (
    _DEFAULTS_COLUMN,
    EVENT_COLUMNS,
    _defaults_of_columns,
    _repeated,
)
from orchestrace.io.parquet._layout import _FILES as _FILES  # the streaming writer's too
from orchestrace.io.parquet._layout import _ROW_GROUP as _ROW_GROUP  # the streaming writer's too
from orchestrace.io.parquet._layout import (
    _TOKENS_FILE as _TOKENS_FILE,  # the streaming writer's too
)
from orchestrace.io.parquet._layout import _pa as _pa  # the streaming writer's too
from orchestrace.io.parquet._layout import _schemas as _schemas  # the streaming writer's too
from orchestrace.io.parquet._layout import (
    _token_schema as _token_schema,  # the streaming writer's too
)
from orchestrace.io.parquet._read import (
    parse_parquet,
    read_graph,
    read_parquet,
    read_tables,
    read_token_tables,
    trace_ids,
)
from orchestrace.trace.model import Event, Trace
from orchestrace.trace.tokens import TOKEN_FIELDS, TOKENS_KEY, is_token_table

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


assert tuple(f.encode_name for f in msgspec.structs.fields(Event)) == EVENT_COLUMNS


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
        for i, tr in enumerate(traces):  # (the caller's iterable runs outside the pause)
            with paused():
                require_writable([tr], first=i)  # (the temporary dataset is dropped on refusal)
                _write_trace(tr, enc, ev_writer, ed_writer, rows, tok_rows)
    finally:
        ev_writer.close()
        ed_writer.close()
    with paused():
        pq.write_table(pa.table(rows, schema=tr_schema), tmp / _FILES[2])
        if tok_rows["trace_id"]:
            pq.write_table(pa.table(tok_rows, schema=_token_schema()), tmp / _TOKENS_FILE)


_ASTUPLE = msgspec.structs.astuple


def _event_columns(
    trace_id: str, events: Sequence[Event], enc: msgspec.json.Encoder
) -> dict[str, Any]:
    """The events table's columns for ``events``: lists and tuples Arrow converts itself."""
    n = len(events)
    cols: dict[str, Any] = {"trace_id": _repeated(trace_id, n)}
    if n:
        cols.update(zip(EVENT_COLUMNS, zip(*map(_ASTUPLE, events), strict=True), strict=True))
    else:
        cols.update((c, []) for c in EVENT_COLUMNS)
    cols["attrs"] = [None if v is None else enc.encode(v).decode() for v in cols["attrs"]]
    cols[_DEFAULTS_COLUMN] = _defaults_of_columns(cols, n)
    return cols


def _write_trace(
    tr: Trace,
    enc: msgspec.json.Encoder,
    ev_writer: Any,
    ed_writer: Any,
    rows: dict[str, list[Any]],
    tok_rows: dict[str, list[Any]],
) -> None:
    """Write one trace's events and edges, and add its row (and token rows) to the lists."""
    pa, _ = _pa()
    ev_schema, ed_schema, _ = _schemas()
    meta = tr.meta
    if is_token_table(meta.get(TOKENS_KEY)):  # the side table goes to tokens.parquet
        meta = {k: v for k, v in meta.items() if k != TOKENS_KEY}
        for eid, rec in tr.meta[TOKENS_KEY].items():
            tok_rows["trace_id"].append(tr.trace_id)
            tok_rows["event_id"].append(eid)
            for c in TOKEN_FIELDS:
                tok_rows[c].append(rec[c])
    ev = tr.events
    # a row group at a time (the same groups one table of every row gives): each event's
    # fields in one C call, turned into columns in C (19 passes over the events took twice as
    # long), with scratch memory bounded by the group
    for lo in range(0, max(len(ev), 1), _ROW_GROUP):
        ev_writer.write_table(
            pa.table(_event_columns(tr.trace_id, ev[lo : lo + _ROW_GROUP], enc), schema=ev_schema),
            row_group_size=_ROW_GROUP,
        )
    ed = tr.edges
    ed_writer.write_table(
        pa.table(
            {
                "trace_id": _repeated(tr.trace_id, len(ed)),
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
