"""Import from and export to the public survey's trace schema (``trace_schema.json``).

The survey schema ("LLM-MAS Orchestration Trace") has the same top-level fields as the native
format minus ``schema_version`` and ``meta``; its events allow extra properties, its edges and
top level do not. The mapping is lossless both ways:

* **Import**: every upstream field maps to the native one; extra event properties that name a
  native field of the right type (``dur``, ``tokens_in``...) become that field, any other extra
  property is kept in ``attrs``.
* **Export**: native-only event fields are written as extra event properties; ``attrs`` keys are
  flattened into the event (those that would collide with a defined name stay under ``attrs``);
  ``llm_call`` events are exported as ``tool_call`` with ``x_orchestrace_type``; trace-level
  native data (``meta``, a native-only topology) goes into the first event's
  ``x_orchestrace_trace`` property, so the file validates and imports back unchanged.

Example:
    >>> from orchestrace.trace.build import TraceBuilder
    >>> b = TraceBuilder(task_id="t", topology="critic_loop")
    >>> _ = b.llm("w", tokens_in=5, dur=1.0)
    >>> tr = b.build()
    >>> doc = to_upstream(tr)
    >>> doc["topology"], doc["events"][0]["type"], doc["events"][0]["x_orchestrace_type"]
    ('mixed', 'tool_call', 'llm_call')
    >>> back, problems = from_upstream(doc)
    >>> problems, back == tr
    ([], True)
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from orchestrace.errors import Problem, TraceError, TraceValidationError
from orchestrace.trace.check import check_structure, check_trace
from orchestrace.trace.model import (
    SCHEMA_VERSION,
    Edge,
    Event,
    EventTypeName,
    NonEmptyStr,
    Trace,
)

__all__ = [
    "UPSTREAM_EDGE_TYPES",
    "UPSTREAM_EVENT_TYPES",
    "UPSTREAM_TOPOLOGIES",
    "from_upstream",
    "looks_upstream",
    "to_upstream",
]

UPSTREAM_EVENT_TYPES = frozenset(
    {
        "orchestrator_decision",
        "spawn",
        "despawn",
        "message",
        "tool_call",
        "tool_result",
        "return",
        "aggregate",
        "human_intervention",
        "safety_event",
    }
)
UPSTREAM_EDGE_TYPES = frozenset(
    {
        "temporal",
        "causal",
        "spawn",
        "message",
        "tool_dependency",
        "return",
        "aggregate",
        "safety_flow",
    }
)
UPSTREAM_TOPOLOGIES = frozenset(
    {
        "centralized",
        "planner_executor_critic",
        "debate",
        "swarm",
        "hierarchical",
        "harness",
        "mixed",
        "unknown",
    }
)
_UPSTREAM_EVENT_FIELDS = (
    "id",
    "t",
    "type",
    "agent",
    "role",
    "from",
    "to",
    "tool",
    "content_ref",
    "trusted",
)
_NATIVE_EXTRA_FIELDS = (
    "dur",
    "decision",
    "step",
    "content",
    "tokens_in",
    "tokens_out",
    "cost",
    "error",
)
_TYPE_KEY = "x_orchestrace_type"
_TRACE_KEY = "x_orchestrace_trace"
_TOP_FIELDS = (
    "trace_id",
    "task_id",
    "system",
    "topology",
    "events",
    "edges",
    "rewards",
    "costs",
    "metrics",
)
_RESERVED = (
    frozenset(_UPSTREAM_EVENT_FIELDS)
    | frozenset(_NATIVE_EXTRA_FIELDS)
    | {"attrs", _TYPE_KEY, _TRACE_KEY}
)
_EXPORT_TYPE = {"llm_call": "tool_call"}
_EXPORT_TOPOLOGY = {"critic_loop": "mixed"}
_ENC = msgspec.json.Encoder()


class _UpEvent(Event, forbid_unknown_fields=True, gc=False, frozen=True, omit_defaults=True):
    """An exported event: native fields plus the export markers."""

    x_orchestrace_type: EventTypeName | None = None
    x_orchestrace_trace: dict[str, Any] | None = None


class _UpTrace(msgspec.Struct, forbid_unknown_fields=True):
    trace_id: NonEmptyStr
    task_id: NonEmptyStr
    events: list[_UpEvent]
    edges: tuple[Edge, ...]
    rewards: dict[str, float]
    costs: dict[str, float]
    system: str | None = None
    topology: (
        Literal[
            "centralized",
            "planner_executor_critic",
            "debate",
            "swarm",
            "hierarchical",
            "harness",
            "mixed",
            "unknown",
        ]
        | None
    ) = None
    metrics: dict[str, float] = {}


_UP_DECODER = msgspec.json.Decoder(_UpTrace)
_N_EVENT_FIELDS = len(msgspec.structs.fields(Event))
_EVENT: Any = Event


def decode_upstream_fast(
    data: Any, *, partial: bool = False, check: bool = True
) -> tuple[Trace, list[Problem]] | None:
    """Typed decode of a survey-schema file whose events carry only known fields.

    Returns ``None`` when the file needs the general (field-by-field) import.
    """
    try:
        up = _UP_DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None
    astuple = msgspec.structs.astuple
    n = _N_EVENT_FIELDS
    events: list[Event] = []
    extra: dict[str, Any] = {}
    for e in up.events:
        fields = astuple(e)
        if fields[n] is not None or fields[n + 1] is not None:
            if fields[n + 1] is not None and not events:
                extra = fields[n + 1]
            vals = list(fields[:n])
            if fields[n] is not None:
                vals[2] = fields[n]
            events.append(_EVENT(*vals))
        else:
            events.append(_EVENT(*fields[:n]))
    topology: Any = extra.get("topology") if isinstance(extra.get("topology"), str) else up.topology
    meta: dict[str, Any] = extra["meta"] if isinstance(extra.get("meta"), dict) else {}
    trace = Trace(
        trace_id=up.trace_id,
        task_id=up.task_id,
        events=tuple(events),
        edges=up.edges,
        rewards=up.rewards,
        costs=up.costs,
        system=up.system,
        topology=topology,
        metrics=up.metrics,
        schema_version=SCHEMA_VERSION,
        meta=meta,
    )
    if topology is not None and topology != up.topology:
        try:
            msgspec.convert(
                {"trace_id": "x", "task_id": "x", "events": [], "topology": topology}, Trace
            )
        except msgspec.ValidationError:
            return None
    trace._mark_decoded()
    return trace, (check_trace(trace, partial=partial) if check else [])


def looks_upstream(obj: Any) -> bool:
    """``True`` for a JSON object that is a survey-schema trace rather than a native one."""
    return isinstance(obj, dict) and "schema_version" not in obj and "events" in obj


def _fits(name: str, value: Any) -> bool:
    """Whether ``value`` can be the native field ``name`` (else it is kept in attrs)."""
    try:
        msgspec.convert({"id": "x", "t": 0, "type": "message", "agent": "a", name: value}, Event)
    except msgspec.ValidationError:
        return False
    return True


def _import_event(ev: Any, index: int, problems: list[Problem], trace_extra: dict[str, Any]) -> Any:
    if not isinstance(ev, dict):
        return ev  # reported by the structural check
    out: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    for key, value in ev.items():
        if key in _UPSTREAM_EVENT_FIELDS:
            out[key] = value
        elif key == _TYPE_KEY:
            out["type"] = value
        elif key == _TRACE_KEY and index == 0 and isinstance(value, dict):
            trace_extra.update(value)
        elif key == "attrs" and isinstance(value, dict):
            attrs.update(value)
        elif key in _NATIVE_EXTRA_FIELDS and _fits(key, value):
            out[key] = value
        else:
            attrs[key] = value
    if attrs:
        out["attrs"] = attrs
    return out


def from_upstream(
    obj: Any, *, partial: bool = False, semantic: bool = True
) -> tuple[Trace | None, list[Problem]]:
    """Import a decoded survey-schema trace (``semantic``: also run ``check_trace``).

    Returns:
        ``(trace, problems)``: the native trace (``None`` when the top level is unusable) and
        every problem found, each naming the JSON path and the fix.
    """
    if not isinstance(obj, dict):
        return check_structure(obj, semantic=semantic)
    problems: list[Problem] = []
    extra_top = [k for k in obj if k not in _TOP_FIELDS]
    for key in extra_top:
        problems.append(
            Problem(
                "unknown-field",
                f"unknown top-level field `{key}`",
                "the survey schema allows no other top-level fields; remove it",
                path="$",
                severity="warning",
            )
        )
    trace_extra: dict[str, Any] = {}
    events = obj.get("events")
    native: dict[str, Any] = {k: v for k, v in obj.items() if k in _TOP_FIELDS}
    if isinstance(events, list):
        native["events"] = [
            _import_event(e, i, problems, trace_extra) for i, e in enumerate(events)
        ]
    native.setdefault("rewards", {})
    native.setdefault("costs", {})
    native["schema_version"] = SCHEMA_VERSION
    if isinstance(trace_extra.get("topology"), str):
        native["topology"] = trace_extra["topology"]
    if isinstance(trace_extra.get("meta"), dict):
        native["meta"] = trace_extra["meta"]
    for key in ("rewards", "costs"):
        if key not in obj:
            problems.append(
                Problem(
                    "missing-field",
                    f"missing required field `{key}`",
                    f"add `{key}` (the survey schema requires it)",
                    path="$",
                    severity="warning",
                )
            )
    trace, found = check_structure(native, partial=partial, semantic=semantic)
    problems.extend(found)
    problems.sort(key=lambda p: p.severity != "error")
    return trace, problems


def load_upstream(obj: Any, *, source: str | None = None) -> Trace:
    """Import a survey-schema trace or raise.

    Raises:
        TraceValidationError: The object is not a valid survey-schema trace.
    """
    trace, problems = from_upstream(obj)
    if trace is None or any(p.severity == "error" for p in problems):
        raise TraceValidationError(problems, source=source)
    return trace


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
    events: list[dict[str, Any]] = []
    for e in trace.events:
        d: dict[str, Any] = msgspec.to_builtins(e)
        attrs = d.pop("attrs", None) or {}
        etype = d["type"]
        if etype not in UPSTREAM_EVENT_TYPES:
            d["type"] = _EXPORT_TYPE.get(etype, "safety_event")
            d[_TYPE_KEY] = etype
        kept: dict[str, Any] = {}
        for key, value in attrs.items():
            if key in _RESERVED or key in d:
                kept[key] = value
            else:
                d[key] = value
        if kept:
            d["attrs"] = kept
        events.append(d)
    extra: dict[str, Any] = {}
    topology: str | None = trace.topology
    if topology is not None and topology not in UPSTREAM_TOPOLOGIES:
        extra["topology"] = topology
        topology = _EXPORT_TOPOLOGY.get(topology, "mixed")
    if trace.meta:
        extra["meta"] = msgspec.to_builtins(trace.meta)
    if extra:
        events[0][_TRACE_KEY] = extra
    costs = dict(trace.costs)
    if "tokens" not in costs or "wall_clock_s" not in costs:
        from orchestrace.trace.build import default_costs

        derived = default_costs(trace.events)
        costs.setdefault("tokens", derived["tokens"])
        costs.setdefault("wall_clock_s", derived["wall_clock_s"])
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
    return out
