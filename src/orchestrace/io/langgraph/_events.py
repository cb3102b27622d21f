"""The LangGraph run mapper's state and its event-building steps.

:class:`_RunState` holds everything the run mapper tracks (open runs, pending inputs,
supersteps, ``Send`` fan-out, interrupts and resumes) and the steps that turn it into events
and edges: emitting with causal inputs, a node's own time, resumes, ``Send`` queues, the
superstep barrier, calls seen only in a node's update, and spawns.
:class:`~orchestrace.io.langgraph._mapper.RunMapper` drives them from the run callbacks.

Example:
    >>> out = []
    >>> s = _RunState(t0=0.0, graph="g", emit_event=out.append, emit_edge=out.append)
    >>> s._edge("a", "b", "causal"); s._edge("a", "b", "causal"); len(out)
    1
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from orchestrace.io._foreign import EPS as _EPS
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
from orchestrace.io._foreign import text as _text
from orchestrace.io.langgraph._values import (
    _COMMAND_KEYS,
    _kwargs,
    _lg_type,
    _sends,
    _step,
    _walk,
)
from orchestrace.trace.model import Edge, Event


# ---------------------------------------------------------------------- run state
@dataclass
class _Run:
    rec: dict[str, Any]
    start: float
    kind: str  # graph | node | llm | tool | inner
    agent: str | None = None  # node instance (node runs)
    sender: str | None = None  # node runs started by a Send: who sent it
    send_t: float = 0.0
    llm_children: int = 0
    first_event: tuple[float, str] | None = None
    last_child_end: float = 0.0
    tool_results: list[str] = field(default_factory=list)
    send_step: int | None = None
    first_call: float | None = None  # start of its first LLM or tool run (node runs)
    opened: bool = False  # its opening event (own time before the first call) was emitted
    covered: float = 0.0  # node runs: where its events so far end (epoch seconds)
    gaps: int = 0  # node runs: own-time events between its calls


@dataclass
class _RunState:
    """The run mapper's state and the steps that emit events and edges from it.

    :class:`~orchestrace.io.langgraph._mapper.RunMapper` adds the run callbacks
    (``start``, ``end``, ``finish``) on top; the fields are documented there.

    Example:
        >>> out = []
        >>> s = _RunState(t0=0.0, graph="g", emit_event=out.append, emit_edge=out.append)
        >>> s.role("g"), s.meta()
        ('orchestrator', {'nodes': {}})
    """

    t0: float
    graph: str
    emit_event: Callable[[Event], None]
    emit_edge: Callable[[Edge], None]
    timed: bool = True  # times are wall clock (else ordinal: no own time is measured)
    unmapped: dict[str, int] = field(default_factory=dict)
    unmapped_items: list[Any] = field(default_factory=list)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: int = 0
    _runs: dict[str, _Run] = field(default_factory=dict)
    _open: dict[str, set[str]] = field(default_factory=dict)
    _acted: dict[str, float] = field(default_factory=dict)
    _spawned: set[str] = field(default_factory=set)
    _done: dict[str, list[tuple[float, str, float]]] = field(default_factory=dict)
    _pending: dict[str, list[_Pending]] = field(default_factory=dict)
    _events_of: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    _sends: dict[str, list[tuple[str, float, Any, int | None, int]]] = field(default_factory=dict)
    _asked: dict[str, str] = field(default_factory=dict)  # tool_call id -> asking agent
    _closing: dict[tuple[str, int], list[tuple[str, str, str | None]]] = field(
        default_factory=dict
    )  # (graph run, step) -> [(event id, kind, to)]
    _last_node: tuple[float, str, int | None] | None = None
    _resume: str | None = None
    _edges: set[tuple[str, str]] = field(default_factory=set)
    root: str | None = None  # the first node to act as an agent (rule 15)
    _spawners: set[str] = field(default_factory=set)
    _interrupted: bool = False  # the last node run ended with an interrupt
    _updates: dict[str, str | None] = field(default_factory=dict)  # closing id -> content
    _stop_at: tuple[_Run, float, str | None] | None = None  # the root graph run's end
    _last_end: float = 0.0

    def role(self, agent: str) -> str:
        """``agent``'s role when its next event is written (rule 15).

        ``orchestrator``: the first node to act as an agent, or the graph itself; ``manager``:
        it has spawned another agent; ``worker`` otherwise; ``human`` for a person's answer or
        edit.
        """
        if agent == "human":
            return "human"
        return agent_role(agent, (self.root, self.graph), self._spawners)

    def _rel(self, ts: float) -> float:
        return max(0.0, round(ts - self.t0, 9))

    def _ancestors(self, rid: str | None) -> Iterator[_Run]:
        return ancestors(self._runs, rid, lambda r: r.rec["parent_id"])

    def _node_of(self, rid: str | None) -> _Run | None:
        for r in self._ancestors(rid):
            if r.kind == "node":
                return r
        return None

    def _scope(self, rid: str | None) -> str:
        """Whose supersteps a run's step counts: its subgraph's node run, else its graph run."""
        for r in self._ancestors(rid):
            if r.kind in ("node", "graph"):
                return str(r.rec["id"])
        return ""

    # ------------------------------------------------------------------ emitting
    def _edge(self, src: str, dst: str, kind: str) -> None:
        if src == dst or (src, dst) in self._edges:
            return
        self._edges.add((src, dst))
        self.emit_edge(Edge(src, dst, kind))  # type: ignore[arg-type]

    def _emit(self, ev: Event, run: _Run | None = None) -> None:
        agent = ev.agent
        self._last_end = max(self._last_end, ev.end)
        if ev.type == "spawn":
            self._spawners.add(agent)
        if self.root is None and ev.type != "tool_result" and agent in self.nodes:
            self.root = agent  # the first node to act as an agent (a tool executor never does)
        if ev.type != "tool_result":
            # a spawn names the role of the agent it starts, as the runtime records it
            role = self.role(ev.to if ev.type == "spawn" and ev.to else agent)
            ev = msgspec.structs.replace(ev, role=role)
        self._acted.setdefault(agent, ev.t)
        prev = None
        take: list[_Pending] = []
        if ev.type != "tool_result":
            prev, take = take_inputs(self._done, self._pending, agent, ev.t)
        self.emit_event(ev)
        self.events += 1
        self._events_of.setdefault(agent, []).append((ev.t, ev.id))
        if run is not None and (run.first_event is None or ev.t < run.first_event[0]):
            run.first_event = (ev.t, ev.id)
        linked = {p.event_id for p in take}
        if prev is not None and prev[1] not in linked:
            self._edge(prev[1], ev.id, "causal")
        for p in take:
            self._edge(p.event_id, ev.id, p.kind)
        if ev.type != "tool_result":
            bisect.insort(self._done.setdefault(agent, []), (ev.end, ev.id, ev.t))

    def _feed(self, agent: str, event_id: str, t: float, kind: str) -> None:
        self._pending.setdefault(agent, []).append(_Pending(event_id, t, kind))

    # ------------------------------------------------------------------ event-building steps
    def _own_time(self, node: _Run, call: _Run, call_end: float | None, *, is_llm: bool) -> None:
        """Emit the node's own time before ``call`` (an LLM or tool run that ended; rule 9).

        Before its first call: an opening event from the node's start (id ``RUN.start``);
        before a later call that starts after the node's earlier calls ended: one for the
        time in between (id ``RUN.workK``). Emitted when the call ends, before the call's
        event, so the edges into the node reach them first. A node that only runs tools for
        others (a tool executor, rule 4) has none, nor has a stream without times.
        """
        if node.first_call is None or not node.agent or not self.timed:
            return
        if not node.opened and not is_llm and node.llm_children == 0 and node.sender is None:
            return
        rec = node.rec
        if not node.opened:
            node.opened = True
            node.covered = node.first_call
            start, until, eid = node.start, node.first_call, f"{rec['id']}.start"
        else:
            start, until = node.covered, call.start
            eid = f"{rec['id']}.work{node.gaps + 1}"
        if call_end is not None:
            node.covered = max(node.covered, call_end)
        t, t_end = self._rel(start), self._rel(until)
        if t_end - t <= _EPS:
            return
        if eid.endswith(f"work{node.gaps + 1}"):
            node.gaps += 1
        self._emit(
            Event(
                id=eid,
                t=t,
                type="orchestrator_decision",
                agent=node.agent,
                dur=round(t_end - t, 9),
                step=_step(rec["metadata"]),
                attrs={"run_id": rec["id"], "node": rec["name"], "own_time": True},
            ),
            node,
        )

    def _resumed(self, run: _Run) -> None:
        """A graph run resumed with ``Command(resume=...)``: a human answered an interrupt."""
        for v in _walk(run.rec.get("inputs")):
            kw = _kwargs(v) if _lg_type(v) == "Command" else v
            if isinstance(kw, dict) and set(kw) == _COMMAND_KEYS and kw.get("resume") is not None:
                eid = f"{run.rec['id']}.resume"
                self._emit(
                    Event(
                        id=eid,
                        t=self._rel(run.start),
                        type="human_intervention",
                        agent="human",
                        content=_text(kw.get("resume")),
                        attrs={"run_id": run.rec["id"], "resume": True},
                    )
                )
                self._resume = eid
                return

    def _queue_sends(self, sender: str, t: float, outputs: object, step: int | None) -> None:
        """Remember the ``Send``s in ``outputs``, numbered per target node in their order."""
        seen: dict[str, int] = {}
        for target, arg in _sends(outputs):
            seen[target] = seen.get(target, 0) + 1
            self._sends.setdefault(target, []).append((sender, t, arg, step, seen[target]))

    def _barrier(self, run: _Run, graph: str, me: str, step: int | None) -> None:
        """Data flow over the superstep barrier: the tasks of the step before feed this one."""
        if step is None or run.first_event is None:
            return
        before = self._closing.get((graph, step - 1), [])
        outer = self._runs.get(graph)
        if not before and outer is not None and outer.kind == "node":
            # the first step of a subgraph reads what its node read
            ostep = _step(outer.rec["metadata"])
            if ostep is not None:
                before = self._closing.get((self._scope(outer.rec["parent_id"]), ostep - 1), [])
        for eid, kind, to in before:
            etype = (
                "return"
                if kind == "return" and to == me
                else "aggregate"
                if len(before) > 1
                else "causal"
            )
            self._edge(eid, run.first_event[1], etype)

    def _from_messages(self, run: _Run, me: str, t: float, end: float, step: int | None) -> None:
        """Tool and LLM calls seen only in a node's update (a stream without callbacks).

        A ``ToolMessage`` in the update is a tool run of this node (a tool executor); an AI
        message with ``usage_metadata`` is an LLM call this node made.
        """
        rid = run.rec["id"]
        dur = round(end - t, 9)
        for k, msg in enumerate(_walk(run.rec.get("outputs"))):
            kind = _lg_type(msg)
            kw = _kwargs(msg)
            if kind == "ToolMessage":
                tool = str(kw.get("name") or "tool")
                tcid = kw.get("tool_call_id")
                asker = self._asked.get(str(tcid), me) if tcid is not None else me
                cid = f"{rid}.tool{k}"
                self._emit(
                    Event(
                        id=cid,
                        t=t,
                        type="tool_call",
                        agent=asker,
                        dur=dur,
                        tool=tool,
                        step=step,
                        attrs={"run_id": rid, "executor": me, "tool_call_id": tcid},
                    ),
                    run,
                )
                res = f"{cid}.result"
                self._emit(
                    Event(
                        id=res,
                        t=end,
                        type="tool_result",
                        agent=tool,
                        tool=tool,
                        content=_text(kw.get("content")),
                        error=None if kw.get("status") != "error" else _text(kw.get("content")),
                    )
                )
                self._edge(cid, res, "tool_dependency")
                run.tool_results.append(res)
            elif kind in ("AIMessage", "AIMessageChunk") and isinstance(
                kw.get("usage_metadata"), dict
            ):
                u = kw["usage_metadata"]
                meta = (
                    kw.get("response_metadata")
                    if isinstance(kw.get("response_metadata"), dict)
                    else {}
                )
                assert isinstance(meta, dict)
                model = meta.get("model_name") or meta.get("model") or "llm"
                self._emit(
                    Event(
                        id=f"{rid}.llm{k}",
                        t=t,
                        type="llm_call",
                        agent=me,
                        dur=dur,
                        tool=str(model),
                        step=step,
                        content=_text(kw.get("content")),
                        tokens_in=_int(u.get("input_tokens")),
                        tokens_out=_int(u.get("output_tokens")),
                        attrs={"run_id": rid, "from_update": True},
                    ),
                    run,
                )
                run.last_child_end = end

    def _spawn(
        self, run: _Run, sender: str, child: str, t: float, arg: Any, step: int | None
    ) -> None:
        rid = run.rec["id"]
        eid = f"{rid}.spawn"
        fresh = is_fresh(self._acted, sender, child, t)
        ev = handover(
            eid,
            t,
            sender,
            child,
            fresh,
            "spawn" if fresh else "delegate",
            step=step,
            content=_text(arg),
            attrs={"run_id": rid, "send": run.rec["name"]},
        )
        if fresh:
            self._spawned.add(child)
        self._emit(ev)
        first = first_event_since(self._events_of, child, t)
        if first is not None:
            self._edge(eid, first, "spawn" if fresh else "message")
        else:
            self._feed(child, eid, t, "spawn" if fresh else "message")

    def meta(self) -> dict[str, Any]:
        """What the run's footer records: the graph's nodes and unmapped items."""
        out: dict[str, Any] = {"nodes": self.nodes}
        if self.unmapped_items:
            out["unmapped"] = self.unmapped_items
        return out
