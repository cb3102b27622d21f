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

from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from orchestrace._collector import paused
from orchestrace.errors import ConfigError
from orchestrace.io._common import PathLike
from orchestrace.io._output import OutputError, replace_dir
from orchestrace.io._writable import require_writable
from orchestrace.io.parquet._check import header_of
from orchestrace.io.parquet._layout import _ATTR as _ATTR  # the streaming writer's too
from orchestrace.io.parquet._layout import (
    _DEFAULTS_COLUMN,
    _ZERO_DEFAULTS,
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
from orchestrace.trace.generate import GeneratedColumns
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
    "write_generated",
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
    _write_dataset(path, overwrite, lambda tmp: _write_tables(traces, tmp))


def write_generated(gen: GeneratedColumns, path: PathLike, *, overwrite: bool = False) -> None:
    """Write a generated trace's columns as a Parquet dataset, without event objects.

    The dataset is the one :func:`write_parquet` writes for ``gen``'s trace, byte for byte,
    and is put in place the same way.

    Args:
        gen: The columns of :func:`~orchestrace.trace.generate.generate_columns`.
        path: The dataset directory (conventionally ``*.parquet``).
        overwrite: Replace an existing dataset (one orchestrace wrote).

    Raises:
        OutputError: As for :func:`write_parquet`.
        ConfigError: ``gen`` is not what :func:`~orchestrace.trace.generate.generate_columns`
            returns.

    Example:
        >>> import tempfile, os
        >>> from orchestrace.trace.generate import generate_columns
        >>> gen = generate_columns(agents=4, steps=40, seed=2)
        >>> path = os.path.join(tempfile.mkdtemp(), "run.parquet")
        >>> write_generated(gen, path)
        >>> read_parquet(path)[0].n_events
        40
    """
    if not isinstance(gen, GeneratedColumns):
        raise ConfigError(
            f"write_generated takes what generate_columns returns, not a {type(gen).__name__}; "
            "write a Trace with write_parquet"
        )
    _write_dataset(path, overwrite, lambda tmp: _write_generated_tables(gen, tmp))


def _write_dataset(path: PathLike, overwrite: bool, write: Callable[[Path], None]) -> None:
    """Run ``write`` on a temporary directory put in place at ``path`` when it returns."""
    pa, _ = _pa()
    with replace_dir(path, force=overwrite) as tmp:
        try:
            write(tmp)
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
    trace_id: str, events: Sequence[Event], enc: msgspec.json.Encoder, ints: bool = True
) -> dict[str, Any]:
    """The events table's columns for ``events``: lists and tuples Arrow converts itself.

    ``ints``: a time, duration or cost may be an int (a trace built in Python; a decoded one
    holds floats), made a float here, as a float column holds it (Arrow refuses an int beyond
    int64 there).
    """
    n = len(events)
    cols: dict[str, Any] = {"trace_id": _repeated(trace_id, n)}
    if n:
        cols.update(zip(EVENT_COLUMNS, zip(*map(_ASTUPLE, events), strict=True), strict=True))
    else:
        cols.update((c, []) for c in EVENT_COLUMNS)
    for c in ("t", "dur", "cost") if ints else ():
        if int in set(map(type, cols[c])):  # (exact: the writers' check refused the others)
            cols[c] = [float(v) if type(v) is int else v for v in cols[c]]
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
            pa.table(
                _event_columns(tr.trace_id, ev[lo : lo + _ROW_GROUP], enc, not tr.decoded),
                schema=ev_schema,
            ),
            row_group_size=_ROW_GROUP,
        )
    ed = tr.edges
    for lo in range(0, max(len(ed), 1), _ROW_GROUP):  # (string columns: 32-bit offsets)
        part = ed[lo : lo + _ROW_GROUP]
        ed_writer.write_table(
            pa.table(
                {
                    "trace_id": _repeated(tr.trace_id, len(part)),
                    "src": list(map(attrgetter("src"), part)),
                    "dst": list(map(attrgetter("dst"), part)),
                    "type": list(map(attrgetter("type"), part)),
                },
                schema=ed_schema,
            ),
            row_group_size=_ROW_GROUP,
        )
    _add_trace_row(rows, tr, enc.encode(meta).decode(), len(ev), len(ed))


def _add_trace_row(
    rows: dict[str, list[Any]], tr: Trace, meta: str, n_events: int, n_edges: int
) -> None:
    """Add ``tr``'s row of the traces table (its header, ``meta`` as JSON text) to ``rows``."""
    for key, value in (
        ("trace_id", tr.trace_id),
        ("task_id", tr.task_id),
        ("system", tr.system),
        ("topology", tr.topology),
        ("schema_version", tr.schema_version),
        ("rewards", _as_floats(tr.rewards)),
        ("costs", _as_floats(tr.costs)),
        ("metrics", _as_floats(tr.metrics)),
        ("meta", meta),
        ("n_events", n_events),
        ("n_edges", n_edges),
    ):
        rows[key].append(value)


def _as_floats(values: dict[str, float]) -> list[tuple[str, float]]:
    """A map column's entries: ints made floats (exact: the writers' check refused others)."""
    return [(k, float(v) if type(v) is int else v) for k, v in values.items()]


def _write_generated_tables(gen: GeneratedColumns, tmp: Path) -> None:
    """The three tables of a generated trace, from its columns (see :func:`write_generated`)."""
    pa, pq = _pa()
    import pyarrow.compute as pc  # noqa: PLC0415  loaded with pyarrow, on first use

    ev_schema, ed_schema, tr_schema = _schemas()
    tr = gen.header
    n, n_ed = gen.n_events, len(gen.edge_src)
    strings = pa.array([*gen.strings, None], pa.string())
    null_code = len(gen.strings)

    def text(codes: Any) -> Any:
        at = codes.astype(np.int32)  # (a copy: the codes of None become the null's)
        at[at < 0] = null_code
        return strings.take(at)

    ids = pc.binary_join_element_wise("e", pc.cast(pa.array(np.arange(1, n + 1)), pa.string()), "")
    nothing = pa.nulls(_ROW_GROUP, pa.string())
    with pq.ParquetWriter(tmp / _FILES[0], ev_schema) as writer:
        for lo in range(0, max(n, 1), _ROW_GROUP):
            hi = min(n, lo + _ROW_GROUP)
            part = slice(lo, hi)
            defaults = np.zeros(hi - lo, dtype=np.int8)
            for k, c in enumerate(_ZERO_DEFAULTS):
                defaults |= getattr(gen, f"{c}_default")[part].astype(np.int8) << k
            step = gen.step[part]
            cols = {
                "trace_id": _repeated(tr.trace_id, hi - lo),
                "id": ids[lo:hi],
                "t": gen.t[part],
                "type": text(gen.type[part]),
                "agent": text(gen.agent[part]),
                "dur": gen.dur[part],
                "role": text(gen.role[part]),
                "from": text(gen.from_[part]),
                "to": text(gen.to[part]),
                "tool": text(gen.tool[part]),
                "decision": text(gen.decision[part]),
                "step": pa.array(step.astype(np.int64), pa.int64(), mask=step < 0),
                "content": text(gen.content[part]),
                "content_ref": nothing[: hi - lo],
                "trusted": pa.array(
                    np.zeros(hi - lo, dtype=bool), pa.bool_(), mask=~gen.has_trusted[part]
                ),
                "tokens_in": gen.tokens_in[part].astype(np.int64),
                "tokens_out": gen.tokens_out[part].astype(np.int64),
                "cost": gen.cost[part],
                "error": nothing[: hi - lo],
                "attrs": nothing[: hi - lo],
                _DEFAULTS_COLUMN: defaults,
            }
            writer.write_table(pa.table(cols, schema=ev_schema), row_group_size=_ROW_GROUP)
    with pq.ParquetWriter(tmp / _FILES[1], ed_schema) as writer:
        for lo in range(0, max(n_ed, 1), _ROW_GROUP):  # the groups write_parquet writes
            part = slice(lo, lo + _ROW_GROUP)
            edges = {
                "trace_id": _repeated(tr.trace_id, len(gen.edge_src[part])),
                "src": ids.take(gen.edge_src[part]),
                "dst": ids.take(gen.edge_dst[part]),
                "type": text(gen.edge_type[part]),
            }
            writer.write_table(pa.table(edges, schema=ed_schema), row_group_size=_ROW_GROUP)
    rows: dict[str, list[Any]] = {f.name: [] for f in tr_schema}
    _add_trace_row(rows, tr, msgspec.json.encode(tr.meta).decode(), n, n_ed)
    pq.write_table(pa.table(rows, schema=tr_schema), tmp / _FILES[2])
