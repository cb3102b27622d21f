"""The OTel span tree to orchestrace events and edges (rules of ``docs/import-otel.md``).

Agent spans become the agents' own events, sub-agent invocations ``spawn`` + ``return``,
handoffs ``message`` with the ``delegate`` decision, tool spans ``tool_call`` + ``tool_result``,
LLM spans ``llm_call``; the tree and the timing of siblings give the edges, span links the
extra edges that keep the graph acyclic.

Example:
    >>> _reaches([[1], [2], []], 0, 2), _reaches([[1], [], []], 2, 0)
    (True, False)
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from typing import Any

import msgspec

from orchestrace.errors import _short
from orchestrace.io.otel._keys import (
    _COST,
    _HANDOFF_PREFIX,
    _HANDOFF_SOURCE,
    _HANDOFF_TARGET,
    _MODEL,
    _OI_KIND,
    _OP,
    _OUTPUT,
    _TOKENS_IN,
    _TOKENS_OUT,
    _TOOL_ARGS,
    _TOOL_RESULT,
    _agent_name,
    _classify,
    _count,
    _first,
    _tool_name,
)
from orchestrace.io.otel._read import OtelSpan
from orchestrace.io.otel._tree import _Node, _SpanTree
from orchestrace.trace.build import default_costs
from orchestrace.trace.model import Edge, Event, Trace


class _Mapper(_SpanTree):
    """Maps the spans of one OTel trace to an orchestrace trace."""

    # -------------------------------------------------------------- events
    def add_event(self, key_t: int, n: _Node, exit: bool, **fields: Any) -> str:
        """Record one event; events are ordered by time, then as the span tree is walked."""
        eid: str = fields["id"]
        t = round((key_t - self.t0) / 1e9, 9)
        fields["t"] = max(t, 0.0)
        order = (fields["t"], n.last, 1, -n.depth) if exit else (fields["t"], n.pre, 0, 0)
        self.events[eid] = (order, fields)
        return eid

    def otel_attrs(self, sp: OtelSpan, used: set[str]) -> dict[str, Any]:
        kept = {k: v for k, v in sp.attrs.items() if k not in used}
        keys = self.attr_keys
        for k in kept:
            keys[k] = keys.get(k, 0) + 1
        out: dict[str, Any] = {"span_id": sp.span_id, "name": sp.name}
        if sp.parent_id:
            out["parent_span_id"] = sp.parent_id
        out["start_time_unix_nano"] = sp.start
        if sp.end is not None:
            out["end_time_unix_nano"] = sp.end
        if sp.kind != "INTERNAL":
            out["kind"] = sp.kind
        if sp.status != "UNSET":
            out["status"] = {"code": sp.status}
            if sp.status_message:
                out["status"]["message"] = sp.status_message
        if kept:
            out["attributes"] = kept
        if sp.events:
            out["events"] = sp.events
            self.keep("span event", len(sp.events))
        if sp.links:
            out["links"] = [
                {"trace_id": t, "span_id": s, **({"attributes": a} if a else {})}
                for t, s, a in sp.links
            ]
        if sp.extra:
            out["fields"] = sp.extra
        if sp.resource != self.resource:
            out["resource"] = sp.resource
        if sp.scope != self.scope:
            out["scope"] = sp.scope
        return {"otel": out}

    def error_of(self, sp: OtelSpan) -> str | None:
        if sp.status != "ERROR":
            return None
        return sp.status_message or "error"

    def own_events(self, n: _Node) -> None:
        """Create the entry (and exit) events of one span.

        While recording live, a span still open has only its entry event: its return, result or
        stop is written once it ends.
        """
        self._own_events(n)
        still_open = (n.sp is None and any(c.sp and c.sp.end is None for c in n.children)) or (
            n.sp is not None and n.sp.end is None
        )
        if self.live and still_open:
            for eid in n.exits:
                if eid != n.entry:
                    del self.events[eid]
            n.exits = [n.entry] if n.entry is not None else []

    def _own_events(self, n: _Node) -> None:
        sp = n.sp
        parent_agent = n.parent.agent if n.parent is not None else n.agent
        first_child = n.children[0].start if n.children else n.end
        lead_dur = max(first_child - n.start, 0) / 1e9
        if sp is None:  # virtual root: the stop at the end
            n.exits = [
                self.add_event(
                    n.end,
                    n,
                    True,
                    id="stop",
                    type="orchestrator_decision",
                    agent=n.ident,
                    decision="stop",
                )
            ]
            return
        used: set[str] = set()
        err = self.error_of(sp)
        sid = sp.span_id
        if n.role == "root-agent":
            key, _ = _agent_name(sp)
            used.update(k for k in (key, _OP, _OI_KIND) if k)
            okey, out = _first(sp.attrs, _OUTPUT)
            attrs = self.otel_attrs(sp, used | ({okey} if isinstance(out, str) and okey else set()))
            if isinstance(out, str):
                attrs["answer"] = out
            n.exits = [
                self.add_event(
                    n.end,
                    n,
                    True,
                    id=f"{sid}.stop",
                    type="orchestrator_decision",
                    agent=n.ident,
                    decision="stop",
                    content=out if isinstance(out, str) else None,
                    error=err,
                    attrs=attrs,
                )
            ]
            return
        if n.role == "agent":
            key, _ = _agent_name(sp)
            used.update(k for k in (key, _OP, _OI_KIND) if k)
            okey, out = _first(sp.attrs, _OUTPUT)
            if isinstance(out, str) and okey:
                used.add(okey)
            n.entry = self.add_event(
                n.start,
                n,
                False,
                id=sid,
                type="spawn",
                agent=parent_agent,
                to=n.ident,
                decision="spawn",
                attrs=self.otel_attrs(sp, used),
            )
            n.exits = [
                self.add_event(
                    n.end,
                    n,
                    True,
                    id=f"{sid}.return",
                    type="return",
                    agent=n.ident,
                    from_=n.ident,
                    to=parent_agent,
                    content=out if isinstance(out, str) else None,
                    error=err,
                )
            ]
            return
        if n.role == "tool":
            key, tool = _tool_name(sp)
            used.update(k for k in (key, _OP, _OI_KIND) if k)
            akey, args = _first(sp.attrs, _TOOL_ARGS)
            rkey, res = _first(sp.attrs, _TOOL_RESULT)
            if isinstance(args, str) and akey:
                used.add(akey)
            if isinstance(res, str) and rkey:
                used.add(rkey)
            n.entry = self.add_event(
                n.start,
                n,
                False,
                id=sid,
                type="tool_call",
                agent=n.agent,
                tool=tool,
                dur=lead_dur,
                content=args if isinstance(args, str) else None,
                attrs=self.otel_attrs(sp, used),
            )
            n.exits = [
                self.add_event(
                    n.end,
                    n,
                    True,
                    id=f"{sid}.result",
                    type="tool_result",
                    agent=tool,
                    tool=tool,
                    content=res if isinstance(res, str) else None,
                    error=err,
                )
            ]
            return
        fields: dict[str, Any] = {"id": sid, "agent": n.agent, "dur": lead_dur, "error": err}
        if n.role == "llm":
            mkey, model = _first(sp.attrs, _MODEL)
            ikey, tin = _first(sp.attrs, _TOKENS_IN)
            okey, tout = _first(sp.attrs, _TOKENS_OUT)
            ckey, cost = _first(sp.attrs, _COST)
            used.update(k for k in (_OP, _OI_KIND) if k in sp.attrs)
            if isinstance(model, str) and mkey:
                used.add(mkey)
                fields["tool"] = model
            for k, v, name in ((ikey, tin, "tokens_in"), (okey, tout, "tokens_out")):
                c = _count(v)
                if k and c is not None:
                    used.add(k)
                    fields[name] = c
            if (
                ckey
                and isinstance(cost, int | float)
                and not isinstance(cost, bool)
                and math.isfinite(cost)
                and cost >= 0
            ):
                used.add(ckey)
                fields["cost"] = float(cost)
            fields["type"] = "llm_call"
        elif n.role == "handoff":
            target = self.handoff_target(sp)
            used.update(k for k in (_OP, _OI_KIND, _HANDOFF_TARGET) if k in sp.attrs)
            if _HANDOFF_SOURCE in sp.attrs:
                used.add(_HANDOFF_SOURCE)
            key, tool = _tool_name(sp)
            if key:
                used.add(key)
                fields["tool"] = tool
            fields.update(type="message", from_=n.agent, to=target, decision="delegate")
        elif n.role == "guardrail":
            used.update(k for k in (_OP, _OI_KIND) if k in sp.attrs)
            fields["type"] = "safety_event"
        elif n.role == "create":
            key, created = _agent_name(sp)
            used.update(k for k in (key, _OP) if k)
            fields.update(type="spawn", to=created, decision="spawn")
        else:
            used.update(k for k in (_OP, _OI_KIND) if k in sp.attrs and _classify(sp)[1] is None)
            fields["type"] = "orchestrator_decision"
        fields["attrs"] = self.otel_attrs(sp, used)
        n.entry = self.add_event(n.start, n, False, **fields)
        n.exits = [n.entry]

    def handoff_target(self, sp: OtelSpan) -> str:
        t = sp.attrs.get(_HANDOFF_TARGET)
        if isinstance(t, str) and t:
            return t
        out = sp.attrs.get("output.value")
        if isinstance(out, str) and out:
            return out
        return sp.name[len(_HANDOFF_PREFIX) :]

    # -------------------------------------------------------------- edges
    def link_children(self, n: _Node) -> None:
        """Edges of one span: entry -> children (by timing of siblings) -> exit."""
        entry = n.entry
        entry_type = self.events[entry][1]["type"] if entry else None
        running: list[tuple[int, int, _Node]] = []
        frontier: list[tuple[int, int, _Node]] = []
        latest: list[Any] = [-1, None]  # the latest start of a finished sibling, and that sibling

        def settle(limit: int) -> None:
            """Siblings done by ``limit`` join the frontier; those a later one followed leave."""
            while running and running[0][0] <= limit:
                item = heapq.heappop(running)
                heapq.heappush(frontier, item)
                if item[2].start >= latest[0]:
                    latest[0], latest[1] = item[2].start, item[2]
            while frontier and frontier[0][0] <= latest[0] and frontier[0][2] is not latest[1]:
                heapq.heappop(frontier)

        for k, c in enumerate(n.children):
            settle(c.start)
            if c.entry is None:  # cannot happen: every span below the root has an entry
                continue
            if frontier:
                self.join([x[2] for x in frontier], c.entry)
            elif entry is not None:
                kind = "spawn" if entry_type == "spawn" else "causal"
                self.edges.append((entry, c.entry, kind))
            heapq.heappush(running, (c.end, k, c))
        own_exit = n.exits[0] if n.exits and n.exits[0] != entry else None
        settle(n.end)
        done = [x[2] for x in frontier]
        if own_exit is not None:
            if done:
                self.join(done, own_exit)
            elif entry is not None:
                kinds = {"tool_call": "tool_dependency", "spawn": "spawn"}
                self.edges.append((entry, own_exit, kinds.get(entry_type or "", "causal")))
        elif done and n.sp is not None:
            n.exits = [e for d in done for e in d.exits]
        if n.role in ("agent", "root-agent") or n.sp is None:
            if n.children:
                n.first_own = n.children[0].entry
            else:
                n.first_own = own_exit

    def join(self, preds: list[_Node], dst: str) -> None:
        exits = [e for p in preds for e in p.exits]
        returns = sum(1 for e in exits if self.events[e][1]["type"] == "return")
        for e in exits:
            if self.events[e][1]["type"] == "return":
                kind = "aggregate" if returns > 1 else "return"
            else:
                kind = "causal"
            self.edges.append((e, dst, kind))

    def handoffs(self, order: list[_Node]) -> None:
        targets: dict[str, list[tuple[int, int, _Node]]] = {}
        for n in order:
            if n.role == "agent":
                targets.setdefault(n.base, []).append((n.start, n.pre, n))
        for lst in targets.values():
            lst.sort(key=lambda x: (x[0], x[1]))
        for n in order:
            if n.role != "handoff" or n.entry is None:
                continue
            fields = self.events[n.entry][1]
            name = fields["to"]
            lst = targets.get(name, [])
            i = bisect_left(lst, (n.start, -1))
            found = None
            ancestors = set()
            p = n.parent
            while p is not None:
                ancestors.add(id(p))
                p = p.parent
            for _, _, cand in lst[i:]:
                if id(cand) not in ancestors:
                    found = cand
                    break
            if found is None or found.first_own is None:
                assert n.sp is not None
                self.problem(
                    "handoff-target",
                    f"handoff {n.sp.span_id} to {_short(name)!r}: no agent span of that name "
                    "starts after it",
                    "kept as a delegate message without an edge; export the target agent's spans",
                    n.sp,
                )
                continue
            fields["to"] = found.ident
            if n.sp is not None:
                self.extra_spans[len(self.extra_edges)] = n.sp
            self.extra_edges.append((n.entry, found.first_own, "message", "handoff"))

    def links(self, by_span: dict[str, _Node], trace_id: str) -> None:
        for n in by_span.values():
            sp = n.sp
            if sp is None or not sp.links or n.entry is None:
                continue
            for tid, sid, _ in sp.links:
                if tid != trace_id:
                    self.keep("link to another trace")
                    continue
                target = by_span.get(sid)
                if target is None:
                    self.problem(
                        "dangling-link",
                        f"span {sp.span_id} links to span {sid}, which is not in the input",
                        "the link is kept in attrs without an edge",
                        sp,
                    )
                    continue
                if target.end <= n.start:
                    srcs = target.exits
                elif target.start <= n.start and target.entry is not None:
                    srcs = [target.entry]
                else:
                    self.problem(
                        "link-backwards",
                        f"span {sp.span_id} links to span {sid}, which starts after it",
                        "the link is kept in attrs without an edge (an event cannot depend on a "
                        "later one)",
                        sp,
                    )
                    continue
                for s in srcs:
                    if s != n.entry:
                        self.extra_spans[len(self.extra_edges)] = sp
                        self.extra_edges.append((s, n.entry, "causal", f"link {sp.span_id}->{sid}"))

    # -------------------------------------------------------------- the trace
    def run(self) -> Trace:
        root, nodes = self.build_tree()
        # the trace's resource and scope: its first span's (a span with others keeps its own)
        first_span = nodes[0].sp
        assert first_span is not None
        self.resource, self.scope = first_span.resource, first_span.scope
        order = self.walk(root)
        self.t0 = min(n.start for n in order)
        self.agents(root, order)
        for n in order:
            self.own_events(n)
        for n in reversed(order):
            self.link_children(n)
        self.handoffs(order)
        by_span = {n.sp.span_id: n for n in nodes if n.sp is not None}
        trace_id = nodes[0].sp.trace_id if nodes[0].sp is not None else ""
        self.links(by_span, trace_id)
        events = self.finish_events(root.ident)
        edges = self.finish_edges(events)
        first = nodes[0].sp
        assert first is not None
        service = self.resource.get("service.name")
        system = (
            service
            if isinstance(service, str) and service and not service.startswith("unknown_service")
            else (self.scope.get("name") or "opentelemetry")
        )
        top = root.sp if root.sp is not None else root.children[0].sp
        assert top is not None
        meta: dict[str, Any] = {
            "source": {
                "format": self.fmt,
                "trace_id": trace_id,
                "root_span_id": top.span_id,
                "start_time_unix_nano": self.t0,
            }
        }
        if self.resource:
            meta["source"]["resource"] = self.resource
        if self.scope:
            meta["source"]["scope"] = self.scope
        self._summarise()
        for k, c in self.attr_keys.items():
            self.keep(f"attribute {k.split('.', 1)[0]}.*" if "." in k else f"attribute {k}", c)
        return Trace(
            trace_id=trace_id,
            task_id=top.name or "otel",
            events=tuple(events),
            edges=tuple(edges),
            costs=default_costs(events),
            system=str(system),
            meta=meta,
        )

    def finish_events(self, root: str) -> list[Event]:
        """Order the events; give them steps (rule 16) and roles (rule 20)."""
        ordered = sorted(self.events.values(), key=lambda x: x[0])
        spawners = {f["agent"] for _, f in ordered if f["type"] == "spawn"}

        def role(agent: str) -> str:
            if agent == root:
                return "orchestrator"
            return "manager" if agent in spawners else "worker"

        steps: dict[str, int] = {}
        out: list[Event] = []
        for _, f in ordered:
            if f["type"] != "tool_result":
                agent = f["agent"]
                if f["type"] == "llm_call":
                    s = steps.get(agent, -1) + 1
                    steps[agent] = s
                else:
                    s = max(steps.get(agent, 0), 0)
                f["step"] = s
                # a spawn names the role of the agent it starts, as the runtime records it
                f["role"] = role(f["to"] if f["type"] == "spawn" and f.get("to") else agent)
            clean = {k: v for k, v in f.items() if v is not None}
            out.append(Event(**clean))
        # an agent invoked again is delegated to, not spawned anew
        seen: set[str] = set()
        for i, e in enumerate(out):
            if e.type == "spawn" and e.to is not None:
                if e.to in seen:
                    out[i] = _replace(e, decision="delegate")
                seen.add(e.to)
        return out

    def finish_edges(self, events: list[Event]) -> list[Edge]:
        pos = {e.id: i for i, e in enumerate(events)}
        edges = [Edge(s, d, k) for s, d, k in self.edges]  # type: ignore[arg-type]
        if self.extra_edges:
            edges += self.checked_extra(events, edges)
        edges.sort(key=lambda e: (pos[e.dst], pos[e.src]))
        return edges

    def checked_extra(self, events: list[Event], edges: list[Edge]) -> list[Edge]:
        """Handoff and link edges that do not close a causal cycle."""
        extra = list(self.extra_edges)
        # add extra edges (handoffs, links) that do not close a causal cycle
        idx = {e.id: i for i, e in enumerate(events)}
        succ: list[list[int]] = [[] for _ in events]
        for e in edges:
            succ[idx[e.src]].append(idx[e.dst])
        kept: list[Edge] = []
        for k, (src, dst, kind, why) in enumerate(extra):
            if _reaches(succ, idx[dst], idx[src]):
                self.problem(
                    "causal-cycle",
                    f"{why} from event {src} to event {dst} would close a causal cycle",
                    "the edge was left out (the link stays in attrs); check the span links",
                    self.extra_spans.get(k),  # located at the span that carries the link
                    dst,
                )
                continue
            succ[idx[src]].append(idx[dst])
            kept.append(Edge(src, dst, kind))  # type: ignore[arg-type]
        return kept


def _reaches(succ: list[list[int]], a: int, b: int) -> bool:
    if a == b:
        return True
    seen = {a}
    stack = [a]
    while stack:
        for v in succ[stack.pop()]:
            if v == b:
                return True
            if v not in seen:
                seen.add(v)
                stack.append(v)
    return False


def _replace(e: Event, **changes: Any) -> Event:
    return msgspec.structs.replace(e, **changes)
