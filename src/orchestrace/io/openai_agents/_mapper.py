"""The Agents SDK span mapper: spans in, orchestrace events and edges out, as spans start and end.

The batch importer replays exported spans through :class:`SpanMapper`; the live processor
(:mod:`orchestrace.integrations.openai_agents`) feeds it as the SDK calls back, so a live
recording equals the import of the SDK's own export of that run. The numbered rules are written
in ``docs/import-agents.md``.

Example:
    >>> _error_text({"message": "boom", "data": {"k": 1}})
    'boom: {"k":1}'
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from orchestrace.io._foreign import Pending as _Pending
from orchestrace.io._foreign import (
    agent_role,
    ancestors,
    first_event_since,
    handover,
    is_fresh,
    take_inputs,
)
from orchestrace.io._foreign import count as _int
from orchestrace.io._foreign import parse_time as _time
from orchestrace.io._foreign import text as _text
from orchestrace.trace.model import Edge, Event

# span types whose events are tool calls / model calls
_TOOLISH = ("function", "mcp_tools")
_MODELISH = ("generation", "response", "transcription", "speech")
_CONTAINERS = ("task", "turn")


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
        return ancestors(self._spans, sid, lambda sp: sp.parent)

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
        return agent_role(agent, (self.root, self.workflow), self._spawners)

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
            prev, take = take_inputs(self._done, self._pending, agent, ev.t)
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
        fresh = is_fresh(self._acted, parent, child, t)
        ev = handover(
            eid,
            t,
            parent,
            child,
            fresh,
            "spawn" if fresh else "delegate",
            step=self._step_of(sp),
            content=_text(sp.data.get("input")),
            attrs={"span_id": sp.id, "span_type": sp.kind, "tool": sp.name},
        )
        if fresh:
            self._spawned.add(child)
        self._emit(ev)
        first = first_event_since(self._events_of, child, t)
        if first is not None:
            self.emit_edge(Edge(eid, first, "spawn" if fresh else "message"))

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
        fresh = is_fresh(self._acted, agent, target, t)
        ev = handover(
            sp.id,
            t,
            agent,
            target,
            fresh,
            "delegate",
            dur=dur,
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
