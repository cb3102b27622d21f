"""Recording pipeline, like OpenTelemetry's: processors see every event as it happens.

A :class:`Recorder` fans each event (with the edges into it) out to its processors: the JSONL
exporter that makes recordings crash-safe, a progress bar, reward annotators or safety monitors.

A failure that loses data fails the run: when a *critical* processor (the JSONL exporter) fails,
the recorder keeps the error in :attr:`Recorder.error`, asks the run to stop
(:attr:`Recorder.on_fatal`) and the run raises it when it ends. Any other processor that fails
is dropped with a one-line warning and listed in :attr:`Recorder.failures`; the run goes on.

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

import contextlib
import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from orchestrace._safe import scrub_known
from orchestrace.errors import OrchestraceError, RuntimeError_
from orchestrace.io._output import StreamTarget, check_output
from orchestrace.io.jsonl import StreamWriter
from orchestrace.runtime.tasks.base import Verdict, answer_digest
from orchestrace.trace.build import default_costs
from orchestrace.trace.model import SCHEMA_VERSION, Edge, Event, Trace

__all__ = ["JsonlExporter", "Processor", "ProgressBar", "Recorder", "assemble_trace"]

log = logging.getLogger("orchestrace.runtime")


class Processor:
    """Base processor: override what you need. Methods must be fast; they run inline.

    Attributes:
        critical: A failure of this processor loses data, so it fails the run (the JSONL
            exporter); other processors are dropped with a warning when they fail.
    """

    critical: bool = False

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

    def fail(self) -> None:
        """Called instead of the rest when this processor failed (drop what it half wrote)."""


class Recorder:
    """Fan events out to processors; failures never escape a processor call.

    Attributes:
        processors: The live processors.
        failures: One line per processor that failed and was dropped.
        error: The failure of a critical processor, raised by the run when it ends.
        on_fatal: Called with a reason when a critical processor fails (the runtime stops the
            run there).
    """

    def __init__(self, processors: Iterable[Processor] = ()) -> None:
        self.processors = list(processors)
        self.failures: list[str] = []
        self.error: OrchestraceError | None = None
        self.on_fatal: Callable[[str], None] | None = None
        self._shut = False

    def _call(self, name: str, *args: Any) -> None:
        for p in list(self.processors):
            try:
                getattr(p, name)(*args)
            except Exception as err:
                self._drop(p, name, err)

    def start(self, header: Mapping[str, Any]) -> None:
        """Announce the run."""
        self._call("on_start", header)

    def event(self, event: Event, edges: list[Edge]) -> None:
        """Record one event."""
        for p in list(self.processors):
            try:
                p.on_event(event, edges)
            except Exception as err:
                self._drop(p, "on_event", err)

    def _drop(self, p: Processor, name: str, err: Exception) -> None:
        if p in self.processors:
            self.processors.remove(p)
        with contextlib.suppress(Exception):  # the first failure is the one reported
            p.fail()
        detail = str(err) if isinstance(err, OrchestraceError) else f"{type(err).__name__}: {err}"
        msg = f"{type(p).__name__}.{name} failed and was removed: {detail[:300]}"
        self.failures.append(msg)
        if not p.critical:
            log.warning(msg, exc_info=log.isEnabledFor(logging.DEBUG))
            return
        if self.error is None:
            self.error = (
                err
                if isinstance(err, OrchestraceError)
                else RuntimeError_(
                    f"{type(p).__name__} failed ({detail[:300]}); the recording is incomplete, "
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

    def force_flush(self) -> None:
        """Flush every processor."""
        self._call("force_flush")

    def shutdown(self) -> None:
        """Shut every processor down (once; later calls do nothing)."""
        if not self._shut:
            self._shut = True
            self._call("shutdown")


class JsonlExporter(Processor):
    """Append every record to a JSONL stream as it happens (crash-safe; see StreamWriter).

    The file is checked, created and locked when the exporter is made, before the run starts,
    so an output that cannot be written never costs a run. It is critical: if writing fails
    the run stops and fails, and the incomplete recording is removed.

    Args:
        path: The ``.jsonl`` file.
        fsync: Also fsync after each record.
        overwrite: Replace an existing file (the new recording is renamed over it when
            complete; until then the old one stays).

    Raises:
        OutputError: The file exists (without ``overwrite``), another process writes it, or
            it cannot be created.
    """

    critical = True

    def __init__(self, path: str | Path, *, fsync: bool = False, overwrite: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.writer: StreamWriter | None = None
        check_output(path, force=overwrite, kind="file")
        self._target: StreamTarget | None = StreamTarget(path, force=overwrite)

    def on_start(self, header: Mapping[str, Any]) -> None:
        """Write the header."""
        target, self._target = self._target, None
        if target is None:
            raise RuntimeError_(
                f"{self.path}: this exporter already recorded a run; make a new JsonlExporter "
                "for each run"
            )
        try:
            self.writer = StreamWriter(
                self.path,
                trace_id=header["trace_id"],
                task_id=header["task_id"],
                system=header.get("system"),
                topology=header.get("topology"),
                meta=header.get("meta"),
                fsync=self.fsync,
                target=target,
            )
        except Exception:
            target.discard(remove_new=True)
            raise

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
        elif self._target is not None:  # the run never started: nothing recorded
            self._target.discard(remove_new=True)
            self._target = None

    def fail(self) -> None:
        """Remove the incomplete recording (a file it was to replace is kept)."""
        if self.writer is not None:
            self.writer.discard()
        elif self._target is not None:
            self._target.discard(remove_new=True)
            self._target = None


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
) -> Trace:
    """The trace of a finished run: its records, costs, metrics and result.

    ``meta.result`` holds the answer, the stop reason, the ground truth and the verdict (which
    names the answer it judged by ``answer_sha256``); ``rewards.team`` and
    ``metrics.task_success`` are the verdict's outcome, left out when it is unknown.

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
        costs=default_costs(events),
        system="orchestrace",
        topology=topology,  # type: ignore[arg-type]
        metrics=metrics,
        schema_version=SCHEMA_VERSION,
        meta=meta,
    )
