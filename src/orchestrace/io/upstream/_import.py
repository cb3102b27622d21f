"""Import from the survey schema: survey events to native fields, markers restored where still valid.

Example:
    >>> from orchestrace.trace.build import TraceBuilder
    >>> from orchestrace.io.upstream import to_upstream
    >>> b = TraceBuilder(task_id="t")
    >>> _ = b.message("a", "b", "hi")
    >>> tr = b.build()
    >>> from_upstream(to_upstream(tr)) == (tr, [])
    True
"""

from __future__ import annotations

from functools import partial
from itertools import compress, count
from operator import attrgetter, is_not
from typing import Annotated, Any, Protocol

import msgspec

from orchestrace.errors import Problem, _short
from orchestrace.io.upstream._names import (
    _MARKED_TYPES,
    _NATIVE_TYPES,
    _TOP_FIELDS,
    _ZERO_DEFAULTS,
    ATTRS_KEY,
    FIELDS_KEY,
    KEPT_KEY,
    PREFIX,
    TRACE_KEY,
    TYPE_KEY,
    UPSTREAM_EVENT_TYPES,
    _exported_topology,
    _exported_type,
    _is_container,
    _present,
    _reads_as_field,
    _valid_fields_marker,
    _valid_trace_marker,
)
from orchestrace.trace.check import _RANK, check_trace
from orchestrace.trace.diagnose import check_structure
from orchestrace.trace.model import Event, Trace


def _stale(path: str, event_id: Any, what: str) -> Problem:
    return Problem(
        "stale-marker",
        f"{what}; the file's value was kept (and the marker too, so export writes it back)",
        "nothing to do if the edit was intended; remove the marker to silence this",
        path=path,
        event_id=event_id if isinstance(event_id, str) else None,
        severity="warning",
    )


def _split_event(ev: dict[str, Any], i: int, problems: list[Problem]) -> tuple[dict[str, Any], Any]:
    """One survey event as a dict the native ``Event`` converts from, and its trace marker.

    Returns:
        ``(native_event, trace_marker)``; the marker is ``None`` when the event has none.
    """
    out: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    raw_container = ev.get("attrs")
    container = raw_container if _is_container(raw_container) else None
    for key, value in ev.items():
        if key == "attrs" and container is not None:
            continue
        if _reads_as_field(key, value):
            out[key] = value
        else:
            attrs[key] = value
    marker: Any = None
    verbatim: dict[str, Any] = {}  # marker entries not applied: written back as they were
    if container is not None:
        where = f"$.events[{i}]"
        kept: dict[str, Any] = {}
        for key, value in container.items():
            if key == TYPE_KEY:
                native = value if isinstance(value, str) else None
                if native not in _NATIVE_TYPES or native in UPSTREAM_EVENT_TYPES:
                    verbatim[key] = value  # not a marker this exporter writes: keep it
                elif out.get("type") == _exported_type(native):
                    out["type"] = native
                else:
                    verbatim[key] = value  # stale: kept, so export writes it back
                    problems.append(
                        _stale(
                            f"{where}.type",
                            out.get("id"),
                            f"type is {_short(str(out.get('type')))!r} but its export marker "
                            f"says {native!r} (exported as {_exported_type(native)!r})",
                        )
                    )
            elif key == TRACE_KEY and marker is None and _valid_trace_marker(value):
                marker = value
            elif key == ATTRS_KEY and isinstance(value, dict):
                kept.update(value)
            elif key == FIELDS_KEY and _valid_fields_marker(value) and not set(value) & set(out):
                out.update(value)  # explicit defaults, written back by the native writer
            elif isinstance(key, str) and key.startswith(PREFIX):
                verbatim[key] = value
            else:
                kept[key] = value  # older exports put these keys here directly
        if verbatim:
            kept.setdefault(KEPT_KEY, verbatim)  # a property of that name wins (reported)
        for key, value in kept.items():
            if key in attrs:
                problems.append(
                    Problem(
                        "duplicate-key",
                        f"attribute `{_short(key)}` is both an event property and in the "
                        "export marker; the property was kept",
                        "remove one of them",
                        path=f"{where}.attrs",
                        event_id=out.get("id") if isinstance(out.get("id"), str) else None,
                        severity="warning",
                    )
                )
            else:
                attrs[key] = value
    if attrs or (container is not None and isinstance(container.get(ATTRS_KEY), dict)):
        out["attrs"] = attrs
    return out, marker


def _keep(out: dict[str, Any], key: str, value: Any) -> None:
    """Keep a marker entry that was not applied in the event's ``attrs``, to write it back."""
    attrs = out.setdefault("attrs", {})
    kept = attrs.get(KEPT_KEY)
    if isinstance(kept, dict):
        kept.setdefault(key, value)
    elif kept is None:
        attrs[KEPT_KEY] = {key: value}


def _apply_trace_marker(
    trace: Trace, marker: Any, fields: dict[str, Any], problems: list[Problem]
) -> Trace:
    """Restore what the trace marker keeps, unless the visible field was edited since."""
    updates: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    stale: dict[str, Any] = {}
    if marker is not None:
        topology = marker.get("topology")
        if topology is not None:
            if trace.topology == _exported_topology(topology):
                updates["topology"] = topology
            else:
                stale["topology"] = topology
                problems.append(
                    _stale(
                        "$.topology",
                        None,
                        f"topology is {_short(str(trace.topology))!r} but the export marker "
                        f"says {topology!r} (exported as {_exported_topology(topology)!r})",
                    )
                )
        filled = marker.get("costs", {})
        if filled:
            costs = dict(trace.costs)
            for key, value in filled.items():
                if key in costs and costs[key] == value:
                    del costs[key]
                else:
                    stale.setdefault("costs", {})[key] = value
                    problems.append(
                        _stale(
                            f"$.costs.{_short(str(key))}",
                            None,
                            f"costs.{_short(str(key))} was filled in on export as {value!r} "
                            "and has changed since",
                        )
                    )
            updates["costs"] = costs
        meta = dict(marker.get("meta", {}))
    if fields or stale:
        info: dict[str, Any] = {"fields": fields}
        if stale:
            info["stale"] = stale
        meta["upstream"] = info
    if meta:
        updates["meta"] = meta
    if not updates:
        return trace
    out = trace.replace(**updates)
    return out._mark_decoded() if trace.decoded else out


# ---------------------------------------------------------------------- import
def from_upstream(
    obj: Any, *, partial: bool = False, semantic: bool = True
) -> tuple[Trace | None, list[Problem]]:
    """Import a decoded survey-schema trace, field by field.

    What the native trace cannot hold as a field is kept (see the module docs), so
    :func:`to_upstream` gives the same JSON value back. Problems are at three levels:
    ``"error"`` (the value cannot become a trace: a required event field missing or of the
    wrong type), ``"warning"`` (imported, with something the survey schema does not allow, such
    as an unknown top-level field, kept), and ``"semantic"`` (orchestrace's own rules, such as no
    cycles and no return without a spawn: listed, never fatal to the import).

    Args:
        obj: The decoded JSON object.
        partial: Accept a truncated recording (see ``check_trace``).
        semantic: Also run ``check_trace`` on what was imported.

    Returns:
        ``(trace, problems)``: the native trace (``None`` when the top level is unusable) and
        every problem found, each naming the JSON path and the fix.
    """
    if not isinstance(obj, dict):
        return check_structure(obj, semantic=semantic)
    problems: list[Problem] = []
    fields: dict[str, Any] = {}
    native: dict[str, Any] = {}
    for key, value in obj.items():
        if key not in _TOP_FIELDS:
            fields[key] = value
            problems.append(
                Problem(
                    "unknown-field",
                    f"unknown top-level field `{_short(key)}` (kept in meta.upstream)",
                    "the survey schema allows no other top-level fields; remove it",
                    path="$",
                    severity="warning",
                )
            )
        elif value is None and key in ("system", "topology"):
            fields[key] = None
        else:
            native[key] = value
    if obj.get("metrics") == {}:
        fields["metrics"] = {}
    marker: Any = None
    if isinstance(obj.get("events"), list):
        events = []
        for i, ev in enumerate(obj["events"]):
            if not isinstance(ev, dict):
                events.append(ev)  # reported by the structural check
                continue
            out, found = _split_event(ev, i, problems)
            if marker is None and found is not None:
                marker = found
            elif found is not None:
                _keep(out, TRACE_KEY, found)
            events.append(out)
        native["events"] = events
    for key in ("rewards", "costs"):
        if key not in obj:
            native[key] = {}
            problems.append(
                Problem(
                    "missing-field",
                    f"missing required field `{key}`",
                    f"add `{key}` (the survey schema requires it)",
                    path="$",
                    severity="warning",
                )
            )
    trace, found_problems = check_structure(native, partial=partial, semantic=False)
    problems.extend(found_problems)
    if trace is not None:
        trace = _apply_trace_marker(trace, marker, fields, problems)
        if semantic and not any(p.severity == "error" for p in problems):
            problems.extend(check_trace(trace, partial=partial, imported=True))
    problems.sort(key=lambda p: _RANK[p.severity])  # as check_trace orders its own
    return trace, problems


class _EventProbe(msgspec.Struct, gc=False):
    """The numeric native fields of an event as written (an explicit ``0`` is not absent)."""

    dur: int | float | msgspec.UnsetType = msgspec.UNSET
    cost: int | float | msgspec.UnsetType = msgspec.UNSET
    tokens_in: int | float | msgspec.UnsetType = msgspec.UNSET
    tokens_out: int | float | msgspec.UnsetType = msgspec.UNSET


_Positive = (
    Annotated[int, msgspec.Meta(gt=0)] | Annotated[float, msgspec.Meta(gt=0)] | msgspec.UnsetType
)


class _NoZeroProbe(msgspec.Struct, gc=False):
    """As :class:`_EventProbe`, refusing an explicit zero (checked without a Python loop)."""

    dur: _Positive = msgspec.UNSET
    cost: _Positive = msgspec.UNSET
    tokens_in: _Positive = msgspec.UNSET
    tokens_out: _Positive = msgspec.UNSET


class _TraceProbe(msgspec.Struct):
    """Which top-level keys a document has, and whether no event holds an explicit zero.

    Decoding fails (a ``ValidationError``) when some event writes a default zero; every other
    value is skipped in C.
    """

    events: list[_NoZeroProbe] = []
    edges: msgspec.Raw = msgspec.Raw()
    rewards: msgspec.Raw = msgspec.Raw()
    costs: msgspec.Raw = msgspec.Raw()
    metrics: msgspec.Raw = msgspec.Raw()
    schema_version: msgspec.Raw = msgspec.Raw()
    meta: msgspec.Raw = msgspec.Raw()


_PROBE = msgspec.json.Decoder(_TraceProbe)


class _ZeroProbe(msgspec.Struct):
    """As :class:`_TraceProbe`, with the events' numeric fields as written (zeros allowed)."""

    events: list[_EventProbe] = []
    edges: msgspec.Raw = msgspec.Raw()
    rewards: msgspec.Raw = msgspec.Raw()
    costs: msgspec.Raw = msgspec.Raw()
    metrics: msgspec.Raw = msgspec.Raw()
    schema_version: msgspec.Raw = msgspec.Raw()
    meta: msgspec.Raw = msgspec.Raw()


_ZEROS = msgspec.json.Decoder(_ZeroProbe)
#: The events array alone, for a document whose top level was already decoded raw.
_PROBE_EVENTS = msgspec.json.Decoder(list[_NoZeroProbe])
_ZEROS_EVENTS = msgspec.json.Decoder(list[_EventProbe])


class _RawTop(Protocol):
    """The top level of a document, each value as its raw bytes (empty when absent)."""

    events: msgspec.Raw
    edges: msgspec.Raw
    rewards: msgspec.Raw
    costs: msgspec.Raw
    metrics: msgspec.Raw
    schema_version: msgspec.Raw
    meta: msgspec.Raw


def _probe(data: Any, top: _RawTop | None) -> tuple[list[Any], bool, Any] | None:
    """Probe ``data`` for explicit zeros, or ``None`` when its events do not decode as probes.

    Returns:
        ``(event probes, some event writes a default zero, the top level)``: the top level is
        ``top`` when given (the raw top level the caller decoded already: only the events
        are read again), else the whole-document probe (the same top-level fields, raw).
    """
    if top is not None:
        raw = top.events
        try:
            if not len(raw):
                return None
            try:
                return _PROBE_EVENTS.decode(raw), False, top
            except msgspec.ValidationError:  # some event writes a default zero
                return _ZEROS_EVENTS.decode(raw), True, top
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None
    try:
        probe: _TraceProbe | _ZeroProbe = _PROBE.decode(data)
        return probe.events, False, probe
    except msgspec.ValidationError:  # some event writes a default zero (or the top is odd)
        try:
            probe = _ZEROS.decode(data)
        except msgspec.ValidationError:
            return None
        return probe.events, True, probe


_NOT_NONE = partial(is_not, None)


class _EventsRaw(msgspec.Struct):
    """The events of a document, each kept as its raw bytes."""

    events: list[msgspec.Raw] = []


_EVENTS_RAW = msgspec.json.Decoder(_EventsRaw)


def _in_document_order(data: Any, fields: dict[int, dict[str, Any]], several: list[int]) -> None:
    """Put the fields of events ``several`` in the document's key order.

    ``fields``: the fields of the events that write explicit zeros. Those zeros go to
    ``attrs``, as does a plain ``attrs`` property, in the event's key order (the
    field-by-field import's): ``several`` are the events with two or more of them, the only
    ones whose order can differ, read again here.
    """
    if not several:
        return
    raws = _EVENTS_RAW.decode(data).events
    for i in several:
        keys = msgspec.json.decode(raws[i], type=dict[str, msgspec.Raw])
        f = fields[i]
        fields[i] = {k: f[k] for k in keys if k in f} | f  # (every key is in the document)


def _as_event(fields: dict[str, Any]) -> Event | None:
    """``fields`` as an event, or ``None`` when they do not make one.

    A marker may restore a value of the wrong type; the field-by-field import then reports it
    where it lies.
    """
    try:
        return msgspec.convert(fields, Event)
    except msgspec.ValidationError:
        return None


def from_typed(
    data: Any, trace: Trace, top: _RawTop | None = None
) -> tuple[Trace, list[Problem]] | None:
    """Finish a survey document that already decoded as a native :class:`Trace`.

    The typed decoder cannot tell an explicit default from an absent field; a second, cheap
    pass over the document finds the explicit zeros (``"cost": 0``), which are kept in
    ``attrs`` as :func:`from_upstream` keeps them, in the document's key order. When the
    document holds a ``null``, an empty ``metrics``, lacks a required top-level field, or has
    a field marker restoring a value the event cannot hold, this returns ``None`` and the
    caller imports it field by field with :func:`from_upstream`; the result is the same.
    ``top``: the document's top level, each value raw (as the JSON reader decodes a large
    document's), when the caller has it.
    """
    if data.find(b"null") >= 0:  # (``in`` would walk a memory map byte by byte)
        return None
    probed = _probe(data, top)
    if probed is None:
        return None
    events_probe, has_zeros, probe = probed
    written: list[_EventProbe] | None = events_probe if has_zeros else None
    if len(probe.schema_version) or len(probe.meta):
        return None
    if not (len(probe.edges) and len(probe.rewards) and len(probe.costs)):
        return None
    if len(probe.metrics) and not trace.metrics:
        return None
    problems: list[Problem] = []
    marker: Any = None
    events = trace.events
    changed: dict[int, Event] = {}
    zeros: dict[int, dict[str, Any]] = {}  # the fields of the events writing explicit zeros
    if written is not None:  # some event writes a default zero: find which
        several: list[int] = []  # events with two or more properties that go to attrs
        for i, ev in enumerate(written):
            if ev.dur == 0 or ev.cost == 0 or ev.tokens_in == 0 or ev.tokens_out == 0:
                explicit = {k: getattr(ev, k) for k in _ZERO_DEFAULTS if getattr(ev, k) == 0}
                zeros[i] = {**_present(events[i]), **explicit}
                if len(explicit) + ("attrs" in zeros[i]) > 1:
                    several.append(i)
        _in_document_order(data, zeros, several)
    # only events with attrs or an explicit zero change (the others are skipped in C)
    with_attrs = compress(count(), map(_NOT_NONE, map(attrgetter("attrs"), events)))
    for i in sorted({*with_attrs, *zeros}):
        e = events[i]
        if i in zeros:
            out, found = _split_event(zeros[i], i, problems)
            if marker is None and found is not None:
                marker = found
            elif found is not None:
                _keep(out, TRACE_KEY, found)
            new = _as_event(out)
            if new is None:
                return None
            changed[i] = new
            continue
        if e.attrs is None:
            continue
        native = e.attrs.get(TYPE_KEY) if len(e.attrs) == 1 else None
        if isinstance(native, str) and native in _MARKED_TYPES and e.type == _exported_type(native):
            changed[i] = msgspec.structs.replace(e, type=native, attrs=None)  # the common case
            continue
        out, found = _split_event(_present(e), i, problems)
        if marker is None and found is not None:
            marker = found
        elif found is not None:
            _keep(out, TRACE_KEY, found)
        new = _as_event(out)
        if new is None:
            return None
        changed[i] = new
    if changed:
        new_events = list(events)
        for i, new in changed.items():
            new_events[i] = new
        trace = trace.replace(events=tuple(new_events))._mark_decoded()
    return _apply_trace_marker(trace, marker, {}, problems), problems
