"""Import LangGraph runs: run trees, streamed chunks and events, and checkpoint history.

Accepted input (the JSON shapes are written out in ``docs/import-langgraph.md``):

- **Run trees**: LangChain runs as a tracer collects them (``Run.dict()`` / ``model_dump``:
  ``id``, ``name``, ``run_type``, ``start_time``, ``end_time``, ``parent_run_id``,
  ``child_runs``, ``inputs``, ``outputs``, ``error``, ``extra.metadata`` with
  ``langgraph_node`` / ``langgraph_step`` / ``langgraph_triggers``, ``tags``): nested or flat,
  one document or one run per line. The richest form: times, LLM tokens, tools, ``Send``
  fan-out and ``Command`` handoffs are all in it.
- **Streamed chunks** of ``graph.stream(..., stream_mode=[...])``: ``{"ns": [...], "mode": M,
  "data": ...}``, or ``[M, data]`` / ``[ns, M, data]`` as a JSON encoder writes the tuples;
  ``debug`` chunks give task start and end times. **Streamed events** of
  ``astream_events(version="v2")``: ``{"event": "on_chain_start", "run_id", "parent_ids",
  "name", "metadata", "data"}``.
- **Checkpoint history**: ``get_state_history()`` snapshots as objects (``values``, ``next``,
  ``config``, ``metadata``, ``created_at``, ``parent_config``, ``tasks``, ``interrupts``), or
  the LangGraph server's thread states (``checkpoint`` / ``parent_checkpoint``). One trace per
  branch; a branch made by ``update_state`` or a fork gets ``meta["fork"]`` and a
  ``human_intervention`` event.

Objects that are not JSON (messages, ``Send``, ``Command``, ``Interrupt``) are written by
:func:`to_json`: LangChain objects as ``dumpd`` writes them, LangGraph's as
``{"lc": 2, "type": "constructor", "id": ["langgraph", "types", NAME], "kwargs": {...}}``.

Every form becomes *run records* fed to one :class:`RunMapper`, which the live callback
handler (:mod:`orchestrace.integrations.langgraph`) feeds too.

Example:
    >>> runs = [
    ...     {"id": "g", "name": "LangGraph", "run_type": "chain", "parent_run_id": None,
    ...      "start_time": 0.0, "end_time": 3.0},
    ...     {"id": "n1", "name": "planner", "run_type": "chain", "parent_run_id": "g",
    ...      "start_time": 0.0, "end_time": 1.0, "outputs": {"plan": "p"}, "tags": ["graph:step:1"],
    ...      "extra": {"metadata": {"langgraph_node": "planner", "langgraph_step": 1}}},
    ...     {"id": "l1", "name": "FakeChat", "run_type": "llm", "parent_run_id": "n1",
    ...      "start_time": 0.1, "end_time": 0.9,
    ...      "outputs": {"llm_output": {"token_usage": {"prompt_tokens": 9, "completion_tokens": 2}}}},
    ...     {"id": "n2", "name": "writer", "run_type": "chain", "parent_run_id": "g",
    ...      "start_time": 1.0, "end_time": 3.0, "outputs": {"answer": "a"}, "tags": ["graph:step:2"],
    ...      "extra": {"metadata": {"langgraph_node": "writer", "langgraph_step": 2}}},
    ... ]
    >>> sniff(runs)
    True
    >>> tr = import_values([runs], source="runs.json").traces[0]
    >>> [(e.type, e.agent, e.dur, e.tokens) for e in tr.events]  # doctest: +NORMALIZE_WHITESPACE
    [('orchestrator_decision', 'planner', 0.1, 0), ('llm_call', 'planner', 0.8, 11),
     ('message', 'planner', 0.1, 0), ('message', 'writer', 2.0, 0),
     ('orchestrator_decision', 'planner', 0.0, 0)]
    >>> tr.events[-1].decision, tr.events[-1].content, [e.role for e in tr.events][:2]
    ('stop', '{"answer":"a"}', ['orchestrator', 'orchestrator'])
"""

from __future__ import annotations

import ast
import base64
import bisect
import dataclasses
import datetime as _dt
import math
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from orchestrace.errors import Problem, TraceFormatError, _short
from orchestrace.io.importers import ImportResult
from orchestrace.io.openai_agents import (
    _int,
    _latest,
    _prepare,
    _replay,
    _text,
    _time,
    settle_spawns,
)
from orchestrace.trace.build import default_costs
from orchestrace.trace.model import Edge, Event, Trace

__all__ = [
    "SYSTEM",
    "RunMapper",
    "import_values",
    "run_record",
    "sniff",
    "stream_runs",
    "to_json",
]

#: ``Trace.system`` of imported and live-captured traces.
SYSTEM = "langgraph"
_EPS = 1e-6
_MODES = frozenset(
    {"values", "updates", "debug", "tasks", "checkpoints", "messages", "custom", "events"}
)
_LLM = ("llm", "chat_model")
_TOOLS = ("tool", "retriever")
_INTERRUPT = ("GraphInterrupt", "NodeInterrupt", "Interrupt(")


# ---------------------------------------------------------------------- JSON of LangGraph objects
def to_json(obj: Any, _depth: int = 0) -> Any:
    """A JSON-compatible copy of ``obj`` (LangChain/LangGraph objects included).

    LangChain serialisable objects (messages) are written as ``langchain_core.load.dumpd``
    writes them; ``Send``, ``Command`` and ``Interrupt`` as constructor records
    ``{"lc": 2, "type": "constructor", "id": ["langgraph", "types", NAME], "kwargs": {...}}``;
    pydantic models, dataclasses and named tuples as objects; anything else as its ``repr``.

    Example:
        >>> to_json({"a": (1, 2), "b": {3}})
        {'a': [1, 2], 'b': [3]}
    """
    if _depth > 64:
        return repr(obj)
    d = _depth + 1
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else repr(obj)
    if isinstance(obj, Mapping):
        return {str(k): to_json(v, d) for k, v in obj.items()}
    cls = type(obj)
    mod = getattr(cls, "__module__", "") or ""
    name = cls.__name__
    if mod.startswith("langgraph") and name in ("Send", "Command", "Interrupt"):
        fields = {
            "Send": ("node", "arg"),
            "Command": ("graph", "update", "resume", "goto"),
            "Interrupt": ("value", "id"),
        }[name]
        kwargs = {f: to_json(getattr(obj, f, None), d) for f in fields}
        return {
            "lc": 2,
            "type": "constructor",
            "id": ["langgraph", "types", name],
            "kwargs": kwargs,
        }
    if hasattr(obj, "_asdict") and isinstance(obj, tuple):
        fields_of: dict[str, Any] = getattr(obj, "_asdict")()  # noqa: B009 - a named tuple
        return {str(k): to_json(v, d) for k, v in fields_of.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [to_json(v, d) for v in obj]
    if mod.startswith("langchain") and hasattr(obj, "to_json"):
        try:
            from langchain_core.load import dumpd

            return to_json(dumpd(obj), d)
        except Exception:
            pass
    if isinstance(obj, BaseException):
        return f"{name}({obj})"
    if isinstance(obj, _dt.datetime | _dt.date):
        return obj.isoformat()
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, bytes):
        return base64.b64encode(obj).decode()
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        try:
            return to_json(dump(), d)
        except Exception:
            pass
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_json(getattr(obj, f.name, None), d) for f in dataclasses.fields(obj)}
    return repr(obj)


def _lg_type(value: object) -> str | None:
    """``Send`` / ``Command`` / ``Interrupt`` / a message class name of a serialised object."""
    if isinstance(value, dict) and value.get("type") == "constructor":
        ident = value.get("id")
        if isinstance(ident, list) and ident and isinstance(ident[-1], str):
            return ident[-1]
    return None


def _kwargs(value: object) -> dict[str, Any]:
    if isinstance(value, dict) and isinstance(value.get("kwargs"), dict):
        kw: dict[str, Any] = value["kwargs"]
        return kw
    return {}


def _walk(value: object, depth: int = 0) -> Iterator[object]:
    if depth > 32:
        return
    yield value
    if isinstance(value, dict):
        for v in value.values():
            yield from _walk(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, depth + 1)


# ---------------------------------------------------------------------- recognising the input
def _is_run(v: object) -> bool:
    return isinstance(v, dict) and isinstance(v.get("run_type"), str) and "id" in v


def _is_chunk(v: object) -> bool:
    if isinstance(v, dict):
        if isinstance(v.get("mode"), str) and v["mode"] in _MODES and "data" in v:
            return True
        return (
            v.get("type") in ("task", "task_result", "checkpoint")
            and "payload" in v
            and "step" in v
        )
    if isinstance(v, list) and len(v) in (2, 3):
        mode = v[-2]
        return isinstance(mode, str) and mode in _MODES
    return False


def _is_stream_event(v: object) -> bool:
    return (
        isinstance(v, dict)
        and isinstance(v.get("event"), str)
        and v["event"].startswith("on_")
        and "run_id" in v
    )


def _is_snapshot(v: object) -> bool:
    return (
        isinstance(v, dict)
        and "values" in v
        and "next" in v
        and ("config" in v or "checkpoint" in v)
    )


def _kind(v: object) -> str | None:
    for name, test in (
        ("runs", _is_run),
        ("chunks", _is_chunk),
        ("events", _is_stream_event),
        ("history", _is_snapshot),
    ):
        if test(v):
            return name
    return None


def _first(value: object) -> object:
    if _kind(value) is not None:
        return value
    if isinstance(value, list) and value:
        return value[0]
    if isinstance(value, dict):
        for key in ("runs", "history", "chunks", "events", "states"):
            inner = value.get(key)
            if isinstance(inner, list) and inner:
                return inner[0]
    return value


def sniff(value: object) -> bool:
    """Whether ``value`` (a file's first JSON value) is a LangGraph run, chunk, event or snapshot.

    Example:
        >>> sniff(["updates", {"node": {"x": 1}}])
        True
        >>> sniff({"object": "trace.span"})
        False
    """
    try:
        return _kind(_first(value)) is not None
    except Exception:
        return False


# ---------------------------------------------------------------------- run records
def run_record(run: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a LangChain run (``Run.dict()``, or a run built from a stream) that are used.

    Example:
        >>> run_record({"id": 1, "run_type": "chain", "name": "n",
        ...             "extra": {"metadata": {"langgraph_step": 2}}})["metadata"]
        {'langgraph_step': 2}
    """
    extra = run.get("extra") if isinstance(run.get("extra"), dict) else {}
    assert isinstance(extra, dict)
    meta = run.get("metadata")
    if not isinstance(meta, dict):
        meta = extra.get("metadata") if isinstance(extra.get("metadata"), dict) else {}
    tags = run.get("tags") if isinstance(run.get("tags"), list) else []
    parent = run.get("parent_run_id")
    return {
        "id": str(run.get("id")),
        "parent_id": str(parent) if parent is not None else None,
        "name": str(run.get("name") or run.get("run_type")),
        "run_type": str(run.get("run_type")),
        "started_at": run.get("start_time"),
        "ended_at": run.get("end_time"),
        "inputs": run.get("inputs"),
        "outputs": run.get("outputs"),
        "error": run.get("error"),
        "metadata": meta,
        "tags": tags,
        "invocation": extra.get("invocation_params")
        if isinstance(extra.get("invocation_params"), dict)
        else {},
    }


def _flatten(run: object, parent: str | None, out: list[tuple[str, object]], where: str) -> None:
    if not isinstance(run, dict):
        out.append((where, run))
        return
    children = run.get("child_runs")
    flat = {k: v for k, v in run.items() if k != "child_runs"}
    if flat.get("parent_run_id") is None and parent is not None:
        flat["parent_run_id"] = parent
    out.append((where, flat))
    if isinstance(children, list):
        for i, c in enumerate(children):
            _flatten(c, str(run.get("id")), out, f"{where}.child_runs[{i}]")


def _step(meta: Mapping[str, Any]) -> int | None:
    s = meta.get("langgraph_step")
    return _int(s) if isinstance(s, int) and not isinstance(s, bool) and s >= 0 else None


def _is_node(rec: Mapping[str, Any]) -> bool:
    meta = rec["metadata"]
    if rec["run_type"] != "chain" or meta.get("langgraph_node") != rec["name"]:
        return False
    step = meta.get("langgraph_step")
    return any(t == f"graph:step:{step}" for t in rec["tags"]) or "graph:step" not in str(
        rec["tags"]
    )


def _tokens(outputs: object) -> tuple[int, int]:
    """Prompt and completion tokens of an LLM run's outputs."""
    if not isinstance(outputs, dict):
        return 0, 0
    llm_output = outputs.get("llm_output")
    if isinstance(llm_output, dict):
        for key in ("token_usage", "usage"):
            u = llm_output.get(key)
            if isinstance(u, dict) and u:
                return (
                    _int(u.get("prompt_tokens", u.get("input_tokens"))),
                    _int(u.get("completion_tokens", u.get("output_tokens"))),
                )
    tin = tout = 0
    for v in _walk(outputs.get("generations", outputs)):
        if isinstance(v, dict) and isinstance(v.get("usage_metadata"), dict):
            u = v["usage_metadata"]
            tin += _int(u.get("input_tokens"))
            tout += _int(u.get("output_tokens"))
    return tin, tout


def _llm_text(outputs: object) -> str | None:
    if not isinstance(outputs, dict):
        return _text(outputs)
    gens = outputs.get("generations")
    texts: list[str] = []
    if isinstance(gens, list):
        for g in _walk(gens):
            if isinstance(g, dict) and isinstance(g.get("text"), str) and g["text"]:
                texts.append(g["text"])
    return "\n".join(texts) if texts else None


def _model(rec: Mapping[str, Any]) -> str:
    meta, inv = rec["metadata"], rec["invocation"]
    for v in (
        meta.get("ls_model_name"),
        inv.get("model"),
        inv.get("model_name"),
        inv.get("_type"),
    ):
        if isinstance(v, str) and v:
            return v
    return str(rec["name"])


def _tool_call_ids(value: object) -> list[str]:
    """Ids of the tool calls an AI message in ``value`` asks for."""
    ids: list[str] = []
    for v in _walk(value):
        if isinstance(v, dict) and isinstance(v.get("tool_calls"), list):
            for tc in v["tool_calls"]:
                if isinstance(tc, dict) and isinstance(tc.get("id"), str):
                    ids.append(tc["id"])
    return ids


def _result_tool_call_id(outputs: object, inputs: object) -> str | None:
    for v in (*_walk(outputs), *_walk(inputs)):
        if isinstance(v, dict) and isinstance(v.get("tool_call_id"), str):
            return str(v["tool_call_id"])
    return None


_SEND_REPR = re.compile(r"\ASend\(node='([^']+)', arg=(.*)\)\Z", re.DOTALL)
_COMMAND_KEYS = frozenset({"graph", "update", "resume", "goto"})


def _as_send(v: object) -> tuple[str, Any] | None:
    """``(node, arg)`` of a serialised ``Send``.

    A constructor record, or the ``repr`` string LangSmith's serialiser writes (its argument
    is read as a Python literal, never run).
    """
    if _lg_type(v) == "Send":
        kw = _kwargs(v)
        return (kw["node"], kw.get("arg")) if isinstance(kw.get("node"), str) else None
    if isinstance(v, str) and v.startswith("Send("):
        m = _SEND_REPR.match(v)
        if m is None:
            return None
        try:
            arg: Any = ast.literal_eval(m.group(2))
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            arg = m.group(2)
        return m.group(1), arg
    return None


def _sends(value: object) -> list[tuple[str, Any]]:
    """The ``Send(node, arg)`` packets in a run's output (also inside ``Command.goto``)."""
    return [s for v in _walk(value) if (s := _as_send(v)) is not None]


def _gotos(value: object) -> tuple[list[str], Any]:
    """Node names a ``Command`` in a run's output goes to, and its state update.

    A ``Command`` is a constructor record, or the plain object (``graph``, ``update``,
    ``resume``, ``goto``) LangSmith's serialiser writes.
    """
    for v in _walk(value):
        if _lg_type(v) == "Command":
            kw = _kwargs(v)
        elif isinstance(v, dict) and set(v) == _COMMAND_KEYS:
            kw = v
        else:
            continue
        goto = kw.get("goto")
        names = [goto] if isinstance(goto, str) else goto if isinstance(goto, list) else []
        return [g for g in names if isinstance(g, str) and g], kw.get("update")
    return [], None


def _instance(base: str, k: int) -> str:
    return base if k == 1 else f"{base}#{k}"


# ---------------------------------------------------------------------- the mapper
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
class _Pending:
    event_id: str
    t: float
    kind: str


@dataclass
class RunMapper:
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
        if agent in (self.root, self.graph):
            return "orchestrator"
        return "manager" if agent in self._spawners else "worker"

    def _rel(self, ts: float) -> float:
        return max(0.0, round(ts - self.t0, 9))

    def _ancestors(self, rid: str | None) -> Iterator[_Run]:
        seen: set[str] = set()
        while rid is not None and rid in self._runs and rid not in seen:
            seen.add(rid)
            r = self._runs[rid]
            yield r
            rid = r.rec["parent_id"]

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

    def _graph_of(self, rid: str | None) -> str:
        for r in self._ancestors(rid):
            if r.kind == "graph":
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
            prev = _latest(self._done.get(agent, []), ev.t)
            take = [p for p in self._pending.get(agent, []) if p.t <= ev.t + _EPS]
            if take:
                self._pending[agent] = [p for p in self._pending[agent] if p not in take]
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
            closing = Event(
                id=f"{rid}.handoff",
                t=close_t,
                type="spawn" if fresh else "message",
                agent=me,
                dur=close_dur,
                from_=None if fresh else me,
                to=target,
                decision="delegate",
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
        first = self._acted.get(child)
        fresh = child != sender and (first is None or first >= t - _EPS)
        ev = Event(
            id=eid,
            t=t,
            type="spawn" if fresh else "message",
            agent=sender,
            from_=None if fresh else sender,
            to=child,
            decision="spawn" if fresh else "delegate",
            step=step,
            content=_text(arg),
            attrs={"run_id": rid, "send": run.rec["name"]},
        )
        if fresh:
            self._spawned.add(child)
        self._emit(ev)
        mine = [(et, e) for et, e in self._events_of.get(child, []) if et >= t - _EPS]
        if mine:
            self._edge(eid, min(mine)[1], "spawn" if fresh else "message")
        else:
            self._feed(child, eid, t, "spawn" if fresh else "message")

    def meta(self) -> dict[str, Any]:
        """What the run's footer records: the graph's nodes and unmapped items."""
        out: dict[str, Any] = {"nodes": self.nodes}
        if self.unmapped_items:
            out["unmapped"] = self.unmapped_items
        return out


# ---------------------------------------------------------------------- batch import
@dataclass
class _Stream:
    """Run records (and checkpoints) built from streamed chunks or events."""

    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    checkpoints: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    unmapped: dict[str, int] = field(default_factory=dict)
    unmapped_items: list[Any] = field(default_factory=list)
    timed: bool = False
    has_tasks: bool = False
    _updates: int = 0

    def _update(
        self,
        ns: list[str],
        where: str,
        data: object,
        k: float,
        calls: list[tuple[str, str]],
        v: object,
    ) -> list[tuple[str, str]]:
        """An ``updates`` chunk of a stream with no task chunks: one finished task per node.

        Each chunk is taken as one step (the order of the updates is all there is to go by).
        """
        if not isinstance(data, dict):
            self.keep("stream mode 'updates'", v)
            return calls
        gid = self._graph(ns, k, calls)
        self._updates += 1
        for name, update in data.items():
            rid = f"update{int(k)}:{name}"
            interrupted = name == "__interrupt__"
            node = "interrupt" if interrupted else str(name)
            self.run(
                rid,
                where,
                name=node,
                parent_run_id=gid,
                start_time=k,
                end_time=k + 1,
                outputs=None if interrupted else update,
                error=f"GraphInterrupt({_text(update)})" if interrupted else None,
                extra={"metadata": {"langgraph_node": node, "langgraph_step": self._updates}},
                tags=[f"graph:step:{self._updates}"],
            )
            calls += [("start", rid), ("end", rid)]
        return calls

    def run(self, rid: str, where: str, **fields: Any) -> dict[str, Any]:
        rec = self.runs.get(rid)
        if rec is None:
            rec = {
                "id": rid,
                "parent_run_id": None,
                "name": fields.get("name") or "run",
                "run_type": "chain",
                "extra": {"metadata": {}},
                "tags": [],
                "_where": where,
            }
            self.runs[rid] = rec
            self.order.append(rid)
        for k, v in fields.items():
            if v is not None:
                rec[k] = v
        return rec

    def keep(self, label: str, item: Any) -> None:
        self.unmapped[label] = self.unmapped.get(label, 0) + 1
        self.unmapped_items.append(item)

    def _graph(self, ns: list[str], t: object, calls: list[tuple[str, str]]) -> str:
        gid = _graph_id(ns)
        if gid not in self.runs:
            parent = _graph_id(ns[:-1]) if ns else None
            self.run(
                gid, "", name="LangGraph" if not ns else ns[-1], start_time=t, parent_run_id=parent
            )
            calls.append(("start", gid))
        self.runs[gid]["end_time"] = t
        return gid

    def feed(self, where: str, v: object, k: float) -> list[tuple[str, str]]:
        """Take one streamed value (the ``k``-th); return the ``(start|end, run id)`` it makes."""
        calls: list[tuple[str, str]] = []
        if _is_stream_event(v):
            assert isinstance(v, dict)
            _stream_event(self, where, v, k, calls)
            return calls
        c = _chunk(v)
        if c is None:
            self.keep("unrecognised stream value", v)
            return calls
        ns, mode, data = c
        if mode == "debug" and isinstance(data, dict):
            ts: object = data.get("timestamp")
            kind, payload, step = data.get("type"), data.get("payload"), data.get("step")
        elif mode in ("tasks", "checkpoints") and not self.timed:
            ts, payload, step = k, data, None
            kind = (
                "checkpoint"
                if mode == "checkpoints"
                else ("task_result" if isinstance(data, dict) and "result" in data else "task")
            )
        elif mode == "updates" and not self.timed and not self.has_tasks:
            return self._update(ns, where, data, k, calls, v)
        elif mode in ("tasks", "checkpoints", "updates"):
            return calls  # the debug (or tasks) chunks carry the same
        else:
            self.keep(f"stream mode {mode!r}", v)
            return calls
        if not isinstance(payload, dict):
            self.keep(f"stream mode {mode!r}", v)
            return calls
        gid = self._graph(ns, ts, calls)
        if kind == "checkpoint":
            self.checkpoints.append(
                (where, {**payload, "created_at": payload.get("created_at", ts)})
            )
            return calls
        tid = payload.get("id")
        if not isinstance(tid, str):
            self.keep(f"stream mode {mode!r}", v)
            return calls
        name = payload.get("name") if isinstance(payload.get("name"), str) else "node"
        if kind == "task":
            step_n = step if isinstance(step, int) else None
            self.run(
                tid,
                where,
                name=name,
                parent_run_id=gid,
                start_time=ts,
                inputs=payload.get("input"),
                extra={
                    "metadata": {
                        "langgraph_node": name,
                        "langgraph_step": step_n,
                        "langgraph_triggers": payload.get("triggers"),
                    }
                },
                tags=[f"graph:step:{step_n}"],
            )
            calls.append(("start", tid))
        else:
            rec = self.run(tid, where, name=name, parent_run_id=gid, end_time=ts)
            if "start_time" not in rec:
                rec["start_time"] = ts
                calls.append(("start", tid))
            rec["outputs"] = payload.get("result")
            err = payload.get("error")
            interrupts = payload.get("interrupts")
            if interrupts:
                err = f"GraphInterrupt({_text(interrupts)})"
            rec["error"] = err
            calls.append(("end", tid))
        return calls

    def trace_id(self) -> str:
        """``THREAD:FIRST_CHECKPOINT`` when the run wrote checkpoints, else ``langgraph-stream``."""
        for where, snap in self.checkpoints:
            c = _checkpoint(where, snap)
            if c is not None:
                return f"{c.thread or 'thread'}:{c.id}"
        return "langgraph-stream"

    def thread(self) -> str | None:
        """The thread id of the run's checkpoints, if any."""
        for where, snap in self.checkpoints:
            c = _checkpoint(where, snap)
            if c is not None and c.thread:
                return c.thread
        return None


def _chunk(v: object) -> tuple[list[str], str, Any] | None:
    """``(namespace, mode, data)`` of a streamed chunk in any accepted shape."""
    if isinstance(v, dict):
        if isinstance(v.get("mode"), str) and "data" in v:
            ns = v.get("ns")
            return ([str(x) for x in ns] if isinstance(ns, list) else []), v["mode"], v["data"]
        if v.get("type") in ("task", "task_result", "checkpoint") and "payload" in v:
            return [], "debug", v
        return None
    if isinstance(v, list) and len(v) == 2 and isinstance(v[0], str):
        return [], v[0], v[1]
    if isinstance(v, list) and len(v) == 3 and isinstance(v[1], str):
        ns = v[0]
        return ([str(x) for x in ns] if isinstance(ns, list) else []), v[1], v[2]
    return None


def _graph_id(ns: list[str]) -> str:
    return "graph" if not ns else "graph:" + "|".join(ns)


def stream_runs(values: Iterable[tuple[str, object]]) -> _Stream:
    """Run records from streamed chunks or ``astream_events`` events (``(where, value)``).

    Task start and end times come from ``debug`` chunks; without them the k-th value is placed
    at ``t = k`` seconds (``meta["clock"] = "order"``).

    Example:
        >>> st = stream_runs([("$[0]", ["tasks", {"id": "t1", "name": "a", "input": {},
        ...                                         "triggers": ["branch:to:a"]}]),
        ...                   ("$[1]", ["tasks", {"id": "t1", "name": "a", "result": {"x": 1},
        ...                                         "error": None, "interrupts": []}])])
        >>> [st.runs[r]["name"] for r in st.order]
        ['LangGraph', 'a']
    """
    items = list(values)
    modes = {c[1] for _, v in items if (c := _chunk(v)) is not None}
    st = _Stream(timed="debug" in modes, has_tasks="tasks" in modes)
    for k, (where, v) in enumerate(items):
        st.feed(where, v, float(k))
    return st


def _stream_event(
    st: _Stream, where: str, v: dict[str, Any], t: float, calls: list[tuple[str, str]]
) -> None:
    event = str(v.get("event"))
    rid = str(v.get("run_id"))
    parts = event.split("_")
    phase = parts[-1]
    run_type = "_".join(parts[1:-1])
    if phase not in ("start", "end") or not run_type or run_type == "custom":
        if phase != "stream":
            st.keep(f"stream event {event!r}", v)
        return
    data = v.get("data") if isinstance(v.get("data"), dict) else {}
    assert isinstance(data, dict)
    parents = v.get("parent_ids")
    parent = str(parents[-1]) if isinstance(parents, list) and parents else None
    meta = v.get("metadata") if isinstance(v.get("metadata"), dict) else {}
    fields: dict[str, Any] = {
        "name": v.get("name"),
        "run_type": run_type,
        "parent_run_id": parent,
        "extra": {"metadata": meta},
        "tags": v.get("tags") if isinstance(v.get("tags"), list) else [],
    }
    if phase == "start":
        st.run(rid, where, start_time=t, inputs=data.get("input"), **fields)
        calls.append(("start", rid))
    else:
        rec = st.run(rid, where, end_time=t, **fields)
        if "start_time" not in rec:
            rec["start_time"] = t
            calls.append(("start", rid))
        rec["outputs"] = data.get("output")
        calls.append(("end", rid))
        if data.get("input") is not None and rec.get("inputs") is None:
            rec["inputs"] = data.get("input")


def _problem(
    code: str, message: str, fix: str, where: str, source: str, eid: str | None = None
) -> Problem:
    return Problem(code, message, fix, path=where, event_id=eid, severity="warning", source=source)


def import_values(values: Iterable[object], *, source: str) -> ImportResult:
    """Import LangGraph runs, streamed chunks/events or checkpoint history (module docstring).

    Raises:
        TraceFormatError: Nothing in the file maps to an event (one line naming the fix).

    Example:
        >>> res = import_values([["updates", {"a": {"x": 1}}]], source="s.jsonl")
        >>> res.unmapped
        {}
        >>> import_values([["values", {"x": 1}]], source="s.jsonl")
        Traceback (most recent call last):
        ...
        orchestrace.errors.TraceFormatError: s.jsonl: file: holds no LangGraph run, task or ...
    """
    vals = list(values)
    many = len(vals) > 1
    items: list[tuple[str, object]] = []
    for n, value in enumerate(vals):
        base = f"line {n + 1}: $" if many else "$"
        if isinstance(value, list) and not _is_chunk(value):
            items.extend((f"{base}[{i}]", x) for i, x in enumerate(value))
        elif (
            isinstance(value, dict)
            and _kind(value) is None
            and any(
                isinstance(value.get(k), list)
                for k in ("runs", "history", "chunks", "events", "states")
            )
        ):
            for key in ("runs", "history", "chunks", "events", "states"):
                inner = value.get(key)
                if isinstance(inner, list):
                    items.extend((f"{base}.{key}[{i}]", x) for i, x in enumerate(inner))
        else:
            items.append((base, value))
    problems: list[Problem] = []
    kinds: dict[str, list[tuple[str, object]]] = {}
    for where, item in items:
        kind = _kind(item)
        if kind is None:
            problems.append(
                _problem(
                    "unknown-item",
                    "not a LangGraph run, stream chunk, stream event or state snapshot",
                    "it was skipped; see docs/import-langgraph.md for the accepted shapes",
                    where,
                    source,
                )
            )
            continue
        kinds.setdefault("stream" if kind in ("chunks", "events") else kind, []).append(
            (where, item)
        )
    traces: list[Trace] = []
    unmapped: dict[str, int] = {}
    if "runs" in kinds:
        flat: list[tuple[str, object]] = []
        for where, run in kinds["runs"]:
            _flatten(run, None, flat, where)
        traces += _import_runs(flat, problems, unmapped, source, clock="wall")
    if "stream" in kinds:
        st = stream_runs(kinds["stream"])
        for k, c in st.unmapped.items():
            unmapped[k] = unmapped.get(k, 0) + c
        runs: list[tuple[str, object]] = [
            (st.runs[r].pop("_where", "$"), st.runs[r]) for r in st.order
        ]
        got = _import_runs(
            runs,
            problems,
            unmapped,
            source,
            clock="wall" if st.timed else "order",
            extra_unmapped=st.unmapped_items,
            trace_id=st.trace_id(),
            task_id=st.thread(),
        )
        traces += [_with_checkpoints(tr, st.checkpoints) for tr in got]
    if "history" in kinds:
        traces += _import_history(kinds["history"], problems, unmapped, source)
    if not traces:
        raise TraceFormatError(
            source,
            "file",
            "holds no LangGraph run, task or checkpoint that maps to an event",
            "export the run tree, stream with stream_mode='debug', or use "
            "orchestrace.integrations.langgraph",
        )
    return ImportResult(traces=traces, problems=problems, unmapped=unmapped)


def _import_runs(
    flat: list[tuple[str, object]],
    problems: list[Problem],
    unmapped: dict[str, int],
    source: str,
    *,
    clock: str,
    extra_unmapped: list[Any] | None = None,
    meta: dict[str, Any] | None = None,
    trace_id: str | None = None,
    task_id: str | None = None,
) -> list[Trace]:
    recs: list[tuple[str, dict[str, Any]]] = []
    for where, raw in flat:
        if not _is_run(raw):
            problems.append(
                _problem(
                    "unknown-item",
                    "not a LangChain run (no run_type)",
                    "it was skipped",
                    where,
                    source,
                )
            )
            continue
        assert isinstance(raw, dict)
        recs.append((where, run_record(raw)))
    # ids, parents and times are repaired over the whole file first, so a duplicate id or a
    # cycle of parent ids never splits a graph run into several traces
    prepared = _prepare(source, recs, problems, source, noun="run", scope="the file")
    by_id = {r["id"]: r for r in prepared}
    tops: dict[str, str] = {}

    def root(r: dict[str, Any]) -> str:
        chain: list[str] = []
        node: dict[str, Any] | None = r
        while node is not None and node["id"] not in tops:
            chain.append(node["id"])
            pid = node.get("parent_id")
            node = by_id.get(pid) if isinstance(pid, str) else None
        top = tops[node["id"]] if node is not None else chain[-1]
        for x in chain:
            tops[x] = top
        return top

    groups: dict[str, list[dict[str, Any]]] = {}
    for r in prepared:
        groups.setdefault(root(r), []).append(r)
    out: list[Trace] = []
    for rid, order in groups.items():
        head = next((r for r in order if r["id"] == rid), order[0])
        graph_name = str(head.get("name") or "LangGraph")
        thread = (
            head.get("metadata", {}).get("thread_id")
            if isinstance(head.get("metadata"), dict)
            else None
        )
        t0 = min(r["_start"] for r in order)
        events: list[Event] = []
        edges: list[Edge] = []
        mapper = RunMapper(
            t0=t0,
            graph=graph_name,
            emit_event=events.append,
            emit_edge=edges.append,
            timed=clock == "wall",
        )
        for call, r in _replay(order):
            rec = {k: v for k, v in r.items() if not k.startswith("_")}
            if call == "start":
                mapper.start(rec, at=r["_start"])
            else:
                mapper.end(rec, at=r["_end"])
        mapper.finish()
        if extra_unmapped:
            mapper.unmapped_items.extend(extra_unmapped)
        events = settle_spawns(events, problems, source)
        for k, c in mapper.unmapped.items():
            unmapped[k] = unmapped.get(k, 0) + c
        if not events:
            problems.append(
                _problem(
                    "no-events",
                    f"run {_short(rid)!r} has no graph node, LLM or tool run",
                    "it was not imported",
                    "$",
                    source,
                )
            )
            continue
        m: dict[str, Any] = {
            "source": {"format": SYSTEM, "root_run_id": rid, "graph": graph_name},
            "clock": clock,
        }
        if not isinstance(thread, str) or not thread:
            thread = None
        else:
            m["source"]["thread_id"] = thread
        m.update(mapper.meta())
        if meta:
            m.update(meta)
        out.append(
            Trace(
                trace_id=trace_id or rid,
                task_id=task_id or (thread if isinstance(thread, str) else graph_name),
                events=tuple(events),
                edges=tuple(edges),
                costs=default_costs(events),
                system=SYSTEM,
                meta=m,
            )
        )
    return out


# ---------------------------------------------------------------------- checkpoints
@dataclass
class _Checkpoint:
    id: str
    parent: str | None
    thread: str | None
    created: float | None
    source: str | None
    step: int | None
    next: list[str]
    tasks: list[dict[str, Any]]
    metadata: dict[str, Any]
    where: str
    raw: dict[str, Any]


def _conf_id(conf: object, key: str = "checkpoint_id") -> str | None:
    if not isinstance(conf, dict):
        return None
    inner = conf.get("configurable") if isinstance(conf.get("configurable"), dict) else conf
    assert isinstance(inner, dict)
    v = inner.get(key)
    return str(v) if v is not None else None


def _checkpoint(where: str, snap: dict[str, Any]) -> _Checkpoint | None:
    conf = snap.get("config", snap.get("checkpoint"))
    cid = _conf_id(conf)
    if cid is None:
        return None
    parent = _conf_id(snap.get("parent_config", snap.get("parent_checkpoint")))
    meta = snap.get("metadata") if isinstance(snap.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    step = meta.get("step")
    tasks_raw = snap.get("tasks")
    tasks: list[Any] = tasks_raw if isinstance(tasks_raw, list) else []
    nxt_raw = snap.get("next")
    nxt: list[Any] = nxt_raw if isinstance(nxt_raw, list) else []
    return _Checkpoint(
        id=cid,
        parent=parent,
        thread=_conf_id(conf, "thread_id"),
        created=_time(snap.get("created_at")),
        source=meta.get("source") if isinstance(meta.get("source"), str) else None,
        step=step if isinstance(step, int) and not isinstance(step, bool) else None,
        next=[str(x) for x in nxt],
        tasks=[t for t in tasks if isinstance(t, dict)],
        metadata=meta,
        where=where,
        raw=snap,
    )


def _with_checkpoints(tr: Trace, cps: list[tuple[str, dict[str, Any]]]) -> Trace:
    """A streamed trace with the ids of the checkpoints the run wrote (``meta["checkpoints"]``)."""
    if not cps:
        return tr
    ids = [c.id for w, s in cps if (c := _checkpoint(w, s)) is not None]
    return tr.replace(meta={**tr.meta, "checkpoints": ids})


def _import_history(
    items: list[tuple[str, object]],
    problems: list[Problem],
    unmapped: dict[str, int],
    source: str,
) -> list[Trace]:
    cps: dict[str, _Checkpoint] = {}
    for where, snap in items:
        assert isinstance(snap, dict)
        c = _checkpoint(where, snap)
        if c is None:
            problems.append(
                _problem(
                    "missing-id",
                    "snapshot has no config.configurable.checkpoint_id",
                    "it was skipped; export snapshots with their config",
                    where,
                    source,
                )
            )
            continue
        if c.id in cps:
            problems.append(
                _problem(
                    "duplicate-id",
                    f"checkpoint {_short(c.id)!r} appears twice",
                    "the later copy was dropped",
                    where,
                    source,
                    c.id,
                )
            )
            continue
        cps[c.id] = c
    for c in cps.values():
        if c.parent is not None and c.parent not in cps:
            problems.append(
                _problem(
                    "missing-parent",
                    f"checkpoint {_short(c.id)!r} names parent {_short(c.parent)!r}, which is "
                    "not in the history",
                    "it starts its branch; export the whole history (get_state_history)",
                    c.where,
                    source,
                    c.id,
                )
            )
            c.parent = None
    children: dict[str, list[_Checkpoint]] = {}
    for c in cps.values():
        if c.parent is not None:
            children.setdefault(c.parent, []).append(c)
    known = [c.created for c in cps.values() if c.created is not None]
    if len(known) < len(cps):
        problems.append(
            _problem(
                "missing-time",
                "some checkpoints have no readable created_at",
                "they were placed by step order",
                "$",
                source,
            )
        )

    def when(c: _Checkpoint) -> float:
        if c.created is not None:
            return c.created
        return (min(known) if known else 0.0) + (c.step or 0) + 1

    for kids in children.values():
        kids.sort(key=lambda c: (when(c), c.id))
    leaves = sorted(
        (c for c in cps.values() if c.id not in children), key=lambda c: (when(c), c.id)
    )
    out: list[Trace] = []
    for leaf in leaves:
        lineage: list[_Checkpoint] = []
        node: _Checkpoint | None = leaf
        while node is not None and node not in lineage:
            lineage.append(node)
            node = cps.get(node.parent) if node.parent else None
        lineage.reverse()
        tr = _branch(lineage, children, when, problems, unmapped, source)
        if tr is not None:
            out.append(tr)
    return out


def _branch(
    lineage: list[_Checkpoint],
    children: dict[str, list[_Checkpoint]],
    when: Callable[[_Checkpoint], float],
    problems: list[Problem],
    unmapped: dict[str, int],
    source: str,
) -> Trace | None:
    leaf = lineage[-1]
    thread = next((c.thread for c in lineage if c.thread), None) or "thread"
    gid = f"{thread}:{leaf.id}"
    runs: list[tuple[str, object]] = []
    start, end = when(lineage[0]), when(leaf)
    runs.append(
        (
            "$",
            {
                "id": gid,
                "name": "LangGraph",
                "run_type": "chain",
                "start_time": start,
                "end_time": end,
                "parent_run_id": None,
                # a branch whose last checkpoint has tasks still to run ended with no answer
                "extra": {"metadata": {"langgraph_next": leaf.next}} if leaf.next else {},
            },
        )
    )
    fork: dict[str, Any] | None = None
    inputs = 0
    for i, c in enumerate(lineage):
        nxt = lineage[i + 1] if i + 1 < len(lineage) else None
        if c.source == "input":
            inputs += 1
        siblings = children.get(c.parent, []) if c.parent else []
        if len(siblings) > 1 and siblings[0] is not c:
            fork = {
                "from_checkpoint": c.parent,
                "checkpoint": c.id,
                "source": c.source,
                "step": c.step,
                "other_branches": [s.id for s in siblings if s is not c],
            }
        if c.source == "update" or (c.source == "input" and inputs > 1):
            runs.append(
                (
                    c.where,
                    {
                        "id": f"{c.id}.{c.source}",
                        "name": "human",
                        "run_type": "human",
                        "start_time": when(c),
                        "end_time": when(c),
                        "parent_run_id": gid,
                        "inputs": c.metadata.get("writes", c.raw.get("values")),
                        "outputs": {"checkpoint_id": c.id, "source": c.source},
                        "extra": {"metadata": {"langgraph_step": max(c.step or 0, 0)}},
                    },
                )
            )
        if nxt is None or nxt.source not in ("loop", None):
            continue  # the tasks at c did not run on this branch (its state was edited)
        for task in c.tasks:
            name = task.get("name")
            if not isinstance(name, str) or name.startswith("__"):
                continue
            path = task.get("path")
            push = isinstance(path, list) and bool(path) and path[0] == "__pregel_push"
            err = task.get("error")
            interrupts = task.get("interrupts")
            if interrupts:
                err = f"GraphInterrupt({_text(interrupts)})"
            step = (c.step if c.step is not None else i) + 1
            runs.append(
                (
                    c.where,
                    {
                        "id": f"{c.id}:{task.get('id')}",
                        "name": name,
                        "run_type": "chain",
                        "start_time": when(c),
                        "end_time": when(nxt),
                        "parent_run_id": gid,
                        "outputs": task.get("result"),
                        "error": err,
                        "tags": [f"graph:step:{step}"],
                        "extra": {
                            "metadata": {
                                "langgraph_node": name,
                                "langgraph_step": step,
                                "langgraph_triggers": ["__pregel_push"] if push else [name],
                            }
                        },
                    },
                )
            )
    meta: dict[str, Any] = {
        "branch": {"leaf": leaf.id, "checkpoints": [c.id for c in lineage]},
    }
    if fork is not None:
        meta["fork"] = fork
    got = _import_runs(
        runs, problems, unmapped, source, clock="checkpoints", meta=meta, trace_id=gid
    )
    for tr in got:
        return tr.replace(
            task_id=thread,
            meta={**tr.meta, "source": {"format": SYSTEM, "thread_id": thread, "history": True}},
        )
    return None
