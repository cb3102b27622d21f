"""Live capture for the OpenAI Agents SDK: a tracing processor writing orchestrace JSONL recordings.

:class:`OrchestraceTracingProcessor` receives the SDK's span callbacks and writes one crash-safe
JSONL record stream per SDK trace (``DIR/<trace_id>.jsonl``): the header when the trace starts,
each event and edge as soon as it is final, the footer (costs, agents, unmapped spans) when the
trace ends. A recording cut off at any moment loads with :func:`orchestrace.io.load` as a
partial trace. Events and edges are made by the importer's own
:class:`~orchestrace.io.openai_agents.SpanMapper`, so a recording equals the import of the
SDK's export of the same run (rules: ``docs/import-agents.md``).

Needs the ``[agents]`` extra (``pip install 'orchestrace[agents]'``); the SDK is imported only
when a processor is made.

Example:
    >>> import tempfile
    >>> from orchestrace.integrations.openai_agents import OrchestraceTracingProcessor
    >>> proc = OrchestraceTracingProcessor(tempfile.mkdtemp())  # doctest: +SKIP
    >>> from agents import set_trace_processors  # doctest: +SKIP
    >>> set_trace_processors([proc])  # replaces the SDK's exporter to OpenAI  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any

from orchestrace.errors import ConfigError, OrchestraceError
from orchestrace.io._foreign import parse_time as _time
from orchestrace.io.jsonl import StreamWriter
from orchestrace.io.openai_agents import SYSTEM, SpanMapper, trace_meta
from orchestrace.trace.build import default_costs
from orchestrace.trace.model import Edge, Event

__all__ = ["HINT", "OrchestraceTracingProcessor", "install"]

#: How to install what this module needs.
HINT = "pip install 'orchestrace[agents]'"


def _require_agents() -> Any:
    try:
        from agents import tracing  # noqa: PLC0415  optional extra [agents]
    except ImportError as err:
        raise ImportError(
            f"the OpenAI Agents SDK is not installed ({err}); install it with: {HINT}"
        ) from None
    return tracing


class _Run:
    """The recording of one SDK trace."""

    def __init__(self, writer: StreamWriter, workflow: str) -> None:
        self.writer = writer
        self.workflow = workflow
        self.events: list[Event] = []
        self.mapper: SpanMapper | None = None

    def ensure_mapper(self, t0: float) -> SpanMapper:
        if self.mapper is None:

            def on_event(ev: Event) -> None:
                self.events.append(ev)
                self.writer.event(ev)

            def on_edge(edge: Edge) -> None:
                self.writer.edge(edge)

            self.mapper = SpanMapper(
                t0=t0, workflow=self.workflow, emit_event=on_event, emit_edge=on_edge
            )
        return self.mapper


class OrchestraceTracingProcessor:
    """An Agents SDK ``TracingProcessor`` writing each trace as an orchestrace JSONL recording.

    Args:
        directory: Where recordings go, one ``<trace_id>.jsonl`` per SDK trace (created if
            missing).
        overwrite: Replace a recording that already exists (otherwise that trace is not
            recorded and the problem is kept in :attr:`errors`).
        fsync: ``fsync`` after every record (survives power loss; slower).

    Attributes:
        paths: The recordings written, by SDK trace id.
        errors: Problems met in callbacks (the SDK swallows exceptions raised there);
            :meth:`force_flush` raises the first one.

    Raises:
        ImportError: The Agents SDK is not installed (the message says how to install it).
        ConfigError: ``directory`` exists and is not a directory.
    """

    def __init__(
        self, directory: str | os.PathLike[str], *, overwrite: bool = False, fsync: bool = False
    ) -> None:
        tracing = _require_agents()
        tracing.TracingProcessor.register(type(self))
        self.directory = Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise ConfigError(
                f"{self.directory}: exists and is not a directory; pass a directory for the "
                "recordings (one <trace_id>.jsonl per trace)"
            )
        self.overwrite = overwrite
        self.fsync = fsync
        self.paths: dict[str, Path] = {}
        self.errors: list[OrchestraceError] = []
        self._runs: dict[str, _Run] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ helpers
    def _open(self, trace_id: str, workflow: str, head: dict[str, Any]) -> _Run | None:
        run = self._runs.get(trace_id)
        if run is not None:
            return run
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in trace_id) or "trace"
        path = self.directory / f"{safe}.jsonl"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            writer = StreamWriter(
                path,
                trace_id=trace_id,
                task_id=workflow,
                system=SYSTEM,
                meta=trace_meta(trace_id, head, workflow),
                fsync=self.fsync,
                overwrite=self.overwrite,
            )
        except (OrchestraceError, OSError) as err:
            self._fail(err)
            return None
        run = _Run(writer, workflow)
        self._runs[trace_id] = run
        self.paths[trace_id] = path
        return run

    def _fail(self, err: Exception) -> None:
        if isinstance(err, OrchestraceError):
            self.errors.append(err)
        else:
            self.errors.append(OrchestraceError(f"recording failed: {err}"))

    @staticmethod
    def _export(obj: Any) -> dict[str, Any] | None:
        try:
            data = obj.export()
        except Exception:
            return None
        return data if isinstance(data, dict) else None

    # ------------------------------------------------------------------ TracingProcessor
    def on_trace_start(self, trace: Any) -> None:
        """Open the recording of ``trace`` (writes its header)."""
        item = self._export(trace)
        if item is None:
            return
        tid = str(item.get("id") or getattr(trace, "trace_id", "trace"))
        workflow = item.get("workflow_name")
        with self._lock:
            self._open(tid, workflow if isinstance(workflow, str) and workflow else SYSTEM, item)

    def on_trace_end(self, trace: Any) -> None:
        """Close the recording of ``trace`` (writes its footer)."""
        tid = str(getattr(trace, "trace_id", ""))
        with self._lock:
            run = self._runs.pop(tid, None)
            if run is None:
                return
            meta = run.mapper.meta() if run.mapper is not None else {}
            try:
                if run.mapper is not None:
                    run.mapper.finish()  # the root agent's stop
                run.writer.close(costs=default_costs(run.events), meta=meta)
            except OrchestraceError as err:
                self._fail(err)

    def on_span_start(self, span: Any) -> None:
        """Note a started span (its agent, turn, or the agent it runs as a tool)."""
        self._call(span, "start")

    def on_span_end(self, span: Any) -> None:
        """Write the events and edges that ``span`` completes."""
        self._call(span, "end")

    def _call(self, span: Any, what: str) -> None:
        item = self._export(span)
        if item is None:
            return
        tid = str(item.get("trace_id"))
        with self._lock:
            run = self._runs.get(tid) or self._open(tid, SYSTEM, {})
            if run is None:
                return
            start = _time(item.get("started_at"))
            mapper = run.ensure_mapper(start if start is not None else 0.0)
            try:
                if what == "start":
                    mapper.start(item)
                else:
                    mapper.end(item)
            except OrchestraceError as err:
                self._fail(err)

    def force_flush(self) -> None:
        """Records are written as they happen; this syncs them to disk.

        Raises:
            OrchestraceError: The first problem met in a callback (a recording could not be
                opened or written).
        """
        with self._lock:
            for run in self._runs.values():
                with contextlib.suppress(OSError):
                    os.fsync(run.writer._fd)
            if self.errors:
                raise self.errors[0]

    def shutdown(self) -> None:
        """Close the recordings of traces that never ended (they stay partial)."""
        with self._lock:
            for run in self._runs.values():
                run.writer.abandon()
            self._runs.clear()


def install(
    directory: str | os.PathLike[str], *, keep_other_processors: bool = False, **kwargs: Any
) -> OrchestraceTracingProcessor:
    """Make a processor and register it with the SDK.

    Args:
        directory: Where recordings go (see :class:`OrchestraceTracingProcessor`).
        keep_other_processors: Keep the SDK's other processors (by default they are replaced,
            which also stops the default export to OpenAI).
        **kwargs: Passed to :class:`OrchestraceTracingProcessor`.

    Example:
        >>> proc = install("recordings")  # doctest: +SKIP
    """
    tracing = _require_agents()
    proc = OrchestraceTracingProcessor(directory, **kwargs)
    if keep_other_processors:
        tracing.add_trace_processor(proc)
    else:
        tracing.set_trace_processors([proc])
    return proc
