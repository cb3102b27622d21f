"""Hand-made traces: :class:`TraceBuilder` assigns ids, times and edges for you.

Each ``add`` call appends one event. ``after`` names the events it consumed; the edge type is
inferred from them (spawn, message, return, tool_dependency, aggregate, else causal) unless
given. By default an agent's events are chained with causal edges (an agent does one thing at a
time) and an event starts when everything it consumed has finished.

Example:
    >>> b = TraceBuilder(task_id="sum", topology="centralized")
    >>> s = b.spawn("lead", "w1", role="worker", dur=0.1)
    >>> call, res = b.tool("w1", "calc", after=[s], dur=2.0, content="1+1")
    >>> r = b.ret("w1", "lead", content="2", after=[res])
    >>> agg = b.aggregate("lead", [r], content="2")
    >>> tr = b.build(rewards={"team": 1.0})
    >>> [e.type for e in tr.events]
    ['spawn', 'tool_call', 'tool_result', 'return', 'aggregate']
    >>> [(e.src, e.dst, e.type) for e in tr.edges][:3]
    [('e1', 'e2', 'spawn'), ('e2', 'e3', 'tool_dependency'), ('e3', 'e4', 'causal')]
    >>> len(tr.edges)  # + the lead's own chain: spawn -> aggregate
    5
    >>> tr.costs["tool_calls"], tr.costs["wall_clock_s"]
    (1.0, 2.1)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from functools import reduce
from itertools import chain
from operator import add, attrgetter
from typing import Any

import msgspec

from orchestrace._numbers import as_int, as_real, is_finite, is_int
from orchestrace.errors import ConfigError
from orchestrace.trace.model import (
    SCHEMA_VERSION,
    Decision,
    Edge,
    EdgeType,
    Event,
    EventType,
    Topology,
    Trace,
)

__all__ = ["TraceBuilder", "default_costs"]

_INFER: dict[str, EdgeType] = {
    "spawn": EdgeType.SPAWN,
    "message": EdgeType.MESSAGE,
    "return": EdgeType.RETURN,
}

After = Iterable[str | tuple[str, EdgeType | str]]


def default_costs(events: Iterable[Event]) -> dict[str, float]:
    """Costs derived from events: tokens, wall_clock_s (makespan), tool_calls, messages, cost.

    Each total is one C-level pass, with the arithmetic of a loop over the events in order:
    integer token sums, the costs added one after another (``reduce``, not ``sum``, which
    compensates rounding from Python 3.12), the earliest start and the latest end.

    Example:
        >>> b = TraceBuilder(task_id="t")
        >>> _ = b.llm("a", tokens_in=3, tokens_out=4, dur=2.0, cost=0.5)
        >>> default_costs(b.events)["tokens"], default_costs(b.events)["wall_clock_s"]
        (7.0, 2.0)
    """
    evs = events if isinstance(events, list | tuple) else list(events)
    types = list(map(_get_type, evs))
    ts = list(map(_get_t, evs))
    tokens = sum(map(_get_tokens_in, evs)) + sum(map(_get_tokens_out, evs))
    money = reduce(add, map(_get_cost, evs), 0.0)
    t0 = min(chain((float("inf"),), ts))
    t1 = max(chain((0.0,), map(add, ts, map(_get_dur, evs))))
    return _costs_of_totals(tokens, money, types.count("tool_call"), types.count("message"), t0, t1)


_get_type, _get_t, _get_dur, _get_cost, _get_tokens_in, _get_tokens_out = map(
    attrgetter, ("type", "t", "dur", "cost", "tokens_in", "tokens_out")
)


def _costs_of_totals(
    tokens: int, money: float, tool_calls: int, messages: int, t0: float, t1: float
) -> dict[str, float]:
    """:func:`default_costs` from totals gathered elsewhere (a stream read batch by batch).

    Args:
        tokens: Sum of every event's ``tokens_in + tokens_out``.
        money: Sum of the events' ``cost``, added in event order.
        tool_calls: Number of ``tool_call`` events.
        messages: Number of ``message`` events.
        t0: Earliest start (``inf`` without events).
        t1: Latest end (``0.0`` without events).

    Example:
        >>> _costs_of_totals(10, 0.0, 1, 0, 1.0, 3.5)
        {'tokens': 10.0, 'wall_clock_s': 2.5, 'tool_calls': 1.0, 'messages': 0.0}
    """
    wall = round(t1 - t0, 9) if t1 >= t0 else 0.0
    out = {
        "tokens": float(tokens),
        "wall_clock_s": max(wall, 0.0),
        "tool_calls": float(tool_calls),
        "messages": float(messages),
    }
    if money:
        out["cost"] = money
    return out


def _check_values(eid: str, agent: Any, values: dict[str, Any]) -> None:
    """Refuse an agent that is not a name and numbers an event cannot hold (before adding it).

    numpy scalars are taken as the Python numbers they equal (``values`` is updated).
    """
    if not isinstance(agent, str) or not agent:
        raise ConfigError(f"event {eid!r}: agent must be a non-empty string, got {agent!r}")
    for name in ("t", "dur", "cost"):
        if name not in values:
            continue
        value = values[name]
        if not is_finite(value) or value < 0:
            raise ConfigError(
                f"event {eid!r}: {name} must be a finite number >= 0, got {value!r}"
                + (" (it starts when the events before it end)" if name == "t" else "")
            )
        values[name] = as_real(value)
    for name in ("tokens_in", "tokens_out"):
        if name not in values:
            continue
        value = values[name]
        if not is_int(value) or not 0 <= value < 2**63:
            raise ConfigError(
                f"event {eid!r}: {name} must be an integer from 0 to 2^63-1, got {value!r}"
            )
        values[name] = as_int(value)


def _member(enum: Any, value: Any, what: str) -> Any:
    """``enum(value)``, or a ConfigError listing the known values."""
    try:
        return enum(value)
    except ValueError:
        known = ", ".join(m.value for m in enum)
        raise ConfigError(f"unknown {what} {str(value)[:80]!r}; use one of: {known}") from None


class TraceBuilder:
    """Build a valid :class:`~orchestrace.trace.model.Trace` event by event.

    Args:
        task_id: Id of the task.
        trace_id: Id of the trace; by default a content hash computed at :meth:`build`.
        system: Name of the producing system.
        topology: Topology of the run.
        meta: Extra run information.
        chain: Add a causal edge from each agent's previous event (not for tool results).
    """

    def __init__(
        self,
        task_id: str = "task",
        trace_id: str | None = None,
        *,
        system: str | None = "orchestrace",
        topology: Topology | str | None = None,
        meta: Mapping[str, Any] | None = None,
        chain: bool = True,
    ) -> None:
        self.task_id = task_id
        self.trace_id = trace_id
        self.system = system
        self.topology = (
            _member(Topology, topology, "topology").value if topology is not None else None
        )
        self.meta = dict(meta or {})
        self.chain = chain
        self.events: list[Event] = []
        self.edges: list[Edge] = []
        self._by_id: dict[str, Event] = {}
        self._last: dict[str, str] = {}
        self._preds: dict[str, set[str]] = {}

    # ------------------------------------------------------------------ core
    def add(
        self,
        type: EventType | str,
        agent: str,
        *,
        after: After = (),
        edge: EdgeType | str | None = None,
        t: float | None = None,
        dur: float = 0.0,
        id: str | None = None,
        chain: bool | None = None,
        **fields: Any,
    ) -> str:
        """Append one event and its incoming edges; return its id.

        Args:
            type: Event type.
            agent: Producing agent.
            after: Ids of consumed events, or ``(id, edge_type)`` pairs.
            edge: Edge type for every plain id in ``after`` (inferred when ``None``).
            t: Start time; default: when the agent and everything consumed are done.
            dur: Duration in seconds.
            id: Event id; default ``e<n>``.
            chain: Override the builder's ``chain`` setting for this event.
            **fields: Other :class:`~orchestrace.trace.model.Event` fields (``to``, ``tool``...).

        Raises:
            ConfigError: An unknown event or edge type, ``after`` names an unknown event (or
                is a single string, not a list), or the id is taken.
        """
        etype = _member(EventType, type, "event type")
        if isinstance(after, str):
            raise ConfigError(
                f"after= takes a list of event ids, got the string {after!r}: "
                f"write after=[{after!r}]"
            )
        eid = id if id is not None else f"e{len(self.events) + 1}"
        if eid in self._by_id:
            raise ConfigError(f"event id {eid!r} is already used; pass a unique id=")
        deps: list[tuple[str, EdgeType]] = []
        for item in after:
            src, kind = (
                (item, None)
                if isinstance(item, str)
                else (item[0], _member(EdgeType, item[1], "edge type"))
            )
            if src not in self._by_id:
                raise ConfigError(f"after= names unknown event {src!r}; add that event first")
            if kind is None:
                kind = (
                    _member(EdgeType, edge, "edge type")
                    if edge is not None
                    else self._infer(self._by_id[src], etype)
                )
            deps.append((src, kind))
        use_chain = self.chain if chain is None else chain
        prev = self._last.get(agent)
        # chain to the agent's previous event unless a consumed event already follows it
        if (
            use_chain
            and etype != "tool_result"
            and prev is not None
            and all(src != prev and prev not in self._preds.get(src, ()) for src, _ in deps)
        ):
            deps.insert(0, (prev, EdgeType.CAUSAL))
        if t is None:
            t = max((self._by_id[s].end for s, _ in deps), default=0.0)
            if prev is not None:
                t = max(t, self._by_id[prev].end)
            t = round(t, 9)
        if fields.get("decision") is not None:
            fields["decision"] = _member(Decision, fields["decision"], "decision").value
        fields = {"t": t, "dur": dur, **fields}
        _check_values(eid, agent, fields)
        ev = Event(id=eid, type=etype.value, agent=agent, **fields)
        self.events.append(ev)
        self._by_id[eid] = ev
        if etype != "tool_result" or ev.tool != agent:
            self._last[agent] = eid
        self.edges.extend(Edge(src, eid, kind.value) for src, kind in deps)
        self._preds[eid] = {src for src, _ in deps}
        return eid

    @staticmethod
    def _infer(src: Event, dst_type: EventType) -> EdgeType:
        if dst_type == "aggregate":
            return EdgeType.AGGREGATE
        if src.type == "tool_call" and dst_type == "tool_result":
            return EdgeType.TOOL_DEPENDENCY
        return _INFER.get(src.type, EdgeType.CAUSAL)

    def edge(self, src: str, dst: str, type: EdgeType | str = EdgeType.CAUSAL) -> None:
        """Add an edge between two existing events."""
        for x in (src, dst):
            if x not in self._by_id:
                raise ConfigError(f"edge names unknown event {x!r}; add that event first")
        self.edges.append(Edge(src, dst, EdgeType(type).value))
        self._preds.setdefault(dst, set()).add(src)

    # ------------------------------------------------------------------ conveniences
    def spawn(self, parent: str, child: str, *, role: str | None = None, **kw: Any) -> str:
        """``parent`` spawns ``child`` (an O1 decision). The child's role goes in ``role``."""
        kw.setdefault("decision", "spawn")
        return self.add(EventType.SPAWN, parent, to=child, role=role, **kw)

    def message(self, sender: str, to: str, content: str | None = None, **kw: Any) -> str:
        """``sender`` sends a message to ``to`` (O3 when sent by an orchestrator)."""
        return self.add(EventType.MESSAGE, sender, from_=sender, to=to, content=content, **kw)

    def delegate(self, parent: str, child: str, subtask: str | None = None, **kw: Any) -> str:
        """``parent`` hands ``subtask`` to ``child`` (an O2 decision)."""
        kw.setdefault("decision", "delegate")
        return self.message(parent, child, subtask, **kw)

    def tool(
        self,
        agent: str,
        tool: str,
        *,
        content: str | None = None,
        result: str | None = None,
        dur: float = 0.0,
        error: str | None = None,
        **kw: Any,
    ) -> tuple[str, str]:
        """``agent`` calls ``tool`` for ``dur`` seconds; returns ``(call_id, result_id)``."""
        call = self.add(EventType.TOOL_CALL, agent, tool=tool, content=content, dur=dur, **kw)
        res = self.add(
            EventType.TOOL_RESULT, tool, tool=tool, after=[call], content=result, error=error
        )
        return call, res

    def llm(self, agent: str, model: str = "sim", **kw: Any) -> str:
        """``agent`` makes one LLM generation (tokens and ``dur`` as keyword arguments)."""
        return self.add(EventType.LLM_CALL, agent, tool=model, **kw)

    def ret(self, agent: str, to: str, content: str | None = None, **kw: Any) -> str:
        """``agent`` returns its result to ``to`` (its parent)."""
        return self.add(EventType.RETURN, agent, from_=agent, to=to, content=content, **kw)

    def aggregate(
        self, agent: str, inputs: Iterable[str], content: str | None = None, **kw: Any
    ) -> str:
        """``agent`` combines the events ``inputs`` (an O4 decision)."""
        kw.setdefault("decision", "aggregate")
        after = list(kw.pop("after", ())) + list(inputs)
        return self.add(EventType.AGGREGATE, agent, after=after, content=content, **kw)

    def decide(self, agent: str, decision: Decision | str, **kw: Any) -> str:
        """Record an orchestrator decision (O1-O5) that has no other event of its own."""
        return self.add(
            EventType.ORCHESTRATOR_DECISION, agent, decision=Decision(decision).value, **kw
        )

    def stop(self, agent: str, reason: str | None = None, **kw: Any) -> str:
        """Record the stop decision (O5) with its reason."""
        return self.decide(agent, Decision.STOP, content=reason, **kw)

    # ------------------------------------------------------------------ finish
    def build(
        self,
        *,
        rewards: Mapping[str, float] | None = None,
        costs: Mapping[str, float] | None = None,
        metrics: Mapping[str, float] | None = None,
    ) -> Trace:
        """Return the trace. Costs not given are derived from the events."""
        all_costs = default_costs(self.events)
        all_costs.update({k: float(v) for k, v in (costs or {}).items()})
        trace_id = self.trace_id
        if trace_id is None:
            digest = hashlib.blake2b(
                msgspec.json.encode([self.task_id, self.events, self.edges]), digest_size=8
            )
            trace_id = f"{self.task_id}-{digest.hexdigest()}"
        return Trace(
            trace_id=trace_id,
            task_id=self.task_id,
            events=tuple(self.events),
            edges=tuple(self.edges),
            rewards={k: float(v) for k, v in (rewards or {}).items()},
            costs=all_costs,
            system=self.system,
            topology=self.topology,
            metrics={k: float(v) for k, v in (metrics or {}).items()},
            schema_version=SCHEMA_VERSION,
            meta=self.meta,
        )
