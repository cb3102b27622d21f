"""Graph analytics: order, cycles, critical path, work, speedup, spawn tree.

A :class:`TraceGraph` is a trace compiled to columns (numpy arrays): times, durations, type
and agent codes, and edges as ``(src, dst)`` index pairs. It is built from a
:class:`~orchestrace.trace.model.Trace` (columns are extracted lazily, on first use) or, by
``orchestrace.io``, straight from Arrow/Parquet columns without ever creating event objects.
Every algorithm here is linear in events plus edges (sorts are skipped when edges already
arrive in order). PARL Critical Steps live in :mod:`orchestrace.trace.steps`.

This module does not import the records of :mod:`orchestrace.trace.model`: it compiles
anything shaped like them, described by the structural protocols of
:mod:`orchestrace.trace.records`, and the functions accept a graph or anything with
a ``graph`` (:class:`HasGraph`). The dependency runs one way: the model owns the cached
``Trace.graph`` accessor and imports this module.

At about 700 lines the module stays whole: it is one concern, the :class:`TraceGraph` whose
columns and caches every algorithm here shares, plus their functional forms.

Example:
    >>> from orchestrace.trace.build import TraceBuilder
    >>> b = TraceBuilder(task_id="demo")
    >>> plan = b.add("orchestrator_decision", "lead", dur=1.0, step=0)
    >>> w = [b.spawn("lead", f"w{i}", after=[plan], step=1) for i in range(3)]
    >>> r = [b.ret(f"w{i}", "lead", after=[w[i]], dur=float(i + 1)) for i in range(3)]
    >>> agg = b.aggregate("lead", r, dur=1.0, step=2)
    >>> tr = b.build()
    >>> critical_path_length(tr), work(tr), round(speedup(tr), 3)
    (5.0, 8.0, 1.6)
    >>> critical_path(tr).ids
    ('e1', 'e2', 'e3', 'e4', 'e7', 'e8')
    >>> tr.graph.critical_steps()
    4
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Protocol

import numpy as np

from orchestrace.errors import TraceError
from orchestrace.trace._column_errors import _not_a_name, _not_a_number, _overflow, _unknown_type
from orchestrace.trace._ids import map_ids
from orchestrace.trace._longest import CHUNK as _CHUNK
from orchestrace.trace._longest import longest_starts as _longest_starts
from orchestrace.trace._names import NameTable, _NoneAware
from orchestrace.trace.enums import (
    DECISION_CODE,
    EDGE_CODE,
    EDGE_TYPES,
    EVENT_CODE,
    EdgeType,
    EventType,
)
from orchestrace.trace.records import EventRecord, TraceRecords
from orchestrace.trace.steps import StepStructure, step_structure

__all__ = [
    "DEPENDENCY_EDGES",
    "CriticalPath",
    "CycleError",
    "TraceGraph",
    "critical_path",
    "critical_path_length",
    "speedup",
    "work",
]

#: Edge types the critical path follows: everything that makes one event wait for another.
DEPENDENCY_EDGES: frozenset[EdgeType] = frozenset(
    {
        EdgeType.CAUSAL,
        EdgeType.SPAWN,
        EdgeType.MESSAGE,
        EdgeType.TOOL_DEPENDENCY,
        EdgeType.RETURN,
        EdgeType.AGGREGATE,
    }
)

_SPAWN = EVENT_CODE[EventType.SPAWN]
_TOOL_RESULT = EVENT_CODE[EventType.TOOL_RESULT]
_get_id, _get_type, _get_agent = map(attrgetter, ("id", "type", "agent"))
_get_src, _get_dst = attrgetter("src"), attrgetter("dst")

#: Columns a :class:`TraceGraph` can hold: name -> (numpy dtype, value when not set); the
#: compilers of other sources (``orchestrace.io``) fill these.
COLUMNS: dict[str, tuple[Any, Any]] = {
    "t": (np.float64, None),
    "dur": (np.float64, None),
    "type_code": (np.int8, None),
    "agent_code": (np.int32, None),
    "to_code": (np.int32, -1),
    "role_code": (np.int32, -1),
    "tool_code": (np.int32, -1),
    "decision_code": (np.int8, -1),
    "step": (np.int64, -1),
    "tokens_in": (np.int64, 0),
    "tokens_out": (np.int64, 0),
    "cost": (np.float64, 0.0),
}


class CycleError(TraceError, ValueError):
    """The dependency edges contain a cycle; ``cycle`` lists the event indices on it.

    A :class:`~orchestrace.errors.TraceError` (so one ``except OrchestraceError`` catches it)
    and, as before, a ``ValueError``.
    """

    def __init__(self, cycle: list[int], ids: Sequence[str]) -> None:
        self.cycle = cycle
        names = " -> ".join(repr(str(ids[i])) for i in cycle[:8])
        if len(cycle) > 8:
            names += " -> ..."
        super().__init__(
            f"causal cycle through events {names}; run `orchestrace validate` and remove an edge"
        )


@dataclass(frozen=True, slots=True)
class CriticalPath:
    """The longest chain of dependent events, weighted by ``dur``.

    Attributes:
        length: Sum of ``dur`` along the path (seconds).
        indices: Event indices on the path, first to last.
        ids: Event ids on the path, first to last.
    """

    length: float
    indices: tuple[int, ...]
    ids: tuple[str, ...]


class TraceGraph:
    """A trace compiled to columns and integer edge arrays, for fast analytics.

    Build one with :meth:`from_trace` (or use the cached ``trace.graph``); a Parquet dataset
    compiles to one with :func:`orchestrace.io.read_graph`. Column attributes (``t``, ``dur``, ``type_code``,
    ``agent_code``, ``to_code``, ``role_code``, ``tool_code``, ``decision_code``, ``step``,
    ``tokens_in``, ``tokens_out``, ``cost``) are numpy arrays indexed by event; codes index
    :attr:`names` (agents and ``to`` targets), :attr:`roles`, :attr:`tools`, ``list(EventType)``
    and ``list(Decision)``; -1 means "not set".

    Attributes:
        ids: Event ids by index (a list, or a pyarrow array for columnar data).
        src: Edge source event indices (-1 when the id is unknown), int64.
        dst: Edge destination event indices (-1 when unknown), int64.
        edge_code: Edge type codes (index into ``list(EdgeType)``), int8.
    """

    def __init__(
        self,
        ids: Any,
        columns: dict[str, np.ndarray],
        names: NameTable,
        roles: NameTable,
        tools: NameTable,
        src: np.ndarray,
        dst: np.ndarray,
        edge_code: np.ndarray,
        *,
        events: Sequence[EventRecord] | None = None,
        edge_refs: tuple[Any, Any] | Sequence[Any] | None = None,
        lookup: dict[str, int] | None = None,
        unique: bool | None = None,
    ) -> None:
        self.ids = ids
        self._unique = unique
        self._edge_refs = edge_refs
        self._cols = columns
        self._names = names
        self._roles = roles
        self._tools = tools
        self._events = events
        self.src = src
        self.dst = dst
        self.edge_code = edge_code
        self._lookup = lookup
        self._order_cache: dict[frozenset[EdgeType], np.ndarray] = {}
        self._dep_cache: dict[frozenset[EdgeType], tuple[np.ndarray, np.ndarray]] = {}
        self._cp_cache: dict[frozenset[EdgeType], CriticalPath] = {}
        self._filling = threading.RLock()  # columns read on first use, by one thread at a time

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_trace(cls, trace: TraceRecords) -> TraceGraph:
        """Compile ``trace``: types and edges now (an unknown type is refused), the rest later.

        Every other column is read on first use. (A critical path needs only durations and edges; checks need times and agents, never
        durations.)
        """
        events = trace.events
        n = len(events)
        try:
            type_code = np.fromiter(
                map(EVENT_CODE.__getitem__, map(_get_type, events)), dtype=np.int8, count=n
            )
        except (KeyError, TypeError):
            raise _unknown_type(events, "events", EVENT_CODE) from None
        cols: dict[str, np.ndarray] = {"type_code": type_code}
        ids = list(map(_get_id, events))
        edges = trace.edges
        refs = [*map(_get_src, edges), *map(_get_dst, edges)]
        both, unique, lookup = map_ids(ids, refs)
        del refs
        m = len(edges)
        try:
            edge_code = np.fromiter(
                map(EDGE_CODE.__getitem__, map(_get_type, edges)), dtype=np.int8, count=m
            )
        except (KeyError, TypeError):
            raise _unknown_type(edges, "edges", EDGE_CODE) from None
        return cls(
            ids,
            cols,
            NameTable(),
            NameTable(),
            NameTable(),
            both[:m],
            both[m:],
            edge_code,
            events=events,
            edge_refs=edges,
            lookup=lookup,
            unique=unique,
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_filling"]  # (a lock is not copied: each copy gets its own)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._filling = threading.RLock()

    # ------------------------------------------------------------------ columns
    def _col(self, name: str) -> np.ndarray:
        col = self._cols.get(name)
        if col is None:
            with self._filling:  # one thread codes the names: codes stay those of one pass
                col = self._cols.get(name)
                if col is None:
                    col = self._extract(name)
                    self._cols[name] = col
        return col

    def _extract(self, name: str) -> np.ndarray:
        events = self._events
        if events is None:
            raise KeyError(name)
        n = len(events)
        dtype, _ = COLUMNS[name]
        gen: Iterable[Any]
        names: str | None = None  # the field, when the column codes names
        if name == "agent_code":  # agents are coded first: `to` targets follow them
            gen = map(self._names.__getitem__, map(_get_agent, events))
            names = "agent"
        elif name in ("to_code", "role_code", "tool_code"):
            attr = name[:-5]
            if attr == "to":
                self._col("agent_code")
            table = {"to": self._names, "role": self._roles, "tool": self._tools}[attr]
            get = _NoneAware(table).__getitem__
            gen = map(get, map(attrgetter(attr), events))
            names = attr
        elif name == "decision_code":
            dc = DECISION_CODE
            gen = (-1 if v is None else dc[v] for v in map(attrgetter("decision"), events))
        elif name == "step":
            gen = (-1 if v is None else v for v in map(attrgetter("step"), events))
        else:
            gen = map(attrgetter(name), events)
        try:
            return np.fromiter(gen, dtype=dtype, count=n)
        except OverflowError:
            raise _overflow(events, name, dtype) from None
        except (TypeError, ValueError):  # a value of the wrong type (a trace built in Python)
            if names is not None:
                raise _not_a_name(events, names, optional=names != "agent") from None
            if name in ("t", "dur", "cost", "tokens_in", "tokens_out"):
                raise _not_a_number(events, name) from None
            raise

    t = property(lambda self: self._col("t"), doc="Start times (float64).")
    dur = property(lambda self: self._col("dur"), doc="Durations (float64).")
    type_code = property(lambda self: self._col("type_code"), doc="Event type codes (int8).")
    agent_code = property(lambda self: self._col("agent_code"), doc="Agent codes into names.")
    to_code = property(lambda self: self._col("to_code"), doc="`to` codes into names, -1 unset.")
    role_code = property(lambda self: self._col("role_code"), doc="Role codes, -1 unset.")
    tool_code = property(lambda self: self._col("tool_code"), doc="Tool codes, -1 unset.")
    decision_code = property(lambda self: self._col("decision_code"), doc="Decision codes, -1.")
    step = property(lambda self: self._col("step"), doc="Agent-local step, -1 unset.")
    tokens_in = property(lambda self: self._col("tokens_in"), doc="Prompt tokens.")
    tokens_out = property(lambda self: self._col("tokens_out"), doc="Completion tokens.")
    cost = property(lambda self: self._col("cost"), doc="Cost per event.")

    def to_codes_at(self, rows: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """The ``to`` codes of the events at ``rows`` (-1: unset), and the names they code.

        Reads only those events when the column is not compiled yet (a check that needs the
        targets of a few spawns does not compile a column of a million). A target the graph
        has not coded yet gets a code after its names, in the list returned, and is not added
        to the graph's own table: :attr:`names` keeps the order the whole column gives it.
        Agent codes are the graph's in both cases.
        """
        self.agent_code  # noqa: B018 - every agent is coded first
        col = self._cols.get("to_code")
        events = self._events
        if col is not None or events is None:
            return np.asarray(self.to_code[rows], dtype=np.int32), self.names
        known = self._names
        extra: dict[str, int] = {}
        first_new = len(known.names)

        def code(name: str | None) -> int:
            if name is None:
                return -1
            found = known.get(name)
            if found is not None:
                return found
            return extra.setdefault(name, first_new + len(extra))

        codes = np.fromiter(
            (code(events[i].to) for i in rows.tolist()), dtype=np.int32, count=len(rows)
        )
        return codes, [*known.names, *extra]

    @property
    def names(self) -> list[str]:
        """Agent names (and ``to`` targets), by code."""
        self.to_code  # noqa: B018 - make sure `to` names are in the table
        return self._names.names

    @property
    def roles(self) -> list[str]:
        """Role names, by code."""
        self.role_code  # noqa: B018
        return self._roles.names

    @property
    def tools(self) -> list[str]:
        """Tool names, by code."""
        self.tool_code  # noqa: B018
        return self._tools.names

    @property
    def n(self) -> int:
        """Number of events."""
        return len(self.ids)

    def id_at(self, index: int) -> str:
        """Event id at ``index``."""
        v = self.ids[index]
        return v if isinstance(v, str) else str(v.as_py())

    def edge_ref(self, k: int, end: str) -> str:
        """The id string edge ``k`` names at ``end`` (``"src"`` or ``"dst"``), as recorded."""
        refs = self._edge_refs
        if refs is None:
            return "?"
        if callable(refs):
            return str(refs(k, end))
        if isinstance(refs, tuple) and len(refs) == 2 and not hasattr(refs[0], "src"):
            v = refs[0 if end == "src" else 1][k]
            return v if isinstance(v, str) else str(v.as_py())
        return str(getattr(refs[k], end))

    def ids_unique(self) -> bool:
        """``True`` when no two events share an id."""
        if self._unique is None:
            if self._lookup is not None:
                self._unique = len(self._lookup) == self.n
            elif isinstance(self.ids, list):
                self._unique = len(set(self.ids)) == self.n
            else:
                import pyarrow.compute as pc  # noqa: PLC0415  only columnar graphs hold Arrow ids

                self._unique = bool(pc.count_distinct(self.ids).as_py() == self.n)
        return self._unique

    def index_of(self, event_id: str) -> int:
        """Index of the (first) event with id ``event_id``.

        Raises:
            KeyError: No event has that id.
        """
        if self._lookup is None:
            lookup: dict[str, int] = {}
            for i, k in enumerate(self.ids if isinstance(self.ids, list) else self.ids.to_pylist()):
                lookup.setdefault(k, i)
            self._lookup = lookup
        try:
            return self._lookup[event_id]
        except KeyError:
            raise KeyError(f"no event has id {event_id!r}") from None

    # ------------------------------------------------------------------ edges and order
    def dependency_edges(
        self, edge_types: Iterable[EdgeType] = DEPENDENCY_EDGES
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` index arrays of the edges of ``edge_types`` whose ends both exist."""
        key = frozenset(EdgeType(x) for x in edge_types)
        hit = self._dep_cache.get(key)
        if hit is not None:
            return hit
        mask = (self.src >= 0) & (self.dst >= 0)
        if key != frozenset(EdgeType):
            wanted = np.zeros(len(EDGE_TYPES), dtype=bool)
            wanted[[EDGE_CODE[x] for x in key]] = True
            mask &= wanted[self.edge_code]
        out = (self.src, self.dst) if bool(mask.all()) else (self.src[mask], self.dst[mask])
        self._dep_cache[key] = out
        return out

    def topological_order(self, edge_types: Iterable[EdgeType] = DEPENDENCY_EDGES) -> np.ndarray:
        """Event indices in an order where every edge goes forward.

        Uses recording order when every edge already points forward (the common case, O(E));
        otherwise Kahn's algorithm, ties broken by recording order.

        Raises:
            CycleError: The edges contain a cycle; the error lists the events on one.
        """
        key = frozenset(EdgeType(x) for x in edge_types)
        hit = self._order_cache.get(key)
        if hit is not None:
            return hit
        src, dst = self.dependency_edges(key)
        if not len(src) or bool(np.all(src < dst)):
            order = np.arange(self.n, dtype=np.int64)
        else:
            order = self._kahn(src, dst)
        self._order_cache[key] = order
        return order

    def _kahn(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        n = self.n
        indeg_l = np.bincount(dst, minlength=n).tolist()
        perm = np.argsort(src, kind="stable")
        succ_l = dst[perm].tolist()
        starts_l = np.searchsorted(src[perm], np.arange(n + 1)).tolist()
        heap = [i for i in range(n) if indeg_l[i] == 0]
        heapq.heapify(heap)
        out: list[int] = []
        while heap:
            u = heapq.heappop(heap)
            out.append(u)
            for v in succ_l[starts_l[u] : starts_l[u + 1]]:
                indeg_l[v] -= 1
                if indeg_l[v] == 0:
                    heapq.heappush(heap, v)
        if len(out) < n:
            raise CycleError(self._one_cycle(src, dst, indeg_l), self.ids)
        return np.asarray(out, dtype=np.int64)

    @staticmethod
    def _one_cycle(src: np.ndarray, dst: np.ndarray, indeg: list[int]) -> list[int]:
        """Find one cycle among the nodes Kahn's algorithm could not order."""
        remaining = {i for i, d in enumerate(indeg) if d > 0}
        preds: dict[int, int] = {}
        for u, v in zip(src.tolist(), dst.tolist(), strict=True):
            if u in remaining and v in remaining and v not in preds:
                preds[v] = u
        seen: dict[int, int] = {}
        path: list[int] = []
        node = min(remaining)
        while node not in seen:
            seen[node] = len(path)
            path.append(node)
            node = preds[node]
        cycle = path[seen[node] :]
        cycle.reverse()
        k = cycle.index(min(cycle))
        cycle = cycle[k:] + cycle[:k]
        return [*cycle, cycle[0]]

    def find_cycle(self, edge_types: Iterable[EdgeType] = tuple(EdgeType)) -> list[int] | None:
        """Event indices of one cycle (first repeated at the end), or ``None`` when acyclic."""
        try:
            self.topological_order(edge_types)
        except CycleError as err:
            return err.cycle
        return None

    # ------------------------------------------------------------------ critical path
    def critical_path(self, edge_types: Iterable[EdgeType] = DEPENDENCY_EDGES) -> CriticalPath:
        """The longest ``dur``-weighted chain of events along dependency edges.

        Raises:
            CycleError: The dependency edges contain a cycle.
        """
        key = frozenset(EdgeType(x) for x in edge_types)
        hit = self._cp_cache.get(key)
        if hit is not None:
            return hit
        n = self.n
        if n == 0:
            return CriticalPath(0.0, (), ())
        src, dst = self.dependency_edges(key)
        if len(src) and not bool(np.all(src < dst)):
            # not in recording order: order topologically (this raises on a cycle)
            order = self.topological_order(key)
            pos = np.empty(n, dtype=np.int64)
            pos[order] = np.arange(n, dtype=np.int64)
            sort_key = pos[dst]
            del pos
        else:
            sort_key = dst
        perm = None
        if len(sort_key) > 1 and not bool(np.all(sort_key[1:] >= sort_key[:-1])):
            # the edges are read in this order a slice at a time (no sorted copies of them)
            perm = np.argsort(sort_key, kind="stable")
        del sort_key
        dur = np.ascontiguousarray(self.dur, dtype=np.float64)
        start, pred = _longest_starts(src, dst, dur, n, perm)
        del perm
        finish = start
        with np.errstate(over="ignore"):  # finite durations can add up to inf: the length is inf
            finish += dur
        end = int(np.argmax(finish))
        length = float(finish[end])
        del start, finish
        links = pred.data
        path = [end]
        while links[path[-1]] >= 0:
            path.append(links[path[-1]])
        path.reverse()
        out = CriticalPath(length, tuple(path), self._ids_at(path))
        self._cp_cache[key] = out
        return out

    def _ids_at(self, indices: list[int]) -> tuple[str, ...]:
        """Event ids at ``indices``, in one step for Arrow ids."""
        ids = self.ids
        if isinstance(ids, list):
            return tuple(ids[i] for i in indices)
        import pyarrow as pa  # noqa: PLC0415  only columnar graphs hold Arrow ids

        at = np.asarray(indices, dtype=np.int64)
        taken = ids.take(pa.Array.from_buffers(pa.int64(), len(at), [None, pa.py_buffer(at)]))
        return tuple(v if isinstance(v, str) else str(v) for v in taken.to_pylist())

    def work(self) -> float:
        """Total work: the sum of every event's ``dur`` (inf when it exceeds a double)."""
        if not self.n:
            return 0.0
        with np.errstate(over="ignore"):
            return float(self.dur.sum())

    def speedup(self, edge_types: Iterable[EdgeType] = DEPENDENCY_EDGES) -> float:
        """Parallel speedup ``work / critical path`` (1.0 when there is no work)."""
        cp = self.critical_path(edge_types).length
        return self.work() / cp if cp > 0 else 1.0

    # ------------------------------------------------------------------ agents
    def tool_mask(self) -> np.ndarray:
        """Boolean per name code: the name is a tool (only ever produces tool results)."""
        n_names = len(self.names)
        acting = np.zeros(n_names, dtype=bool)
        results = np.zeros(n_names, dtype=bool)
        ac, tc = self.agent_code, self.type_code
        if len(ac) and int(ac.min()) < 0:  # an index of -1 would name the last name
            raise ValueError("every event needs an agent: an agent code is -1 (not set)")
        for lo in range(0, len(ac), _CHUNK):  # a slice at a time: no per-event int64 copies
            codes = ac[lo : lo + _CHUNK]
            is_result = tc[lo : lo + _CHUNK] == _TOOL_RESULT
            acting[codes[~is_result]] = True
            results[codes[is_result]] = True
        return results & ~acting

    def agent_codes(self) -> np.ndarray:
        """Codes (into :attr:`names`) of the agents: actors and spawned names, tools excluded."""
        n_names = len(self.names)
        present = np.zeros(n_names, dtype=bool)
        codes = self.agent_code
        for lo in range(0, len(codes), _CHUNK):  # numpy copies an index array to int64
            present[codes[lo : lo + _CHUNK]] = True
        spawned = self.to_code[(self.type_code == _SPAWN) & (self.to_code >= 0)]
        present[spawned] = True
        present &= ~self.tool_mask()
        return np.flatnonzero(present)

    def spawn_parents(self) -> dict[int, tuple[int, int]]:
        """Map child name code to ``(parent name code, index of its earliest spawn event)``."""
        idx = np.flatnonzero((self.type_code == _SPAWN) & (self.to_code >= 0))
        if not len(idx):
            return {}
        idx = idx[np.argsort(self.t[idx], kind="stable")]
        out: dict[int, tuple[int, int]] = {}
        for i, child, parent in zip(
            idx.tolist(), self.to_code[idx].tolist(), self.agent_code[idx].tolist(), strict=True
        ):
            if child != parent and child not in out:
                out[child] = (parent, i)
        return out

    def spawn_depth(self) -> int:
        """Depth of the spawn tree: 0 for a lone agent, 1 when a root spawns workers, ..."""
        parents = self.spawn_parents()
        depth: dict[int, int] = {}
        best = 0
        for agent in parents:
            chain: list[int] = []
            node = agent
            while node in parents and node not in depth and node not in chain:
                chain.append(node)
                node = parents[node][0]
            base = depth.get(node, 0)
            for k, a in enumerate(reversed(chain)):
                depth[a] = base + k + 1
            best = max(best, depth.get(agent, 0))
        return best

    # ------------------------------------------------------------------ critical steps
    def step_structure(self) -> StepStructure:
        """Steps, stages and episodes of every agent (see :mod:`orchestrace.trace.steps`)."""
        return step_structure(self)

    def critical_steps(self) -> int:
        """PARL Critical Steps (see :func:`orchestrace.trace.steps.critical_steps`)."""
        return step_structure(self).critical_steps()


# ---------------------------------------------------------------------- functional API
class HasGraph(Protocol):
    """Anything with a compiled ``graph``: a :class:`~orchestrace.trace.model.Trace`."""

    @property
    def graph(self) -> TraceGraph:
        """The compiled graph."""


#: What the functions below accept: a compiled graph, or a trace (its cached ``graph``).
GraphLike = TraceGraph | HasGraph


def _graph(trace: GraphLike) -> TraceGraph:
    return trace if isinstance(trace, TraceGraph) else trace.graph


def critical_path(
    trace: GraphLike, edge_types: Iterable[EdgeType] = DEPENDENCY_EDGES
) -> CriticalPath:
    """The longest ``dur``-weighted chain of dependent events of a trace (or graph).

    Follows causal, spawn, message, tool_dependency, return and aggregate edges by default
    (not temporal or safety_flow, which order events without making one wait for another).

    Raises:
        CycleError: The dependency edges contain a cycle (``check_trace`` reports it too).
    """
    return _graph(trace).critical_path(edge_types)


def critical_path_length(
    trace: GraphLike, edge_types: Iterable[EdgeType] = DEPENDENCY_EDGES
) -> float:
    """Length in seconds of :func:`critical_path`."""
    return critical_path(trace, edge_types).length


def work(trace: GraphLike) -> float:
    """Total work: the sum of every event's ``dur`` (seconds)."""
    return _graph(trace).work()


def speedup(trace: GraphLike, edge_types: Iterable[EdgeType] = DEPENDENCY_EDGES) -> float:
    """Parallel speedup = work / critical path (1.0 when the trace has no work)."""
    return _graph(trace).speedup(edge_types)
