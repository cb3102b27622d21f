"""The LangGraph run mapper: run records in, orchestrace events and edges out, as runs start and end.

:class:`RunMapper` is one state machine (open runs, pending inputs, supersteps, ``Send``
fan-out, interrupts and resumes) driven the same way by the batch importer and the live
callback handler. Its state and the steps that build events from it live in
:mod:`orchestrace.io.langgraph._events`; this module holds the run callbacks.

Example:
    >>> from orchestrace.io.langgraph import run_record
    >>> out = []
    >>> m = RunMapper(t0=0.0, graph="g", emit_event=out.append, emit_edge=out.append)
    >>> m.start(run_record({"id": "g", "name": "G", "run_type": "chain", "start_time": 0}))
    >>> m.finish(); out
    []
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrace.io._foreign import handover
from orchestrace.io._foreign import parse_time as _time
from orchestrace.io._foreign import text as _text
from orchestrace.io.langgraph._events import _Run, _RunState
from orchestrace.io.langgraph._values import (
    _INTERRUPT,
    _LLM,
    _TOOLS,
    _gotos,
    _instance,
    _is_node,
    _kwargs,
    _lg_type,
    _llm_text,
    _model,
    _result_tool_call_id,
    _step,
    _tokens,
    _tool_call_ids,
)
from orchestrace.trace.model import Event


@dataclass
class RunMapper(_RunState):
    """Turns LangGraph runs (see :func:`run_record`) into events and edges as they start and end.

    ``start(rec)`` and ``end(rec)`` take run records; events and edges go to ``emit_event`` and
    ``emit_edge`` as soon as they are final. :func:`import_values` replays runs through it;
    the live callback handler calls it from LangChain's callbacks.

    Args:
        t0: Epoch seconds that become ``t = 0``.
        graph: Agent name for runs outside any graph node.
        emit_event: Called with each finished event.
        emit_edge: Called with each edge, after both its events.
        timed: Times are wall clock; with ordinal times (a stream without timestamps) no
            node's own time is measured, so nodes get no opening event.

    Example:
        >>> from orchestrace.io.langgraph import run_record
        >>> out = []
        >>> m = RunMapper(t0=0.0, graph="g", emit_event=out.append, emit_edge=out.append)
        >>> g = run_record({"id": "g", "name": "G", "run_type": "chain", "start_time": 0})
        >>> node = run_record({"id": "n", "name": "a", "run_type": "chain", "start_time": 0,
        ...                    "end_time": 1, "parent_run_id": "g",
        ...                    "extra": {"metadata": {"langgraph_node": "a"}}})
        >>> m.start(g); m.start(node); m.end(node); m.end(g); m.finish()
        >>> [(e.type, e.agent, e.role, e.decision) for e in out if isinstance(e, Event)]
        [('message', 'a', 'orchestrator', None), ('orchestrator_decision', 'a', 'orchestrator', 'stop')]
    """

    # ------------------------------------------------------------------ callbacks
    def start(self, rec: dict[str, Any], *, at: float | None = None) -> None:
        """A run started (``rec``: :func:`run_record`); ``at`` overrides its start time."""
        rid = rec["id"]
        ts = at if at is not None else _time(rec.get("started_at"))
        parent = rec.get("parent_id")
        if rec["run_type"] == "human":
            kind = "human"
        elif rec["run_type"] in _LLM:
            kind = "llm"
        elif rec["run_type"] in _TOOLS:
            kind = "tool"
        elif _is_node(rec):
            kind = "node"  # also a node of a subgraph, or one whose graph run is missing
        elif parent is None or parent not in self._runs:
            kind = "graph"
        else:
            kind = "inner"
        run = _Run(rec, ts if ts is not None else self.t0, kind)
        self._runs[rid] = run
        if kind in ("llm", "tool"):
            node = self._node_of(parent)
            if node is not None:
                if kind == "llm":
                    node.llm_children += 1
                if node.first_call is None or run.start < node.first_call:
                    node.first_call = run.start
        if kind == "graph" and parent is None:
            self._resumed(run)
        if kind != "node":
            return
        base = rec["name"]
        busy = self._open.setdefault(base, set())
        ordinal = 0
        triggers = rec["metadata"].get("langgraph_triggers")
        if isinstance(triggers, list | tuple) and "__pregel_push" in triggers:
            queue = self._sends.get(base, [])
            inputs = rec.get("inputs")
            pick = next((i for i, s in enumerate(queue) if s[2] == inputs), 0 if queue else None)
            if pick is not None:
                sender, t, _, sstep, ordinal = queue.pop(pick)
                run.sender, run.send_t, run.send_step = sender, t, sstep
            elif self._last_node is not None:
                run.sender, run.send_t = self._last_node[1], self._last_node[0]
                run.send_step = self._last_node[2]
        # the k-th Send of a fan-out runs as instance k (whatever order the runs start in)
        k = ordinal if ordinal and _instance(base, ordinal) not in busy else 1
        while _instance(base, k) in busy:
            k += 1
        run.agent = _instance(base, k)
        busy.add(run.agent)
        info = self.nodes.setdefault(run.agent, {"node": base, "runs": 0})
        info["runs"] += 1

    def end(self, rec: dict[str, Any], *, at: float | None = None) -> None:
        """A run ended (``rec``: :func:`run_record` with outputs); ``at`` overrides its end."""
        rid = rec["id"]
        run = self._runs.get(rid)
        if run is None:
            self.start(rec)
            run = self._runs[rid]
        run.rec = rec
        ts = at if at is not None else _time(rec.get("ended_at"))
        t = self._rel(run.start)
        end = max(t, self._rel(ts)) if ts is not None else t
        dur = round(end - t, 9)
        node = self._node_of(rec.get("parent_id"))
        if node is not None and run.kind in ("llm", "tool", "node"):
            # the node's closing message starts after its last call or subgraph node (inner
            # runnables such as routing functions are the node's own time)
            node.last_child_end = max(node.last_child_end, end)
        agent = node.agent if node is not None and node.agent else self.graph
        step = _step(rec["metadata"])
        error = _text(rec.get("error")) if rec.get("error") else None
        attrs: dict[str, Any] = {"run_id": rid, "run_type": rec["run_type"], "name": rec["name"]}
        if node is not None and run.kind in ("llm", "tool"):
            self._own_time(node, run, ts, is_llm=run.kind == "llm")
        if run.kind == "llm":
            tin, tout = _tokens(rec.get("outputs"))
            self._emit(
                Event(
                    id=rid,
                    t=t,
                    type="llm_call",
                    agent=agent,
                    dur=dur,
                    tool=_model(rec),
                    step=step,
                    content=_llm_text(rec.get("outputs")),
                    tokens_in=tin,
                    tokens_out=tout,
                    error=error,
                    attrs=attrs,
                ),
                node,
            )
            return
        if run.kind == "tool":
            asker = agent
            if node is not None and node.llm_children == 0 and node.sender is None:
                # a node that calls no LLM runs tools for whoever asked (rule 6); when no
                # agent asked, the graph itself did: a tool executor is never the caller
                tcid = _result_tool_call_id(rec.get("outputs"), rec.get("inputs"))
                if tcid is not None and tcid in self._asked:
                    asker = self._asked[tcid]
                elif self._last_node is not None and self._last_node[1] != agent:
                    asker = self._last_node[1]
                else:
                    asker = self.graph
                attrs["executor"] = agent
            tool = rec["name"]
            inputs = rec.get("inputs")
            if isinstance(inputs, dict) and "input" in inputs and len(inputs) == 1:
                inputs = inputs["input"]
            outputs = rec.get("outputs")
            if isinstance(outputs, dict) and "output" in outputs and len(outputs) == 1:
                outputs = outputs["output"]
            if _lg_type(outputs) is not None:
                outputs = _kwargs(outputs).get("content", outputs)
            self._emit(
                Event(
                    id=rid,
                    t=t,
                    type="tool_call",
                    agent=asker,
                    dur=dur,
                    tool=tool,
                    step=step,
                    content=_text(inputs),
                    attrs=attrs,
                ),
                node,
            )
            result = f"{rid}.result"
            self._emit(
                Event(
                    id=result,
                    t=end,
                    type="tool_result",
                    agent=tool,
                    tool=tool,
                    content=_text(outputs),
                    error=error,
                ),
            )
            self._edge(rid, result, "tool_dependency")
            self._feed(asker, result, end, "causal")
            if node is not None:
                node.tool_results.append(result)
            return
        if run.kind == "inner":
            if node is not None and node.agent:
                self._queue_sends(node.agent, end, rec.get("outputs"), step)
            return
        if run.kind == "graph":
            if (rec.get("parent_id") is None or rec["parent_id"] not in self._runs) and (
                self._stop_at is None
            ):
                self._stop_at = (run, end, error)  # written by finish()
            return
        if run.kind == "human":
            ev = Event(
                id=rid,
                t=t,
                type="human_intervention",
                agent=rec["name"],
                dur=dur,
                step=step,
                content=_text(rec.get("inputs")),
                attrs={**attrs, **(rec.get("outputs") or {})},
            )
            self._emit(ev, run)
            if step is not None:
                graph = self._scope(rec.get("parent_id"))
                self._closing.setdefault((graph, step), []).append((ev.id, ev.type, None))
            return
        self._end_node(run, t, end, step, error, attrs)

    def _end_node(
        self,
        run: _Run,
        t: float,
        end: float,
        step: int | None,
        error: str | None,
        attrs: dict[str, Any],
    ) -> None:
        rec = run.rec
        me = run.agent or rec["name"]
        self._open.get(rec["name"], set()).discard(me)
        outputs = rec.get("outputs")
        for tcid in _tool_call_ids(outputs):
            self._asked[tcid] = me
        self._queue_sends(me, end, outputs, step)
        gotos, update = _gotos(outputs)
        attrs = {**attrs, "node": rec["name"]}
        triggers = rec["metadata"].get("langgraph_triggers")
        if triggers is not None:
            attrs["triggers"] = list(triggers) if isinstance(triggers, list | tuple) else triggers
        if run.sender is not None:  # started by a Send: the sender spawned it
            self._spawn(run, run.sender, me, run.send_t, rec.get("inputs"), run.send_step)
        rid = rec["id"]
        graph = self._scope(rec.get("parent_id"))
        interrupted = error is not None and any(x in error for x in _INTERRUPT)
        if (
            run.tool_results
            and run.llm_children == 0
            and run.sender is None
            and not gotos
            and not interrupted
        ):
            # a tool executor (ToolNode): not an agent; its tool results feed the next step
            self._open.get(rec["name"], set()).discard(me)
            self.nodes.get(me, {})["tool_executor"] = True
            self._barrier(run, graph, me, step)
            if step is not None:
                self._closing.setdefault((graph, step), []).extend(
                    (r, "tool_result", None) for r in run.tool_results
                )
            return
        if not run.tool_results and run.llm_children == 0:
            self._from_messages(run, me, t, end, step)
            if run.tool_results and run.sender is None and not gotos and not interrupted:
                self.nodes.get(me, {})["tool_executor"] = True
                self._barrier(run, graph, me, step)
                if step is not None:
                    self._closing.setdefault((graph, step), []).extend(
                        (r, "tool_result", None) for r in run.tool_results
                    )
                return
        close_t = max(t, min(end, run.last_child_end)) if run.last_child_end else t
        close_dur = round(end - close_t, 9)
        closing: Event
        if interrupted:
            assert error is not None
            closing = Event(
                id=f"{rid}.interrupt",
                t=close_t,
                type="human_intervention",
                agent=me,
                dur=close_dur,
                step=step,
                content=error.split("Traceback (most recent call last)")[0].strip(),
                attrs={**attrs, "interrupt": True, "error": error},
            )
            error = None
        elif run.sender is not None and run.sender in self._acted:
            kind = "return" if me in self._spawned else "message"
            closing = Event(
                id=f"{rid}.{kind}",
                t=close_t,
                type=kind,  # type: ignore[arg-type]
                agent=me,
                dur=close_dur,
                from_=me,
                to=run.sender,
                step=step,
                content=_text(outputs),
                error=error,
                attrs=attrs,
            )
        elif gotos:
            target = gotos[0]
            first = self._acted.get(target)
            fresh = target != me and first is None
            closing = handover(
                f"{rid}.handoff",
                close_t,
                me,
                target,
                fresh,
                "delegate",
                dur=close_dur,
                step=step,
                content=_text(update),
                error=error,
                attrs={**attrs, "goto": gotos},
            )
            if fresh:
                self._spawned.add(target)
        else:
            closing = Event(
                id=f"{rid}.update",
                t=close_t,
                type="message",
                agent=me,
                dur=close_dur,
                from_=me,
                step=step,
                content=_text(outputs),
                error=error,
                attrs=attrs,
            )
        self._interrupted = interrupted
        self._updates[closing.id] = closing.content
        self._emit(closing, run)
        inner = [(k[1], v) for k, v in self._closing.items() if k[0] == rid]
        if inner:  # a subgraph: its last step's results are this node's update
            last = max(inner, key=lambda x: x[0])[1]
            for eid, _, _ in last:
                self._edge(eid, closing.id, "aggregate" if len(last) > 1 else "causal")
        if self._resume is not None and run.first_event is not None:
            self._edge(self._resume, run.first_event[1], "causal")
            self._resume = None
        if closing.type in ("spawn", "message") and closing.decision == "delegate" and closing.to:
            self._feed(
                closing.to, closing.id, close_t, "spawn" if closing.type == "spawn" else "message"
            )
        self._barrier(run, graph, me, step)
        if step is not None:
            self._closing.setdefault((graph, step), []).append(
                (closing.id, closing.type, closing.to)
            )
        self._last_node = (end, me, step)

    def finish(self) -> None:
        """The graph run ended: the root agent's ``stop`` decision, when it ended with an answer.

        Called once after the last run ended (rule 15). Not when the run failed or its last
        node was interrupted. ``content`` is the last
        node's state update (the graph's final write); the last step's closing events lead
        to it.
        """
        if self._stop_at is None:
            return
        run, end, error = self._stop_at
        self._stop_at = None
        end = max(end, self._last_end)
        if error is not None or self._interrupted or self.events == 0:
            return
        if run.rec["metadata"].get("langgraph_next"):  # a checkpoint with tasks still to run
            return
        rid = str(run.rec["id"])
        steps = [k[1] for k in self._closing if k[0] == rid]
        before = self._closing.get((rid, max(steps)), []) if steps else []
        answer = self._updates.get(before[-1][0]) if before else None
        agent = self.root or self.graph
        for eid, _, _ in before:
            self._feed(agent, eid, end, "aggregate" if len(before) > 1 else "causal")
        self._emit(
            Event(
                id=f"{rid}.stop",
                t=end,
                type="orchestrator_decision",
                agent=agent,
                decision="stop",
                content=answer,
                attrs={"run_id": rid, **({"answer": answer} if answer else {})},
            )
        )
