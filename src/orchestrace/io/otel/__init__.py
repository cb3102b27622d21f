"""Import OpenTelemetry traces: OTLP JSON and span-per-line dumps, GenAI semconv and OpenInference.

Accepted input (one file):

- OTLP JSON, ``{"resourceSpans": [{"resource": ..., "scopeSpans": [{"scope": ..., "spans":
  [...]}]}]}``, as the OTel SDK's OTLP encoder and the collector's file exporter write it (hex or
  base64 ids, nanosecond times as strings or numbers, ``attributes`` as key/value lists of typed
  ``AnyValue``), one request per file or one per line;
- span-per-line JSON as ``ConsoleSpanExporter`` and ``ReadableSpan.to_json()`` write it
  (``context.trace_id``/``span_id`` as ``0x...``, ISO times, attributes as a plain object).

Spans are typed by ``gen_ai.operation.name`` (GenAI semantic conventions) or
``openinference.span.kind`` (OpenInference). The mapping rules are written in
``docs/import-otel.md``, one numbered rule each: agent spans name the agents (any other span acts
for its nearest agent ancestor; CHAIN and workflow spans are never agents), a sub-agent
invocation becomes ``spawn`` + ``return``, a handoff a ``message`` with the ``delegate``
decision, tool spans ``tool_call`` + ``tool_result``, LLM spans ``llm_call`` with model and
tokens, guardrails ``safety_event``; the span tree and the timing of siblings give the edges.
What has no orchestrace meaning is kept verbatim under ``attrs["otel"]`` and counted.

A file :mod:`orchestrace.io.otlp` wrote (an orchestrace export) is recognised by its structure
and restored exactly.

Example:
    >>> def attr(k, v):
    ...     return {"key": k, "value": {"intValue": str(v)} if isinstance(v, int)
    ...             else {"stringValue": v}}
    >>> def span(sid, parent, name, start, end, **a):
    ...     return {"traceId": "ab" * 16, "spanId": sid, "parentSpanId": parent, "name": name,
    ...             "startTimeUnixNano": str((start + 1) * 10**9),
    ...             "endTimeUnixNano": str((end + 1) * 10**9),
    ...             "attributes": [attr("gen_ai." + k.replace("__", "."), v)
    ...                            for k, v in a.items()]}
    >>> doc = {"resourceSpans": [{"scopeSpans": [{"spans": [
    ...     span("01" * 8, "", "invoke_agent lead", 0, 4,
    ...          operation__name="invoke_agent", agent__name="lead"),
    ...     span("02" * 8, "01" * 8, "chat m", 0, 1, operation__name="chat",
    ...          request__model="m", usage__input_tokens=10),
    ...     span("03" * 8, "01" * 8, "execute_tool calc", 1, 3,
    ...          operation__name="execute_tool", tool__name="calc"),
    ... ]}]}]}
    >>> sniff(doc)
    True
    >>> tr = import_values([doc], source="run.json").traces[0]
    >>> [(e.type, e.agent, e.t, e.dur) for e in tr.events]  # doctest: +NORMALIZE_WHITESPACE
    [('llm_call', 'lead', 0.0, 1.0), ('tool_call', 'lead', 1.0, 2.0),
     ('tool_result', 'calc', 3.0, 0.0), ('orchestrator_decision', 'lead', 4.0, 0.0)]
    >>> [(e.src, e.dst, e.type) for e in tr.edges]  # doctest: +NORMALIZE_WHITESPACE
    [('0202020202020202', '0303030303030303', 'causal'),
     ('0303030303030303', '0303030303030303.result', 'tool_dependency'),
     ('0303030303030303.result', '0101010101010101.stop', 'causal')]
"""

from __future__ import annotations

from collections.abc import Iterable

from orchestrace._collector import paused
from orchestrace.errors import TraceFormatError
from orchestrace.io.importers import ImportResult
from orchestrace.io.otel._keys import _OI_KIND
from orchestrace.io.otel._mapper import _Mapper
from orchestrace.io.otel._read import (
    OtelSpan,
    _Reader,
    iter_spans,
    sniff,
    sniff_openinference,
)
from orchestrace.io.otel._read import any_value as any_value  # importable here too
from orchestrace.io.otel._read import attributes as attributes  # importable here too
from orchestrace.io.otlp import restore

__all__ = [
    "OtelSpan",
    "import_spans",
    "import_values",
    "iter_spans",
    "sniff",
    "sniff_openinference",
]


# ---------------------------------------------------------------------- entry points
def import_spans(
    spans: Iterable[OtelSpan], *, source: str = "<spans>", live: bool = False
) -> ImportResult:
    """Map decoded spans (:func:`iter_spans`) to traces, one per OTel trace id.

    Args:
        spans: The spans.
        source: Name of the input, for problems.
        live: The spans are being recorded (open spans are expected, not a problem).
    """
    with paused():  # mapping allocates many small objects, none cyclic
        return _import_spans(spans, source, live)


def _import_spans(spans: Iterable[OtelSpan], source: str, live: bool) -> ImportResult:
    by_trace: dict[str, list[OtelSpan]] = {}
    for sp in spans:
        by_trace.setdefault(sp.trace_id, []).append(sp)
    result = ImportResult(traces=[])
    for spans_ in by_trace.values():
        fmt = "openinference" if any(_OI_KIND in s.attrs for s in spans_) else "otel"
        m = _Mapper(spans_, fmt, source, live)
        result.traces.append(m.run())
        result.problems.extend(m.problems)
        for k, v in m.unmapped.items():
            result.unmapped[k] = result.unmapped.get(k, 0) + v
    return result


def import_values(values: Iterable[object], *, source: str) -> ImportResult:
    """Import the JSON values of an OTLP JSON file or span-per-line dump.

    A file orchestrace exported (:mod:`orchestrace.io.otlp`) is restored exactly.

    Raises:
        TraceFormatError: No span could be read (the message says why).
    """
    reader = _Reader(source)
    try:
        with paused():  # mapping allocates many small objects, none cyclic
            spans = list(reader.read(values))
    except RecursionError:
        raise TraceFormatError(
            source,
            "document",
            "attribute values nested too deeply",
            "OTel attribute values nest a few levels; this file is not an OTel export",
        ) from None
    result = import_spans(spans, source=source)
    if reader.native:
        for resource, scopes, where in reader.native:
            result.traces.append(restore(resource, scopes, source=source, where=where))
    result.problems[:0] = reader.problems
    if not result.traces:
        first = reader.problems[0] if reader.problems else None
        raise TraceFormatError(
            source,
            first.path if first else "file",
            "no span could be imported" + (f" ({first.message})" if first else " (no spans)"),
            "pass OTLP JSON (resourceSpans) or a span-per-line dump with trace and span ids",
        )
    return result
