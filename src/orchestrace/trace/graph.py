"""Graph analytics: order, cycles, critical path, work, speedup, spawn tree, Critical Steps.

A :class:`TraceGraph` is a trace compiled to columns (numpy arrays): times, durations, type
and agent codes, and edges as ``(src, dst)`` index pairs. It is built from a
:class:`~orchestrace.trace.model.Trace` (columns are extracted lazily, on first use) or straight
from Arrow/Parquet columns without ever creating event objects, which keeps a
1,000,000-event analysis within about twice the memory of its Arrow table. Every algorithm here
is linear in events plus edges (sorts are skipped when edges already arrive in order).

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
    >>> critical_steps(tr)
    4
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from orchestrace.errors import TraceError
from orchestrace.trace.model import Decision, EdgeType, EventType

if TYPE_CHECKING:
    from orchestrace.trace.model import Event, Trace

__all__ = [
    "ACTION_TYPES",
    "DEPENDENCY_EDGES",
    "CriticalPath",
    "CycleError",
    "TraceGraph",
    "critical_path",
    "critical_path_length",
    "critical_steps",
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

#: Event types that count as an agent's steps (actions) for Critical Steps.
ACTION_TYPES: frozenset[EventType] = frozenset(
    {
        EventType.ORCHESTRATOR_DECISION,
        EventType.SPAWN,
        EventType.MESSAGE,
        EventType.TOOL_CALL,
        EventType.RETURN,
        EventType.AGGREGATE,
        EventType.LLM_CALL,
    }
)

EVENT_TYPES: list[EventType] = list(EventType)
EDGE_TYPES: list[EdgeType] = list(EdgeType)
DECISIONS: list[Decision] = list(Decision)
EVENT_CODE: dict[str, int] = {t.value: i for i, t in enumerate(EVENT_TYPES)}
EDGE_CODE: dict[str, int] = {t.value: i for i, t in enumerate(EDGE_TYPES)}
DECISION_CODE: dict[str, int] = {d.value: i for i, d in enumerate(DECISIONS)}
_SPAWN = EVENT_CODE[EventType.SPAWN]
_TOOL_RESULT = EVENT_CODE[EventType.TOOL_RESULT]
_DELEGATE = DECISION_CODE[Decision.DELEGATE]
_ACTION_MASK = np.zeros(len(EVENT_TYPES), dtype=bool)
_ACTION_MASK[[EVENT_CODE[x] for x in ACTION_TYPES]] = True
_get_id, _get_t, _get_dur, _get_type, _get_agent = map(
    attrgetter, ("id", "t", "dur", "type", "agent")
)
_get_src, _get_dst = attrgetter("src"), attrgetter("dst")
_CHUNK = 1 << 16

# columns a TraceGraph can hold, with their dtype and missing value
_COLUMNS: dict[str, tuple[Any, Any]] = {
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


class _NoneAware(dict[Any, int]):
    """A view of a :class:`_Names` table that maps ``None`` to -1 (C-level lookups)."""

    def __init__(self, table: _Names) -> None:
        super().__init__(table)
        self[None] = -1
        self._table = table

    def __missing__(self, name: str) -> int:
        code = self[name] = self._table[name]
        return code


class _Names(dict[str, int]):
    """An append-only string table: ``table[name]`` gives the code, adding new names."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        super().__init__()
        self.names: list[str] = []
        for x in names:
            self[x]

    def __missing__(self, name: str) -> int:
        code = self[name] = len(self.names)
        self.names.append(name)
        return code

    def code(self, name: str) -> int:
        return self[name]


def _overflow(events: Sequence[Any], name: str) -> Exception:
    """The error for an event field too large for its int64 column."""
    from orchestrace.errors import Problem, TraceValidationError

    for i, e in enumerate(events):
        value = getattr(e, name, None)
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            return TraceValidationError(
                [
                    Problem(
                        "out-of-range",
                        f"{name} is {value}, beyond the largest count 2^63-1",
                        f"record {name} as an integer from 0 to 2^63-1",
                        path=f"$.events[{i}].{name}",
                        event_id=e.id if isinstance(e.id, str) else None,
                    )
                ]
            )
    return TraceValidationError(
        [
            Problem(
                "out-of-range",
                f"an event's {name} does not fit a 64-bit integer",
                f"record {name} as an integer from 0 to 2^63-1",
                path="$.events",
            )
        ]
    )


def _is_arrow(x: Any) -> bool:
    return type(x).__module__.startswith("pyarrow")


def _index_in(values: Any, ids: Any) -> np.ndarray:
    """Map each string of the Arrow array ``values`` to its position in ``ids`` (-1: absent)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    id_arr = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    out = pc.index_in(values, value_set=id_arr)
    return np.asarray(out.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


_POW10 = np.array([10**k for k in range(19)], dtype=np.int64)
_DIGITS = frozenset("0123456789")


def _int_ids(strs: list[str], prefix: str) -> np.ndarray | None:
    """Parse ids of the exact form ``prefix + canonical decimal`` in bulk, else ``None``.

    Every step is a C-level string operation, so this is several times faster than hashing a
    million strings. It only accepts ids that the integer identifies uniquely.
    """
    n = len(strs)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    joined = " ".join(strs)
    if prefix:
        if not joined.startswith(prefix) or joined.count(prefix) != n:
            return None
        if joined.count(" " + prefix) != n - 1:
            return None
        joined = joined.replace(prefix, "")
    digits = joined.replace(" ", "")
    if not (digits.isascii() and digits.isdigit()):
        return None
    with np.errstate(all="ignore"):
        ints = np.fromstring(joined, dtype=np.int64, sep=" ")
    if len(ints) != n or (ints < 0).any():
        return None
    # canonical: no leading zeros, so the digit count is exactly the decimal width
    width = np.maximum(np.searchsorted(_POW10, ints, side="right"), 1)
    if int(width.sum()) != len(digits):
        return None
    return np.asarray(ints)


def _arrow_int_ids(values: Any, prefix: str) -> np.ndarray | None:
    """Arrow twin of :func:`_int_ids`: parse ``prefix + canonical decimal`` strings, else None."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if values.null_count or not pc.all(pc.starts_with(values, prefix)).as_py():
        return None
    digits = pc.utf8_slice_codeunits(values, start=len(prefix)) if prefix else values
    if not pc.all(pc.string_is_ascii(digits)).as_py():
        return None
    if not pc.all(pc.ascii_is_decimal(digits)).as_py():
        return None
    lengths = np.asarray(pc.utf8_length(digits).to_numpy(zero_copy_only=False))
    if (lengths == 0).any() or (lengths > 18).any():
        return None
    try:
        ints = np.asarray(pc.cast(digits, pa.int64()).to_numpy(zero_copy_only=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    width = np.maximum(np.searchsorted(_POW10, ints, side="right"), 1)
    if not np.array_equal(width, lengths):
        return None
    return ints


def _dense_table(id_ints: np.ndarray, n: int) -> tuple[np.ndarray, bool] | None:
    """Position of each integer id (first occurrence), and whether all ids are distinct."""
    top = int(id_ints.max()) + 1 if len(id_ints) else 0
    if top > 4 * n + 1024:
        return None
    table = np.full(top, -1, dtype=np.int64)
    table[id_ints[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)
    return table, bool(np.count_nonzero(table >= 0) == n)


def _lookup_ints(table: np.ndarray, ref_ints: np.ndarray) -> np.ndarray:
    ok = ref_ints < len(table)
    out = np.full(len(ref_ints), -1, dtype=np.int64)
    out[ok] = table[ref_ints[ok]]
    return out


def _map_ids(ids: list[str], refs: list[str]) -> tuple[np.ndarray, bool, dict[str, int] | None]:
    """``(index of each ref or -1, ids are unique, id -> index dict or None)``."""
    n = len(ids)
    prefix = ids[0].rstrip("0123456789") if n else ""
    if n >= 1024 and " " not in prefix and not (_DIGITS & set(prefix)):
        id_ints = _int_ids(ids, prefix)
        dense = _dense_table(id_ints, n) if id_ints is not None else None
        if dense is not None:
            ref_ints = _int_ids(refs, prefix)
            if ref_ints is not None:
                return _lookup_ints(dense[0], ref_ints), dense[1], None
    lookup = dict(zip(reversed(ids), range(n - 1, -1, -1), strict=True))
    idx = np.fromiter(map(lookup.get, refs, repeat(-1)), dtype=np.int64, count=len(refs))
    return idx, len(lookup) == n, lookup


class _Columns:
    """Numpy columns filled batch by batch (preallocated when the total is known)."""

    def __init__(self, spec: dict[str, tuple[Any, Any]], total: int | None) -> None:
        self.spec = spec
        self.total = total
        self.pos = 0
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in spec}
        self.full = (
            {k: np.full(total, 0 if m is None else m, dtype=d) for k, (d, m) in spec.items()}
            if total is not None
            else None
        )

    def append(self, got: dict[str, np.ndarray], count: int) -> None:
        for key, (dtype, missing) in self.spec.items():
            if self.full is not None:
                if self.pos + count > len(self.full[key]):
                    raise ValueError(f"more rows than the {self.total} announced")
                if key in got:
                    self.full[key][self.pos : self.pos + count] = got[key]
            else:
                value = got.get(key)
                self.parts[key].append(
                    value if value is not None else np.full(count, missing, dtype=dtype)
                )
        self.pos += count

    def finish(self) -> dict[str, np.ndarray]:
        if self.full is not None:
            if self.pos != self.total:
                raise ValueError(f"expected {self.total} rows, got {self.pos}")
            return self.full
        return {
            k: (v[0] if len(v) == 1 else np.concatenate(v)) if v else np.zeros(0, self.spec[k][0])
            for k, v in self.parts.items()
        }


class TraceGraph:
    """A trace compiled to columns and integer edge arrays, for fast analytics.

    Build one with :meth:`from_trace` (or use the cached ``trace.graph``), or from columnar
    data with :meth:`from_columns`. Column attributes (``t``, ``dur``, ``type_code``,
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
        names: _Names,
        roles: _Names,
        tools: _Names,
        src: np.ndarray,
        dst: np.ndarray,
        edge_code: np.ndarray,
        *,
        events: Sequence[Event] | None = None,
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

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_trace(cls, trace: Trace) -> TraceGraph:
        """Compile ``trace``. Times, types, agents and edges now; other columns on first use."""
        events = trace.events
        n = len(events)
        names = _Names()
        cols: dict[str, np.ndarray] = {
            "t": np.fromiter(map(_get_t, events), dtype=np.float64, count=n),
            "dur": np.fromiter(map(_get_dur, events), dtype=np.float64, count=n),
            "type_code": np.fromiter(
                map(EVENT_CODE.__getitem__, map(_get_type, events)), dtype=np.int8, count=n
            ),
            "agent_code": np.fromiter(
                map(names.__getitem__, map(_get_agent, events)), dtype=np.int32, count=n
            ),
        }
        ids = list(map(_get_id, events))
        edges = trace.edges
        refs = [*map(_get_src, edges), *map(_get_dst, edges)]
        both, unique, lookup = _map_ids(ids, refs)
        del refs
        m = len(edges)
        edge_code = np.fromiter(
            map(EDGE_CODE.__getitem__, map(_get_type, edges)), dtype=np.int8, count=m
        )
        return cls(
            ids,
            cols,
            names,
            _Names(),
            _Names(),
            both[:m],
            both[m:],
            edge_code,
            events=events,
            edge_refs=edges,
            lookup=lookup,
            unique=unique,
        )

    @classmethod
    def from_columns(
        cls,
        ids: Any,
        t: Any,
        dur: Any,
        types: Any,
        agents: Any,
        edge_src: Any,
        edge_dst: Any,
        edge_types: Any,
        **optional: Any,
    ) -> TraceGraph:
        """Compile columnar data (pyarrow arrays or sequences) without building events.

        Args:
            ids: Event ids.
            t: Start times.
            dur: Durations.
            types: Event type names.
            agents: Producing agent of each event.
            edge_src: Edge source ids.
            edge_dst: Edge destination ids.
            edge_types: Edge type names.
            **optional: Any of ``to``, ``role``, ``tool``, ``decision`` (strings, null for
                unset), ``step`` (ints, null for unset), ``tokens_in``, ``tokens_out``,
                ``cost``.

        Raises:
            ValueError: A type or decision name is unknown (the message names it).
        """
        batch = {"id": ids, "t": t, "dur": dur, "type": types, "agent": agents, **optional}
        edges = {"src": edge_src, "dst": edge_dst, "type": edge_types}
        graph = cls.from_batches([batch], [edges])
        graph._edge_refs = (edge_src, edge_dst)
        return graph

    @classmethod
    def from_batches(
        cls,
        event_batches: Iterable[Any],
        edge_batches: Iterable[Any],
        *,
        n_events: int | None = None,
        n_edges: int | None = None,
        edge_refs: Callable[[int, str], str] | None = None,
    ) -> TraceGraph:
        """Compile columns arriving in batches (e.g. Parquet row groups), in bounded memory.

        Each event batch is a mapping (or ``pyarrow.RecordBatch``) with the event columns named
        as in the Parquet ``events`` table (``id``, ``t``, ``dur``, ``type``, ``agent`` and
        optionally ``to``, ``role``, ``tool``, ``decision``, ``step``, ``tokens_in``,
        ``tokens_out``, ``cost``); each edge batch has ``src``, ``dst`` and ``type``. Only
        compact numpy columns are kept; with ``n_events``/``n_edges`` they are allocated once.

        Args:
            event_batches: Event column batches, in event order.
            edge_batches: Edge column batches, read after all events.
            n_events: Number of events, when known.
            n_edges: Number of edges, when known.
            edge_refs: ``f(k, "src"|"dst")`` giving edge ``k``'s id string, for messages.

        Raises:
            ValueError: A type or decision name is unknown (the message names it).
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        pool = pa.default_memory_pool()

        def arr(x: Any) -> Any:
            try:
                out = x if _is_arrow(x) else pa.array(x, pa.string() if not len(x) else None)
            except OverflowError:
                raise ValueError("a number does not fit a 64-bit column (2^63-1 at most)") from None
            return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out

        def numeric(x: Any, dtype: Any, missing: Any) -> np.ndarray:
            a = arr(x)
            if a.null_count:
                a = a.fill_null(missing)
            if pa.types.is_unsigned_integer(a.type) and len(a) and pc.max(a).as_py() >= 2**63:
                raise ValueError("a number does not fit a 64-bit column (2^63-1 at most)")
            return np.asarray(a.to_numpy(zero_copy_only=False), dtype=dtype)

        member_sets = {
            "event type": pa.array([m.value for m in EVENT_TYPES], pa.string()),
            "edge type": pa.array([m.value for m in EDGE_TYPES], pa.string()),
            "decision": pa.array([m.value for m in DECISIONS], pa.string()),
        }

        def enum_codes(x: Any, what: str, dtype: Any) -> np.ndarray:
            a = pc.cast(arr(x), pa.string())
            out = pc.index_in(a, value_set=member_sets[what])
            unknown = pc.and_(pc.is_null(out), pc.is_valid(a))
            if pc.any(unknown).as_py():
                bad = pc.filter(a, unknown).unique().to_pylist()[:5]
                choices = member_sets[what].to_pylist()
                raise ValueError(f"unknown {what} {bad}; use one of {choices}")
            return numeric(out, dtype, -1)

        def string_codes(x: Any, table: _Names) -> np.ndarray:
            enc = pc.dictionary_encode(pc.cast(arr(x), pa.string()))
            local = [table[s] for s in enc.dictionary.to_pylist()]
            remap = np.asarray([*local, -1], dtype=np.int32)
            return np.asarray(remap[numeric(enc.indices, np.int64, -1)])

        def as_dict(raw: Any) -> dict[str, Any]:
            if hasattr(raw, "schema"):
                return {k: raw.column(k) for k in raw.schema.names}
            return dict(raw)

        # ---- events
        names, roles, tools = _Names(), _Names(), _Names()
        tables = {
            "to": ("to_code", names),
            "role": ("role_code", roles),
            "tool": ("tool_code", tools),
        }
        grow = _Columns(_COLUMNS, n_events)
        id_parts: list[Any] = []
        for raw in event_batches:
            batch = as_dict(raw)
            id_parts.append(pc.cast(arr(batch["id"]), pa.string()))
            got = {
                "t": numeric(batch["t"], np.float64, np.nan),
                "dur": numeric(batch["dur"], np.float64, 0.0),
                "type_code": enum_codes(batch["type"], "event type", np.int8),
                "agent_code": string_codes(batch["agent"], names),
            }
            for key, value in batch.items():
                if value is None or key in ("id", "t", "dur", "type", "agent", "trace_id"):
                    continue
                if key in tables:
                    col, table = tables[key]
                    got[col] = string_codes(value, table)
                elif key == "decision":
                    got["decision_code"] = enum_codes(value, "decision", np.int8)
                elif key in ("step", "tokens_in", "tokens_out", "cost"):
                    dtype, missing = _COLUMNS[key]
                    got[key] = numeric(value, dtype, missing)
                elif key not in ("from", "content", "content_ref", "trusted", "error", "attrs"):
                    raise TypeError(f"unknown column {key!r}")
            grow.append(got, len(id_parts[-1]))
            del got, batch, raw
            pool.release_unused()
        cols = grow.finish()
        ids_arr = pa.concat_arrays(id_parts) if id_parts else pa.array([], pa.string())
        del id_parts
        n = len(ids_arr)

        # ---- edges: ids of the form prefix+integer map through a dense table
        first = ids_arr[0].as_py() if n else ""
        prefix = first.rstrip("0123456789")
        id_ints = _arrow_int_ids(ids_arr, prefix) if n >= 1024 else None
        dense = _dense_table(id_ints, n) if id_ints is not None else None
        del id_ints
        edge_cols = _Columns(
            {"src": (np.int64, -1), "dst": (np.int64, -1), "code": (np.int8, 0)}, n_edges
        )
        kept: list[tuple[Any, Any]] = []
        for raw in edge_batches:
            batch = as_dict(raw)
            src_b = pc.cast(arr(batch["src"]), pa.string())
            dst_b = pc.cast(arr(batch["dst"]), pa.string())
            got = {"code": enum_codes(batch["type"], "edge type", np.int8)}
            for key, refs in (("src", src_b), ("dst", dst_b)):
                ints = _arrow_int_ids(refs, prefix) if dense is not None else None
                got[key] = (
                    _lookup_ints(dense[0], ints)
                    if dense is not None and ints is not None
                    else (_index_in(refs, ids_arr) if len(refs) else np.zeros(0, np.int64))
                )
            edge_cols.append(got, len(src_b))
            if edge_refs is None:
                kept.append((src_b, dst_b))
            del got, batch, raw, src_b, dst_b
            pool.release_unused()
        ecols = edge_cols.finish()
        unique = dense[1] if dense is not None else None
        del dense
        pool.release_unused()
        refs_out: Any = edge_refs
        if edge_refs is None:
            refs_out = (
                pa.concat_arrays([a for a, _ in kept]) if kept else pa.array([], pa.string()),
                pa.concat_arrays([b for _, b in kept]) if kept else pa.array([], pa.string()),
            )
        return cls(
            ids_arr,
            cols,
            names,
            roles,
            tools,
            ecols["src"],
            ecols["dst"],
            ecols["code"],
            edge_refs=refs_out,
            unique=unique,
        )

    # ------------------------------------------------------------------ columns
    def _col(self, name: str) -> np.ndarray:
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
        dtype, _ = _COLUMNS[name]
        gen: Iterable[Any]
        if name in ("to_code", "role_code", "tool_code"):
            attr = name[:-5]
            table = {"to": self._names, "role": self._roles, "tool": self._tools}[attr]
            get = _NoneAware(table).__getitem__
            gen = map(get, map(attrgetter(attr), events))
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
            raise _overflow(events, name) from None

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
                import pyarrow.compute as pc

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
        import heapq

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
        order = self.topological_order(key)
        src, dst = self.dependency_edges(key)
        if n > 1 and not bool(np.all(order[1:] > order[:-1])):
            pos = np.empty(n, dtype=np.int64)
            pos[order] = np.arange(n, dtype=np.int64)
            sort_key = pos[dst]
        else:
            sort_key = dst
        if len(sort_key) > 1 and not bool(np.all(sort_key[1:] >= sort_key[:-1])):
            perm = np.argsort(sort_key, kind="stable")
            src, dst = src[perm], dst[perm]
        # DP in edge order: every edge into u precedes every edge out of u.
        dur = self.dur
        start = array("d", bytes(8 * n))
        pred = array("q", [-1]) * n
        durl = array("d", dur.tobytes())
        for lo in range(0, len(src), _CHUNK):
            for u, v in zip(
                src[lo : lo + _CHUNK].tolist(), dst[lo : lo + _CHUNK].tolist(), strict=True
            ):
                f = start[u] + durl[u]
                if f > start[v]:
                    start[v] = f
                    pred[v] = u
        finish = np.frombuffer(start, dtype=np.float64) + dur
        end = int(np.argmax(finish))
        path = [end]
        while pred[path[-1]] >= 0:
            path.append(pred[path[-1]])
        path.reverse()
        out = CriticalPath(float(finish[end]), tuple(path), tuple(self.id_at(i) for i in path))
        self._cp_cache[key] = out
        return out

    def work(self) -> float:
        """Total work: the sum of every event's ``dur``."""
        return float(self.dur.sum()) if self.n else 0.0

    def speedup(self, edge_types: Iterable[EdgeType] = DEPENDENCY_EDGES) -> float:
        """Parallel speedup ``work / critical path`` (1.0 when there is no work)."""
        cp = self.critical_path(edge_types).length
        return self.work() / cp if cp > 0 else 1.0

    # ------------------------------------------------------------------ agents
    def tool_mask(self) -> np.ndarray:
        """Boolean per name code: the name is a tool (only ever produces tool results)."""
        n_names = len(self.names)
        ac = self.agent_code
        is_result = self.type_code == _TOOL_RESULT
        acting = np.bincount(ac[~is_result], minlength=n_names)[:n_names] > 0
        results = np.bincount(ac[is_result], minlength=n_names)[:n_names] > 0
        return results & ~acting

    def agent_codes(self) -> np.ndarray:
        """Codes (into :attr:`names`) of the agents: actors and spawned names, tools excluded."""
        n_names = len(self.names)
        present = np.zeros(n_names, dtype=bool)
        present[self.agent_code] = True
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
        """Steps, stages and episodes of every agent (see :func:`critical_steps`)."""
        return _step_structure(self)

    def critical_steps(self) -> int:
        """PARL Critical Steps of the trace (see :func:`critical_steps`)."""
        return self.step_structure().critical_steps()


@dataclass(frozen=True)
class StepStructure:
    """How a trace's action events group into steps, stages and episodes.

    Attributes:
        stage_main: Main steps per stage (int64).
        stage_episode: Episode of each stage.
        episode_parent_stage: For each episode, the parent stage it is attributed to (-1: root).
        episode_agent: Name code of each episode's agent.
    """

    stage_main: np.ndarray
    stage_episode: np.ndarray
    episode_parent_stage: np.ndarray
    episode_agent: np.ndarray

    @property
    def total_steps(self) -> int:
        """Steps taken by all agents together."""
        return int(self.stage_main.sum())

    def critical_steps(self) -> int:
        """Sum over stages of main steps plus the longest attributed episode, from the roots."""
        n_ep = len(self.episode_agent)
        if n_ep == 0:
            return 0
        parent_stage = self.episode_parent_stage.tolist()
        stage_ep = self.stage_episode.tolist()
        parent_ep = [stage_ep[s] if s >= 0 else -1 for s in parent_stage]
        # depth of each episode in the attribution tree, guarding against cycles
        depth = [-1] * n_ep
        for e in range(n_ep):
            chain = []
            node = e
            while node >= 0 and depth[node] < 0 and node not in chain:
                chain.append(node)
                node = parent_ep[node]
            base = depth[node] + 1 if node >= 0 and depth[node] >= 0 else 0
            for k, x in enumerate(reversed(chain)):
                depth[x] = base + k
        stage_total = self.stage_main.astype(np.int64).tolist()
        stage_branch = [0] * len(stage_total)
        ep_value = [0] * n_ep
        stages_of: list[list[int]] = [[] for _ in range(n_ep)]
        for s, e in enumerate(stage_ep):
            stages_of[e].append(s)
        for e in sorted(range(n_ep), key=lambda x: -depth[x]):
            ep_value[e] = sum(stage_total[s] + stage_branch[s] for s in stages_of[e])
            s = parent_stage[e]
            if s >= 0 and parent_ep[e] != e and depth[parent_ep[e]] < depth[e]:
                stage_branch[s] = max(stage_branch[s], ep_value[e])
        roots = [e for e in range(n_ep) if parent_stage[e] < 0]
        return max((ep_value[e] for e in roots), default=0)


def _step_structure(g: TraceGraph) -> StepStructure:
    n = g.n
    empty = np.zeros(0, dtype=np.int64)
    if n == 0:
        return StepStructure(empty, empty, empty, empty)
    type_code = g.type_code
    agent = g.agent_code.astype(np.int64)
    t = g.t
    tool = g.tool_mask()
    act = _ACTION_MASK[type_code] & ~tool[agent]

    # an event "waits" when it consumes an event of another agent
    src, dst = g.dependency_edges()
    waits = np.zeros(n, dtype=bool)
    if len(src):
        waits[dst[agent[src] != agent[dst]]] = True

    # entries: spawns and delegations open an episode of the target agent
    to = g.to_code.astype(np.int64)
    entry = (
        act & (to >= 0) & (to != agent) & ((type_code == _SPAWN) | (g.decision_code == _DELEGATE))
    )
    ent_idx = np.flatnonzero(entry)
    ent_idx = ent_idx[np.lexsort((ent_idx, t[ent_idx], to[ent_idx]))]
    ent_child = to[ent_idx]

    # action events sorted by agent, time, index; each gets an episode
    a_idx = np.flatnonzero(act)
    a_idx = a_idx[np.lexsort((a_idx, t[a_idx], agent[a_idx]))]
    a_agent = agent[a_idx]
    n_names = int(max(agent.max(initial=0), to.max(initial=0))) + 1
    ent_first = np.searchsorted(ent_child, np.arange(n_names + 1))
    ep_local = np.zeros(len(a_idx), dtype=np.int64)
    agent_first = np.searchsorted(a_agent, np.arange(n_names + 1))
    has_entries = np.flatnonzero(ent_first[1:] > ent_first[:-1])
    for c in has_entries.tolist():
        lo, hi = int(agent_first[c]), int(agent_first[c + 1])
        if lo == hi:
            continue
        times = t[ent_idx[ent_first[c] : ent_first[c + 1]]]
        k = np.searchsorted(times, t[a_idx[lo:hi]], side="right") - 1
        ep_local[lo:hi] = np.maximum(k, 0)
    # global episode id per action event
    new_ep = np.ones(len(a_idx), dtype=bool)
    if len(a_idx) > 1:
        new_ep[1:] = (a_agent[1:] != a_agent[:-1]) | (ep_local[1:] != ep_local[:-1])
    ep_id = np.cumsum(new_ep) - 1
    n_ep = int(ep_id[-1]) + 1 if len(ep_id) else 0
    ep_first = np.flatnonzero(new_ep)
    episode_agent = a_agent[ep_first] if n_ep else empty
    episode_local = ep_local[ep_first] if n_ep else empty

    # steps: runs of equal recorded step within an episode (unset steps stand alone)
    step = g.step[a_idx]
    new_step = new_ep.copy()
    if len(a_idx) > 1:
        new_step[1:] |= (step[1:] != step[:-1]) | (step[1:] < 0)
    new_stage = new_step & (new_ep | waits[a_idx])
    stage_id = np.cumsum(new_stage) - 1
    stage_main = np.bincount(
        stage_id[new_step], minlength=int(stage_id[-1]) + 1 if len(stage_id) else 0
    )
    stage_episode = ep_id[np.flatnonzero(new_stage)]

    # attach each episode to the parent stage holding its entry event
    stage_of_event = np.full(n, -1, dtype=np.int64)
    stage_of_event[a_idx] = stage_id
    parent_stage = np.full(n_ep, -1, dtype=np.int64)
    if n_ep and len(ent_idx):
        # entry k of child c opens local episode k; find its global episode id
        key_ep = episode_agent * (len(ent_idx) + 1) + episode_local
        ent_local = np.arange(len(ent_idx)) - ent_first[ent_child]
        key_ent = ent_child * (len(ent_idx) + 1) + ent_local
        order = np.argsort(key_ep, kind="stable")
        pos = np.searchsorted(key_ep[order], key_ent)
        pos = np.minimum(pos, n_ep - 1)
        found = key_ep[order][pos] == key_ent
        target = order[pos[found]]
        parent_stage[target] = stage_of_event[ent_idx[found]]
    return StepStructure(
        stage_main.astype(np.int64),
        stage_episode.astype(np.int64),
        parent_stage,
        episode_agent.astype(np.int64),
    )


# ---------------------------------------------------------------------- functional API
GraphLike = Any  # Trace | TraceGraph


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


def critical_steps(trace: GraphLike) -> int:
    """PARL Critical Steps: per stage, main steps plus the longest sub-agent branch.

    Applied recursively down the spawn tree and summed over the root's stages.

    Definitions (also in ``docs/trace-format.md``):

    * A *step* of an agent is one of its action events (:data:`ACTION_TYPES`); consecutive
      events that share a recorded ``step`` number count once (one LLM turn that emits several
      tool calls or spawns).
    * A *stage* of an agent starts at its first step and at every step that consumes (has an
      incoming dependency edge from) an event of another agent: that is where it waits.
    * Each spawn or delegation opens an *episode* of the target agent, attributed to the stage
      of the parent that issued it. A stage costs its main steps plus the largest critical steps
      among its episodes. With several roots the result is the maximum over roots.
    """
    return _graph(trace).critical_steps()


Analyzer = Callable[[TraceGraph], Any]
