"""Reading OTel spans: OTLP JSON and span-per-line dumps decoded to :class:`OtelSpan` records.

Ids may be hex or base64, times nanosecond integers, numeric strings or ISO strings, attributes
OTLP ``AnyValue`` lists or plain objects; a span that cannot be read is skipped and named.

Example:
    >>> attributes([{"key": "n", "value": {"intValue": "3"}}])
    {'n': 3}
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from orchestrace.errors import Problem, _short
from orchestrace.io._repair import warning
from orchestrace.io.importers import describe_value
from orchestrace.io.otel._keys import _OI_KIND

_SPAN_KINDS = ("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")


_STATUS = ("UNSET", "OK", "ERROR")


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
        self.problems.append(warning(code, msg, fix, where, self.source, sid))

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
