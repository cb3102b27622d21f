"""Recording pipeline, like OpenTelemetry's: processors see every event as it happens.

A :class:`Recorder` fans each event (with the edges into it) out to its processors: the JSONL
exporter that makes recordings crash-safe, a progress bar, reward annotators or safety monitors.
Processors never break a run: an exception is logged and the processor is dropped.

Example:
    >>> import io
    >>> class Count(Processor):
    ...     n = 0
    ...     def on_event(self, event, edges): self.n += 1
    >>> c = Count()
    >>> rec = Recorder([c])
    >>> from orchestrace.trace.model import Event
    >>> rec.event(Event(id="e1", t=0.0, type="message", agent="a"), [])
    >>> c.n
    1
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from orchestrace.io.jsonl import StreamWriter
from orchestrace.trace.model import Edge, Event, Trace

__all__ = ["JsonlExporter", "Processor", "ProgressBar", "Recorder"]

log = logging.getLogger("orchestrace.runtime")


class Processor:
    """Base processor: override what you need. Methods must be fast; they run inline."""

    def on_start(self, header: Mapping[str, Any]) -> None:
        """A run starts (``header``: trace_id, task_id, system, topology, meta)."""

    def on_event(self, event: Event, edges: list[Edge]) -> None:
        """An event was recorded, with the edges into it."""

    def on_end(self, trace: Trace) -> None:
        """The run ended; ``trace`` is complete."""

    def force_flush(self) -> None:
        """Push buffered output out."""

    def shutdown(self) -> None:
        """Release resources (called once, even after a failed run)."""


class Recorder:
    """Fan events out to processors; failures are logged, never raised."""

    def __init__(self, processors: Iterable[Processor] = ()) -> None:
        self.processors = list(processors)
        self.failures: list[str] = []

    def _call(self, name: str, *args: Any) -> None:
        for p in list(self.processors):
            try:
                getattr(p, name)(*args)
            except Exception:
                self._drop(p, name)

    def start(self, header: Mapping[str, Any]) -> None:
        """Announce the run."""
        self._call("on_start", header)

    def event(self, event: Event, edges: list[Edge]) -> None:
        """Record one event."""
        for p in list(self.processors):
            try:
                p.on_event(event, edges)
            except Exception:
                self._drop(p, "on_event")

    def _drop(self, p: Processor, name: str) -> None:
        msg = f"{type(p).__name__}.{name} failed and was removed"
        log.warning(msg, exc_info=True)
        self.failures.append(msg)
        if p in self.processors:
            self.processors.remove(p)

    def end(self, trace: Trace) -> None:
        """Close the run."""
        self._call("on_end", trace)

    def force_flush(self) -> None:
        """Flush every processor."""
        self._call("force_flush")

    def shutdown(self) -> None:
        """Shut every processor down."""
        self._call("shutdown")


class JsonlExporter(Processor):
    """Append every record to a JSONL stream as it happens (crash-safe; see StreamWriter).

    Args:
        path: The ``.jsonl`` file.
        fsync: Also fsync after each record.
    """

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.writer: StreamWriter | None = None

    def on_start(self, header: Mapping[str, Any]) -> None:
        """Open the stream file and write the header."""
        self.writer = StreamWriter(
            self.path,
            trace_id=header["trace_id"],
            task_id=header["task_id"],
            system=header.get("system"),
            topology=header.get("topology"),
            meta=header.get("meta"),
            fsync=self.fsync,
        )

    def on_event(self, event: Event, edges: list[Edge]) -> None:
        """Append the event and the edges into it."""
        w = self.writer
        if w is not None:
            w.event(event)
            for e in edges:
                w.edge(e)

    def on_end(self, trace: Trace) -> None:
        """Write the footer (rewards, costs, metrics) and close."""
        if self.writer is not None:
            self.writer.close(
                rewards=trace.rewards,
                costs=trace.costs,
                metrics=trace.metrics,
                meta={k: v for k, v in trace.meta.items() if k == "result"},
            )

    def shutdown(self) -> None:
        """Close without a footer if the run did not end (the trace stays partial)."""
        if self.writer is not None:
            self.writer.abandon()


class ProgressBar(Processor):
    """A tqdm progress bar of recorded events (to stderr; silent when not a terminal)."""

    def __init__(self, desc: str = "run", every: int = 50, force: bool = False) -> None:
        self.desc = desc
        self.every = every
        self.force = force
        self.bar: Any = None
        self.n = 0

    def on_start(self, header: Mapping[str, Any]) -> None:
        """Open the bar (only on a terminal unless forced)."""
        if not (self.force or sys.stderr.isatty()):
            return
        from tqdm import tqdm

        self.bar = tqdm(desc=self.desc, unit=" events", file=sys.stderr, dynamic_ncols=True)

    def on_event(self, event: Event, edges: list[Edge]) -> None:
        """Count the event."""
        self.n += 1
        if self.bar is not None and self.n % self.every == 0:
            self.bar.update(self.every)

    def on_end(self, trace: Trace) -> None:
        """Show the final count and the outcome."""
        if self.bar is not None:
            self.bar.update(self.n % self.every)
            self.bar.set_postfix_str(f"{trace.metrics.get('task_success', 0):.0f} success")

    def shutdown(self) -> None:
        """Close the bar."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
