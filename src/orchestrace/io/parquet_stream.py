"""Stream a trace to a Parquet dataset while it is recorded, in bounded row groups.

:func:`~orchestrace.io.parquet.write_parquet` writes finished traces; this writer takes events
and edges one at a time, as a run records them, and writes a row group to ``events.parquet``
(and ``edges.parquet``) whenever ``row_group`` rows have piled up, so the columns held in memory
never exceed one row group. The ``traces`` row (rewards, costs, metrics, meta) is written when
the run ends. The dataset is built in a temporary sibling directory and renamed into place only
when complete, exactly like :func:`~orchestrace.io.parquet.write_parquet` (same layout, same
marker; :func:`~orchestrace.io.parquet.read_parquet` and ``read_graph`` read it).

:class:`ParquetExporter` is the recording exporter (``run(..., processors=[...])``).

Example:
    >>> import tempfile, os
    >>> from orchestrace.io import read_parquet
    >>> from orchestrace.runtime import run
    >>> path = os.path.join(tempfile.mkdtemp(), "run.parquet")
    >>> res = run("swarm", "arith", agents=4, seed=1, processors=[ParquetExporter(path)])
    >>> read_parquet(path) == [res.trace]
    True
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from orchestrace.errors import ConfigError, RuntimeError_
from orchestrace.io._common import PathLike
from orchestrace.io._output import OutputError, replace_dir, write_error
from orchestrace.io._writable import check_record, readable
from orchestrace.io.parquet import (
    _ATTR,
    _FILES,
    _ROW_GROUP,
    _TOKENS_FILE,
    EVENT_COLUMNS,
    _pa,
    _schemas,
    _token_schema,
)
from orchestrace.io.parquet._layout import _DEFAULTS_COLUMN, _defaults_of, _repeated
from orchestrace.trace.model import Edge, Event, Trace
from orchestrace.trace.tokens import TOKEN_FIELDS, TOKENS_KEY, is_token_table

__all__ = ["ParquetExporter", "ParquetStreamWriter"]

_EDGE_COLUMNS = ("src", "dst", "type")


class ParquetStreamWriter:
    """Write one trace's events and edges to a Parquet dataset in row groups as they come.

    The output is checked and its temporary directory created when the writer is made, so an
    output that cannot be written never costs a run.

    Args:
        path: The dataset directory (conventionally ``*.parquet``).
        trace_id: The trace's id (every row carries it).
        overwrite: Replace an existing dataset (only one orchestrace wrote).
        row_group: Rows per row group (the most rows held in memory per table).

    Raises:
        OutputError: The output exists (without ``overwrite``), is not ours, or cannot be
            created.
    """

    def __init__(
        self,
        path: PathLike,
        trace_id: str = "",
        *,
        overwrite: bool = False,
        row_group: int = _ROW_GROUP,
    ) -> None:
        if row_group < 1:
            raise ValueError(f"row_group must be >= 1, got {row_group}")
        self.path = path
        self.trace_id = trace_id
        self.row_group = row_group
        self.n_events = 0
        self.n_edges = 0
        self._enc = msgspec.json.Encoder()
        self._cm = replace_dir(path, force=overwrite)
        self._tmp = self._cm.__enter__()
        self._writers: list[Any] = []
        self._ev: dict[str, list[Any]] = {c: [] for c in EVENT_COLUMNS}
        self._defaults: list[int] = []
        self._ed: dict[str, list[Any]] = {c: [] for c in _EDGE_COLUMNS}
        self._done = False
        try:
            _, pq = _pa()
            ev_schema, ed_schema, _tr = _schemas()
            self._schemas = (ev_schema, ed_schema)
            self._writers = [
                pq.ParquetWriter(self._tmp / _FILES[0], ev_schema),
                pq.ParquetWriter(self._tmp / _FILES[1], ed_schema),
            ]
        except BaseException as err:
            self.abort(err)
            raise

    def event(self, event: Event, edges: list[Edge] | tuple[Edge, ...] = ()) -> None:
        """Append one event and the edges into it.

        Raises:
            ConfigError: ``event`` is not an Event, a time, duration or cost is not finite,
                or the reader would refuse the event or an edge (an unknown type, a negative
                number, a field of the wrong type); nothing of them is kept.
        """
        check_record(event, "ParquetStreamWriter.event")
        for e in edges:
            if not isinstance(e, Edge):
                raise ConfigError(
                    f"ParquetStreamWriter.event takes Edge objects, not a {type(e).__name__}"
                )
        # each kept as its reader reads it back (refused when it would not be)
        event = readable(event, "ParquetStreamWriter.event")[0]
        edges = [readable(e, "ParquetStreamWriter.event")[0] for e in edges]
        cols = self._ev
        for c in EVENT_COLUMNS:
            cols[c].append(getattr(event, _ATTR[c]))
        self._defaults.extend(_defaults_of((event,)))
        for e in edges:
            self._ed["src"].append(e.src)
            self._ed["dst"].append(e.dst)
            self._ed["type"].append(e.type)
        self.n_events += 1
        self.n_edges += len(edges)
        try:
            if len(cols["id"]) >= self.row_group:
                self._flush_events()
            if len(self._ed["src"]) >= self.row_group:
                self._flush_edges()
        except BaseException as err:
            raise self._failed(err) from None

    def _failed(self, err: BaseException) -> BaseException:
        """Drop the unfinished dataset; an :class:`OutputError` for a failed write."""
        self.abort(err)
        if not isinstance(err, (OSError, *pa_errors())):
            return err
        reason = str(write_error(self.path, err)) if isinstance(err, OSError) else str(err)[:200]
        if not reason.startswith("cannot write"):
            reason = f"cannot write {self.path}: {reason}"
        return OutputError(
            self.path,
            f"{reason}; a Parquet dataset is readable only once complete, so nothing of this "
            "run was kept there (record to a .jsonl file to keep a partial recording)",
        )

    def _flush_events(self) -> None:
        pa, _ = _pa()
        cols = self._ev
        n = len(cols["id"])
        if not n:
            return
        attrs = [None if v is None else self._enc.encode(v).decode() for v in cols["attrs"]]
        defaults = {_DEFAULTS_COLUMN: self._defaults}
        table = pa.table(
            {"trace_id": _repeated(self.trace_id, n), **cols, "attrs": attrs, **defaults},
            schema=self._schemas[0],
        )
        self._defaults = []
        self._writers[0].write_table(table, row_group_size=self.row_group)
        self._ev = {c: [] for c in EVENT_COLUMNS}

    def _flush_edges(self) -> None:
        pa, _ = _pa()
        n = len(self._ed["src"])
        if not n:
            return
        table = pa.table(
            {"trace_id": _repeated(self.trace_id, n), **self._ed}, schema=self._schemas[1]
        )
        self._writers[1].write_table(table, row_group_size=self.row_group)
        self._ed = {c: [] for c in _EDGE_COLUMNS}

    def finish(self, trace: Trace) -> None:
        """Write what is left and the ``traces`` row of ``trace``; put the dataset in place.

        Raises:
            OutputError: Writing failed (the temporary directory is removed).
            RuntimeError_: ``trace`` does not hold the events written (another trace).
        """
        if self._done:
            return
        try:
            if trace.n_events != self.n_events or trace.trace_id != self.trace_id:
                raise RuntimeError_(
                    f"{self.path}: the streamed events ({self.n_events} of trace "
                    f"{self.trace_id!r}) are not those of trace {trace.trace_id!r} "
                    f"({trace.n_events} events); stream each run to its own dataset"
                )
            self._flush_events()
            self._flush_edges()
            for w in self._writers:
                w.close()
            pa, pq = _pa()
            _ev, _ed, tr_schema = _schemas()
            meta = trace.meta
            tokens: Any = meta.get(TOKENS_KEY)
            if is_token_table(tokens):  # the side table goes to tokens.parquet, as write_parquet
                meta = {k: v for k, v in meta.items() if k != TOKENS_KEY}
                tok_rows: dict[str, list[Any]] = {
                    "trace_id": [trace.trace_id] * len(tokens),
                    "event_id": list(tokens),
                    **{c: [rec[c] for rec in tokens.values()] for c in TOKEN_FIELDS},
                }
                pq.write_table(pa.table(tok_rows, schema=_token_schema()), self._tmp / _TOKENS_FILE)
            row = {
                "trace_id": [trace.trace_id],
                "task_id": [trace.task_id],
                "system": [trace.system],
                "topology": [trace.topology],
                "schema_version": [trace.schema_version],
                "rewards": [list(trace.rewards.items())],
                "costs": [list(trace.costs.items())],
                "metrics": [list(trace.metrics.items())],
                "meta": [self._enc.encode(meta).decode()],
                "n_events": [self.n_events],
                "n_edges": [self.n_edges],
            }
            pq.write_table(pa.table(row, schema=tr_schema), self._tmp / _FILES[2])
        except BaseException as err:
            raise self._failed(err) from None
        self._done = True
        self._cm.__exit__(None, None, None)

    def abort(self, err: BaseException | None = None) -> None:
        """Drop what was written (the temporary directory); an earlier dataset stays."""
        if self._done:
            return
        self._done = True
        for w in self._writers:
            with contextlib.suppress(Exception):
                w.close()
        failure = err if err is not None else RuntimeError_("the recording was abandoned")
        with contextlib.suppress(BaseException):
            self._cm.__exit__(type(failure), failure, failure.__traceback__)


def pa_errors() -> tuple[type[BaseException], ...]:
    """The pyarrow errors that mean a write failed (other than ``OSError``)."""
    pa, _ = _pa()
    return (pa.ArrowException,)


class ParquetExporter:
    """An exporter that streams the run to a Parquet dataset (row groups).

    It has the methods of :class:`orchestrace.runtime.export.Exporter` (the Parquet layer
    sits below the runtime, so it does not derive from it); passed in ``run(...,
    processors=[ParquetExporter(path)])`` it is driven by a ``SimpleProcessor``. If writing
    fails the run stops and fails, and the incomplete dataset is removed (a dataset is only
    readable once complete; an earlier dataset it was to replace stays). A run whose backend
    returns token records writes them to ``tokens.parquet``, as ``write_parquet`` does.

    Args:
        path: The dataset directory.
        overwrite: Replace an existing dataset.
        row_group: Rows per row group.

    Raises:
        OutputError: The output exists (without ``overwrite``), is not ours, or cannot be
            created.
    """

    def __init__(
        self, path: PathLike, *, overwrite: bool = False, row_group: int = _ROW_GROUP
    ) -> None:
        self.writer = ParquetStreamWriter(path, overwrite=overwrite, row_group=row_group)

    def start(self, header: Mapping[str, Any]) -> None:
        """Take the trace id."""
        self.writer.trace_id = str(header["trace_id"])

    def export(self, records: Sequence[tuple[Event, Sequence[Edge]]]) -> None:
        """Append each event and the edges into it."""
        for event, edges in records:
            self.writer.event(event, tuple(edges))

    def finish(self, trace: Trace) -> None:
        """Write the rest and put the dataset in place."""
        self.writer.finish(trace)

    def force_flush(self) -> bool:
        """Nothing to flush early; ``True``.

        Rows are written a row group at a time and the dataset appears complete or not at all
        (when the run ends), so a partial flush would not make anything readable.
        """
        return True

    def shutdown(self) -> None:
        """Drop an unfinished dataset (a run that failed or never ended)."""
        self.writer.abort()

    def fail(self) -> None:
        """Drop what was written."""
        self.writer.abort()
