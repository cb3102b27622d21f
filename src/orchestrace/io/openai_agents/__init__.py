"""Import OpenAI Agents SDK traces: the ``Trace.export()`` / ``Span.export()`` items its processors see.

Accepted input (one file):

- a JSON array of items, the ``{"data": [...]}`` payload the SDK's backend exporter sends, or any
  object holding such items under ``traces`` / ``spans`` / ``items``;
- one item (or one such payload) per line.

An item is ``{"object": "trace", "id", "workflow_name", "group_id", "metadata"}`` or
``{"object": "trace.span", "id", "trace_id", "parent_id", "started_at", "ended_at",
"span_data": {"type": ...}, "error"}``. Items of several SDK traces give one trace each.

The mapping rules are written in ``docs/import-agents.md``, one numbered rule each. In short:
agent spans name the agents (a generation inherits the agent of its nearest agent ancestor);
an agent run as a tool becomes ``spawn`` + ``return``, a handoff a ``spawn`` (or ``message``)
with the ``delegate`` decision; function spans become ``tool_call`` + ``tool_result``,
generations ``llm_call`` with model and tokens, guardrails ``safety_event``; turn spans give
each event its ``step``. Spans with no orchestrace meaning are kept verbatim in
``meta["unmapped"]`` and counted.

The live processor (:mod:`orchestrace.integrations.openai_agents`) feeds the same
:class:`SpanMapper` as spans start and end, so a live recording equals the import of the
SDK's own export of that run.

Example:
    >>> items = [
    ...     {"object": "trace", "id": "trace_1", "workflow_name": "demo"},
    ...     {"object": "trace.span", "id": "s_agent", "trace_id": "trace_1", "parent_id": None,
    ...      "started_at": "2025-01-01T00:00:00+00:00", "ended_at": "2025-01-01T00:00:02+00:00",
    ...      "span_data": {"type": "agent", "name": "lead", "tools": ["calc"]}},
    ...     {"object": "trace.span", "id": "s_gen", "trace_id": "trace_1", "parent_id": "s_agent",
    ...      "started_at": "2025-01-01T00:00:00+00:00", "ended_at": "2025-01-01T00:00:01+00:00",
    ...      "span_data": {"type": "generation", "model": "gpt-x",
    ...                    "usage": {"input_tokens": 12, "output_tokens": 3}}},
    ...     {"object": "trace.span", "id": "s_fn", "trace_id": "trace_1", "parent_id": "s_agent",
    ...      "started_at": "2025-01-01T00:00:01+00:00", "ended_at": "2025-01-01T00:00:02+00:00",
    ...      "span_data": {"type": "function", "name": "calc", "input": "1+1", "output": "2"}},
    ... ]
    >>> sniff(items)
    True
    >>> res = import_values([items], source="run.json")
    >>> tr = res.traces[0]
    >>> [(e.type, e.agent, e.tokens) for e in tr.events]
    [('llm_call', 'lead', 15), ('tool_call', 'lead', 0), ('tool_result', 'calc', 0)]
    >>> [(e.src, e.dst, e.type) for e in tr.edges]
    [('s_gen', 's_fn', 'causal'), ('s_fn', 's_fn.result', 'tool_dependency')]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrace.errors import Problem, TraceFormatError, _short
from orchestrace.io._repair import prepare_spans as _prepare
from orchestrace.io._repair import replay_order as _replay
from orchestrace.io._repair import settle_spawns
from orchestrace.io.importers import ImportResult
from orchestrace.io.openai_agents._mapper import _MODELISH, _TOOLISH, SpanMapper
from orchestrace.trace.build import default_costs
from orchestrace.trace.model import Edge, Event, Trace

__all__ = ["SYSTEM", "SpanMapper", "import_values", "iter_items", "settle_spawns", "sniff"]

#: ``Trace.system`` of imported and live-captured traces.
SYSTEM = "openai-agents"
_ITEM_KEYS = ("data", "items", "traces", "spans")


# ---------------------------------------------------------------------- recognising the input
def _is_item(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    obj = value.get("object")
    if obj == "trace":
        return isinstance(value.get("id"), str) and "workflow_name" in value
    return obj == "trace.span" and isinstance(value.get("span_data"), dict)


def sniff(value: object) -> bool:
    """Whether ``value`` (a file's first JSON value) holds Agents SDK trace/span items.

    Example:
        >>> sniff({"data": [{"object": "trace", "id": "trace_1", "workflow_name": "w"}]})
        True
        >>> sniff({"resourceSpans": []})
        False
    """
    try:
        if _is_item(value):
            return True
        if isinstance(value, list):
            return bool(value) and _is_item(value[0])
        if isinstance(value, dict):
            for key in _ITEM_KEYS:
                inner = value.get(key)
                if isinstance(inner, list) and inner and _is_item(inner[0]):
                    return True
        return False
    except Exception:
        return False


def iter_items(values: Iterable[object]) -> Iterator[tuple[str, object]]:
    """``(where, item)`` for every item in the file's JSON values (wrappers unpacked).

    Example:
        >>> [w for w, _ in iter_items([{"data": [{"object": "trace"}, {"object": "trace.span"}]}])]
        ['$.data[0]', '$.data[1]']
    """
    vals = list(values)
    many = len(vals) > 1
    for n, value in enumerate(vals):
        base = f"line {n + 1}: $" if many else "$"
        if isinstance(value, list):
            for i, item in enumerate(value):
                yield f"{base}[{i}]", item
            continue
        if isinstance(value, dict) and "object" not in value:
            found = False
            for key in _ITEM_KEYS:
                inner = value.get(key)
                if isinstance(inner, list):
                    found = True
                    for i, item in enumerate(inner):
                        yield f"{base}.{key}[{i}]", item
            if found:
                continue
        yield base, value


# ---------------------------------------------------------------------- batch import
@dataclass
class _Group:
    trace: dict[str, Any] | None = None
    spans: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _export(sp: dict[str, Any]) -> dict[str, Any]:
    """The span item as read (with a repaired id or parent)."""
    return {k: v for k, v in sp.items() if not k.startswith("_")}


def import_values(values: Iterable[object], *, source: str) -> ImportResult:
    """Import the Agents SDK items in a file's JSON values (see the module docstring).

    Raises:
        TraceFormatError: No span maps to an event (one line naming the fix).

    Example:
        >>> import_values([{"object": "trace", "id": "t", "workflow_name": "w"}], source="f")
        Traceback (most recent call last):
        ...
        orchestrace.errors.TraceFormatError: f: file: holds no Agents SDK span that maps to ...
    """
    problems: list[Problem] = []
    groups: dict[str, _Group] = {}
    skipped = 0
    for where, item in iter_items(values):
        if not isinstance(item, dict) or item.get("object") not in ("trace", "trace.span"):
            skipped += 1
            problems.append(
                Problem(
                    "unknown-item",
                    "not an Agents SDK trace or span item (no object 'trace' or 'trace.span')",
                    "it was skipped; export items with Trace.export() / Span.export()",
                    path=where,
                    severity="warning",
                    source=source,
                )
            )
            continue
        if item["object"] == "trace":
            tid = item.get("id")
            if not isinstance(tid, str) or not tid:
                problems.append(
                    Problem(
                        "missing-id",
                        "trace item has no id",
                        "it was skipped; its spans still import under their trace_id",
                        path=where,
                        severity="warning",
                        source=source,
                    )
                )
                continue
            g = groups.setdefault(tid, _Group())
            g.trace = g.trace or item
            continue
        tid = item.get("trace_id")
        tid = tid if isinstance(tid, str) and tid else "trace"
        data = item.get("span_data")
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            problems.append(
                Problem(
                    "missing-field",
                    "span has no span_data.type",
                    "it was kept in meta.unmapped; export spans with Span.export()",
                    path=where,
                    event_id=item.get("id") if isinstance(item.get("id"), str) else None,
                    severity="warning",
                    source=source,
                )
            )
        groups.setdefault(tid, _Group()).spans.append((where, item))
    traces: list[Trace] = []
    unmapped: dict[str, int] = {}
    for tid, g in groups.items():
        tr = _import_one(tid, g, problems, unmapped, source)
        if tr is not None:
            traces.append(tr)
    if not traces:
        raise TraceFormatError(
            source,
            "file",
            "holds no Agents SDK span that maps to an event"
            + (f" ({skipped} item(s) were not trace or span items)" if skipped else ""),
            "export the run's spans (Span.export(), or orchestrace.integrations.openai_agents)",
        )
    return ImportResult(traces=traces, problems=problems, unmapped=unmapped)


def _known_type(sp: dict[str, Any]) -> bool:
    data = sp.get("span_data")
    kind = data.get("type") if isinstance(data, dict) else None
    return kind in (*_TOOLISH, *_MODELISH, "agent", "handoff", "guardrail", "custom")


def _import_one(
    tid: str, g: _Group, problems: list[Problem], unmapped: dict[str, int], source: str
) -> Trace | None:
    order = _prepare(tid, g.spans, problems, source)
    for sp in order:
        if not _known_type(sp):
            data = sp.get("span_data")
            kind = data.get("type") if isinstance(data, dict) else None
            problems.append(
                Problem(
                    "unknown-span-type",
                    f"span type {_short(str(kind))!r} has no orchestrace meaning",
                    "it was kept verbatim in meta.unmapped",
                    path=sp["_where"],
                    event_id=sp["id"],
                    severity="warning",
                    source=source,
                )
            )
    head = g.trace or {}
    workflow = head.get("workflow_name")
    if not isinstance(workflow, str) or not workflow:
        workflow = _root_task_name(order) or "agents-workflow"
    t0 = min((sp["_start"] for sp in order), default=0.0)
    events: list[Event] = []
    edges: list[Edge] = []
    mapper = SpanMapper(t0=t0, workflow=workflow, emit_event=events.append, emit_edge=edges.append)
    for call, sp in _replay(order):
        item = _export(sp)
        if call == "start":
            mapper.start(item, at=sp["_start"])
        else:
            mapper.end(item, at=sp["_end"])
    mapper.finish()
    for k, c in mapper.unmapped.items():
        unmapped[k] = unmapped.get(k, 0) + c
    if not events:
        problems.append(
            Problem(
                "no-events",
                f"trace {_short(tid)!r} has no span that maps to an event",
                "it was not imported; export its agent, generation and function spans",
                severity="warning",
                source=source,
            )
        )
        return None
    events = settle_spawns(events, problems, source)
    meta = trace_meta(tid, head, workflow)
    meta.update(mapper.meta())
    tr = Trace(
        trace_id=tid,
        task_id=workflow,
        events=tuple(events),
        edges=tuple(edges),
        costs=default_costs(events),
        system=SYSTEM,
        meta=meta,
    )
    return tr


def trace_meta(trace_id: str, head: Mapping[str, Any], workflow: str) -> dict[str, Any]:
    """``meta["source"]`` of a trace from the SDK trace item ``head``.

    Example:
        >>> trace_meta("trace_1", {"group_id": "g"}, "demo")["source"]["group_id"]
        'g'
    """
    src: dict[str, Any] = {"format": SYSTEM, "trace_id": trace_id, "workflow_name": workflow}
    for key in ("group_id", "metadata"):
        if head.get(key) is not None:
            src[key] = head[key]
    return {"source": src}


def _root_task_name(order: list[dict[str, Any]]) -> str | None:
    for sp in order:
        data = sp.get("span_data")
        if (
            sp.get("parent_id") is None
            and isinstance(data, dict)
            and isinstance(data.get("data"), dict)
            and data["data"].get("sdk_span_type") == "task"
            and isinstance(data["data"].get("name"), str)
        ):
            name: str = data["data"]["name"]
            return name
    return None
