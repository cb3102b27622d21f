"""The typed trace model: :class:`Trace`, :class:`Event`, :class:`Edge` and their enums.

An orchestration trace is a temporal interaction graph. Events are what agents did (spawn,
message, tool call, return, aggregate, orchestrator decisions, LLM calls); edges say which event
consumed which. Records are frozen ``msgspec`` structs: decoding a 1,000,000-event JSON file into
them is several times faster than pydantic v2 (see ``benchmarks/bench_decode.py``). Enumerated
fields hold plain strings (``Literal`` types, validated on decode); the ``StrEnum`` classes
(defined in :mod:`orchestrace.trace.enums`, re-exported here) name the allowed values and
compare equal to them.

The records own their compiled view: :attr:`Trace.graph` builds a
:class:`~orchestrace.trace.graph.TraceGraph` on first use and caches it. The dependency runs
one way, model to graph: the graph module compiles anything shaped like these records (its
structural protocols) and never imports this module.

Example:
    >>> from orchestrace.trace.model import Event, Edge, Trace, EventType
    >>> e1 = Event(id="e1", t=0.0, type=EventType.SPAWN, agent="lead", to="w1", dur=0.5)
    >>> e2 = Event(id="e2", t=0.5, type="return", agent="w1", to="lead", dur=2.0)
    >>> tr = Trace(trace_id="t1", task_id="demo", events=(e1, e2),
    ...            edges=(Edge("e1", "e2", "spawn"),))
    >>> tr.events[1].type == "return"
    True
    >>> tr.n_events
    2
"""

from __future__ import annotations

import reprlib
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from orchestrace.trace.enums import (
    CreditUnit,
    Decision,
    DecisionName,
    EdgeType,
    EdgeTypeName,
    EventType,
    EventTypeName,
    Topology,
    TopologyName,
)
from orchestrace.trace.graph import TraceGraph

if TYPE_CHECKING:
    from orchestrace.trace._tables import TraceTables

__all__ = [
    "MAX_INT",
    "SCHEMA_VERSION",
    "CreditUnit",
    "Decision",
    "DecisionName",
    "Edge",
    "EdgeType",
    "EdgeTypeName",
    "Event",
    "EventType",
    "EventTypeName",
    "Topology",
    "TopologyName",
    "Trace",
]

#: Version of the native trace format. Readers accept any ``1.x``.
SCHEMA_VERSION = "1.0"


NonNegFloat = Annotated[float, msgspec.Meta(ge=0)]
#: Largest integer a count or step may hold (the int64 columns of the graph and Parquet).
MAX_INT = 2**63 - 1
NonNegInt = Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)]
NonEmptyStr = Annotated[str, msgspec.Meta(min_length=1)]


class Event(
    msgspec.Struct,
    frozen=True,
    omit_defaults=True,
    forbid_unknown_fields=True,
    gc=False,
    rename={"from_": "from"},
):
    """One thing an agent did, at time ``t`` for ``dur`` seconds.

    Attributes:
        id: Unique within the trace.
        t: Start time in seconds from the trace start (virtual or wall clock), >= 0.
        type: What happened: one of :class:`EventType` (stored as the plain string).
        agent: The agent (or tool, for ``tool_result``) that produced the event.
        dur: Duration in seconds (the weight used by the critical path).
        role: The agent's role, e.g. ``"worker"``.
        from_: Sender of a message or return (``"from"`` in JSON).
        to: Receiver of a message, return or delegation; the child of a spawn.
        tool: Tool name of a ``tool_call``/``tool_result``; the model of an ``llm_call``.
        decision: Which orchestration sub-decision (:class:`Decision`, O1-O5) it enacts, if any.
        step: Agent-local step (LLM turn) the event belongs to; events of one step run together.
        content: Inline content (message text, tool output, answer).
        content_ref: Pointer or hash of content kept elsewhere.
        trusted: Whether the content comes from a trusted source.
        tokens_in: Prompt tokens consumed.
        tokens_out: Completion tokens produced.
        cost: Monetary or abstract cost.
        error: Set when the action failed (tool error, agent exception, timeout).
        attrs: Anything else, JSON-serialisable.
    """

    id: NonEmptyStr
    t: NonNegFloat
    type: EventTypeName
    agent: NonEmptyStr
    dur: NonNegFloat = 0.0
    role: str | None = None
    from_: str | None = None
    to: str | None = None
    tool: str | None = None
    decision: DecisionName | None = None
    step: NonNegInt | None = None
    content: str | None = None
    content_ref: str | None = None
    trusted: bool | None = None
    tokens_in: NonNegInt = 0
    tokens_out: NonNegInt = 0
    cost: NonNegFloat = 0.0
    error: str | None = None
    attrs: dict[str, Any] | None = None

    @property
    def end(self) -> float:
        """``t + dur``."""
        return self.t + self.dur

    @property
    def tokens(self) -> int:
        """``tokens_in + tokens_out``."""
        return self.tokens_in + self.tokens_out

    def __repr__(self) -> str:
        """One bounded line: the fields that are set, long texts cut (content: its length).

        Example:
            >>> Event(id="e1", t=0.0, type="message", agent="a", content="x" * 10**6)
            Event(id='e1', t=0.0, type='message', agent='a', content='x...x' (1000000 chars))
        """
        return _struct_repr(self)


class Edge(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A dependency: event ``dst`` consumed (or followed) event ``src``.

    Example:
        >>> Edge("e1", "e2", "causal").type == "causal"
        True
    """

    src: NonEmptyStr
    dst: NonEmptyStr
    type: EdgeTypeName

    def __repr__(self) -> str:
        """One bounded line (long ids are cut)."""
        return _struct_repr(self)


class Trace(msgspec.Struct, frozen=True, forbid_unknown_fields=True, dict=True):
    """An orchestration trace: events, edges, rewards, costs and metrics of one run.

    Attributes:
        trace_id: Unique id of this run.
        task_id: Id of the task the run solved.
        events: The events, in recording order.
        edges: Dependencies between events; their causal part is a DAG.
        rewards: Reward channels, e.g. ``{"team": 1.0}``.
        costs: At least ``tokens`` and ``wall_clock_s``; also ``tool_calls``, ``messages``.
        system: The system that produced the trace.
        topology: How the agents were organised.
        metrics: Benchmark metrics, e.g. ``task_success``.
        schema_version: Native format version (always written).
        meta: Anything else about the run (config, seed, task spec), JSON-serialisable.
    """

    trace_id: NonEmptyStr
    task_id: NonEmptyStr
    events: tuple[Event, ...]
    edges: tuple[Edge, ...] = ()
    rewards: dict[str, float] = {}
    costs: dict[str, float] = {}
    system: str | None = None
    topology: TopologyName | None = None
    metrics: dict[str, float] = {}
    schema_version: str = SCHEMA_VERSION
    meta: dict[str, Any] = {}

    @property
    def n_events(self) -> int:
        """Number of events."""
        return len(self.events)

    @cached_property
    def graph(self) -> TraceGraph:
        """The compiled, array-backed graph of this trace (built once, then cached)."""
        return TraceGraph.from_trace(self)

    def event(self, event_id: str) -> Event:
        """Return the event with id ``event_id``.

        Raises:
            KeyError: No event has that id.
        """
        idx = self.graph.index_of(event_id)
        return self.events[idx]

    def replace(self, **changes: Any) -> Trace:
        """Return a copy with ``changes`` applied (e.g. ``rewards={...}``)."""
        return msgspec.structs.replace(self, **changes)

    @property
    def decoded(self) -> bool:
        """``True`` when every field was type- and range-checked while decoding.

        Loaders set it; a trace built in Python (whose fields the constructor does not
        check) has it ``False``, so ``check_trace`` re-checks types and numbers.
        """
        return bool(self.__dict__.get("_decoded", False))

    def _mark_decoded(self) -> Trace:
        self.__dict__["_decoded"] = True
        return self

    def _mark_writable(self) -> Trace:
        """Note that every value fits its field and a file holds it exactly.

        Set after the writers' check (``orchestrace.io._writable``), or by a producer whose
        values are typed and finite by construction (``generate_trace``).
        """
        self.__dict__["_writable"] = True
        return self

    @property
    def _writable(self) -> bool:
        return bool(self.__dict__.get("_writable", False))

    # ------------------------------------------------------------------ views
    def __repr__(self) -> str:
        """One line: ids, sizes, agent count and topology (never the events themselves).

        Example:
            >>> Trace(trace_id="t1", task_id="demo", events=(
            ...     Event(id="e1", t=0.0, type="spawn", agent="lead", to="w1"),))
            Trace(trace_id='t1', task_id='demo', events=1, edges=0, agents=2, topology=None)
        """
        ev = self.events
        agents = {e.agent for e in ev if e.type != "tool_result"}
        agents.update(e.to for e in ev if e.type == "spawn" and e.to is not None)
        return (
            f"Trace(trace_id={_cut(self.trace_id)!r}, task_id={_cut(self.task_id)!r}, "
            f"events={len(ev)}, edges={len(self.edges)}, agents={len(agents)}, "
            f"topology={_cut(self.topology)!r})"
        )

    def _repr_html_(self) -> str:
        """Jupyter's view: a summary table and a mini-timeline (bounded, escaped HTML)."""
        from orchestrace.trace._html import trace_html  # noqa: PLC0415  keeps `import orchestrace` light (loaded on first use)

        return trace_html(self)

    def to_arrow(self) -> TraceTables:
        """The events and edges as ``pyarrow.Table`` objects, as :meth:`to_pandas` lays out.

        The columns are those of a Parquet dataset's ``events`` and ``edges`` tables
        (``attrs`` as JSON text), so tables of several traces concatenate.

        Example:
            >>> from orchestrace.trace.generate import generate_trace
            >>> events, edges = generate_trace(agents=3, steps=20, seed=0).to_arrow()
            >>> events.num_rows, events.column_names[:5]
            (20, ['trace_id', 'id', 't', 'type', 'agent'])
        """
        from orchestrace.trace._tables import to_arrow  # noqa: PLC0415  import cycle: orchestrace.trace._tables imports this module

        return to_arrow(self)

    def to_pandas(self) -> TraceTables:
        """The events and edges as pandas DataFrames: ``events, edges = trace.to_pandas()``.

        One row per event (columns ``trace_id``, then every :class:`Event` field, ``from``
        for ``from_``) and per edge (``trace_id, src, dst, type``), in recording order.
        ``attrs`` holds the dicts; ``step`` (``Int64``) and ``trusted`` (``boolean``) are
        nullable. Needs pandas (``pip install 'orchestrace[viewer]'``).

        Example:
            >>> from orchestrace.trace.generate import generate_trace
            >>> tr = generate_trace(agents=3, steps=40, seed=0)
            >>> tables = tr.to_pandas()
            >>> busy = tables.events.groupby("agent")["dur"].sum()
            >>> len(tables.edges) == len(tr.edges), bool(busy.idxmax() in busy.index)
            (True, True)
            >>> tables.events[tables.events.type == "spawn"][["agent", "to"]].shape[1]
            2
        """
        from orchestrace.trace._tables import to_pandas  # noqa: PLC0415  import cycle: orchestrace.trace._tables imports this module

        return to_pandas(self)


def _cut(text: str | None, limit: int = 60) -> str | None:
    if text is None:
        return None
    from orchestrace.trace._layout import short  # noqa: PLC0415  keeps `import orchestrace` light (loaded on first use)

    return short(text, limit)


def _struct_repr(obj: msgspec.Struct) -> str:
    """``Name(field=value, ...)`` of the fields that differ from their defaults, bounded."""
    parts = []
    for f in msgspec.structs.fields(obj):
        value = getattr(obj, f.name)
        if f.default is not msgspec.NODEFAULT and value == f.default and f.name != "dur":
            continue
        if f.name == "dur" and value == 0.0:
            continue
        if isinstance(value, str) and len(value) > 60:
            parts.append(f"{f.name}={_REPR.repr(value)} ({len(value)} chars)")
        else:
            parts.append(f"{f.name}={_REPR.repr(value)}")
    return f"{type(obj).__name__}({', '.join(parts)})"


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 64
_REPR.maxdict = _REPR.maxlist = 6
_REPR.maxlevel = 2
