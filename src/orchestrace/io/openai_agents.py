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

import bisect
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from orchestrace.errors import Problem, TraceFormatError, _short
from orchestrace.io.importers import ImportResult
from orchestrace.trace.build import default_costs
from orchestrace.trace.model import Edge, Event, Trace

__all__ = ["SYSTEM", "SpanMapper", "import_values", "iter_items", "settle_spawns", "sniff"]

#: ``Trace.system`` of imported and live-captured traces.
SYSTEM = "openai-agents"
_EPS = 1e-6
_ITEM_KEYS = ("data", "items", "traces", "spans")
# span types whose events are tool calls / model calls
_TOOLISH = ("function", "mcp_tools")
_MODELISH = ("generation", "response", "transcription", "speech")
_CONTAINERS = ("task", "turn")


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


def _time(value: object) -> float | None:
    """Seconds since the epoch of an ISO 8601 string (or a number), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and value:
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return dt.timestamp()
    return None


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if not math.isfinite(value) or value < 0:
        return 0
    return min(int(value), 2**63 - 1)


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, ValueError, OverflowError):
        return str(value)


def _output_text(output: object) -> str | None:
    """The assistant text of a generation's output messages (``None`` when there is none)."""
    if not isinstance(output, list):
        return None
    parts: list[str] = []
    for msg in output:
        if not isinstance(msg, dict):
            continue
        content = msg.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for c in content:
                if isinstance(c, dict) and isinstance(c.get("text"), str):
                    parts.append(c["text"])
    return "\n".join(parts) if parts else None


def _error_text(error: object) -> str | None:
    if error is None:
        return None
    if isinstance(error, dict):
        msg = error.get("message")
        if isinstance(msg, str):
            data = error.get("data")
            return msg if not data else f"{msg}: {_text(data)}"
    return _text(error)


def _latest(done: list[tuple[float, str, float]], t: float) -> tuple[float, str] | None:
    """The latest ``(end, id)`` of ``done`` (sorted) that ended by ``t`` and started before it.

    Events starting at the same instant as ``t`` are concurrent with it, not before it.
    """
    i = bisect.bisect_right(done, (t + _EPS, "\U0010ffff", math.inf))
    while i > 0:
        i -= 1
        end, eid, start = done[i]
        if start < t - _EPS:
            return end, eid
    return None


# ---------------------------------------------------------------------- the mapper
@dataclass
class _Span:
    id: str
    parent: str | None
    kind: str  # span_data.type, or "task"/"turn" for the SDK's custom container spans
    name: str | None
    start: float
    data: dict[str, Any]
    agent: str | None = None  # instance name, for agent spans
    child_agent: str | None = None  # function spans: the agent run as this tool
    last_agent: str | None = None  # function spans: the agent that produced the output
    auto_step: int | None = None  # LLM calls its agent had started (when there are no turns)


@dataclass
class _Pending:
    event_id: str
    t: float
    kind: str  # edge type the consumer gets


@dataclass
class SpanMapper:
    """Turns Agents SDK spans into orchestrace events and edges as they start and end.

    Feed ``start(item)`` when a span starts and ``end(item)`` when it ends (``item`` is the
    span's ``export()``); ``emit_event`` and ``emit_edge`` receive the records in the order
    they become final, which is what a live recording writes. :func:`import_values` replays
    exported spans through the same mapper.

    Args:
        t0: Epoch seconds that become ``t = 0``.
        workflow: Agent name for spans outside any agent span.
        emit_event: Called with each finished event.
        emit_edge: Called with each edge, after both its events were emitted.

    Example:
        >>> out = []
        >>> m = SpanMapper(t0=0.0, workflow="w", emit_event=out.append, emit_edge=out.append)
        >>> a = {"id": "a", "parent_id": None, "started_at": 0, "ended_at": 2,
        ...      "span_data": {"type": "agent", "name": "lead"}}
        >>> g = {"id": "g", "parent_id": "a", "started_at": 0, "ended_at": 1,
        ...      "span_data": {"type": "generation", "model": "m"}}
        >>> m.start(a); m.start(g); m.end(g); m.end(a)
        >>> [(e.type, e.agent, e.tool, e.role) for e in out]
        [('llm_call', 'lead', 'm', 'orchestrator')]
    """

    t0: float
    workflow: str
    emit_event: Callable[[Event], None]
    emit_edge: Callable[[Edge], None]
    unmapped: dict[str, int] = field(default_factory=dict)
    unmapped_items: list[Any] = field(default_factory=list)
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: int = 0
    _spans: dict[str, _Span] = field(default_factory=dict)
    _open_agents: dict[str, set[str]] = field(default_factory=dict)  # name -> open instances
    _acted: dict[str, float] = field(default_factory=dict)  # agent -> first event time
    _spawned: set[str] = field(default_factory=set)
    _done: dict[str, list[tuple[float, str, float]]] = field(
        default_factory=dict
    )  # agent -> (end, id)
    _pending: dict[str, list[_Pending]] = field(default_factory=dict)
    _events_of: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    _llm_starts: dict[str, int] = field(default_factory=dict)
    root: str | None = None  # the agent the run started with (rule 14)
    _spawners: set[str] = field(default_factory=set)
    _last_end: float = 0.0
    _answer: tuple[float, str, str | None] | None = None  # latest LLM call: end, id, text
    _finished: bool = False

    # ------------------------------------------------------------------ span tree
    def _rel(self, ts: float) -> float:
        return max(0.0, round(ts - self.t0, 9))

    def _ancestors(self, sid: str | None) -> Iterator[_Span]:
        seen: set[str] = set()
        while sid is not None and sid in self._spans and sid not in seen:
            seen.add(sid)
            sp = self._spans[sid]
            yield sp
            sid = sp.parent

    def _agent_of(self, sid: str | None) -> str:
        for sp in self._ancestors(sid):
            if sp.kind == "agent" and sp.agent:
                return sp.agent
        return self.workflow

    def _step_of(self, span: _Span) -> int | None:
        """The step of ``span``: the turn of the SDK's turn span around it.

        Without turn spans: the number of LLM calls its agent had started by then (a tool
        call belongs to the LLM call before it).
        """
        for sp in self._ancestors(span.parent):
            if sp.kind == "turn":
                turn = sp.data.get("turn")
                return _int(turn) if isinstance(turn, int) else None
            if sp.kind == "agent":
                break
        return span.auto_step

    def _tool_parent(self, sid: str | None) -> _Span | None:
        """The function span an agent span runs under, when it runs as a tool."""
        for sp in self._ancestors(sid):
            if sp.kind in _TOOLISH:
                return sp
            if sp.kind == "agent":
                return None
        return None

    # ------------------------------------------------------------------ emitting
    def role(self, agent: str) -> str:
        """``agent``'s role when its next event is written (rule 14).

        ``orchestrator``: the root agent, or the workflow itself; ``manager``: it has spawned
        another agent; ``worker`` otherwise.
        """
        if agent in (self.root, self.workflow):
            return "orchestrator"
        return "manager" if agent in self._spawners else "worker"

    def _emit(self, ev: Event) -> None:
        agent = ev.agent
        if ev.type == "spawn":
            self._spawners.add(agent)
        if ev.type != "tool_result":
            # a spawn names the role of the agent it starts, as the runtime records it
            who = ev.to if ev.type == "spawn" and ev.to else agent
            ev = msgspec.structs.replace(ev, role=self.role(who))
        if ev.type == "llm_call" and (self._answer is None or ev.end >= self._answer[0]):
            self._answer = (ev.end, ev.id, None if ev.error else ev.content)
        self._acted.setdefault(agent, ev.t)
        if ev.type != "tool_result":
            # an agent does one thing after another: chain to its last event that had ended
            prev = _latest(self._done.get(agent, []), ev.t)
            take = [p for p in self._pending.get(agent, []) if p.t <= ev.t + _EPS]
            if take:
                self._pending[agent] = [p for p in self._pending[agent] if p not in take]
            returns = sum(1 for p in take if p.kind == "return")
        else:
            prev, take, returns = None, [], 0
        self.emit_event(ev)
        self.events += 1
        self._events_of.setdefault(agent, []).append((ev.t, ev.id))
        linked = {p.event_id for p in take}
        if prev is not None and prev[1] not in linked:
            self.emit_edge(Edge(prev[1], ev.id, "causal"))
        for p in take:
            kind = "aggregate" if p.kind == "return" and returns > 1 else p.kind
            self.emit_edge(Edge(p.event_id, ev.id, kind))  # type: ignore[arg-type]
        if ev.type != "tool_result":
            bisect.insort(self._done.setdefault(agent, []), (ev.end, ev.id, ev.t))

    def _feed(self, agent: str, event_id: str, t: float, kind: str) -> None:
        """``event_id`` (at ``t``) is input to ``agent``'s next event."""
        self._pending.setdefault(agent, []).append(_Pending(event_id, t, kind))

    def _spawn_tool_agent(self, sp: _Span, parent: str, child: str, t: float) -> None:
        """Emit the spawn (or, for an agent that acted before, message) of an agent-as-tool."""
        eid = f"{sp.id}.spawn"
        first_act = self._acted.get(child)
        fresh = child != parent and (first_act is None or first_act >= t - _EPS)
        ev = Event(
            id=eid,
            t=t,
            type="spawn" if fresh else "message",
            agent=parent,
            from_=None if fresh else parent,
            to=child,
            decision="spawn" if fresh else "delegate",
            step=self._step_of(sp),
            content=_text(sp.data.get("input")),
            attrs={"span_id": sp.id, "span_type": sp.kind, "tool": sp.name},
        )
        if fresh:
            self._spawned.add(child)
        self._emit(ev)
        firsts = [(et, e) for et, e in self._events_of.get(child, []) if et >= t - _EPS]
        if firsts:
            self.emit_edge(Edge(eid, min(firsts)[1], "spawn" if fresh else "message"))

    @staticmethod
    def _attrs(sp: _Span, data: Mapping[str, Any], keep: Iterable[str]) -> dict[str, Any]:
        out: dict[str, Any] = {"span_id": sp.id, "span_type": sp.kind}
        rest = {k: v for k, v in data.items() if k not in keep and k != "type"}
        if rest:
            out["span_data"] = rest
        return out

    # ------------------------------------------------------------------ callbacks
    def start(self, item: Mapping[str, Any], *, at: float | None = None) -> None:
        """A span started (``item``: its export; ``ended_at`` may be unset).

        ``at`` (epoch seconds) overrides ``started_at``.
        """
        sid = str(item.get("id"))
        data = item.get("span_data") if isinstance(item.get("span_data"), dict) else {}
        assert isinstance(data, dict)
        kind = str(data.get("type"))
        name = data.get("name") if isinstance(data.get("name"), str) else None
        if kind == "custom" and isinstance(data.get("data"), dict):
            sdk = data["data"].get("sdk_span_type")
            if sdk in _CONTAINERS:
                kind = str(sdk)
        parent = item.get("parent_id")
        start = at if at is not None else _time(item.get("started_at"))
        sp = _Span(
            sid,
            parent if isinstance(parent, str) else None,
            kind,
            name,
            start if start is not None else self.t0,
            data.get("data", {}) if kind in _CONTAINERS else data,
        )
        self._spans[sid] = sp
        if kind != "agent":
            owner = self._agent_of(sp.parent)
            if kind in _MODELISH:
                self._llm_starts[owner] = self._llm_starts.get(owner, 0) + 1
            sp.auto_step = self._llm_starts.get(owner) or None
            return
        base = name or "agent"
        busy = self._open_agents.setdefault(base, set())
        k = 1
        while (base if k == 1 else f"{base}#{k}") in busy:
            k += 1
        sp.agent = base if k == 1 else f"{base}#{k}"
        busy.add(sp.agent)
        if self.root is None and self._agent_of(sp.parent) == self.workflow:
            self.root = sp.agent  # the first agent outside any other agent
        info = self.agents.setdefault(sp.agent, {"name": base, "spans": []})
        info["spans"].append(sid)
        fn = self._tool_parent(sp.parent)
        if fn is None:
            return
        fn.last_agent = sp.agent
        if fn.child_agent is None:  # the agent run as this tool
            fn.child_agent = sp.agent

    def end(self, item: Mapping[str, Any], *, at: float | None = None) -> None:
        """A span ended (``item``: its export with ``ended_at`` set).

        ``at`` (epoch seconds) overrides ``ended_at``.
        """
        sid = str(item.get("id"))
        sp = self._spans.get(sid)
        if sp is None:
            self.start(item)
            sp = self._spans[sid]
        data = item.get("span_data") if isinstance(item.get("span_data"), dict) else {}
        assert isinstance(data, dict)
        if sp.kind not in _CONTAINERS:
            sp.data = data
        else:
            inner = data.get("data")
            sp.data = inner if isinstance(inner, dict) else sp.data
        end_ts = at if at is not None else _time(item.get("ended_at"))
        t = self._rel(sp.start)
        end = max(t, self._rel(end_ts)) if end_ts is not None else t
        dur = round(end - t, 9)
        error = _error_text(item.get("error"))
        kind = sp.kind
        self._last_end = max(self._last_end, end)
        if kind == "agent":
            if sp.agent:
                self._open_agents.get(sp.name or "agent", set()).discard(sp.agent)
                info = self.agents.get(sp.agent, {})
                for key in ("tools", "handoffs", "output_type"):
                    if data.get(key) is not None:
                        info[key] = data[key]
            return
        if kind in _CONTAINERS:
            return
        agent = self._agent_of(sp.parent)
        step = self._step_of(sp)
        if kind in _MODELISH:
            usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
            assert isinstance(usage, dict)
            model = data.get("model")
            out = data.get("output")
            self._emit(
                Event(
                    id=sid,
                    t=t,
                    type="llm_call",
                    agent=agent,
                    dur=dur,
                    tool=model if isinstance(model, str) else None,
                    step=step,
                    content=_output_text(out) if kind == "generation" else _text(out),
                    tokens_in=_int(usage.get("input_tokens", usage.get("prompt_tokens"))),
                    tokens_out=_int(usage.get("output_tokens", usage.get("completion_tokens"))),
                    error=error,
                    attrs=self._attrs(sp, data, keep=("model",)),
                )
            )
            return
        if kind in _TOOLISH:
            if sp.child_agent is not None:
                child = sp.last_agent or sp.child_agent
                caller = self._agent_of(sp.parent)
                self._spawn_tool_agent(sp, caller, sp.child_agent, t)
                eid = f"{sid}.return"
                ret = child in self._spawned
                self._emit(
                    Event(
                        id=eid,
                        t=end,
                        type="return" if ret else "message",
                        agent=child,
                        from_=child,
                        to=caller,
                        content=_text(data.get("output")),
                        error=error,
                        attrs=self._attrs(sp, data, keep=("input", "output")),
                    )
                )
                self._feed(caller, eid, end, "return" if ret else "message")
                return
            tool = sp.name or (f"mcp:{data.get('server')}" if kind == "mcp_tools" else kind)
            if kind == "mcp_tools":
                tool = f"mcp_list_tools:{data.get('server')}"
            self._emit(
                Event(
                    id=sid,
                    t=t,
                    type="tool_call",
                    agent=agent,
                    dur=dur,
                    tool=tool,
                    step=step,
                    content=_text(data.get("input")),
                    attrs=self._attrs(sp, data, keep=("name", "input", "output", "result")),
                )
            )
            rid = f"{sid}.result"
            result = data.get("output") if kind == "function" else data.get("result")
            self._emit(
                Event(
                    id=rid,
                    t=end,
                    type="tool_result",
                    agent=tool,
                    tool=tool,
                    content=_text(result),
                    error=error,
                )
            )
            self.emit_edge(Edge(sid, rid, "tool_dependency"))
            self._feed(agent, rid, end, "causal")
            return
        if kind == "handoff":
            target = data.get("to_agent")
            if isinstance(target, str) and target:
                self._hand_over_handoff(sp, agent, target, t, dur, data, error)
                return
        if kind == "guardrail":
            triggered = bool(data.get("triggered"))
            self._emit(
                Event(
                    id=sid,
                    t=t,
                    type="safety_event",
                    agent=agent,
                    dur=dur,
                    step=step,
                    content=f"guardrail {sp.name or '?'} "
                    + ("triggered" if triggered else "passed"),
                    error=error,
                    attrs=self._attrs(sp, data, keep=()),
                )
            )
            return
        label = f"custom span {sp.name!r}" if kind == "custom" else f"span type {kind!r}"
        self.unmapped[label] = self.unmapped.get(label, 0) + 1
        self.unmapped_items.append(dict(item))

    def _hand_over_handoff(
        self,
        sp: _Span,
        agent: str,
        target: str,
        t: float,
        dur: float,
        data: Mapping[str, Any],
        error: str | None,
    ) -> None:
        first_act = self._acted.get(target)
        fresh = target != agent and (first_act is None or first_act >= t - _EPS)
        ev = Event(
            id=sp.id,
            t=t,
            type="spawn" if fresh else "message",
            agent=agent,
            dur=dur,
            from_=None if fresh else agent,
            to=target,
            decision="delegate",
            step=self._step_of(sp),
            error=error,
            attrs=self._attrs(sp, data, keep=("to_agent",)),
        )
        if fresh:
            self._spawned.add(target)
        self._emit(ev)
        self._feed(target, sp.id, t, "spawn" if fresh else "message")

    def finish(self) -> None:
        """The trace ended: the root agent's ``stop`` decision, when the run ended with an answer.

        The answer is the text of the LLM call that ended last (rule 14); a run whose last
        LLM call failed or gave no text has no ``stop``. Called once, after the last span.
        """
        if self._finished or self._answer is None or not self._answer[2]:
            return
        self._finished = True
        end, last, answer = self._answer
        eid = "stop"
        while any(eid == e for evs in self._events_of.values() for _, e in evs):
            eid += "~"
        agent = self.root or self.workflow
        self._feed(agent, last, end, "causal")  # the answer leads to the stop
        self._emit(
            Event(
                id=eid,
                t=self._last_end,
                type="orchestrator_decision",
                agent=agent,
                decision="stop",
                content=answer,
                attrs={"answer": answer},
            )
        )

    def meta(self) -> dict[str, Any]:
        """What the run's footer records: agents (tools, handoffs, spans) and unmapped spans."""
        out: dict[str, Any] = {"agents": self.agents}
        if self.unmapped_items:
            out["unmapped"] = self.unmapped_items
        return out


# ---------------------------------------------------------------------- batch import
@dataclass
class _Group:
    trace: dict[str, Any] | None = None
    spans: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _prepare(
    tid: str,
    spans: list[tuple[str, dict[str, Any]]],
    problems: list[Problem],
    source: str,
    noun: str = "span",
    scope: str | None = None,
) -> list[dict[str, Any]]:
    """Repair what can be repaired (each repair named in ``problems``); return the spans.

    ``scope`` names where the spans are (default: trace ``tid``) in messages.
    """
    where_all = scope or f"trace {_short(tid)!r}"

    def warn(code: str, where: str, sid: str | None, msg: str, fix: str) -> None:
        problems.append(
            Problem(code, msg, fix, path=where, event_id=sid, severity="warning", source=source)
        )

    by_id: dict[str, dict[str, Any]] = {}
    raws: dict[str, object] = {}
    order: list[dict[str, Any]] = []
    for where, raw in spans:
        sp = dict(raw)
        sid = sp.get("id")
        if not isinstance(sid, str) or not sid:
            sid = f"{where}"
            warn(
                "missing-id",
                where,
                None,
                f"{noun} has no id",
                f"it was imported under the id {sid!r}; export {noun}s with their ids",
            )
            sp["id"] = sid
        if sid in by_id:
            if raws[sid] == raw:
                warn(
                    "duplicate-id",
                    where,
                    sid,
                    f"{noun} {_short(sid)!r} appears twice with the same content",
                    f"the copy was dropped; export each {noun} once",
                )
                continue
            k = 2
            while f"{sid}~{k}" in by_id:
                k += 1
            new = f"{sid}~{k}"
            warn(
                "duplicate-id",
                where,
                sid,
                f"{noun} id {_short(sid)!r} is used by two different {noun}s",
                f"the later one was imported as {new!r} (children keep the first); "
                f"give every {noun} a unique id",
            )
            sp["id"] = sid = new
        start = _time(sp.get("started_at"))
        end = _time(sp.get("ended_at"))
        if start is None and end is None:
            warn(
                "missing-time",
                where,
                sid,
                f"{noun} {_short(sid)!r} has no readable started_at or ended_at",
                f"it was placed at its parent's start with no duration; export finished {noun}s",
            )
        elif start is None:
            warn(
                "missing-time",
                where,
                sid,
                f"{noun} {_short(sid)!r} has no readable started_at",
                f"it was placed at its end with no duration; export {noun}s with both times",
            )
            start = end
        elif end is None:
            warn(
                "unfinished-span",
                where,
                sid,
                f"{noun} {_short(sid)!r} has no ended_at (it had not ended when exported)",
                f"it was imported with no duration; export {noun}s when they end",
            )
            end = start
        elif end < start:
            warn(
                "clock-skew",
                where,
                sid,
                f"{noun} {_short(sid)!r} ends before it starts",
                "its duration was set to 0; check the clock of the process that recorded it",
            )
            end = start
        sp["_start"], sp["_end"], sp["_where"] = start, end, where
        by_id[sid] = sp
        raws[sid] = raw
        order.append(sp)
    # parents: missing ones and cycles make a span a root
    for sp in order:
        pid = sp.get("parent_id")
        if pid is None:
            continue
        if not isinstance(pid, str) or pid not in by_id:
            warn(
                "missing-parent",
                sp["_where"],
                sp["id"],
                f"{noun} {_short(sp['id'])!r} names parent {_short(str(pid))!r}, which is not "
                f"in {where_all}",
                f"it was attached to the trace root; export the parent {noun} too",
            )
            sp["parent_id"] = None
    # a cycle of parent ids is broken at the span that closes it (the first one met again
    # while walking up); its descendants keep their parents
    state: dict[str, int] = {}  # 1: on the path being walked, 2: known to reach a root
    for sp in order:
        path: list[dict[str, Any]] = []
        node: dict[str, Any] | None = sp
        while node is not None and node["id"] not in state:
            state[node["id"]] = 1
            path.append(node)
            pid = node.get("parent_id")
            node = by_id.get(pid) if isinstance(pid, str) else None
        if node is not None and state[node["id"]] == 1:
            warn(
                "parent-cycle",
                node["_where"],
                node["id"],
                f"{noun} {_short(node['id'])!r} is its own ancestor through parent "
                f"{_short(str(node.get('parent_id')))!r}",
                "it was attached to the trace root (its descendants keep their parents); "
                "fix the parent ids",
            )
            node["parent_id"] = None
        for x in path:
            state[x["id"]] = 2
    # times: untimed spans take their parent's start; children start no earlier than parents
    done: set[str] = set()

    def parent_of(sp: dict[str, Any]) -> dict[str, Any] | None:
        pid = sp.get("parent_id")
        return by_id.get(pid) if isinstance(pid, str) else None

    def settle(leaf: dict[str, Any]) -> None:
        chain: list[dict[str, Any]] = []
        node: dict[str, Any] | None = leaf
        while node is not None and node["id"] not in done:  # parents first (no recursion)
            done.add(node["id"])
            chain.append(node)
            node = parent_of(node)
        for sp in reversed(chain):
            settle_one(sp)

    def settle_one(sp: dict[str, Any]) -> None:
        parent = parent_of(sp)
        if sp["_start"] is None:
            base = parent["_start"] if parent is not None else None
            sp["_start"] = sp["_end"] = base
            return
        if (
            parent is not None
            and parent["_start"] is not None
            and sp["_start"] < parent["_start"] - _EPS
        ):
            warn(
                "clock-skew",
                sp["_where"],
                sp["id"],
                f"{noun} {_short(sp['id'])!r} starts {parent['_start'] - sp['_start']:.6f}s "
                f"before its parent {_short(parent['id'])!r}",
                "it was moved to its parent's start; check the clocks of the processes "
                "that recorded them",
            )
            sp["_end"] = max(sp["_end"], parent["_start"])
            sp["_start"] = parent["_start"]

    for sp in order:
        settle(sp)
    known = [s["_start"] for s in order if s["_start"] is not None]
    floor = min(known, default=0.0)
    for sp in order:
        if sp["_start"] is None:
            sp["_start"] = sp["_end"] = floor
    return order


def _replay(order: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Start and end callbacks in the order the SDK made them (by time; ends first on ties)."""
    depth: dict[str, int] = {}
    by_id = {sp["id"]: sp for sp in order}

    def d(sp: dict[str, Any]) -> int:
        chain: list[dict[str, Any]] = []
        node: dict[str, Any] | None = sp
        while node is not None and node["id"] not in depth:  # no recursion on deep trees
            chain.append(node)
            pid = node.get("parent_id")
            node = by_id.get(pid) if isinstance(pid, str) else None
        base = depth[node["id"]] if node is not None else -1
        for k, x in enumerate(reversed(chain)):
            depth[x["id"]] = base + k + 1
        return depth[sp["id"]]

    calls: list[tuple[float, int, int, int, str, dict[str, Any]]] = []
    for i, sp in enumerate(order):
        calls.append((sp["_start"], 1, d(sp), i, "start", sp))
        calls.append((sp["_end"], 0, -d(sp), i, "end", sp))
    calls.sort(key=lambda c: c[:4])
    return [(c[4], c[5]) for c in calls]


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


def settle_spawns(events: list[Event], problems: list[Problem], source: str) -> list[Event]:
    """Move events of a spawned agent that start before its first spawn to the spawn's time.

    Only input with broken times (lost or skewed span times) has such events; each agent
    moved is named in ``problems``.

    Example:
        >>> evs = [Event(id="s", t=2.0, type="spawn", agent="a", to="b"),
        ...        Event(id="x", t=0.0, type="llm_call", agent="b")]
        >>> found = []
        >>> [e.t for e in settle_spawns(evs, found, "f")], found[0].code
        ([2.0, 2.0], 'event-before-spawn')
    """
    first: dict[str, tuple[float, str]] = {}
    for e in events:
        if (
            e.type == "spawn"
            and e.to
            and e.to != e.agent
            and (e.to not in first or e.t < first[e.to][0])
        ):
            first[e.to] = (e.t, e.id)
    out: list[Event] = []
    named: set[str] = set()
    for e in events:
        limit = first.get(e.agent)
        if limit is not None and e.type != "tool_result" and e.t < limit[0] - _EPS:
            if e.agent not in named:
                named.add(e.agent)
                problems.append(
                    Problem(
                        "event-before-spawn",
                        f"agent {_short(e.agent)!r} acts at t={e.t} before its spawn "
                        f"{_short(limit[1])!r} at t={limit[0]} (lost or skewed times)",
                        "its earlier events were moved to the spawn's time; export complete "
                        "span times",
                        event_id=e.id,
                        severity="warning",
                        source=source,
                    )
                )
            e = msgspec.structs.replace(e, t=limit[0])
        out.append(e)
    return out


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
