"""Export traces as OTLP JSON, for any OpenTelemetry backend (Jaeger, Phoenix, Langfuse ...).

One span per event, one ``resourceSpans`` entry per trace. Each span carries GenAI semantic
convention attributes (``gen_ai.operation.name`` ``chat`` for an ``llm_call``, ``execute_tool``
for a tool call, ``invoke_agent`` for a spawn; agent, model, tool and token counts) and
``orchestrace.*`` attributes holding every field of the event; edges become span links (with
``orchestrace.edge.type``); the trace's own fields are resource attributes. Importing the file
(:mod:`orchestrace.io.otel`, which recognises an orchestrace export by its resource attributes)
gives back the same trace, field for field.

Span times are ``meta.source.start_time_unix_nano`` (an imported trace's original clock) or
2023-11-14T22:13:20Z, plus ``t``; ids are derived from the trace id and the event's position, so
the same trace gives the same bytes.

Example:
    >>> from orchestrace.trace.generate import generate_trace
    >>> from orchestrace.io.otel import import_values
    >>> import msgspec
    >>> tr = generate_trace(agents=3, steps=20, seed=0)
    >>> doc = msgspec.json.decode(export_bytes([tr]))
    >>> span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    >>> span["name"], {a["key"] for a in span["attributes"]} >= {"gen_ai.operation.name"}
    ('chat sim', True)
    >>> import_values([doc], source="t.json").traces[0] == tr
    True
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from orchestrace.errors import TraceFormatError
from orchestrace.trace.model import Edge, Event, Trace

__all__ = ["BASE_UNIX_NANO", "export_bytes", "export_dict", "restore"]

#: Span start of ``t = 0`` when the trace does not record its clock (2023-11-14T22:13:20Z).
BASE_UNIX_NANO = 1_700_000_000 * 10**9
_P = "orchestrace."
_SCOPE = {"name": "orchestrace"}
_ENC = msgspec.json.Encoder()
_EVENT_FIELDS = tuple(f for f in Event.__struct_fields__)
_JSON_FIELDS = ("attrs",)
_TRACE_JSON = ("rewards", "costs", "metrics", "meta")
_OPS = {"llm_call": "chat", "tool_call": "execute_tool", "spawn": "invoke_agent"}


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def _attrs(pairs: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in pairs.items() if v is not None]


def _json(v: Any) -> str:
    return _ENC.encode(v).decode()


def _ids(trace: Trace) -> tuple[str, list[str]]:
    tid = hashlib.blake2b(trace.trace_id.encode(), digest_size=16).hexdigest()
    sids = [
        hashlib.blake2b(f"{trace.trace_id}\x00{i}".encode(), digest_size=8).hexdigest()
        for i in range(len(trace.events))
    ]
    return tid, sids


def _base(trace: Trace) -> int:
    src = trace.meta.get("source") if isinstance(trace.meta, dict) else None
    start = src.get("start_time_unix_nano") if isinstance(src, dict) else None
    if isinstance(start, int) and not isinstance(start, bool) and 0 < start < 2**63:
        return start
    return BASE_UNIX_NANO


def _semconv(e: Event) -> tuple[str, dict[str, Any]]:
    a: dict[str, Any] = {}
    op = _OPS.get(e.type)
    if op:
        a["gen_ai.operation.name"] = op
    if e.type == "spawn":
        a["gen_ai.agent.name"] = e.to or e.agent
        name = f"invoke_agent {e.to or e.agent}"
    else:
        a["gen_ai.agent.name"] = e.agent
        name = f"{e.type} {e.agent}"
    if e.type == "llm_call":
        if e.tool:
            a["gen_ai.request.model"] = e.tool
        name = f"chat {e.tool or e.agent}"
    elif e.type in ("tool_call", "tool_result") and e.tool:
        a["gen_ai.tool.name"] = e.tool
        if e.type == "tool_call":
            name = f"execute_tool {e.tool}"
    if e.tokens_in:
        a["gen_ai.usage.input_tokens"] = e.tokens_in
    if e.tokens_out:
        a["gen_ai.usage.output_tokens"] = e.tokens_out
    return name, a


def _parents(trace: Trace, sids: list[str]) -> list[str]:
    """A span's parent: the spawn that started its agent, or the call of a tool result."""
    pos = {e.id: i for i, e in enumerate(trace.events)}
    parent = [""] * len(trace.events)
    for ed in trace.edges:
        if ed.type == "tool_dependency" and ed.dst in pos and ed.src in pos:
            parent[pos[ed.dst]] = sids[pos[ed.src]]
    spawned: dict[str, list[tuple[float, int]]] = {}
    for i, e in enumerate(trace.events):
        if e.type == "spawn" and e.to:
            spawned.setdefault(e.to, []).append((e.t, i))
    for lst in spawned.values():
        lst.sort()
    for i, e in enumerate(trace.events):
        if parent[i] or e.agent not in spawned:
            continue
        best = -1
        for t, j in spawned[e.agent]:
            if t <= e.t and j != i:
                best = j
            elif t > e.t:
                break
        if best >= 0:
            parent[i] = sids[best]
    return parent


def _resource_spans(trace: Trace) -> dict[str, Any]:
    tid, sids = _ids(trace)
    base = _base(trace)
    parents = _parents(trace, sids)
    pos: dict[str, int] = {}
    for i, e in enumerate(trace.events):
        pos.setdefault(e.id, i)
    links: list[list[dict[str, Any]]] = [[] for _ in trace.events]
    loose: list[list[Any]] = []
    for k, ed in enumerate(trace.edges):
        s, d = pos.get(ed.src), pos.get(ed.dst)
        if s is None or d is None:
            loose.append([k, ed.src, ed.dst, ed.type])
            continue
        links[d].append(
            {
                "traceId": tid,
                "spanId": sids[s],
                "attributes": _attrs({_P + "edge.type": ed.type, _P + "edge.index": k}),
            }
        )
    spans = []
    for i, e in enumerate(trace.events):
        name, sem = _semconv(e)
        own: dict[str, Any] = {}
        written = msgspec.to_builtins(e)  # what the native writer writes: explicit 0.0 too
        for f in _EVENT_FIELDS:
            v = getattr(e, f)
            if v is None or ("from" if f == "from_" else f) not in written:
                continue
            key = _P + "event." + ("from" if f == "from_" else f)
            own[key] = _json(v) if f in _JSON_FIELDS else v
        start = base + round(e.t * 1e9)
        span: dict[str, Any] = {
            "traceId": tid,
            "spanId": sids[i],
            "name": name,
            "kind": 1,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + round(e.dur * 1e9)),
            "attributes": _attrs({**sem, **own}),
        }
        if parents[i]:
            span["parentSpanId"] = parents[i]
        if links[i]:
            span["links"] = links[i]
        if e.error is not None:
            span["status"] = {"code": 2, "message": e.error}
        spans.append(span)
    res: dict[str, Any] = {"service.name": trace.system or "orchestrace"}
    for f in Trace.__struct_fields__:
        if f in ("events", "edges"):
            continue
        v = getattr(trace, f)
        if v is None:
            continue
        res[_P + f] = _json(v) if f in _TRACE_JSON else v
    if loose:
        res[_P + "loose_edges"] = _json(loose)
    return {
        "resource": {"attributes": _attrs(res)},
        "scopeSpans": [{"scope": dict(_SCOPE), "spans": spans}],
    }


def export_dict(traces: Sequence[Trace]) -> dict[str, Any]:
    """The OTLP JSON document (an ``ExportTraceServiceRequest``) of ``traces``."""
    return {"resourceSpans": [_resource_spans(tr) for tr in traces]}


def export_bytes(traces: Sequence[Trace]) -> bytes:
    """Encode ``traces`` as OTLP JSON (``resourceSpans``)."""
    return _ENC.encode(export_dict(traces))


# ---------------------------------------------------------------------- import of an export
def restore(
    resource: Mapping[str, Any], scopes: list[Any], *, source: str, where: str = "$"
) -> Trace:
    """Rebuild the trace an orchestrace OTLP export holds (its resource and scope spans).

    Raises:
        TraceFormatError: An ``orchestrace.*`` attribute was edited into something that is not
            an orchestrace field (the message names the span).
    """
    from orchestrace.io.otel import attributes  # noqa: PLC0415  import cycle: orchestrace.io.otel imports this module

    def bad(place: str, err: Exception) -> TraceFormatError:
        return TraceFormatError(
            source,
            place,
            f"orchestrace attributes do not decode ({err})",
            "re-export the trace with `orchestrace convert --to otlp`, or remove the "
            "orchestrace.* attributes to import it as plain OTel spans",
        )

    events: list[Event] = []
    edges: list[tuple[int, Edge]] = []
    sid_to_id: dict[str, str] = {}
    pending: list[tuple[str, list[Any]]] = []
    for j, ss in enumerate(scopes):
        spans = ss.get("spans") if isinstance(ss, dict) else None
        for k, sp in enumerate(spans if isinstance(spans, list) else []):
            place = f"{where}.scopeSpans[{j}].spans[{k}]"
            if not isinstance(sp, dict):
                raise bad(place, ValueError("span is not an object"))
            a = attributes(sp.get("attributes"))
            fields: dict[str, Any] = {}
            try:
                for f in _EVENT_FIELDS:
                    key = _P + "event." + ("from" if f == "from_" else f)
                    if key in a:
                        v = a[key]
                        fields[key[len(_P) + 6 :]] = (
                            msgspec.json.decode(v) if f in _JSON_FIELDS else v
                        )
                ev = msgspec.convert(fields, Event, from_attributes=False)
            except (msgspec.ValidationError, msgspec.DecodeError, TypeError) as err:
                raise bad(place, err) from None
            events.append(ev)
            sid = sp.get("spanId")
            if isinstance(sid, str):
                sid_to_id.setdefault(sid, ev.id)
            pending.append((ev.id, sp.get("links") or []))
    for dst, lnks in pending:
        for ln in lnks:
            if not isinstance(ln, dict):
                continue
            la = attributes(ln.get("attributes"))
            src = sid_to_id.get(str(ln.get("spanId")))
            idx, kind = la.get(_P + "edge.index"), la.get(_P + "edge.type")
            if src is None or not isinstance(idx, int):
                continue
            try:
                edges.append((idx, msgspec.convert({"src": src, "dst": dst, "type": kind}, Edge)))
            except msgspec.ValidationError as err:
                raise bad(where, err) from None
    header: dict[str, Any] = {}
    loose = resource.get(_P + "loose_edges")
    try:
        for f in Trace.__struct_fields__:
            v = resource.get(_P + f)
            if v is None or f in ("events", "edges"):
                continue
            header[f] = msgspec.json.decode(v) if f in _TRACE_JSON else v
        for idx, s, d, kind in msgspec.json.decode(loose) if isinstance(loose, str) else []:
            edges.append((idx, Edge(s, d, kind)))
        edges.sort(key=lambda x: x[0])
        trace = msgspec.convert(
            {**header, "events": [], "edges": []}, Trace, from_attributes=False
        ).replace(events=tuple(events), edges=tuple(e for _, e in edges))
    except (msgspec.ValidationError, msgspec.DecodeError, ValueError, TypeError) as err:
        raise bad(where, err) from None
    return trace
