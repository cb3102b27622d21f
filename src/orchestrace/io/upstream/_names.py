"""The survey schema's vocabularies, the ``x_orchestrace_*`` marker keys, and which values fit which field.

Shared by the import (:mod:`orchestrace.io.upstream._import`) and the export
(:mod:`orchestrace.io.upstream._export`), which must agree on them exactly for a round trip to be
lossless.

Example:
    >>> is_native_object({"schema_version": "1"}), TYPE_KEY
    (True, 'x_orchestrace_type')
"""

from __future__ import annotations

from typing import Any

import msgspec

from orchestrace.trace.model import EdgeType, Event, EventType, Topology

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


def _present(e: Event) -> dict[str, Any]:
    """The fields of ``e`` that differ from their defaults (``attrs`` included), by JSON name."""
    d: dict[str, Any] = msgspec.to_builtins(e)  # omits None and most defaults
    for key in _ZERO_DEFAULTS:
        if key in d and d[key] == 0:
            del d[key]
    return d
