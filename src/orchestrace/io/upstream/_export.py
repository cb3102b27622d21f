"""Export to the survey schema: native-only fields as event properties, the rest in markers.

Example:
    >>> from orchestrace.trace.build import TraceBuilder
    >>> b = TraceBuilder(task_id="t", topology="critic_loop")
    >>> _ = b.message("a", "b", "hi")
    >>> to_upstream(b.build())["topology"]
    'mixed'
"""

from __future__ import annotations

from typing import Any

import msgspec

from orchestrace.errors import TraceError
from orchestrace.io.upstream._names import (
    _MARKED_TYPES,
    _REQUIRED_COSTS,
    _SURVEY_EVENT_FIELDS,
    _TOP_FIELDS,
    _ZERO_DEFAULTS,
    ATTRS_KEY,
    FIELDS_KEY,
    KEPT_KEY,
    PREFIX,
    TRACE_KEY,
    TYPE_KEY,
    UPSTREAM_EVENT_TYPES,
    UPSTREAM_TOPOLOGIES,
    _exported_topology,
    _exported_type,
    _is_container,
    _present,
    _reads_as_field,
    _valid_fields_marker,
    _valid_trace_marker,
)
from orchestrace.trace.build import default_costs
from orchestrace.trace.model import Event, Trace


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
    items = list((e.attrs or {}).items())

    def kept(key: str, value: Any) -> bool:
        return key == KEPT_KEY and _writes_back(value, container, d["type"], later_marker)

    def escape(key: str, value: Any) -> bool:  # flattened, it would read back as a field
        return key in d or key in _SURVEY_EVENT_FIELDS or _reads_as_field(key, value)

    # the import reads flattened attributes first, then the container's: with a container,
    # the attributes from the first escaped one on are all escaped, so they keep their order
    boxed = bool(container) or any(
        kept(k, v) or (_is_container(v) if k == "attrs" else escape(k, v)) for k, v in items
    )
    escaping = False
    for key, value in items:
        if kept(key, value):
            reserved.update(value)  # marker entries kept on import: written back as read
        elif key == "attrs" and not boxed:
            d["attrs"] = value  # in its place: nothing else is escaped
        elif escaping or (boxed and key == "attrs") or escape(key, value):
            escaped[key] = value
            escaping = True
        else:
            d[key] = value
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
