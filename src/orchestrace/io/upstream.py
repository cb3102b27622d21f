"""Import from and export to the public survey's trace schema (``trace_schema.json``).

The survey schema ("LLM-MAS Orchestration Trace") has the same top-level fields as the native
format minus ``schema_version`` and ``meta``; its events allow extra properties, its edges and
top level do not. The mapping is lossless both ways:

* **Import**: every upstream field maps to the native one; extra event properties that name a
  native field of the right type (``dur``, ``tokens_in``...) become that field, any other extra
  property is kept in ``attrs``.
* **Export**: native-only event fields are written as extra event properties; ``attrs`` keys are
  flattened into the event (keys that would collide with a defined name stay under ``attrs``).
  What the survey schema cannot say is kept under reserved ``attrs`` keys: an ``llm_call`` event
  is exported as a ``tool_call`` with ``attrs.x_orchestrace_type``, and trace-level native data
  (``meta``, a native-only topology) rides in the first event's ``attrs.x_orchestrace_trace``.
  The file validates under the survey schema and imports back unchanged; since every exported
  event has only native fields, it decodes on the fast typed path.

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
"""

from __future__ import annotations

from typing import Any

import msgspec

from orchestrace.errors import Problem, TraceError, TraceValidationError
from orchestrace.trace.check import check_structure
from orchestrace.trace.model import Event, EventType, Topology, Trace

__all__ = [
    "UPSTREAM_EDGE_TYPES",
    "UPSTREAM_EVENT_TYPES",
    "UPSTREAM_TOPOLOGIES",
    "from_upstream",
    "looks_upstream",
    "restore_markers",
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
    "id", "t", "type", "agent", "role", "from", "to", "tool", "content_ref", "trusted",
)  # fmt: skip
_NATIVE_EXTRA_FIELDS = (
    "dur", "decision", "step", "content", "tokens_in", "tokens_out", "cost", "error",
)  # fmt: skip
TYPE_KEY = "x_orchestrace_type"
TRACE_KEY = "x_orchestrace_trace"
_TOP_FIELDS = (
    "trace_id", "task_id", "system", "topology", "events", "edges", "rewards", "costs", "metrics",
)  # fmt: skip
_RESERVED = (
    frozenset(_UPSTREAM_EVENT_FIELDS)
    | frozenset(_NATIVE_EXTRA_FIELDS)
    | {"attrs", TYPE_KEY, TRACE_KEY}
)
_EXPORT_TYPE = {"llm_call": "tool_call"}
_EXPORT_TOPOLOGY = {"critic_loop": "mixed"}
_NATIVE_TYPES = frozenset(t.value for t in EventType)
_NATIVE_TOPOLOGIES = frozenset(t.value for t in Topology)


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


def restore_markers(trace: Trace) -> Trace:
    """Undo the export markers (``attrs.x_orchestrace_type`` / ``x_orchestrace_trace``).

    Events whose ``attrs`` hold no marker are left as they are (the same objects).
    """
    events = trace.events
    changes: dict[int, Event] = {}
    extra: dict[str, Any] = {}
    for i, e in enumerate(events):
        attrs = e.attrs
        if not attrs or (TYPE_KEY not in attrs and TRACE_KEY not in attrs):
            continue
        rest = dict(attrs)
        new_type = rest.pop(TYPE_KEY, None)
        trace_extra = rest.pop(TRACE_KEY, None)
        if i == 0 and isinstance(trace_extra, dict):
            extra = trace_extra
        elif trace_extra is not None:
            rest[TRACE_KEY] = trace_extra
        if new_type is not None and (
            not isinstance(new_type, str) or new_type not in _NATIVE_TYPES
        ):
            rest[TYPE_KEY] = new_type  # not ours: keep it
            new_type = None
        changes[i] = msgspec.structs.replace(e, type=new_type or e.type, attrs=rest or None)
    if not changes:
        return trace
    new_events = list(events)
    for i, e in changes.items():
        new_events[i] = e
    updates: dict[str, Any] = {"events": tuple(new_events)}
    topology = extra.get("topology")
    if isinstance(topology, str) and topology in _NATIVE_TOPOLOGIES:
        updates["topology"] = topology
    if isinstance(extra.get("meta"), dict):
        updates["meta"] = extra["meta"]
    out = trace.replace(**updates)
    if trace.decoded:
        out._mark_decoded()
    return out


def _import_event(ev: Any) -> Any:
    if not isinstance(ev, dict):
        return ev  # reported by the structural check
    out: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    for key, value in ev.items():
        if key in _UPSTREAM_EVENT_FIELDS:
            out[key] = value
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
    """Import a decoded survey-schema trace, field by field.

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
    for key in obj:
        if key not in _TOP_FIELDS:
            problems.append(
                Problem(
                    "unknown-field",
                    f"unknown top-level field `{key}`",
                    "the survey schema allows no other top-level fields; remove it",
                    path="$",
                    severity="warning",
                )
            )
    native: dict[str, Any] = {k: v for k, v in obj.items() if k in _TOP_FIELDS}
    if isinstance(obj.get("events"), list):
        native["events"] = [_import_event(e) for e in obj["events"]]
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
    trace, found = check_structure(native, partial=partial, semantic=False)
    if trace is not None:
        trace = restore_markers(trace)
        if semantic and not any(p.severity == "error" for p in found):
            from orchestrace.trace.check import check_trace

            found += check_trace(trace, partial=partial)
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
        kept: dict[str, Any] = {}
        etype = d["type"]
        if etype not in UPSTREAM_EVENT_TYPES:
            d["type"] = _EXPORT_TYPE.get(etype, "safety_event")
            kept[TYPE_KEY] = etype
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
        events[0].setdefault("attrs", {})[TRACE_KEY] = extra
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
