"""Recording pipeline, like OpenTelemetry's SDK: processors see events, exporters write them.

A :class:`Recorder` hands each event (with the edges into it) to its processors, in order, as
it is recorded. A processor decides *when* records go out: :class:`SimpleProcessor` passes
each event to its exporter at once (the crash-safe JSONL stream), :class:`BatchProcessor`
collects them and exports in batches; others act on events themselves (a progress bar, reward
annotators, safety monitors). Exporters (:mod:`orchestrace.runtime.export`) decide *where*:
a JSONL stream, a Parquet dataset, memory. An exporter given where a processor is expected is
wrapped in a ``SimpleProcessor``.

When the run ends the runtime calls :meth:`Recorder.end`, :meth:`Recorder.force_flush` and
:meth:`Recorder.shutdown` (a stopped or failed run gets the last two), so what was recorded is
written and durable.

No failure is dropped silently. A processor that raises is kept (as OpenTelemetry keeps a
failing exporter) and its failures are counted: :attr:`Recorder.failures` lists one line per
failing processor, the trace records them in ``meta.processor_failures`` and ``orchestrace
run`` prints them on stderr. A failure that loses data (a *critical* processor: one driving an
exporter) also stops the run: the recorder keeps the error in :attr:`Recorder.error`, asks the
run to stop (:attr:`Recorder.on_fatal`), calls no more of that processor (its exporter keeps
what it wrote, see :meth:`Exporter.fail <orchestrace.runtime.export.Exporter.fail>`) and the
run raises the error when it ends.

Example:
    >>> class Count(Processor):
    ...     n = 0
    ...     def on_event(self, event, edges): self.n += 1
    >>> c = Count()
    >>> rec = Recorder([c])
    >>> from orchestrace.trace.model import Event
    >>> rec.event(Event(id="e1", t=0.0, type="message", agent="a"), [])
    >>> c.n, rec.force_flush()
    (1, True)
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from orchestrace._safe import scrub_known
from orchestrace.errors import OrchestraceError, RuntimeError_
from orchestrace.runtime.export import Exporter, JsonlExporter, Record
from orchestrace.tasks.base import Verdict, answer_digest
from orchestrace.trace.build import default_costs
from orchestrace.trace.model import SCHEMA_VERSION, Edge, Event, Trace

__all__ = [
    "BatchProcessor",
    "JsonlExporter",
    "Processor",
    "ProcessorFailure",
    "ProgressBar",
    "Recorder",
    "SimpleProcessor",
    "assemble_trace",
]

log = logging.getLogger("orchestrace.runtime")

#: Where a trace lists the processors that failed while it was recorded.
FAILURES_KEY = "processor_failures"


class Processor:
    """Base processor: override what you need. Methods must be fast; they run inline.

    Attributes:
        critical: A failure of this processor loses data, so it stops and fails the run (a
            processor driving an exporter); other processors' failures are reported.

    Example:
        >>> Processor().force_flush()
        True
    """

    critical: bool = False

    def on_start(self, header: Mapping[str, Any]) -> None:
        """A run starts (``header``: trace_id, task_id, system, topology, meta)."""

    def on_event(self, event: Event, edges: list[Edge]) -> None:
        """An event was recorded, with the edges into it."""

    def on_end(self, trace: Trace) -> None:
        """The run ended; ``trace`` is complete."""

    def force_flush(self, timeout_s: float | None = None) -> bool:
        """Push buffered output out and make it durable; ``True`` once it is."""
        return True

    def shutdown(self) -> None:
        """Release resources (called once, even after a failed run)."""

    def fail(self) -> None:
        """A critical processor's call raised; it gets no more calls after this one."""


class SimpleProcessor(Processor):
    """Export each event as soon as it is recorded (like OpenTelemetry's ``SimpleSpanProcessor``).

    Args:
        exporter: Where the records go.

    Example:
        >>> from orchestrace.runtime.export import MemoryExporter
        >>> from orchestrace.trace.model import Event
        >>> mem = MemoryExporter()
        >>> SimpleProcessor(mem).on_event(Event(id="e1", t=0.0, type="message", agent="a"), [])
        >>> len(mem.records)
        1
    """

    critical = True

    def __init__(self, exporter: Exporter) -> None:
        self.exporter = exporter

    @property
    def name(self) -> str:
        """The exporter's class name (what failure reports show)."""
        return type(self.exporter).__name__

    def on_start(self, header: Mapping[str, Any]) -> None:
        """Start the exporter."""
        self.exporter.start(header)

    def on_event(self, event: Event, edges: list[Edge]) -> None:
        """Export the event and the edges into it."""
        self.exporter.export([(event, edges)])

    def on_end(self, trace: Trace) -> None:
        """Finish the exporter's output."""
        self.exporter.finish(trace)

    def force_flush(self, timeout_s: float | None = None) -> bool:
        """Make what was exported durable."""
        return self.exporter.force_flush() is not False

    def shutdown(self) -> None:
        """Shut the exporter down."""
        self.exporter.shutdown()

    def fail(self) -> None:
        """Let the exporter keep what it can."""
        self.exporter.fail()


class BatchProcessor(SimpleProcessor):
    """Export events in batches of ``max_batch`` (like OpenTelemetry's ``BatchSpanProcessor``).

    Batches are exported inline on the recording thread (runs are deterministic and
    single-threaded); :meth:`force_flush` and the end of the run export what is pending.
    Events not yet exported are lost if the process dies, so crash-safe recordings use
    :class:`SimpleProcessor`.

    Args:
        exporter: Where the records go.
        max_batch: Records per export call.

    Raises:
        ValueError: ``max_batch`` is below 1.

    Example:
        >>> from orchestrace.runtime.export import MemoryExporter
        >>> from orchestrace.trace.model import Event
        >>> mem = MemoryExporter()
        >>> p = BatchProcessor(mem, max_batch=10)
        >>> p.on_event(Event(id="e1", t=0.0, type="message", agent="a"), [])
        >>> len(mem.records), p.force_flush(), len(mem.records)
        (0, True, 1)
    """

    def __init__(self, exporter: Exporter, max_batch: int = 512) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        super().__init__(exporter)
        self.max_batch = max_batch
        self._pending: list[Record] = []

    def _export(self) -> None:
        batch, self._pending = self._pending, []
        if batch:
            self.exporter.export(batch)

    def on_event(self, event: Event, edges: list[Edge]) -> None:
        """Queue the event; export the batch once full."""
        self._pending.append((event, edges))
        if len(self._pending) >= self.max_batch:
            self._export()

    def on_end(self, trace: Trace) -> None:
        """Export what is pending, then finish the exporter's output."""
        self._export()
        self.exporter.finish(trace)

    def force_flush(self, timeout_s: float | None = None) -> bool:
        """Export what is pending and make it durable."""
        self._export()
        return self.exporter.force_flush() is not False


def _as_processor(p: Any) -> Processor:
    """``p`` itself, or an exporter wrapped in a SimpleProcessor.

    An exporter is an :class:`Exporter`, or (duck-typed, as the Parquet exporter that lives
    below the runtime) an object with ``export`` and without ``on_event``.
    """
    if isinstance(p, Exporter) or (
        not isinstance(p, Processor)
        and callable(getattr(p, "export", None))
        and not callable(getattr(p, "on_event", None))
    ):
        return SimpleProcessor(p)
    return p  # type: ignore[no-any-return]  # a processor by duck typing


def _name(p: Any) -> str:
    return str(getattr(p, "name", None) or type(p).__name__)


@dataclass
class ProcessorFailure:
    """What went wrong with one processor during a run.

    Attributes:
        processor: The processor's name (the exporter's for a processor driving one).
        method: The first call that raised (``on_event``, ``on_end``...).
        error: That call's error, one line.
        count: How many calls raised.
        event: The id of the event being recorded when it first raised (``None`` outside
            ``on_event``).
        critical: Whether the failure lost data and stopped the run.

    Example:
        >>> f = ProcessorFailure("Bar", "on_event", "ValueError: boom", 3, "e3")
        >>> f.line()
        'processor Bar failed: on_event raised ValueError: boom (3 calls failed, first at event e3)'
    """

    processor: str
    method: str
    error: str
    count: int = 1
    event: str | None = None
    critical: bool = False

    def line(self) -> str:
        """One line naming the processor and the error."""
        if self.count > 1:
            first = f", first at event {self.event}" if self.event else ""
            times = f" ({self.count} calls failed{first})"
        else:
            times = f" (at event {self.event})" if self.event else ""
        stop = "; the recording is incomplete and the run was stopped" if self.critical else ""
        return f"processor {self.processor} failed: {self.method} raised {self.error}{times}{stop}"

    def as_meta(self) -> dict[str, Any]:
        """The record kept in ``trace.meta["processor_failures"]``."""
        out: dict[str, Any] = {
            "processor": self.processor,
            "method": self.method,
            "error": self.error,
            "count": self.count,
        }
        if self.event is not None:
            out["event"] = self.event
        if self.critical:
            out["critical"] = True
        return out


class Recorder:
    """Hand events to processors; a processor's failure never escapes, and is never lost.

    Args:
        processors: Processors, or exporters (each wrapped in a :class:`SimpleProcessor`).

    Attributes:
        processors: The processors, in the order they are called.
        error: The failure of a critical processor, raised by the run when it ends.
        on_fatal: Called with a reason when a critical processor fails (the runtime stops the
            run there).

    Example:
        >>> class Broken(Processor):
        ...     def on_event(self, event, edges): raise ValueError("boom")
        >>> from orchestrace.trace.model import Event
        >>> rec = Recorder([Broken()])
        >>> for i in range(3): rec.event(Event(id=f"e{i}", t=0.0, type="message", agent="a"), [])
        >>> rec.failures
        ['processor Broken failed: on_event raised ValueError: boom (3 calls failed, first at event e0)']
    """

    def __init__(self, processors: Iterable[Any] = ()) -> None:
        self.processors: list[Processor] = [_as_processor(p) for p in processors]
        self.error: OrchestraceError | None = None
        self.on_fatal: Callable[[str], None] | None = None
        self._failed: dict[int, ProcessorFailure] = {}
        self._dead: set[int] = set()
        self._shut = False

    @property
    def failures(self) -> list[str]:
        """One line per processor that failed (see :meth:`ProcessorFailure.line`)."""
        return [f.line() for f in self._failed.values()]

    @property
    def failure_records(self) -> list[ProcessorFailure]:
        """The processors that failed, in the order they first failed."""
        return list(self._failed.values())

    def _call(self, name: str, *args: Any) -> None:
        for p in self.processors:
            if id(p) in self._dead:
                continue
            try:
                getattr(p, name)(*args)
            except Exception as err:
                self._failure(p, name, err, None)

    def start(self, header: Mapping[str, Any]) -> None:
        """Announce the run."""
        self._call("on_start", header)

    def event(self, event: Event, edges: list[Edge]) -> None:
        """Record one event."""
        for p in self.processors:
            if id(p) in self._dead:
                continue
            try:
                p.on_event(event, edges)
            except Exception as err:
                self._failure(p, "on_event", err, event.id)

    def _failure(self, p: Processor, method: str, err: Exception, event: str | None) -> None:
        known = self._failed.get(id(p))
        if known is not None:
            known.count += 1
            return
        detail = str(err) if isinstance(err, OrchestraceError) else f"{type(err).__name__}: {err}"
        detail = " ".join(detail.split())[:600]
        failure = ProcessorFailure(_name(p), method, detail, 1, event, p.critical)
        self._failed[id(p)] = failure
        if not p.critical:
            log.warning(failure.line(), exc_info=log.isEnabledFor(logging.DEBUG))
            return
        self._dead.add(id(p))  # it cannot write: no more calls, keep what it wrote
        try:
            p.fail()
        except Exception as again:  # the first failure is the one reported
            log.debug("%s.fail raised %r", _name(p), again)
        if self.error is None:
            self.error = (
                err
                if isinstance(err, OrchestraceError)
                else RuntimeError_(
                    f"{_name(p)} failed ({detail}); the recording is incomplete, "
                    "so the run was stopped"
                )
            )
            if self.on_fatal is not None:
                self.on_fatal(f"recording failed: {detail[:200]}")

    def raise_error(self) -> None:
        """Raise the failure of a critical processor, if there was one.

        Raises:
            OrchestraceError: The recording could not be written.
        """
        if self.error is not None:
            raise self.error

    def end(self, trace: Trace) -> None:
        """Close the run."""
        self._call("on_end", trace)

    def force_flush(self, timeout_s: float | None = None) -> bool:
        """Flush every processor; ``True`` when each made its output durable in time.

        Args:
            timeout_s: Give up on the processors left once this many seconds have passed.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        ok = True
        for p in self.processors:
            if id(p) in self._dead:
                ok = False
                continue
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            try:  # without a deadline, a processor written as force_flush(self) works too
                done = p.force_flush() if left is None else p.force_flush(left)
                ok = done is not False and ok  # None (nothing to report) is a success
            except Exception as err:
                self._failure(p, "force_flush", err, None)
                ok = False
        return ok

    def shutdown(self) -> None:
        """Shut every processor down (once; later calls do nothing)."""
        if not self._shut:
            self._shut = True
            for p in self.processors:  # a failed processor still releases what it holds
                try:
                    p.shutdown()
                except Exception as err:
                    self._failure(p, "shutdown", err, None)


class ProgressBar(Processor):
    """A tqdm progress bar of recorded events (to stderr; silent when not a terminal).

    Example:
        >>> ProgressBar(desc="run").bar is None
        True
    """

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
        from tqdm import tqdm  # noqa: PLC0415  tqdm is heavy: loaded on first use

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


def assemble_trace(
    header: Mapping[str, Any],
    events: Iterable[Event],
    edges: Iterable[Edge],
    *,
    verdict: Verdict,
    answer: Any,
    stop_reason: str | None,
    truth: Any,
    agents: int,
    topology: str | None,
    costs: dict[str, float] | None = None,
) -> Trace:
    """The trace of a finished run: its records, costs, metrics and result.

    ``meta.result`` holds the answer, the stop reason, the ground truth and the verdict (which
    names the answer it judged by ``answer_sha256``); ``rewards.team`` and
    ``metrics.task_success`` are the verdict's outcome, left out when it is unknown.
    ``costs``: :func:`~orchestrace.trace.build.default_costs` of ``events``, when the caller
    kept it while the events were recorded (computed here otherwise).

    Example:
        >>> head = {"trace_id": "t", "task_id": "k", "meta": {}}
        >>> v = {"passed": True, "checker": "demo", "reason": ""}
        >>> tr = assemble_trace(head, [], [], verdict=v, answer=4, stop_reason=None, truth=4,
        ...                     agents=1, topology=None)
        >>> tr.rewards, tr.meta["result"]["stop_reason"]
        ({'team': 1.0}, 'done')
    """
    events = tuple(events)
    success = verdict["passed"]
    metrics = {
        "budget_exceeded": float(bool(stop_reason and stop_reason.startswith("budget"))),
        "agents": float(agents),
    }
    if success is not None:  # unknown outcomes have no task_success
        metrics = {"task_success": float(success), **metrics}
    meta = dict(header["meta"])
    meta["result"] = scrub_known(
        {
            "answer": answer,
            "stop_reason": stop_reason or "done",
            "truth": truth,
            "success": success,
            "verdict": dict(verdict),
        }
    )
    # the verdict names the answer it judged, so an answer edited later is not scored with it
    meta["result"]["verdict"]["answer_sha256"] = answer_digest(meta["result"]["answer"])
    return Trace(
        trace_id=header["trace_id"],
        task_id=header["task_id"],
        events=events,
        edges=tuple(edges),
        rewards={} if success is None else {"team": float(success)},
        costs=default_costs(events) if costs is None else costs,
        system="orchestrace",
        topology=topology,  # type: ignore[arg-type]
        metrics=metrics,
        schema_version=SCHEMA_VERSION,
        meta=meta,
    )
