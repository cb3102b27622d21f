"""Exporters: where recorded events go (a JSONL stream, a Parquet dataset, memory).

An exporter decides *where* records are written, as OpenTelemetry's ``SpanExporter`` does;
a processor of :mod:`orchestrace.runtime.recorder` decides *when* (each event as it is
recorded with :class:`~orchestrace.runtime.recorder.SimpleProcessor`, or in batches with
:class:`~orchestrace.runtime.recorder.BatchProcessor`). An exporter passed where a processor is
expected (``run(..., processors=[JsonlExporter(path)])``) is wrapped in a ``SimpleProcessor``.

An exporter that cannot write loses data, so the run stops and fails with the exporter's
error (an :class:`~orchestrace.io.OutputError` for a file that cannot be written); what it
wrote before stays where it can be read (a JSONL recording keeps its whole records and reads
back as a partial trace).

The Parquet exporter, :class:`orchestrace.io.parquet_stream.ParquetExporter`, has the same
methods.

Example:
    >>> from orchestrace.runtime import run
    >>> mem = MemoryExporter()
    >>> res = run("swarm", "arith", agents=2, seed=1, processors=[mem])
    >>> len(mem.records) == res.trace.n_events, mem.trace == res.trace
    (True, True)
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrace.errors import RuntimeError_
from orchestrace.io._output import StreamTarget, check_output, write_error
from orchestrace.io.jsonl import StreamWriter
from orchestrace.trace.model import Edge, Event, Trace

__all__ = ["Exporter", "JsonlExporter", "MemoryExporter", "Record"]

#: One recorded event with the edges into it.
Record = tuple[Event, Sequence[Edge]]


class Exporter:
    """Base exporter: the destination of a run's records.

    Methods raise on failure (an :class:`~orchestrace.io.OutputError` when a file cannot be
    written); the processor that drives the exporter reports it and the run stops.

    Example:
        >>> class Count(Exporter):
        ...     n = 0
        ...     def export(self, records): self.n += len(records)
        >>> c = Count()
        >>> c.export([]); c.force_flush()
        True
    """

    def start(self, header: Mapping[str, Any]) -> None:
        """A run starts (``header``: trace_id, task_id, system, topology, meta)."""

    def export(self, records: Sequence[Record]) -> None:
        """Write ``records`` (in the order they were recorded)."""

    def finish(self, trace: Trace) -> None:
        """The run ended: write what belongs to the whole trace (rewards, metrics, meta)."""

    def force_flush(self) -> bool:
        """Make everything exported so far durable; ``True`` once it is."""
        return True

    def shutdown(self) -> None:
        """Release resources (called once; an unfinished output stays as it is)."""

    def fail(self) -> None:
        """An earlier call raised: keep what can still be read, drop the rest."""


class MemoryExporter(Exporter):
    """Keep the records and the finished trace in memory (for tests and notebooks).

    Attributes:
        header: The run's header, once it started.
        records: Every record exported, in order.
        trace: The finished trace, once the run ended.
        flushes: How many times :meth:`force_flush` was called.
        closed: Whether :meth:`shutdown` was called.

    Example:
        >>> m = MemoryExporter()
        >>> m.records, m.trace
        ([], None)
    """

    def __init__(self) -> None:
        self.header: Mapping[str, Any] | None = None
        self.records: list[Record] = []
        self.trace: Trace | None = None
        self.flushes = 0
        self.closed = False

    def start(self, header: Mapping[str, Any]) -> None:
        """Keep the header."""
        self.header = header

    def export(self, records: Sequence[Record]) -> None:
        """Keep the records."""
        self.records.extend(records)

    def finish(self, trace: Trace) -> None:
        """Keep the trace."""
        self.trace = trace

    def force_flush(self) -> bool:
        """Count the flush; memory needs none."""
        self.flushes += 1
        return True

    def shutdown(self) -> None:
        """Mark the exporter closed."""
        self.closed = True


class JsonlExporter(Exporter):
    """Append every record to a JSONL stream (crash-safe; see ``StreamWriter``).

    The file is checked, created and locked when the exporter is made, before the run starts,
    so an output that cannot be written never costs a run. If writing fails the run stops and
    fails; the whole records written before stay in the file, which reads back as a partial
    trace (a recording that held no event, or was to replace a file, is removed and the
    replaced file kept). The footer holds what the run adds to the header's meta: the result,
    the token table of trainable calls (``meta.tokens``), the processors that failed.

    Args:
        path: The ``.jsonl`` file.
        fsync: Also fsync after each record (:meth:`force_flush` syncs in any case).
        overwrite: Replace an existing file (the new recording is renamed over it when
            complete; until then the old one stays).

    Raises:
        OutputError: The file exists (without ``overwrite``), another process writes it, or
            it cannot be created.

    Example:
        >>> import os, tempfile
        >>> from orchestrace.io import load
        >>> from orchestrace.runtime import run
        >>> path = os.path.join(tempfile.mkdtemp(), "run.jsonl")
        >>> res = run("swarm", "arith", agents=2, seed=1, processors=[JsonlExporter(path)])
        >>> load(path) == res.trace
        True
    """

    def __init__(self, path: str | Path, *, fsync: bool = False, overwrite: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.writer: StreamWriter | None = None
        self._header_meta: Mapping[str, Any] = {}
        self._synced = False
        check_output(path, force=overwrite, kind="file")
        self._target: StreamTarget | None = StreamTarget(path, force=overwrite)

    def start(self, header: Mapping[str, Any]) -> None:
        """Write the header."""
        target, self._target = self._target, None
        if target is None:
            raise RuntimeError_(
                f"{self.path}: this exporter already recorded a run; make a new JsonlExporter "
                "for each run"
            )
        self._header_meta = dict(header.get("meta") or {})
        try:
            self.writer = StreamWriter(
                self.path,
                trace_id=header["trace_id"],
                task_id=header["task_id"],
                system=header.get("system"),
                topology=header.get("topology"),
                meta=self._header_meta,
                fsync=self.fsync,
                target=target,
            )
        except Exception:
            target.discard(remove_new=True)
            raise

    def export(self, records: Sequence[Record]) -> None:
        """Append each event and the edges into it."""
        w = self.writer
        if w is None:
            return
        for event, edges in records:
            w.event(event)
            for e in edges:
                w.edge(e)

    def finish(self, trace: Trace) -> None:
        """Write the footer (rewards, costs, metrics, the meta the run added) and close."""
        if self.writer is None:
            return
        head = self._header_meta
        self.writer.close(
            rewards=trace.rewards,
            costs=trace.costs,
            metrics=trace.metrics,
            meta={k: v for k, v in trace.meta.items() if k not in head or head[k] != v},
        )

    def force_flush(self) -> bool:
        """Sync the records written so far to disk (``fsync``); ``True`` once done.

        After the run ended (the footer is written and the file closed) the finished recording
        is synced once; the runtime calls this at the end of every run.

        Raises:
            OutputError: The file could not be synced.
        """
        w = self.writer
        if w is None:
            return True
        if not w.closed:
            w.flush()
        elif not self._synced and self.path.is_file():
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as err:
                raise write_error(self.path, err) from None
            self._synced = True
        return True

    def shutdown(self) -> None:
        """Close without a footer if the run did not end (the trace stays partial)."""
        if self.writer is not None:
            self.writer.abandon()
        elif self._target is not None:  # the run never started: nothing recorded
            self._target.discard(remove_new=True)
            self._target = None

    def fail(self) -> None:
        """Close after a failure, keeping the whole records (a file it replaces is kept)."""
        if self.writer is not None:
            if self.writer.records > 1:
                self.writer.abandon()
            else:
                self.writer.discard()
        elif self._target is not None:
            self._target.discard(remove_new=True)
            self._target = None
