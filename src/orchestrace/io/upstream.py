"""Import from and export to the public survey's trace schema (``trace_schema.json``).

The survey schema ("LLM-MAS Orchestration Trace") has the native top-level fields minus
``schema_version`` and ``meta``; its events allow extra properties, its edges and top level do
not. A JSON object is read as a *native* trace when its top level has ``schema_version`` or
``meta`` (what the native writer always writes), else as a survey trace: the decision is made on
the parsed structure, never on text found somewhere in the file.

**Import is exact**: exporting an imported survey trace gives back the same JSON value.

* Survey-defined event properties (``id``, ``t``, ``type``, ``agent``, ``role``, ``from``, ``to``,
  ``tool``, ``content_ref``, ``trusted``) become the native fields.
* An extra property that names a native field (``dur``, ``tokens_in``, ``decision``...) becomes
  that field when its value fits and differs from the field's default. Every other extra
  property, including one holding an explicit default (``"cost": 0``, ``"step": null``) or a
  value of the wrong type, is kept verbatim in ``attrs`` under its own name. A survey event's own
  ``attrs`` property is such an extra property too: it is kept as ``attrs["attrs"]`` and never
  merged with the others, so no key can shadow another.
* Top-level fields the native trace has no place for (unknown fields, an empty ``metrics``
  object, ``null`` for ``system``/``topology``) are kept in ``meta["upstream"]["fields"]`` and
  written back at the top level on export.

**Export** writes native-only event fields as extra event properties and flattens ``attrs``
into the event, except where that would be read back differently. Those keys, and what the
survey schema cannot say, ride in a reserved ``attrs`` object on the event, recognised by its
``x_orchestrace_*`` keys:

* ``x_orchestrace_type``: the native type of an event exported under a survey type (an
  ``llm_call`` is exported as a ``tool_call``);
* ``x_orchestrace_trace`` (on the first event): trace-level native data: a native-only
  ``topology`` (exported as ``mixed``), ``meta``, and the ``costs`` the export filled in because
  the schema requires them;
* ``x_orchestrace_attrs``: ``attrs`` keys that could not be flattened;
* ``x_orchestrace_fields``: native fields written with their default value (``"dur": 0.0``),
  which the native writer keeps and an event property would not carry (see above).

**An edited field wins over a stale marker.** A marker only restores a value while the field it
stands behind still holds what the export wrote there: a ``tool_call`` marked ``llm_call`` whose
type was edited to ``message`` stays a ``message``; a ``mixed`` topology edited to ``debate``
stays ``debate``; a filled-in ``costs.tokens`` that was edited is kept. A warning names the
place, and the stale marker itself is kept verbatim (an event's in ``attrs["x_orchestrace_kept"]``,
the trace's in ``meta["upstream"]["stale"]``), so exporting again writes the same document back.

Example:
    >>> from orchestrace.trace.build import TraceBuilder
    >>> b = TraceBuilder(task_id="t", topology="critic_loop")
    >>> _ = b.llm("w", tokens_in=5, dur=1.0)
    >>> tr = b.build()
    >>> doc = to_upstream(tr)
    >>> doc["topology"], doc["events"][0]["type"], doc["events"][0]["attrs"]["x_orchestrace_type"]
    ('mixed', 'tool_call', 'llm_call')
    >>> back, problems = from_upstream(doc)
    >>> problems, back == tr
    ([], True)
    >>> doc["events"][0]["type"] = "message"  # edited after export: the edit wins
    >>> back, problems = from_upstream(doc)
    >>> back.events[0].type, problems[0].code, back.events[0].attrs
    ('message', 'stale-marker', {'x_orchestrace_kept': {'x_orchestrace_type': 'llm_call'}})
    >>> to_upstream(back) == doc
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import msgspec

from orchestrace.errors import Problem, TraceError, _short
from orchestrace.trace.check import check_structure, check_trace
from orchestrace.trace.model import (
    EdgeType,
    Event,
    EventType,
    Topology,
    Trace,
)

__all__ = [
    "UPSTREAM_EDGE_TYPES",
    "UPSTREAM_EVENT_TYPES",
    "UPSTREAM_TOPOLOGIES",
    "from_upstream",
    "is_native_object",
    "schema_problems",
    "to_upstream",
]

#: Event types of the survey schema: the native ones minus ``llm_call``.
UPSTREAM_EVENT_TYPES = frozenset(t.value for t in EventType) - {EventType.LLM_CALL.value}
#: Edge types of the survey schema (the native ones).
UPSTREAM_EDGE_TYPES = frozenset(t.value for t in EdgeType)
#: Topologies of the survey schema: the native ones minus ``critic_loop``.
UPSTREAM_TOPOLOGIES = frozenset(t.value for t in Topology) - {"critic_loop"}

_REQUIRED_EVENT = ("id", "t", "type", "agent")
_OPTIONAL_SURVEY = ("role", "from", "to", "tool", "content_ref", "trusted")
_SURVEY_EVENT_FIELDS = frozenset(_REQUIRED_EVENT + _OPTIONAL_SURVEY)
_FIELDS = {f.encode_name: f for f in msgspec.structs.fields(Event)}
#: Native event fields the survey schema does not define (written as extra properties).
_NATIVE_ONLY = tuple(k for k in _FIELDS if k not in _SURVEY_EVENT_FIELDS and k != "attrs")
_ATTR_NAME = {k: f.name for k, f in _FIELDS.items()}
_DEFAULT = {k: f.default for k, f in _FIELDS.items() if f.default is not msgspec.NODEFAULT}
_ZERO_DEFAULTS = tuple(k for k, v in _DEFAULT.items() if v is not None)

PREFIX = "x_orchestrace_"
TYPE_KEY = PREFIX + "type"
TRACE_KEY = PREFIX + "trace"
ATTRS_KEY = PREFIX + "attrs"
FIELDS_KEY = PREFIX + "fields"
KEPT_KEY = PREFIX + "kept"
_TOP_FIELDS = (
    "trace_id", "task_id", "system", "topology", "events", "edges", "rewards", "costs", "metrics",
)  # fmt: skip
_NATIVE_TOP = frozenset(("schema_version", "meta"))
_EXPORT_TYPE = {"llm_call": "tool_call"}
_EXPORT_TOPOLOGY = {"critic_loop": "mixed"}
_NATIVE_TYPES = frozenset(t.value for t in EventType)
_NATIVE_TOPOLOGIES = frozenset(t.value for t in Topology)
_MARKED_TYPES = _NATIVE_TYPES - UPSTREAM_EVENT_TYPES
_REQUIRED_COSTS = ("tokens", "wall_clock_s")
#: Codes of the warnings the import itself gives (what it kept, and why); every command that
#: imports a survey trace prints them.
IMPORT_WARNINGS = frozenset({"stale-marker", "unknown-field", "missing-field", "duplicate-key"})


def is_native_object(obj: Any) -> bool:
    """Whether a decoded JSON value is a native trace (its top level has native-only fields).

    Example:
        >>> is_native_object({"trace_id": "t", "schema_version": "1.0"})
        True
        >>> is_native_object({"trace_id": "t", "events": [{"content": "schema_version"}]})
        False
    """
    return isinstance(obj, dict) and not _NATIVE_TOP.isdisjoint(obj)


def _exported_type(native: str) -> str:
    return _EXPORT_TYPE.get(native, "safety_event")


def _exported_topology(native: str) -> str:
    return _EXPORT_TOPOLOGY.get(native, "mixed")


# ---------------------------------------------------------------------- event mapping
# one single-field struct per native field: converting into it checks a value's type and range
_HOLDERS = {k: msgspec.defstruct(f"_Holder_{f.name}", [("v", f.type)]) for k, f in _FIELDS.items()}


def _fits(key: str, value: Any) -> bool:
    """Whether ``value`` is a valid value of the native event field ``key``."""
    try:
        msgspec.convert({"v": value}, _HOLDERS[key])
    except msgspec.ValidationError:
        return False
    return True


def _is_default(key: str, value: Any) -> bool:
    default = _DEFAULT.get(key, msgspec.NODEFAULT)
    if default is None:
        return value is None
    return isinstance(value, int | float) and not isinstance(value, bool) and value == default


def _reads_as_field(key: str, value: Any) -> bool:
    """Whether an event property ``key: value`` is imported as the native field ``key``."""
    if key in _REQUIRED_EVENT:
        return True
    if key in _OPTIONAL_SURVEY:
        return value is not None
    if key in _DEFAULT and key != "attrs":
        return _fits(key, value) and not _is_default(key, value)
    return False


def _is_container(value: Any) -> bool:
    """An event's ``attrs`` property written by the exporter: it holds ``x_orchestrace_*`` keys."""
    return isinstance(value, dict) and any(
        isinstance(k, str) and k.startswith(PREFIX) for k in value
    )


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


def _valid_fields_marker(value: Any) -> bool:
    """Explicit default values of native fields, as the exporter writes them."""
    return (
        isinstance(value, dict)
        and bool(value)
        and all(
            k in _ZERO_DEFAULTS and isinstance(v, float) and _is_default(k, v)
            for k, v in value.items()
        )
    )


def _valid_trace_marker(value: Any) -> bool:
    """A trace marker as the exporter writes it (anything else stays verbatim in ``attrs``)."""
    if not isinstance(value, dict) or not set(value) <= {"topology", "meta", "costs"}:
        return False
    topology = value.get("topology")
    if topology is not None and (
        not isinstance(topology, str)
        or topology not in _NATIVE_TOPOLOGIES
        or topology in UPSTREAM_TOPOLOGIES
    ):
        return False
    costs = value.get("costs", {})
    numbers = isinstance(costs, dict) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in costs.values()
    )
    return isinstance(value.get("meta", {}), dict) and numbers


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
    problems.sort(key=lambda p: p.severity != "error")
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


class _NoZeroEvents(msgspec.Struct):
    events: list[_NoZeroProbe] = []


_NO_ZEROS = msgspec.json.Decoder(_NoZeroEvents)


class _TraceProbe(msgspec.Struct):
    """Which top-level keys a document has, and whether an event holds an explicit zero."""

    events: list[_EventProbe] = []
    edges: msgspec.Raw = msgspec.Raw()
    rewards: msgspec.Raw = msgspec.Raw()
    costs: msgspec.Raw = msgspec.Raw()
    metrics: msgspec.Raw = msgspec.Raw()
    schema_version: msgspec.Raw = msgspec.Raw()
    meta: msgspec.Raw = msgspec.Raw()


_PROBE = msgspec.json.Decoder(_TraceProbe)


def from_typed(data: bytes, trace: Trace) -> tuple[Trace, list[Problem]] | None:
    """Finish a survey document that already decoded as a native :class:`Trace`.

    The typed decoder cannot tell an explicit default from an absent field; a second, cheap
    pass over the document finds the explicit zeros (``"cost": 0``), which are kept in
    ``attrs`` as :func:`from_upstream` keeps them. When the document holds a ``null``, an
    empty ``metrics`` or lacks a required top-level field, this returns ``None`` and the
    caller imports it field by field with :func:`from_upstream`; the result is the same.
    """
    if b"null" in data:
        return None
    try:
        probe = _PROBE.decode(data)
    except msgspec.ValidationError:
        return None
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
    zeros: dict[int, dict[str, Any]] = {}
    try:
        _NO_ZEROS.decode(data)
    except msgspec.ValidationError:  # some event writes a default zero: find which
        for i, ev in enumerate(probe.events):
            if ev.dur == 0 or ev.cost == 0 or ev.tokens_in == 0 or ev.tokens_out == 0:
                zeros[i] = {k: getattr(ev, k) for k in _ZERO_DEFAULTS if getattr(ev, k) == 0}
    for i, e in enumerate(events):
        if i in zeros:
            out, found = _split_event({**_present(e), **zeros[i]}, i, problems)
            if marker is None and found is not None:
                marker = found
            elif found is not None:
                _keep(out, TRACE_KEY, found)
            changed[i] = msgspec.convert(out, Event)
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
        changed[i] = msgspec.convert(out, Event)
    if changed:
        new_events = list(events)
        for i, new in changed.items():
            new_events[i] = new
        trace = trace.replace(events=tuple(new_events))._mark_decoded()
    return _apply_trace_marker(trace, marker, {}, problems), problems


# ---------------------------------------------------------------------- export
def _upstream_fields(trace: Trace) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``meta["upstream"]``'s ``fields`` and ``stale`` when an import wrote them, else ``None``."""
    info = trace.meta.get("upstream")
    if not isinstance(info, dict) or not ({"fields"} <= set(info) <= {"fields", "stale"}):
        return None
    fields = info["fields"]
    stale = info.get("stale", {})
    if not isinstance(fields, dict) or not isinstance(stale, dict):
        return None
    if not set(stale) <= {"topology", "costs"} or not _valid_trace_marker(
        {**stale, "topology": None}
    ):
        return None
    topology = stale.get("topology")
    if topology is not None and not isinstance(topology, str):
        return None
    for key, value in fields.items():
        if key in _TOP_FIELDS:
            ok = (key == "metrics" and value == {} and not trace.metrics) or (
                key in ("system", "topology") and value is None and getattr(trace, key) is None
            )
            if not ok:
                return None
    return fields, stale


def _present(e: Event) -> dict[str, Any]:
    """The fields of ``e`` that differ from their defaults (``attrs`` included), by JSON name."""
    d: dict[str, Any] = msgspec.to_builtins(e)  # omits None and most defaults
    for key in _ZERO_DEFAULTS:
        if key in d and d[key] == 0:
            del d[key]
    return d


def _reads_back_verbatim(key: str, value: Any, etype: str, later_marker: bool) -> bool:
    """Whether a marker entry put back into an event's marker object is read back as kept.

    Kept means not applied as a marker.

    ``later_marker``: the trace marker is on an earlier event, so this one's is kept as is.
    """
    if key == TYPE_KEY:
        return not (
            isinstance(value, str) and value in _MARKED_TYPES and etype == _exported_type(value)
        )
    if key == TRACE_KEY:
        return later_marker or not _valid_trace_marker(value)
    if key == FIELDS_KEY:
        return not _valid_fields_marker(value)
    return (
        key.startswith(PREFIX)
        and key != KEPT_KEY
        and (key != ATTRS_KEY or not isinstance(value, dict))
    )


def _writes_back(kept: Any, container: dict[str, Any], etype: str, later_marker: bool) -> bool:
    """Whether the kept marker entries can go back into the marker object as they were."""
    return (
        isinstance(kept, dict)
        and bool(kept)
        and all(
            isinstance(k, str)
            and k not in container
            and _reads_back_verbatim(k, v, etype, later_marker)
            for k, v in kept.items()
        )
    )


def _export_event(
    e: Event, trace_marker: dict[str, Any] | None = None, *, later_marker: bool = False
) -> dict[str, Any]:
    written = msgspec.to_builtins(e)
    d = _present(e)
    d.pop("attrs", None)
    container: dict[str, Any] = {}
    etype = d["type"]
    if etype not in UPSTREAM_EVENT_TYPES:
        d["type"] = _exported_type(etype)
        container[TYPE_KEY] = etype
    explicit = {k: float(written[k]) for k in _ZERO_DEFAULTS if k in written and k not in d}
    if explicit:
        container[FIELDS_KEY] = explicit  # the native writer keeps these; so does the import
    if trace_marker:
        container[TRACE_KEY] = trace_marker
    escaped: dict[str, Any] = {}
    reserved: dict[str, Any] = {}
    own_attrs = _not_set = object()
    for key, value in (e.attrs or {}).items():
        if key == "attrs":
            own_attrs = value
        elif key == KEPT_KEY and _writes_back(value, container, d["type"], later_marker):
            reserved.update(value)  # marker entries kept on import: written back as read
        elif key in d or key in _SURVEY_EVENT_FIELDS or _reads_as_field(key, value):
            escaped[key] = value  # flattened, it would read back as a field (or break the schema)
        else:
            d[key] = value
    if own_attrs is not _not_set:
        if container or escaped or reserved or _is_container(own_attrs):
            escaped["attrs"] = own_attrs
        else:
            d["attrs"] = own_attrs
    if escaped or e.attrs == {}:
        container[ATTRS_KEY] = escaped
    container.update(reserved)
    if container:
        d["attrs"] = container
    return d


def to_upstream(trace: Trace) -> dict[str, Any]:
    """Export ``trace`` as a dict that validates under the survey schema.

    Raises:
        TraceError: The trace has no events (the survey schema requires at least one).
    """
    if not trace.events:
        raise TraceError(
            "cannot export a trace without events: the survey schema requires at "
            "least one event; record one first"
        )
    marker: dict[str, Any] = {}
    topology: str | None = trace.topology
    if topology is not None and topology not in UPSTREAM_TOPOLOGIES:
        marker["topology"] = topology
        topology = _exported_topology(topology)
    found = _upstream_fields(trace)
    fields, stale = found if found is not None else (None, {})
    meta = dict(trace.meta)
    if found is not None:
        del meta["upstream"]
    if "topology" in stale and "topology" not in marker:
        marker["topology"] = stale["topology"]  # a stale marker, written back as it was read
    if meta:
        marker["meta"] = msgspec.to_builtins(meta)
    costs = dict(trace.costs)
    filled: dict[str, Any] = dict(stale.get("costs", {}))
    if any(k not in costs for k in _REQUIRED_COSTS):
        from orchestrace.trace.build import default_costs

        derived = default_costs(trace.events)
        added = {k: derived[k] for k in _REQUIRED_COSTS if k not in costs}
        costs.update(added)
        filled.update(added)
    if filled:
        marker["costs"] = filled
    events = [
        _export_event(e, marker if i == 0 else None, later_marker=bool(marker))
        for i, e in enumerate(trace.events)
    ]
    out: dict[str, Any] = {"trace_id": trace.trace_id, "task_id": trace.task_id}
    if trace.system is not None:
        out["system"] = trace.system
    if topology is not None:
        out["topology"] = topology
    out["events"] = events
    out["edges"] = [{"src": e.src, "dst": e.dst, "type": e.type} for e in trace.edges]
    out["rewards"] = dict(trace.rewards)
    out["costs"] = costs
    if trace.metrics:
        out["metrics"] = dict(trace.metrics)
    for key, value in (fields or {}).items():
        out.setdefault(key, value)
    return out


# ---------------------------------------------------------------------- the schema's verdict
#: Problems listed per document by :func:`schema_problems`; the rest are counted.
MAX_SCHEMA_PROBLEMS = 100


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object" if isinstance(v, dict) else "value"


def _schema_problem(path: str, message: str, fix: str) -> Problem:
    return Problem("schema", message, fix, path=path)


def _string(v: Any, path: str, *, nonempty: bool = False) -> Iterator[Problem]:
    if not isinstance(v, str):
        yield _schema_problem(path, f"is {_kind(v)}, not a string", "make it a string")
    elif nonempty and not v:
        yield _schema_problem(path, "is an empty string", "make it a non-empty string")


def _enum(v: Any, path: str, allowed: frozenset[str], what: str) -> Iterator[Problem]:
    if not isinstance(v, str) or v not in allowed:
        shown = _short(repr(v), 60) if isinstance(v, str) else _kind(v)
        yield _schema_problem(
            path, f"{shown} is not a survey {what}", f"use one of: {', '.join(sorted(allowed))}"
        )


def _number_map(
    v: Any, path: str, minimum: tuple[str, ...] = (), required: tuple[str, ...] = ()
) -> Iterator[Problem]:
    if not isinstance(v, dict):
        yield _schema_problem(path, f"is {_kind(v)}, not an object", "make it a JSON object")
        return
    for key in required:
        if key not in v:
            yield _schema_problem(
                path, f"missing required key `{key}`", f"add `{key}` (a number >= 0)"
            )
    for key, value in v.items():
        where = f"{path}.{_short(str(key))}"
        if not _is_number(value):
            yield _schema_problem(where, f"is {_kind(value)}, not a number", "record a number")
        elif key in minimum and value < 0:
            yield _schema_problem(where, f"{value!r} is below 0", "record a number >= 0")


def _event_problems(ev: Any, path: str) -> Iterator[Problem]:
    if not isinstance(ev, dict):
        yield _schema_problem(path, f"is {_kind(ev)}, not an object", "make each event an object")
        return
    for key in _REQUIRED_EVENT:
        if key not in ev:
            yield _schema_problem(
                path,
                f"missing required field `{key}`",
                f"add `{key}` (every event needs id, t, type and agent)",
            )
    if "id" in ev:
        yield from _string(ev["id"], f"{path}.id", nonempty=True)
    if "agent" in ev:
        yield from _string(ev["agent"], f"{path}.agent", nonempty=True)
    if "t" in ev:
        t = ev["t"]
        if not _is_number(t):
            yield _schema_problem(f"{path}.t", f"is {_kind(t)}, not a number", "record seconds")
        elif t < 0 or (isinstance(t, float) and math.isnan(t)):
            yield _schema_problem(f"{path}.t", f"{t!r} is below 0", "record t >= 0")
    if "type" in ev:
        yield from _enum(ev["type"], f"{path}.type", UPSTREAM_EVENT_TYPES, "event type")
    for key in ("role", "from", "to", "tool", "content_ref"):
        if key in ev:
            yield from _string(ev[key], f"{path}.{key}")
    if "trusted" in ev and not isinstance(ev["trusted"], bool):
        yield _schema_problem(
            f"{path}.trusted", f"is {_kind(ev['trusted'])}, not a boolean", "use true or false"
        )


def _edge_problems(ed: Any, path: str) -> Iterator[Problem]:
    if not isinstance(ed, dict):
        yield _schema_problem(path, f"is {_kind(ed)}, not an object", "make each edge an object")
        return
    for key in ("src", "dst", "type"):
        if key not in ed:
            yield _schema_problem(
                path, f"missing required field `{key}`", f"add `{key}` (edges need src, dst, type)"
            )
    for key in ed:
        if key not in ("src", "dst", "type"):
            yield _schema_problem(
                path,
                f"unknown field `{_short(str(key))}`",
                "edges allow only src, dst and type; remove it",
            )
    for key in ("src", "dst"):
        if key in ed:
            yield from _string(ed[key], f"{path}.{key}", nonempty=True)
    if "type" in ed:
        yield from _enum(ed["type"], f"{path}.type", UPSTREAM_EDGE_TYPES, "edge type")


def _all_schema_problems(obj: Any) -> Iterator[Problem]:
    if not isinstance(obj, dict):
        yield _schema_problem("$", f"is {_kind(obj)}, not an object", "a trace is a JSON object")
        return
    for key in ("trace_id", "task_id", "events", "edges", "rewards", "costs"):
        if key not in obj:
            yield _schema_problem("$", f"missing required field `{key}`", f"add `{key}`")
    for key in obj:
        if key not in _TOP_FIELDS:
            yield _schema_problem(
                "$",
                f"unknown top-level field `{_short(str(key))}`",
                "the survey schema allows no other top-level fields; remove it",
            )
    for key in ("trace_id", "task_id"):
        if key in obj:
            yield from _string(obj[key], f"$.{key}", nonempty=True)
    if "system" in obj:
        yield from _string(obj["system"], "$.system")
    if "topology" in obj:
        yield from _enum(obj["topology"], "$.topology", UPSTREAM_TOPOLOGIES, "topology")
    checks: tuple[tuple[str, Callable[[Any, str], Iterator[Problem]]], ...] = (
        ("events", _event_problems),
        ("edges", _edge_problems),
    )
    for name, each in checks:
        if name not in obj:
            continue
        items = obj[name]
        if not isinstance(items, list):
            yield _schema_problem(
                f"$.{name}", f"is {_kind(items)}, not an array", f"make `{name}` an array"
            )
            continue
        if name == "events" and not items:
            yield _schema_problem("$.events", "is empty", "record at least one event")
        for i, item in enumerate(items):
            yield from each(item, f"$.{name}[{i}]")
    if "rewards" in obj:
        yield from _number_map(obj["rewards"], "$.rewards")
    if "costs" in obj:
        yield from _number_map(
            obj["costs"],
            "$.costs",
            minimum=("tokens", "wall_clock_s", "tool_calls", "messages"),
            required=_REQUIRED_COSTS,
        )
    if "metrics" in obj:
        yield from _number_map(obj["metrics"], "$.metrics")


def schema_problems(obj: Any, *, limit: int = MAX_SCHEMA_PROBLEMS) -> list[Problem]:
    """Every way a decoded JSON value breaks the survey's ``trace_schema.json``.

    The verdict is exactly the schema's (Draft 2020-12): an empty list if and only if a JSON
    Schema validator accepts the value. Only the schema is applied; orchestrace's own rules
    are :func:`from_upstream`'s ``"semantic"`` problems.

    Args:
        obj: The decoded JSON value.
        limit: List at most this many problems, then one line counting the rest.

    Example:
        >>> schema_problems({"trace_id": "t", "task_id": "x", "events": [], "edges": [],
        ...                  "rewards": {}, "costs": {"tokens": 0, "wall_clock_s": 0}})[0].message
        'is empty'
    """
    out: list[Problem] = []
    extra = 0
    for p in _all_schema_problems(obj):
        if len(out) < limit:
            out.append(p)
        else:
            extra += 1
    if extra:
        out.append(
            _schema_problem(
                "$", f"{extra} more schema problem(s) not listed", "fix these and validate again"
            )
        )
    return out
