"""Live capture from any OpenTelemetry-instrumented framework into an orchestrace JSONL recording.

:class:`OrchestraceSpanProcessor` (an OTel ``SpanProcessor``) and
:class:`OrchestraceSpanExporter` (an OTel ``SpanExporter``, for the SDK's own
``SimpleSpanProcessor`` / ``BatchSpanProcessor``) turn spans into an orchestrace trace with the
importer's rules (:mod:`orchestrace.io.otel`, ``docs/import-otel.md``) while the run happens.

The recording is a JSONL record stream (header, events, edges; a footer once
:meth:`~OrchestraceSpanProcessor.shutdown` is called), one trace per OTel trace id. It is
replaced atomically as spans end (at most every ``min_interval`` seconds, and on
``force_flush``), so the file on disk is always a whole recording: it loads with
:func:`orchestrace.io.load` at any moment (marked partial until shutdown), and after shutdown it
equals the import of the same spans exported as OTLP JSON. While a span is open, its children are
attributed with the attributes it had when it started.

Needs the ``[otel]`` extra (``pip install 'orchestrace[otel]'``); OpenTelemetry is imported only
when a processor or exporter is made.

Example:
    >>> import os, tempfile
    >>> from opentelemetry.sdk.trace import TracerProvider
    >>> from orchestrace.io import load
    >>> path = os.path.join(tempfile.mkdtemp(), "run.jsonl")
    >>> provider = TracerProvider()
    >>> provider.add_span_processor(OrchestraceSpanProcessor(path))
    >>> tracer = provider.get_tracer("demo")
    >>> with tracer.start_as_current_span("invoke_agent lead", attributes={
    ...         "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "lead"}):
    ...     with tracer.start_as_current_span("chat m", attributes={
    ...             "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 7}):
    ...         pass
    ...     load(path, partial=True).meta["partial"]
    True
    >>> provider.shutdown()
    >>> [(e.type, e.agent, e.tokens_in) for e in load(path).events]
    [('llm_call', 'lead', 7), ('orchestrator_decision', 'lead', 0)]
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from orchestrace.errors import OrchestraceError
from orchestrace.io._output import atomic_write, check_output
from orchestrace.io.otel import OtelSpan, import_spans
from orchestrace.trace.model import Trace

__all__ = ["HINT", "OrchestraceSpanExporter", "OrchestraceSpanProcessor", "span_from_sdk"]

#: How to install what this module needs.
HINT = "pip install 'orchestrace[otel]'"
_ENC = msgspec.json.Encoder()


def _require_otel() -> Any:
    try:
        from opentelemetry.sdk import trace as sdk_trace  # noqa: PLC0415  optional extra [otel]
        from opentelemetry.sdk.trace import export  # noqa: PLC0415  optional extra [otel]
    except ImportError as err:
        raise ImportError(
            f"live capture from OpenTelemetry needs the OpenTelemetry SDK ({err}); {HINT}"
        ) from None
    return sdk_trace, export


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def span_from_sdk(span: Any, *, open_: bool = False) -> OtelSpan:
    """An OTel SDK span (``ReadableSpan``) as the importer's :class:`OtelSpan`."""
    ctx = span.context
    parent = span.parent
    scope = span.instrumentation_scope
    sid = f"{ctx.span_id:016x}"
    status = span.status
    return OtelSpan(
        trace_id=f"{ctx.trace_id:032x}",
        span_id=sid,
        parent_id=f"{parent.span_id:016x}" if parent is not None else None,
        name=span.name,
        start=int(span.start_time or time.time_ns()),
        end=None if open_ or span.end_time is None else int(span.end_time),
        attrs=_plain(dict(span.attributes or {})),
        kind=span.kind.name,
        status=status.status_code.name if status is not None else "UNSET",
        status_message=(status.description or None) if status is not None else None,
        events=[
            {
                "name": e.name,
                "time_unix_nano": int(e.timestamp),
                "attributes": _plain(dict(e.attributes or {})),
            }
            for e in span.events
        ],
        links=[
            (
                f"{ln.context.trace_id:032x}",
                f"{ln.context.span_id:016x}",
                _plain(dict(ln.attributes or {})),
            )
            for ln in span.links
        ],
        resource=_plain(dict(span.resource.attributes)) if span.resource is not None else {},
        scope=(
            {k: v for k, v in (("name", scope.name), ("version", scope.version)) if v}
            if scope is not None
            else {}
        ),
        where=f"span {sid}",
    )


def _records(trace: Trace, final: bool) -> Iterable[bytes]:
    head: dict[str, Any] = {"trace_id": trace.trace_id, "task_id": trace.task_id}
    if trace.system is not None:
        head["system"] = trace.system
    if trace.topology is not None:
        head["topology"] = trace.topology
    head["schema_version"] = trace.schema_version
    head["meta"] = trace.meta
    yield _ENC.encode({"header": head})
    for e in trace.events:
        yield _ENC.encode({"event": e})
    for d in trace.edges:
        yield _ENC.encode({"edge": d})
    if final:
        yield _ENC.encode(
            {"footer": {"rewards": trace.rewards, "costs": trace.costs, "metrics": trace.metrics}}
        )


class _Recording:
    """The spans seen so far and the file they are written to."""

    def __init__(self, path: str | Path, overwrite: bool, min_interval: float) -> None:
        _require_otel()
        self.path = Path(path)
        check_output(self.path, force=overwrite, kind="file")
        self.min_interval = float(min_interval)
        self.lock = threading.RLock()
        self.ended: list[OtelSpan] = []
        self.open: dict[tuple[str, str], OtelSpan] = {}
        self.last_write = 0.0
        self.timer: threading.Timer | None = None
        self.closed = False
        self.error: OrchestraceError | None = None

    def start(self, span: Any) -> None:
        sp = span_from_sdk(span, open_=True)
        with self.lock:
            self.open[(sp.trace_id, sp.span_id)] = sp

    def end(self, spans: Sequence[Any]) -> None:
        with self.lock:
            if self.closed:
                return
            for span in spans:
                sp = span_from_sdk(span)
                self.open.pop((sp.trace_id, sp.span_id), None)
                self.ended.append(sp)
            self._due()

    def _due(self) -> None:
        wait = self.last_write + self.min_interval - time.monotonic()
        if wait <= 0:
            self.write(final=False)
        elif self.timer is None:
            self.timer = threading.Timer(wait, self._timed)
            self.timer.daemon = True
            self.timer.start()

    def _timed(self) -> None:
        with self.lock:
            self.timer = None
            if not self.closed:
                self.write(final=False)

    def write(self, final: bool) -> None:
        """Replace the recording with every span seen so far (the footer when ``final``)."""
        with self.lock:
            spans = self.ended + list(self.open.values())
            try:
                traces = import_spans(spans, source=str(self.path), live=True).traces
                with atomic_write(self.path, force=True) as fh:
                    for tr in traces:
                        fh.write(b"\n".join(_records(tr, final)) + b"\n")
            except OrchestraceError as err:
                if self.error is None:
                    warnings.warn(f"orchestrace: {err}", RuntimeWarning, stacklevel=2)
                self.error = err
                return
            self.last_write = time.monotonic()

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            self.write(final=True)
            self.closed = True
            if self.error is not None:
                raise self.error


class OrchestraceSpanProcessor:
    """An OTel ``SpanProcessor`` recording spans as they end into an orchestrace JSONL file.

    Args:
        path: The recording to create.
        overwrite: Replace an existing file (otherwise an existing ``path`` is refused).
        min_interval: Rewrite the recording at most this often, in seconds (a span that ends
            sooner is written by a timer). ``0`` writes on every span end.

    Raises:
        ImportError: OpenTelemetry is not installed (the message says what to install).
        OutputError: ``path`` exists (without ``overwrite``) or cannot be written.
    """

    def __init__(
        self, path: str | Path, *, overwrite: bool = False, min_interval: float = 0.2
    ) -> None:
        self._rec = _Recording(path, overwrite, min_interval)

    @property
    def path(self) -> Path:
        """The recording."""
        return self._rec.path

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        """Note an open span (its children are attributed with what it says at its start)."""
        self._rec.start(span)

    def _on_ending(self, span: Any) -> None:
        """Nothing to do before the span is ended."""

    def on_end(self, span: Any) -> None:
        """Record an ended span and rewrite the recording (see ``min_interval``)."""
        self._rec.end([span])

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Write the recording now; ``False`` when writing failed."""
        self._rec.write(final=False)
        return self._rec.error is None

    def shutdown(self) -> None:
        """Write the complete recording (with its footer).

        Raises:
            OutputError: The recording could not be written (also warned about when it failed
                earlier in the run).
        """
        self._rec.close()


class OrchestraceSpanExporter:
    """An OTel ``SpanExporter`` writing exported spans as an orchestrace JSONL recording.

    Use it with the SDK's ``SimpleSpanProcessor`` (written as each span ends) or
    ``BatchSpanProcessor``. Arguments as for :class:`OrchestraceSpanProcessor`.
    """

    def __init__(
        self, path: str | Path, *, overwrite: bool = False, min_interval: float = 0.0
    ) -> None:
        _, export = _require_otel()
        self._result = export.SpanExportResult
        self._rec = _Recording(path, overwrite, min_interval)

    @property
    def path(self) -> Path:
        """The recording."""
        return self._rec.path

    def export(self, spans: Sequence[Any]) -> Any:
        """Record ``spans``; ``SpanExportResult.FAILURE`` when the recording cannot be written."""
        self._rec.end(spans)
        return self._result.FAILURE if self._rec.error is not None else self._result.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Write the recording now; ``False`` when writing failed."""
        self._rec.write(final=False)
        return self._rec.error is None

    def shutdown(self) -> None:
        """Write the complete recording (with its footer)."""
        self._rec.close()
