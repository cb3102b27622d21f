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

import base64
import binascii
import contextlib
import gc
import heapq
import math
from bisect import bisect_left
from collections.abc import Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from orchestrace.errors import Problem, TraceFormatError, _short
from orchestrace.io._common import format_ns
from orchestrace.io.importers import ImportResult, describe_value
from orchestrace.trace.build import default_costs
from orchestrace.trace.model import Edge, Event, Trace

__all__ = [
    "OtelSpan",
    "import_spans",
    "import_values",
    "iter_spans",
    "sniff",
    "sniff_openinference",
]

#: Problems of one kind listed before they are summarised in one line.
_LISTED = 20
_OI_KIND = "openinference.span.kind"
_OP = "gen_ai.operation.name"
_HANDOFF_TARGET = "gen_ai.agent.handoff.target.name"
_HANDOFF_SOURCE = "gen_ai.agent.handoff.source.name"
_HANDOFF_PREFIX = "handoff to "

# ---------------------------------------------------------------------- span kinds
_LLM_OPS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})
_TOOL_OPS = frozenset({"execute_tool", "retrieval"})
_CHAIN_OPS = frozenset({"invoke_workflow"})
_LLM_KINDS = frozenset({"LLM", "EMBEDDING"})
_TOOL_KINDS = frozenset({"TOOL", "RETRIEVER", "RERANKER"})
_CHAIN_KINDS = frozenset({"CHAIN", "EVALUATOR", "PROMPT", "UNKNOWN"})
_KNOWN_KINDS = frozenset({"AGENT", "GUARDRAIL"}) | _LLM_KINDS | _TOOL_KINDS | _CHAIN_KINDS
_KNOWN_OPS = (
    frozenset({"invoke_agent", "create_agent", "apply_guardrail"})
    | _LLM_OPS
    | _TOOL_OPS
    | _CHAIN_OPS
)
_SPAN_KINDS = ("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
_STATUS = ("UNSET", "OK", "ERROR")

_TOKENS_IN = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
_TOKENS_OUT = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
)
_MODEL = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name", "embedding.model_name")
_AGENT_NAME = ("gen_ai.agent.name", "agent.name", "graph.node.id", "gen_ai.agent.id")
_TOOL_NAME = ("gen_ai.tool.name", "tool.name")
_TOOL_ARGS = ("gen_ai.tool.call.arguments", "input.value")
_TOOL_RESULT = ("gen_ai.tool.call.result", "output.value")
_OUTPUT = ("output.value",)
_COST = ("llm.cost.total", "gen_ai.usage.cost")


# ---------------------------------------------------------------------- the normalised span
@dataclass(slots=True)
class OtelSpan:
    """One span, whatever JSON form it came in.

    Attributes:
        trace_id: 32 lowercase hex digits.
        span_id: 16 lowercase hex digits (a duplicate gets a ``~2`` suffix).
        parent_id: The parent's span id, ``None`` for a root.
        name: Span name.
        start: Start, nanoseconds since the epoch.
        end: End, nanoseconds since the epoch; ``None`` while the span is open.
        attrs: Attributes, decoded to plain JSON values.
        kind: ``INTERNAL``, ``CLIENT``, ...
        status: ``UNSET``, ``OK`` or ``ERROR``.
        status_message: The status description.
        events: Span events (``name``, ``time_unix_nano``, ``attributes``).
        links: Links: ``(trace id, span id, attributes)``.
        resource: Resource attributes.
        scope: Instrumentation scope (``name``, ``version``).
        extra: Other fields of the span, kept verbatim.
        where: Where the span sits in the input (a JSON path).
    """

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start: int
    end: int | None
    attrs: dict[str, Any]
    kind: str = "INTERNAL"
    status: str = "UNSET"
    status_message: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    links: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    where: str = "$"


# ---------------------------------------------------------------------- recognising the input
def _resource_spans(value: object) -> list[Any] | None:
    if not isinstance(value, dict):
        return None
    rs = value.get("resourceSpans", value.get("resource_spans"))
    return rs if isinstance(rs, list) else None


def _is_line_span(value: object) -> bool:
    """A span as ``ReadableSpan.to_json()`` or an OTLP span object alone on a line."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return False
    ctx = value.get("context")
    if isinstance(ctx, dict) and "span_id" in ctx and "trace_id" in ctx:
        return "start_time" in value
    return ("spanId" in value or "span_id" in value) and (
        "startTimeUnixNano" in value or "start_time_unix_nano" in value
    )


def sniff(value: object) -> bool:
    """Whether ``value`` (a file's first JSON value) is OTLP JSON or a span of a span-per-line dump.

    Example:
        >>> sniff({"resourceSpans": []}), sniff({"events": []})
        (True, False)
    """
    try:
        return _resource_spans(value) is not None or _is_line_span(value)
    except Exception:  # never raises
        return False


def _first_attr_keys(value: object, limit: int = 200) -> Iterator[str]:
    rs = _resource_spans(value)
    spans: Iterable[Any]
    if rs is not None:
        spans = (
            sp
            for r in rs
            if isinstance(r, dict)
            for ss in _scope_list(r)
            if isinstance(ss, dict)
            for sp in (ss.get("spans") or [])
        )
    else:
        spans = [value]
    for n, sp in enumerate(spans):
        if n >= limit or not isinstance(sp, dict):
            return
        attrs = sp.get("attributes")
        if isinstance(attrs, dict):
            yield from (k for k in attrs if isinstance(k, str))
        elif isinstance(attrs, list):
            yield from (a["key"] for a in attrs if isinstance(a, dict) and "key" in a)


def sniff_openinference(value: object) -> bool:
    """Whether ``value`` holds OTel spans carrying ``openinference.span.kind``.

    Example:
        >>> sniff_openinference({"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": [
        ...     {"key": "openinference.span.kind", "value": {"stringValue": "LLM"}}]}]}]}]})
        True
    """
    try:
        return sniff(value) and any(k == _OI_KIND for k in _first_attr_keys(value))
    except Exception:  # never raises
        return False


def _scope_list(r: Mapping[str, Any]) -> list[Any]:
    for key in ("scopeSpans", "scope_spans", "instrumentationLibrarySpans"):
        v = r.get(key)
        if isinstance(v, list):
            return v
    return []


# ---------------------------------------------------------------------- decoding values
_ANY_KEYS = {
    "stringValue": "s",
    "string_value": "s",
    "boolValue": "b",
    "bool_value": "b",
    "intValue": "i",
    "int_value": "i",
    "doubleValue": "d",
    "double_value": "d",
    "arrayValue": "a",
    "array_value": "a",
    "kvlistValue": "k",
    "kvlist_value": "k",
    "bytesValue": "y",
    "bytes_value": "y",
}


def any_value(v: Any) -> Any:
    """Decode an OTLP ``AnyValue`` (``{"stringValue": ...}``, ``{"intValue": "3"}`` ...)."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:  # the common case first
        return v["stringValue"]
    for key, val in v.items():
        tag = _ANY_KEYS.get(key)
        if tag is None:
            continue
        if tag == "i":
            try:
                return int(val)
            except (TypeError, ValueError):
                return val
        if tag == "d":
            try:
                x = float(val)
            except (TypeError, ValueError):
                return val
            return x if math.isfinite(x) else str(val)
        if tag == "a":
            vals = val.get("values", []) if isinstance(val, dict) else []
            return [any_value(x) for x in vals] if isinstance(vals, list) else []
        if tag == "k":
            vals = val.get("values", []) if isinstance(val, dict) else []
            return attributes(vals)
        return val
    return None  # an empty AnyValue


def attributes(raw: Any) -> dict[str, Any]:
    """Decode attributes: an OTLP key/value list or a plain object."""
    if isinstance(raw, dict):
        return dict(raw)
    out: dict[str, Any] = {}
    if isinstance(raw, list):
        for kv in raw:
            try:
                key = kv["key"]
                v = kv["value"]
            except (TypeError, KeyError):
                if isinstance(kv, dict) and isinstance(kv.get("key"), str):
                    out[kv["key"]] = None
                continue
            if isinstance(key, str):
                out[key] = (
                    v["stringValue"] if type(v) is dict and "stringValue" in v else any_value(v)
                )
    return out


def _hex_id(raw: Any, size: int) -> str | None:
    """A trace (``size`` 16) or span (8) id as lowercase hex, from hex, ``0x`` hex or base64."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return f"{raw:0{size * 2}x}" if raw > 0 else None
    if not isinstance(raw, str) or not raw:
        return None
    s = raw[2:] if raw[:2] in ("0x", "0X") else raw
    if len(s) == size * 2:
        try:
            int(s, 16)
            return s.lower()
        except ValueError:
            pass
    try:
        b = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return None
    return b.hex() if len(b) == size else None


def _nanos(raw: Any) -> int | None:
    if raw is None or isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if raw > 0 else None
    if isinstance(raw, float):
        return int(raw) if math.isfinite(raw) and raw > 0 else None
    if isinstance(raw, str):
        try:
            v = int(raw)
            return v if v > 0 else None
        except ValueError:
            pass
        try:
            dt = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            return None
        if dt.tzinfo is None:
            return None
        whole = int(dt.timestamp())
        return whole * 1_000_000_000 + dt.microsecond * 1000
    return None


def _enum(raw: Any, names: tuple[str, ...], prefix: str) -> str:
    if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw < len(names):
        return names[raw]
    if isinstance(raw, str):
        s = raw.rsplit(".", 1)[-1].upper()
        if s.startswith(prefix):
            s = s[len(prefix) :]
        return s or names[0]
    return names[0]


# ---------------------------------------------------------------------- reading spans
# span fields with a place in OtelSpan; any other field is kept verbatim (``flags``: the W3C
# trace flags of the transport, not part of the trace)
_KNOWN_LINE = frozenset(
    {"name", "context", "parent_id", "start_time", "end_time", "status", "attributes"}
    | {"events", "links", "resource", "kind"}
)
_KNOWN_OTLP = frozenset(
    {"traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id"}
    | {"startTimeUnixNano", "start_time_unix_nano", "endTimeUnixNano", "end_time_unix_nano"}
    | {"status", "name", "attributes", "events", "links", "kind", "flags"}
)


class _Reader:
    """Turns JSON values into :class:`OtelSpan` records, naming what it could not read."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[Problem] = []
        self.native: list[tuple[dict[str, Any], list[Any], str]] = []

    def problem(self, code: str, msg: str, fix: str, where: str, sid: str | None = None) -> None:
        self.problems.append(
            Problem(
                code, msg, fix, path=where, event_id=sid, severity="warning", source=self.source
            )
        )

    def read(self, values: Iterable[object]) -> Iterator[OtelSpan]:
        for v, value in enumerate(values):
            base = f"$[{v}]" if v else "$"
            rs = _resource_spans(value)
            if rs is not None:
                yield from self._otlp(rs, base)
            elif _is_line_span(value):
                assert isinstance(value, dict)
                sp = self._span(value, {}, {}, f"line value {v + 1}")
                if sp is not None:
                    yield sp
            else:
                looks, fix = describe_value(value)
                self.problem(
                    "not-a-span",
                    f"JSON value {v + 1} is neither OTLP JSON nor a span (it looks like {looks})",
                    f"the value was skipped; a span dump holds one span object per line ({fix})",
                    base,
                )

    def _otlp(self, rs: list[Any], base: str) -> Iterator[OtelSpan]:
        for i, r in enumerate(rs):
            if not isinstance(r, dict):
                continue
            res_raw = r.get("resource")
            resource = attributes(res_raw.get("attributes")) if isinstance(res_raw, dict) else {}
            scopes = _scope_list(r)
            if "orchestrace.trace_id" in resource:
                self.native.append((resource, scopes, f"{base}.resourceSpans[{i}]"))
                continue
            for j, ss in enumerate(scopes):
                if not isinstance(ss, dict):
                    continue
                sc = ss.get("scope") or ss.get("instrumentationLibrary") or {}
                scope = (
                    {k: sc[k] for k in ("name", "version") if sc.get(k)}
                    if isinstance(sc, dict)
                    else {}
                )
                spans = ss.get("spans")
                if not isinstance(spans, list):
                    continue
                for k, raw in enumerate(spans):
                    where = f"{base}.resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                    if not isinstance(raw, dict):
                        self.problem(
                            "not-a-span", "span is not an object", "the entry was skipped", where
                        )
                        continue
                    sp = self._span(raw, resource, scope, where)
                    if sp is not None:
                        yield sp

    def _span(
        self, raw: dict[str, Any], resource: dict[str, Any], scope: dict[str, Any], where: str
    ) -> OtelSpan | None:
        ctx = raw.get("context") if isinstance(raw.get("context"), dict) else None
        if ctx is not None:  # ReadableSpan.to_json()
            tid_raw, sid_raw = ctx.get("trace_id"), ctx.get("span_id")
            pid_raw = raw.get("parent_id")
            start_raw, end_raw = raw.get("start_time"), raw.get("end_time")
            st: dict[str, Any] = raw["status"] if isinstance(raw.get("status"), dict) else {}
            status_raw, status_msg = st.get("status_code"), st.get("description")
            res = raw.get("resource")
            if isinstance(res, dict):
                resource = attributes(res.get("attributes"))
            events = [
                {
                    "name": e.get("name"),
                    "time_unix_nano": _nanos(e.get("timestamp")),
                    "attributes": attributes(e.get("attributes")),
                }
                for e in raw.get("events") or []
                if isinstance(e, dict)
            ]
            links = []
            for ln in raw.get("links") or []:
                lc = ln.get("context") if isinstance(ln, dict) else None
                if isinstance(lc, dict):
                    links.append(
                        (
                            _hex_id(lc.get("trace_id"), 16) or "",
                            _hex_id(lc.get("span_id"), 8) or "",
                            attributes(ln.get("attributes")),
                        )
                    )
            known = _KNOWN_LINE
        else:  # OTLP span
            tid_raw = raw.get("traceId", raw.get("trace_id"))
            sid_raw = raw.get("spanId", raw.get("span_id"))
            pid_raw = raw.get("parentSpanId", raw.get("parent_span_id"))
            start_raw = raw.get("startTimeUnixNano", raw.get("start_time_unix_nano"))
            end_raw = raw.get("endTimeUnixNano", raw.get("end_time_unix_nano"))
            st = raw["status"] if isinstance(raw.get("status"), dict) else {}
            status_raw, status_msg = st.get("code"), st.get("message")
            events = [
                {
                    "name": e.get("name"),
                    "time_unix_nano": _nanos(e.get("timeUnixNano", e.get("time_unix_nano"))),
                    "attributes": attributes(e.get("attributes")),
                }
                for e in raw.get("events") or []
                if isinstance(e, dict)
            ]
            links = [
                (
                    _hex_id(ln.get("traceId", ln.get("trace_id")), 16) or "",
                    _hex_id(ln.get("spanId", ln.get("span_id")), 8) or "",
                    attributes(ln.get("attributes")),
                )
                for ln in raw.get("links") or []
                if isinstance(ln, dict)
            ]
            known = _KNOWN_OTLP
        tid = _hex_id(tid_raw, 16)
        sid = _hex_id(sid_raw, 8)
        name: str = raw["name"] if isinstance(raw.get("name"), str) else ""
        if tid is None or sid is None:
            what = "trace id" if tid is None else "span id"
            self.problem(
                "bad-id",
                f"span {_short(str(name))!r} has no valid {what} ({_short(repr(tid_raw if tid is None else sid_raw), 60)})",
                "the span was skipped; ids are 32 (trace) and 16 (span) hex digits",
                where,
            )
            return None
        start = _nanos(start_raw)
        if start is None:
            self.problem(
                "bad-time",
                f"span {sid} ({_short(name)!r}) has no valid start time ({_short(repr(start_raw), 60)})",
                "the span was skipped; record startTimeUnixNano",
                where,
                sid,
            )
            return None
        pid = _hex_id(pid_raw, 8) if pid_raw not in (None, "", "0" * 16) else None
        extra = {k: v for k, v in raw.items() if k not in known}
        return OtelSpan(
            trace_id=tid,
            span_id=sid,
            parent_id=pid,
            name=name,
            start=start,
            end=_nanos(end_raw),
            attrs=attributes(raw.get("attributes")),
            kind=_enum(raw.get("kind"), _SPAN_KINDS, "SPAN_KIND_"),
            status=_enum(status_raw, _STATUS, "STATUS_CODE_"),
            status_message=status_msg if isinstance(status_msg, str) and status_msg else None,
            events=events,
            links=links,
            resource=resource,
            scope=scope,
            extra=extra,
            where=where,
        )


def iter_spans(values: Iterable[object], *, source: str = "<spans>") -> Iterator[OtelSpan]:
    """The spans of OTLP JSON values or span-per-line values, decoded (bad spans are skipped)."""
    yield from _Reader(source).read(values)


# ---------------------------------------------------------------------- classifying spans
def _first(attrs: Mapping[str, Any], keys: Iterable[str]) -> tuple[str | None, Any]:
    for k in keys:
        v = attrs.get(k)
        if v is not None and v != "":
            return k, v
    return None, None


def _classify(sp: OtelSpan) -> tuple[str, str | None]:
    """The span's role and, for an unknown kind, the kind it named."""
    a = sp.attrs
    op = a.get(_OP)
    oi = a.get(_OI_KIND)
    oi = oi.upper() if isinstance(oi, str) else None
    if _HANDOFF_TARGET in a or (
        oi == "TOOL" and sp.name.startswith(_HANDOFF_PREFIX) and len(sp.name) > len(_HANDOFF_PREFIX)
    ):
        return "handoff", None
    if op == "invoke_agent" or oi == "AGENT":
        return "agent", None
    if op == "create_agent":
        return "create", None
    if op in _LLM_OPS or oi in _LLM_KINDS:
        return "llm", None
    if op in _TOOL_OPS or oi in _TOOL_KINDS:
        return "tool", None
    if oi == "GUARDRAIL" or (isinstance(op, str) and "guardrail" in op):
        return "guardrail", None
    if op in _CHAIN_OPS or oi in _CHAIN_KINDS:
        return "chain", None
    if oi is not None:
        return "chain", f"openinference.span.kind {oi}"
    if op is not None:
        return "chain", f"gen_ai.operation.name {op}"
    return "chain", ""


def _agent_name(sp: OtelSpan) -> tuple[str | None, str]:
    key, v = _first(sp.attrs, _AGENT_NAME)
    if isinstance(v, str) and v:
        return key, v
    name = sp.name
    if name.startswith("invoke_agent "):
        name = name[len("invoke_agent ") :]
    if name.startswith("create_agent "):
        name = name[len("create_agent ") :]
    return None, name or "agent"


def _tool_name(sp: OtelSpan) -> tuple[str | None, str]:
    key, v = _first(sp.attrs, _TOOL_NAME)
    if isinstance(v, str) and v:
        return key, v
    name = sp.name
    if name.startswith("execute_tool "):
        name = name[len("execute_tool ") :]
    return None, name or "tool"


def _count(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int) and 0 <= v < 2**63:
        return v
    if isinstance(v, float) and v.is_integer() and 0 <= v < 2**63:
        return int(v)
    if isinstance(v, str) and v.isdigit() and len(v) < 19:
        return int(v)
    return None


# ---------------------------------------------------------------------- mapping one trace
@dataclass(slots=True)
class _Node:
    sp: OtelSpan | None  # None: the virtual root
    role: str
    start: int
    end: int
    children: list[_Node] = field(default_factory=list)
    parent: _Node | None = None
    agent: str = ""  # the agent this span acts for (its own identity for an agent span)
    ident: str = ""  # agent spans: the invoked agent's identity
    base: str = ""  # agent spans: the agent's name before a concurrency suffix
    entry: str | None = None
    exits: list[str] = field(default_factory=list)
    first_own: str | None = None  # agent spans: the first event of the invoked agent
    pre: int = 0  # position in pre-order
    last: int = 0  # the last pre-order position in this span's subtree
    depth: int = 0


class _Mapper:
    """Maps the spans of one OTel trace to an orchestrace trace."""

    def __init__(self, spans: list[OtelSpan], fmt: str, source: str, live: bool) -> None:
        self.spans = spans
        self.fmt = fmt
        self.source = source
        self.live = live
        self.problems: list[Problem] = []
        self.counts: dict[str, int] = {}
        self.unmapped: dict[str, int] = {}
        self.attr_keys: dict[str, int] = {}  # unmapped attribute keys kept, by key
        self.events: dict[str, tuple[tuple[float, int, int, int], dict[str, Any]]] = {}
        self.edges: list[tuple[str, str, str]] = []
        self.extra_edges: list[tuple[str, str, str, str]] = []  # src, dst, type, why
        self.extra_spans: dict[int, OtelSpan] = {}  # position in extra_edges -> span it is from

    # -------------------------------------------------------------- problems
    def problem(
        self, code: str, msg: str, fix: str, sp: OtelSpan | None, event_id: str | None = None
    ) -> None:
        n = self.counts.get(code, 0)
        self.counts[code] = n + 1
        if n < _LISTED:
            self.problems.append(
                Problem(
                    code,
                    msg,
                    fix,
                    path=sp.where if sp is not None else "$",
                    event_id=event_id if event_id is not None else (sp.span_id if sp else None),
                    severity="warning",
                    source=self.source,
                )
            )

    def _summarise(self) -> None:
        for code, n in self.counts.items():
            if n > _LISTED:
                self.problems.append(
                    Problem(
                        code,
                        f"{n - _LISTED} more problem(s) of this kind not listed",
                        "fix the ones above and import again",
                        severity="warning",
                        source=self.source,
                    )
                )

    def keep(self, what: str, n: int = 1) -> None:
        self.unmapped[what] = self.unmapped.get(what, 0) + n

    # -------------------------------------------------------------- the tree
    def build_tree(self) -> tuple[_Node, list[_Node]]:
        by_id: dict[str, _Node] = {}
        nodes: list[_Node] = []
        for sp in self.spans:
            if sp.span_id in by_id:
                k = 2
                while f"{sp.span_id}~{k}" in by_id:
                    k += 1
                new = f"{sp.span_id}~{k}"
                was = by_id[sp.span_id].sp
                self.problem(
                    "duplicate-span-id",
                    f"span id {sp.span_id} is used twice (spans "
                    f"{_short(was.name if was else '')!r} and {_short(sp.name)!r})",
                    f"the second was imported as {new!r}, children stay with the first; give every "
                    "span a unique id",
                    sp,
                    new,
                )
                sp.span_id = new
            role, unknown = _classify(sp)
            if unknown:
                self.problem(
                    "unknown-span-kind",
                    f"span {sp.span_id} ({_short(sp.name)!r}) has unknown {unknown}",
                    "imported as an orchestrator_decision of its agent, attributes kept in attrs; "
                    "use a GenAI operation name or OpenInference span kind orchestrace maps",
                    sp,
                )
                self.keep(f"span kind {unknown.split()[-1]}")
            elif unknown == "":
                self.keep("span without a GenAI kind")
            end = sp.end
            if end is None:
                if not self.live:
                    self.problem(
                        "no-end-time",
                        f"span {sp.span_id} ({_short(sp.name)!r}) has no end time (still open when "
                        "exported?)",
                        "imported as ending with its last child; export spans after they end",
                        sp,
                    )
                end = sp.start
            elif end < sp.start:
                self.problem(
                    "negative-duration",
                    f"span {sp.span_id} ({_short(sp.name)!r}) ends before it starts",
                    "imported with duration 0; fix the span's clock",
                    sp,
                )
                end = sp.start
            node = _Node(sp, role, sp.start, end)
            by_id[sp.span_id] = node
            nodes.append(node)
        parent_of: dict[int, _Node | None] = {}
        for node in nodes:
            assert node.sp is not None
            pid = node.sp.parent_id
            parent = by_id.get(pid) if pid else None
            if pid and parent is None:
                self.problem(
                    "missing-parent",
                    f"span {node.sp.span_id} ({_short(node.sp.name)!r}) names parent {pid}, which "
                    "is not in the input",
                    "imported as a top-level span; export the whole trace (a sampler or a "
                    "truncated export dropped the parent)",
                    node.sp,
                )
            parent_of[id(node)] = parent
        self._break_cycles(nodes, parent_of)
        tops: list[_Node] = []
        for node in nodes:
            parent = parent_of[id(node)]
            if parent is None:
                tops.append(node)
            else:
                node.parent = parent
                parent.children.append(node)
        for node in nodes:
            node.children.sort(key=_order)
        tops.sort(key=_order)
        return self._root(tops), nodes

    def _break_cycles(self, nodes: list[_Node], parent_of: dict[int, _Node | None]) -> None:
        """Make the span that closes a cycle of parent ids top-level (linear time)."""
        state: dict[int, int] = {}  # 1: on the path being walked, 2: known to reach a root
        for node in nodes:
            path: list[_Node] = []
            x: _Node | None = node
            while x is not None and id(x) not in state:
                state[id(x)] = 1
                path.append(x)
                x = parent_of[id(x)]
            if x is not None and state[id(x)] == 1:
                assert x.sp is not None
                self.problem(
                    "parent-cycle",
                    f"span {x.sp.span_id} ({_short(x.sp.name)!r}) is its own ancestor through "
                    f"parent {x.sp.parent_id}",
                    "imported as a top-level span; fix the parent ids",
                    x.sp,
                )
                parent_of[id(x)] = None
            for y in path:
                state[id(y)] = 2

    def _root(self, tops: list[_Node]) -> _Node:
        if len(tops) == 1 and tops[0].role == "agent":
            root = tops[0]
            root.role = "root-agent"
            return root
        first = tops[0].sp
        assert first is not None
        name = first.attrs.get("gen_ai.workflow.name")
        if not isinstance(name, str) or not name or tops[0].role == "agent":
            name = first.name if tops[0].role != "agent" else "workflow"
        root = _Node(None, "root", min(n.start for n in tops), max(n.end for n in tops), tops)
        root.ident = root.base = name or "workflow"
        for n in tops:
            n.parent = root
        return root

    # -------------------------------------------------------------- times and agents
    def walk(self, root: _Node) -> list[_Node]:
        """Pre-order; shifts clock-skewed subtrees into their parent; open spans end last."""
        order: list[_Node] = []
        stack = [root]
        while stack:
            node = stack.pop()
            node.pre = len(order)
            node.depth = node.parent.depth + 1 if node.parent is not None else 0
            order.append(node)
            for c in node.children:
                if c.start < node.start:
                    shift = node.start - c.start
                    assert c.sp is not None
                    self.problem(
                        "clock-skew",
                        f"span {c.sp.span_id} ({_short(c.sp.name)!r}) starts "
                        f"{format_ns(shift)} before its parent",
                        "its subtree was moved to start with the parent; synchronise the clocks of "
                        "the processes that recorded them",
                        c.sp,
                    )
                    _shift(c, shift)
            stack.extend(reversed(node.children))
        # an open span (no end time) ends with its last descendant
        for node in reversed(order):
            node.last = max([node.pre, *(c.last for c in node.children)])
            if node.sp is not None and node.sp.end is None:
                node.end = max([node.end, *(c.end for c in node.children)])
        if root.sp is None:
            root.start = min(c.start for c in root.children)
            root.end = max(c.end for c in root.children)
        return order

    def agents(self, root: _Node, order: list[_Node]) -> None:
        invocations = sorted((n for n in order if n.role == "agent"), key=_order)
        slots: dict[str, list[int]] = {}
        for n in invocations:
            assert n.sp is not None
            _, n.base = _agent_name(n.sp)
            ends = slots.setdefault(n.base, [])
            k = next((i for i, e in enumerate(ends) if e <= n.start), len(ends))
            if k == len(ends):
                ends.append(n.end)
            else:
                ends[k] = n.end
            n.ident = n.base if k == 0 else f"{n.base}#{k + 1}"
        if root.role == "root-agent":
            assert root.sp is not None
            _, root.base = _agent_name(root.sp)
            root.ident = root.base
        taken = {n.ident for n in invocations}
        if root.role == "root" and root.ident in taken:
            root.ident = root.base = f"{root.ident} (workflow)"
        for n in order:
            if n is root:
                n.agent = n.ident
            else:
                assert n.parent is not None
                n.agent = n.ident if n.role == "agent" else n.parent.agent

    # -------------------------------------------------------------- events
    def add_event(self, key_t: int, n: _Node, exit: bool, **fields: Any) -> str:
        """Record one event; events are ordered by time, then as the span tree is walked."""
        eid: str = fields["id"]
        t = round((key_t - self.t0) / 1e9, 9)
        fields["t"] = max(t, 0.0)
        order = (fields["t"], n.last, 1, -n.depth) if exit else (fields["t"], n.pre, 0, 0)
        self.events[eid] = (order, fields)
        return eid

    def otel_attrs(self, sp: OtelSpan, used: set[str]) -> dict[str, Any]:
        kept = {k: v for k, v in sp.attrs.items() if k not in used}
        keys = self.attr_keys
        for k in kept:
            keys[k] = keys.get(k, 0) + 1
        out: dict[str, Any] = {"span_id": sp.span_id, "name": sp.name}
        if sp.parent_id:
            out["parent_span_id"] = sp.parent_id
        out["start_time_unix_nano"] = sp.start
        if sp.end is not None:
            out["end_time_unix_nano"] = sp.end
        if sp.kind != "INTERNAL":
            out["kind"] = sp.kind
        if sp.status != "UNSET":
            out["status"] = {"code": sp.status}
            if sp.status_message:
                out["status"]["message"] = sp.status_message
        if kept:
            out["attributes"] = kept
        if sp.events:
            out["events"] = sp.events
            self.keep("span event", len(sp.events))
        if sp.links:
            out["links"] = [
                {"trace_id": t, "span_id": s, **({"attributes": a} if a else {})}
                for t, s, a in sp.links
            ]
        if sp.extra:
            out["fields"] = sp.extra
        if sp.resource != self.resource:
            out["resource"] = sp.resource
        if sp.scope != self.scope:
            out["scope"] = sp.scope
        return {"otel": out}

    def error_of(self, sp: OtelSpan) -> str | None:
        if sp.status != "ERROR":
            return None
        return sp.status_message or "error"

    def own_events(self, n: _Node) -> None:
        """Create the entry (and exit) events of one span.

        While recording live, a span still open has only its entry event: its return, result or
        stop is written once it ends.
        """
        self._own_events(n)
        still_open = (n.sp is None and any(c.sp and c.sp.end is None for c in n.children)) or (
            n.sp is not None and n.sp.end is None
        )
        if self.live and still_open:
            for eid in n.exits:
                if eid != n.entry:
                    del self.events[eid]
            n.exits = [n.entry] if n.entry is not None else []

    def _own_events(self, n: _Node) -> None:
        sp = n.sp
        parent_agent = n.parent.agent if n.parent is not None else n.agent
        first_child = n.children[0].start if n.children else n.end
        lead_dur = max(first_child - n.start, 0) / 1e9
        if sp is None:  # virtual root: the stop at the end
            n.exits = [
                self.add_event(
                    n.end,
                    n,
                    True,
                    id="stop",
                    type="orchestrator_decision",
                    agent=n.ident,
                    decision="stop",
                )
            ]
            return
        used: set[str] = set()
        err = self.error_of(sp)
        sid = sp.span_id
        if n.role == "root-agent":
            key, _ = _agent_name(sp)
            used.update(k for k in (key, _OP, _OI_KIND) if k)
            okey, out = _first(sp.attrs, _OUTPUT)
            attrs = self.otel_attrs(sp, used | ({okey} if isinstance(out, str) and okey else set()))
            if isinstance(out, str):
                attrs["answer"] = out
            n.exits = [
                self.add_event(
                    n.end,
                    n,
                    True,
                    id=f"{sid}.stop",
                    type="orchestrator_decision",
                    agent=n.ident,
                    decision="stop",
                    content=out if isinstance(out, str) else None,
                    error=err,
                    attrs=attrs,
                )
            ]
            return
        if n.role == "agent":
            key, _ = _agent_name(sp)
            used.update(k for k in (key, _OP, _OI_KIND) if k)
            okey, out = _first(sp.attrs, _OUTPUT)
            if isinstance(out, str) and okey:
                used.add(okey)
            n.entry = self.add_event(
                n.start,
                n,
                False,
                id=sid,
                type="spawn",
                agent=parent_agent,
                to=n.ident,
                decision="spawn",
                attrs=self.otel_attrs(sp, used),
            )
            n.exits = [
                self.add_event(
                    n.end,
                    n,
                    True,
                    id=f"{sid}.return",
                    type="return",
                    agent=n.ident,
                    from_=n.ident,
                    to=parent_agent,
                    content=out if isinstance(out, str) else None,
                    error=err,
                )
            ]
            return
        if n.role == "tool":
            key, tool = _tool_name(sp)
            used.update(k for k in (key, _OP, _OI_KIND) if k)
            akey, args = _first(sp.attrs, _TOOL_ARGS)
            rkey, res = _first(sp.attrs, _TOOL_RESULT)
            if isinstance(args, str) and akey:
                used.add(akey)
            if isinstance(res, str) and rkey:
                used.add(rkey)
            n.entry = self.add_event(
                n.start,
                n,
                False,
                id=sid,
                type="tool_call",
                agent=n.agent,
                tool=tool,
                dur=lead_dur,
                content=args if isinstance(args, str) else None,
                attrs=self.otel_attrs(sp, used),
            )
            n.exits = [
                self.add_event(
                    n.end,
                    n,
                    True,
                    id=f"{sid}.result",
                    type="tool_result",
                    agent=tool,
                    tool=tool,
                    content=res if isinstance(res, str) else None,
                    error=err,
                )
            ]
            return
        fields: dict[str, Any] = {"id": sid, "agent": n.agent, "dur": lead_dur, "error": err}
        if n.role == "llm":
            mkey, model = _first(sp.attrs, _MODEL)
            ikey, tin = _first(sp.attrs, _TOKENS_IN)
            okey, tout = _first(sp.attrs, _TOKENS_OUT)
            ckey, cost = _first(sp.attrs, _COST)
            used.update(k for k in (_OP, _OI_KIND) if k in sp.attrs)
            if isinstance(model, str) and mkey:
                used.add(mkey)
                fields["tool"] = model
            for k, v, name in ((ikey, tin, "tokens_in"), (okey, tout, "tokens_out")):
                c = _count(v)
                if k and c is not None:
                    used.add(k)
                    fields[name] = c
            if (
                ckey
                and isinstance(cost, int | float)
                and not isinstance(cost, bool)
                and math.isfinite(cost)
                and cost >= 0
            ):
                used.add(ckey)
                fields["cost"] = float(cost)
            fields["type"] = "llm_call"
        elif n.role == "handoff":
            target = self.handoff_target(sp)
            used.update(k for k in (_OP, _OI_KIND, _HANDOFF_TARGET) if k in sp.attrs)
            if _HANDOFF_SOURCE in sp.attrs:
                used.add(_HANDOFF_SOURCE)
            key, tool = _tool_name(sp)
            if key:
                used.add(key)
                fields["tool"] = tool
            fields.update(type="message", from_=n.agent, to=target, decision="delegate")
        elif n.role == "guardrail":
            used.update(k for k in (_OP, _OI_KIND) if k in sp.attrs)
            fields["type"] = "safety_event"
        elif n.role == "create":
            key, created = _agent_name(sp)
            used.update(k for k in (key, _OP) if k)
            fields.update(type="spawn", to=created, decision="spawn")
        else:
            used.update(k for k in (_OP, _OI_KIND) if k in sp.attrs and _classify(sp)[1] is None)
            fields["type"] = "orchestrator_decision"
        fields["attrs"] = self.otel_attrs(sp, used)
        n.entry = self.add_event(n.start, n, False, **fields)
        n.exits = [n.entry]

    def handoff_target(self, sp: OtelSpan) -> str:
        t = sp.attrs.get(_HANDOFF_TARGET)
        if isinstance(t, str) and t:
            return t
        out = sp.attrs.get("output.value")
        if isinstance(out, str) and out:
            return out
        return sp.name[len(_HANDOFF_PREFIX) :]

    # -------------------------------------------------------------- edges
    def link_children(self, n: _Node) -> None:
        """Edges of one span: entry -> children (by timing of siblings) -> exit."""
        entry = n.entry
        entry_type = self.events[entry][1]["type"] if entry else None
        running: list[tuple[int, int, _Node]] = []
        frontier: list[tuple[int, int, _Node]] = []
        latest: list[Any] = [-1, None]  # the latest start of a finished sibling, and that sibling

        def settle(limit: int) -> None:
            """Siblings done by ``limit`` join the frontier; those a later one followed leave."""
            while running and running[0][0] <= limit:
                item = heapq.heappop(running)
                heapq.heappush(frontier, item)
                if item[2].start >= latest[0]:
                    latest[0], latest[1] = item[2].start, item[2]
            while frontier and frontier[0][0] <= latest[0] and frontier[0][2] is not latest[1]:
                heapq.heappop(frontier)

        for k, c in enumerate(n.children):
            settle(c.start)
            if c.entry is None:  # cannot happen: every span below the root has an entry
                continue
            if frontier:
                self.join([x[2] for x in frontier], c.entry)
            elif entry is not None:
                kind = "spawn" if entry_type == "spawn" else "causal"
                self.edges.append((entry, c.entry, kind))
            heapq.heappush(running, (c.end, k, c))
        own_exit = n.exits[0] if n.exits and n.exits[0] != entry else None
        settle(n.end)
        done = [x[2] for x in frontier]
        if own_exit is not None:
            if done:
                self.join(done, own_exit)
            elif entry is not None:
                kinds = {"tool_call": "tool_dependency", "spawn": "spawn"}
                self.edges.append((entry, own_exit, kinds.get(entry_type or "", "causal")))
        elif done and n.sp is not None:
            n.exits = [e for d in done for e in d.exits]
        if n.role in ("agent", "root-agent") or n.sp is None:
            if n.children:
                n.first_own = n.children[0].entry
            else:
                n.first_own = own_exit

    def join(self, preds: list[_Node], dst: str) -> None:
        exits = [e for p in preds for e in p.exits]
        returns = sum(1 for e in exits if self.events[e][1]["type"] == "return")
        for e in exits:
            if self.events[e][1]["type"] == "return":
                kind = "aggregate" if returns > 1 else "return"
            else:
                kind = "causal"
            self.edges.append((e, dst, kind))

    def handoffs(self, order: list[_Node]) -> None:
        targets: dict[str, list[tuple[int, int, _Node]]] = {}
        for n in order:
            if n.role == "agent":
                targets.setdefault(n.base, []).append((n.start, n.pre, n))
        for lst in targets.values():
            lst.sort(key=lambda x: (x[0], x[1]))
        for n in order:
            if n.role != "handoff" or n.entry is None:
                continue
            fields = self.events[n.entry][1]
            name = fields["to"]
            lst = targets.get(name, [])
            i = bisect_left(lst, (n.start, -1))
            found = None
            ancestors = set()
            p = n.parent
            while p is not None:
                ancestors.add(id(p))
                p = p.parent
            for _, _, cand in lst[i:]:
                if id(cand) not in ancestors:
                    found = cand
                    break
            if found is None or found.first_own is None:
                assert n.sp is not None
                self.problem(
                    "handoff-target",
                    f"handoff {n.sp.span_id} to {_short(name)!r}: no agent span of that name "
                    "starts after it",
                    "kept as a delegate message without an edge; export the target agent's spans",
                    n.sp,
                )
                continue
            fields["to"] = found.ident
            if n.sp is not None:
                self.extra_spans[len(self.extra_edges)] = n.sp
            self.extra_edges.append((n.entry, found.first_own, "message", "handoff"))

    def links(self, by_span: dict[str, _Node], trace_id: str) -> None:
        for n in by_span.values():
            sp = n.sp
            if sp is None or not sp.links or n.entry is None:
                continue
            for tid, sid, _ in sp.links:
                if tid != trace_id:
                    self.keep("link to another trace")
                    continue
                target = by_span.get(sid)
                if target is None:
                    self.problem(
                        "dangling-link",
                        f"span {sp.span_id} links to span {sid}, which is not in the input",
                        "the link is kept in attrs without an edge",
                        sp,
                    )
                    continue
                if target.end <= n.start:
                    srcs = target.exits
                elif target.start <= n.start and target.entry is not None:
                    srcs = [target.entry]
                else:
                    self.problem(
                        "link-backwards",
                        f"span {sp.span_id} links to span {sid}, which starts after it",
                        "the link is kept in attrs without an edge (an event cannot depend on a "
                        "later one)",
                        sp,
                    )
                    continue
                for s in srcs:
                    if s != n.entry:
                        self.extra_spans[len(self.extra_edges)] = sp
                        self.extra_edges.append((s, n.entry, "causal", f"link {sp.span_id}->{sid}"))

    # -------------------------------------------------------------- the trace
    def run(self) -> Trace:
        root, nodes = self.build_tree()
        # the trace's resource and scope: its first span's (a span with others keeps its own)
        first_span = nodes[0].sp
        assert first_span is not None
        self.resource, self.scope = first_span.resource, first_span.scope
        order = self.walk(root)
        self.t0 = min(n.start for n in order)
        self.agents(root, order)
        for n in order:
            self.own_events(n)
        for n in reversed(order):
            self.link_children(n)
        self.handoffs(order)
        by_span = {n.sp.span_id: n for n in nodes if n.sp is not None}
        trace_id = nodes[0].sp.trace_id if nodes[0].sp is not None else ""
        self.links(by_span, trace_id)
        events = self.finish_events(root.ident)
        edges = self.finish_edges(events)
        first = nodes[0].sp
        assert first is not None
        service = self.resource.get("service.name")
        system = (
            service
            if isinstance(service, str) and service and not service.startswith("unknown_service")
            else (self.scope.get("name") or "opentelemetry")
        )
        top = root.sp if root.sp is not None else root.children[0].sp
        assert top is not None
        meta: dict[str, Any] = {
            "source": {
                "format": self.fmt,
                "trace_id": trace_id,
                "root_span_id": top.span_id,
                "start_time_unix_nano": self.t0,
            }
        }
        if self.resource:
            meta["source"]["resource"] = self.resource
        if self.scope:
            meta["source"]["scope"] = self.scope
        self._summarise()
        for k, c in self.attr_keys.items():
            self.keep(f"attribute {k.split('.', 1)[0]}.*" if "." in k else f"attribute {k}", c)
        return Trace(
            trace_id=trace_id,
            task_id=top.name or "otel",
            events=tuple(events),
            edges=tuple(edges),
            costs=default_costs(events),
            system=str(system),
            meta=meta,
        )

    def finish_events(self, root: str) -> list[Event]:
        """Order the events; give them steps (rule 16) and roles (rule 20)."""
        ordered = sorted(self.events.values(), key=lambda x: x[0])
        spawners = {f["agent"] for _, f in ordered if f["type"] == "spawn"}

        def role(agent: str) -> str:
            if agent == root:
                return "orchestrator"
            return "manager" if agent in spawners else "worker"

        steps: dict[str, int] = {}
        out: list[Event] = []
        for _, f in ordered:
            if f["type"] != "tool_result":
                agent = f["agent"]
                if f["type"] == "llm_call":
                    s = steps.get(agent, -1) + 1
                    steps[agent] = s
                else:
                    s = max(steps.get(agent, 0), 0)
                f["step"] = s
                # a spawn names the role of the agent it starts, as the runtime records it
                f["role"] = role(f["to"] if f["type"] == "spawn" and f.get("to") else agent)
            clean = {k: v for k, v in f.items() if v is not None}
            out.append(Event(**clean))
        # an agent invoked again is delegated to, not spawned anew
        seen: set[str] = set()
        for i, e in enumerate(out):
            if e.type == "spawn" and e.to is not None:
                if e.to in seen:
                    out[i] = _replace(e, decision="delegate")
                seen.add(e.to)
        return out

    def finish_edges(self, events: list[Event]) -> list[Edge]:
        pos = {e.id: i for i, e in enumerate(events)}
        edges = [Edge(s, d, k) for s, d, k in self.edges]  # type: ignore[arg-type]
        if self.extra_edges:
            edges += self.checked_extra(events, edges)
        edges.sort(key=lambda e: (pos[e.dst], pos[e.src]))
        return edges

    def checked_extra(self, events: list[Event], edges: list[Edge]) -> list[Edge]:
        """Handoff and link edges that do not close a causal cycle."""
        extra = list(self.extra_edges)
        # add extra edges (handoffs, links) that do not close a causal cycle
        idx = {e.id: i for i, e in enumerate(events)}
        succ: list[list[int]] = [[] for _ in events]
        for e in edges:
            succ[idx[e.src]].append(idx[e.dst])
        kept: list[Edge] = []
        for k, (src, dst, kind, why) in enumerate(extra):
            if _reaches(succ, idx[dst], idx[src]):
                self.problem(
                    "causal-cycle",
                    f"{why} from event {src} to event {dst} would close a causal cycle",
                    "the edge was left out (the link stays in attrs); check the span links",
                    self.extra_spans.get(k),  # located at the span that carries the link
                    dst,
                )
                continue
            succ[idx[src]].append(idx[dst])
            kept.append(Edge(src, dst, kind))  # type: ignore[arg-type]
        return kept


def _reaches(succ: list[list[int]], a: int, b: int) -> bool:
    if a == b:
        return True
    seen = {a}
    stack = [a]
    while stack:
        for v in succ[stack.pop()]:
            if v == b:
                return True
            if v not in seen:
                seen.add(v)
                stack.append(v)
    return False


def _replace(e: Event, **changes: Any) -> Event:
    import msgspec

    return msgspec.structs.replace(e, **changes)


def _order(n: _Node) -> tuple[int, int, str]:
    return (n.start, n.end, n.sp.span_id if n.sp is not None else "")


def _shift(node: _Node, delta: int) -> None:
    stack = [node]
    while stack:
        x = stack.pop()
        x.start += delta
        x.end += delta
        stack.extend(x.children)


# ---------------------------------------------------------------------- entry points
@contextlib.contextmanager
def _no_gc() -> Generator[None, None, None]:
    """Pause the cyclic garbage collector while spans are mapped.

    Mapping allocates many small objects, none cyclic; collections triggered meanwhile would
    rescan them all (40% of the import time).
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def import_spans(
    spans: Iterable[OtelSpan], *, source: str = "<spans>", live: bool = False
) -> ImportResult:
    """Map decoded spans (:func:`iter_spans`) to traces, one per OTel trace id.

    Args:
        spans: The spans.
        source: Name of the input, for problems.
        live: The spans are being recorded (open spans are expected, not a problem).
    """
    with _no_gc():
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
        with _no_gc():
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
        from orchestrace.io.otlp import restore

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
