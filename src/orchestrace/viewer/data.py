"""What the viewer page shows, computed from loaded traces: lanes, windows, paths, overlays, diffs.

A :class:`TraceView` holds one trace as an Arrow table of its events (one row per event, in
recording order) plus its compiled :class:`~orchestrace.trace.graph.TraceGraph`. The page never
receives the whole trace: it asks for a *window* (a time range and the lanes on screen) and
gets at most one event per lane and pixel column (the longest; the others are counted), so a
100,000-event trace answers in a few milliseconds with a few thousand rows. Everything else the
page shows is computed here once and cached: the spawn tree of lanes, the critical path with
work, speedup and PARL Critical Steps, failure-mode detections and safety events as markers,
reward and credit overlays, and the marks of a diff against its fork
(:mod:`orchestrace.viewer.diff` computes it; :mod:`orchestrace.viewer.load` reads the files).

The whole-trace analyses (interaction graph, critical path, markers, overlays, diff marks)
live in :mod:`orchestrace.viewer._analyses` as a mixin :class:`TraceView` inherits; they read
the same cached Arrow table, lanes and compiled graph, and are called on the view.

Example:
    >>> from orchestrace.trace.generate import generate_trace
    >>> view = TraceView(generate_trace(agents=4, steps=60, seed=0), source="demo")
    >>> s = view.summary()
    >>> s["n_events"], s["n_lanes"] >= 4
    (60, True)
    >>> w = view.window(0.0, s["t_end"], px=800)
    >>> w["total"]
    60
    >>> len(view.critical()["idx"]) > 0
    True
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from orchestrace._safe import decimal
from orchestrace.credit.base import root_agents
from orchestrace.errors import ConfigError, TraceError
from orchestrace.trace.check import check_trace
from orchestrace.trace.enums import EVENT_TYPES
from orchestrace.trace.graph import TraceGraph
from orchestrace.trace.model import Event, Trace
from orchestrace.viewer._analyses import (
    _EDGE_NAMES,
    DIFF_STATUS,
    OVERLAYS,
    AnalysesMixin,
    _finite,
)

__all__ = [
    "CONTENT_PAGE",
    "DIFF_STATUS",
    "OVERLAYS",
    "TraceView",
]

#: Characters of content sent per request (the page asks for the next page on demand).
CONTENT_PAGE = 65_536
_TYPE_NAMES = [t.value for t in EVENT_TYPES]
_TYPE_CODE = {n: i for i, n in enumerate(_TYPE_NAMES)}
_SPAWN_CODE = _TYPE_CODE["spawn"]


def _pa() -> Any:
    import pyarrow as pa  # noqa: PLC0415  pyarrow is heavy: loaded on first use

    return pa


def _pc() -> Any:
    import pyarrow.compute as pc  # noqa: PLC0415  pyarrow is heavy: loaded on first use

    return pc


class TraceView(AnalysesMixin):
    """One trace prepared for the viewer (see the module docs).

    Args:
        trace: The trace.
        source: Where it came from (shown on the page).
        note: A remark shown with it (e.g. that the file holds several traces).
    """

    def __init__(self, trace: Trace, *, source: str, note: str | None = None) -> None:
        self.trace = trace
        self.source = source
        self.note = note
        self.graph: TraceGraph = trace.graph
        self._cache: dict[str, Any] = {}
        #: Rows of a credit file (``orchestrace credit --json``) given for this trace.
        self.credit_rows: list[dict[str, Any]] | None = None
        self._build_lanes()
        self._build_table()

    # ------------------------------------------------------------------ construction
    def _build_lanes(self) -> None:
        tr = self.trace
        g = self.graph
        names = g.names
        roles = _agent_roles(g)
        roots = root_agents(tr)
        parents = {names[c]: names[p] for c, (p, _) in g.spawn_parents().items()}
        acting = [names[c] for c in np.unique(g.agent_code).tolist()]
        spawned = [names[c] for c in g.agent_codes().tolist()]
        members = list(dict.fromkeys([*roots, *spawned, *acting]))
        children: dict[str | None, list[str]] = defaultdict(list)
        for name in members:
            parent = parents.get(name)
            if parent == name or parent not in members:
                parent = None
            children[parent].append(name)
        order: list[tuple[str, int]] = []
        seen: set[str] = set()
        stack = [(name, 0) for name in reversed(children[None])]
        while stack:
            name, depth = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            order.append((name, depth))
            stack.extend((c, depth + 1) for c in reversed(children.get(name, [])))
        for name in members:  # a spawn cycle: still one lane each
            if name not in seen:
                order.append((name, 0))
        lane_of = {name: i for i, (name, _) in enumerate(order)}
        ac = g.agent_code
        n_codes = len(names)
        counts = np.bincount(ac, minlength=n_codes) if g.n else np.zeros(n_codes, dtype=np.int64)
        first = np.full(n_codes, np.inf)
        last = np.full(n_codes, -np.inf)
        if g.n:
            np.minimum.at(first, ac, g.t)
            np.maximum.at(last, ac, g.t + g.dur)
        tools = set(np.flatnonzero(g.tool_mask()).tolist()) if g.n else set()
        code_of = {name: c for c, name in enumerate(names)}
        lanes: list[dict[str, Any]] = []
        for i, (name, depth) in enumerate(order):
            code = code_of.get(name, -1)
            parent = parents.get(name)
            lanes.append(
                {
                    "i": i,
                    "name": name,
                    "role": "tool" if code in tools else roles.get(code, "unknown"),
                    "parent": lane_of.get(parent, -1) if parent is not None else -1,
                    "depth": depth,
                    "n": int(counts[code]) if code >= 0 else 0,
                    "t0": _finite(float(first[code])) if code >= 0 else None,
                    "t1": _finite(float(last[code])) if code >= 0 else None,
                }
            )
        self.lanes = lanes
        self.lane_of = lane_of
        code_to_lane = np.full(max(n_codes, 1), -1, dtype=np.int32)
        for name, i in lane_of.items():
            if name in code_of:
                code_to_lane[code_of[name]] = i
        self.event_lane = code_to_lane[ac] if g.n else np.zeros(0, dtype=np.int32)

    def _build_table(self) -> None:
        pa = _pa()
        ev = self.trace.events
        g = self.graph
        n = g.n
        self.t = np.asarray(g.t, dtype=np.float64)
        self.dur = np.asarray(g.dur, dtype=np.float64)
        self.type_code = np.asarray(g.type_code, dtype=np.int8)
        self.table = pa.table(
            {
                "idx": pa.array(np.arange(n, dtype=np.int32)),
                "t": pa.array(self.t),
                "end": pa.array(self.t + self.dur),
                "dur": pa.array(self.dur),
                "type": pa.array(self.type_code),
                "lane": pa.array(self.event_lane.astype(np.int32)),
                "id": pa.array([e.id for e in ev], pa.string()),
                "agent": pa.array([e.agent for e in ev], pa.string()),
                "text": pa.array([_search_text(e) for e in ev], pa.large_string()),
            }
        )

    # ------------------------------------------------------------------ summary
    @property
    def n(self) -> int:
        """Number of events."""
        return self.graph.n

    def summary(self) -> dict[str, Any]:
        """Header fields, sizes, totals and the analyses' figures, JSON-ready."""
        if "summary" in self._cache:
            return dict(self._cache["summary"])
        tr = self.trace
        ends = self.t + self.dur
        t_end = float(ends.max()) if self.n else 0.0
        t_start = float(self.t.min()) if self.n else 0.0

        problems = check_trace(tr, partial=True)
        type_counts: list[int] = (
            np.bincount(self.type_code, minlength=len(_TYPE_NAMES)).tolist() if self.n else []
        )
        out = {
            "source": self.source,
            "note": self.note,
            "trace_id": tr.trace_id,
            "task_id": tr.task_id,
            "system": tr.system,
            "topology": tr.topology,
            "schema_version": tr.schema_version,
            "n_events": self.n,
            "n_edges": len(tr.edges),
            "n_lanes": len(self.lanes),
            "n_agents": len(self.graph.agent_codes()) if self.n else 0,
            "t_start": t_start,
            "t_end": t_end,
            "tokens": int(np.sum(self.graph.tokens_in) + np.sum(self.graph.tokens_out)),
            "cost": float(np.sum(self.graph.cost)),
            "rewards": {k: _finite(v) for k, v in tr.rewards.items()},
            "metrics": {k: _finite(v) for k, v in tr.metrics.items()},
            "costs": {k: _finite(v) for k, v in tr.costs.items()},
            "partial": bool(tr.meta.get("partial", False)) if isinstance(tr.meta, dict) else False,
            "fork_of": _fork_of(tr),
            "types": _TYPE_NAMES,
            "edge_types": _EDGE_NAMES,
            "type_counts": [int(x) for x in type_counts],
            "roles": sorted({lane["role"] for lane in self.lanes}),
            "problems": [str(p) for p in problems[:20]],
            "n_problems": len(problems),
        }
        self._cache["summary"] = out
        return dict(out)

    # ------------------------------------------------------------------ windows
    def _mask(
        self,
        t0: float,
        t1: float,
        lanes: Sequence[int] | None,
        types: Iterable[str] | None,
        q: str | None,
    ) -> Any:
        pc = _pc()
        tab = self.table
        mask = pc.and_(pc.less_equal(tab["t"], t1), pc.greater_equal(tab["end"], t0))
        if lanes is not None:
            mask = pc.and_(mask, pc.is_in(tab["lane"], _pa().array(list(lanes), _pa().int32())))
        if types is not None:
            codes = [_TYPE_CODE[x] for x in types if x in _TYPE_CODE]
            mask = pc.and_(mask, pc.is_in(tab["type"], _pa().array(codes, _pa().int8())))
        if q:
            mask = pc.and_(mask, pc.match_substring(tab["text"], q, ignore_case=True))
        return mask

    def window(
        self,
        t0: float,
        t1: float,
        *,
        px: int = 1000,
        lanes: Sequence[int] | None = None,
        rows: Sequence[int] | None = None,
        types: Iterable[str] | None = None,
        q: str | None = None,
        subset: str | None = None,
        overlay: str | None = None,
        unit: str | None = None,
        edges_below: int = 4000,
    ) -> dict[str, Any]:
        """The events of ``[t0, t1]`` on ``lanes``, at most one per display row and pixel.

        Args:
            t0: Window start (seconds).
            t1: Window end.
            px: Pixel columns the window is drawn on.
            lanes: Lanes asked for (default: all).
            rows: Display row of each lane in ``lanes`` (collapsed lanes share a row).
            types: Event types to keep (default: all).
            q: Keep events whose id, agent, type, tool, role or content contain this text
                (case-insensitive).
            subset: ``"disappeared"`` / ``"changed"``: only the events of this diff status
                (of the diff this view takes part in).
            overlay: Add each shown event's value of this overlay (see :meth:`overlay`).
            unit: The overlay's credit unit.
            edges_below: Send the edges among the events when at most this many are shown.

        Returns:
            Columns ``idx``, ``t``, ``dur``, ``type``, ``lane``, ``row``, ``count`` (events the
            shown one stands for), with ``total`` (events matching) and ``edges``.
        """
        pc = _pc()
        if not (math.isfinite(t0) and math.isfinite(t1)) or t1 < t0:
            raise ConfigError(f"window [{t0}, {t1}] is not a time range; give t0 <= t1")
        px = max(1, min(int(px), 20_000))
        mask = self._mask(t0, t1, lanes, types, q)
        if subset is not None:
            status = self._cache.get("diff_status")
            want = DIFF_STATUS.index(subset) if subset in DIFF_STATUS else -1
            if status is None or want < 0:
                return _empty_window()
            mask = pc.and_(mask, _pa().array(status == want))
        picked = self.table.filter(mask)
        total = picked.num_rows
        idx = picked["idx"].to_numpy()
        lane = picked["lane"].to_numpy()
        if rows is not None and lanes is not None:
            row_of = np.full(len(self.lanes) + 1, -1, dtype=np.int64)
            row_of[np.asarray(list(lanes), dtype=np.int64)] = np.asarray(list(rows), dtype=np.int64)
            row = row_of[lane]
        else:
            row = lane.astype(np.int64)
        t = self.t[idx]
        dur = self.dur[idx]
        span = max(t1 - t0, 1e-12)
        col = np.clip(((t - t0) / span * px).astype(np.int64), 0, px - 1)
        key = row * px + col
        status = self._cache.get("diff_status")
        if status is not None and len(status) == self.n:
            # one bar per diff status in a pixel: a change is never hidden in a bin of others
            key = key * len(DIFF_STATUS) + np.asarray(status, dtype=np.int64)[idx]
        count = np.ones(len(idx), dtype=np.int64)
        if total > 0:
            order = np.lexsort((-dur, key))
            key_sorted = key[order]
            first = np.ones(len(order), dtype=bool)
            first[1:] = key_sorted[1:] != key_sorted[:-1]
            starts = np.flatnonzero(first)
            count = np.diff(np.append(starts, len(order)))
            keep = order[starts]
            keep_sorted = np.argsort(idx[keep], kind="stable")
            keep = keep[keep_sorted]
            count = count[keep_sorted]
            idx, t, dur, lane, row = idx[keep], t[keep], dur[keep], lane[keep], row[keep]
        out: dict[str, Any] = {
            "t0": t0,
            "t1": t1,
            "px": px,
            "total": int(total),
            "idx": idx.tolist(),
            "t": t.tolist(),
            "dur": dur.tolist(),
            "type": self.type_code[idx].tolist(),
            "lane": lane.tolist(),
            "row": row.tolist(),
            "count": count.tolist(),
            "edges": self.edges_among(idx) if len(idx) <= edges_below else None,
        }
        if overlay:
            vals = self.overlay_values(overlay, unit)[idx]
            out["value"] = [None if math.isnan(v) else v for v in vals.tolist()]
        return out

    def edges_among(self, idx: Any) -> dict[str, Any]:
        """Edges with an end among events ``idx``, with both ends' time and lane."""
        g = self.graph
        idx = np.asarray(idx, dtype=np.int64)
        if not len(g.src) or not len(idx):
            return {
                "src": [],
                "dst": [],
                "type": [],
                "ends": {"idx": [], "t": [], "dur": [], "lane": []},
            }
        chosen = np.zeros(g.n, dtype=bool)
        chosen[idx] = True
        ok = (g.src >= 0) & (g.dst >= 0)
        src = np.where(ok, g.src, 0)
        dst = np.where(ok, g.dst, 0)
        sel = ok & (chosen[src] | chosen[dst])
        s, d = g.src[sel], g.dst[sel]
        ends = np.unique(np.concatenate([s, d]))
        return {
            "src": s.tolist(),
            "dst": d.tolist(),
            "type": g.edge_code[sel].tolist(),
            "ends": {
                "idx": ends.tolist(),
                "t": self.t[ends].tolist(),
                "dur": self.dur[ends].tolist(),
                "lane": self.event_lane[ends].tolist(),
            },
        }

    def search(self, q: str, limit: int = 1000) -> dict[str, Any]:
        """Events whose text contains ``q`` (case-insensitive): the first ``limit`` and a count."""
        if not q:
            return {"q": q, "total": 0, "idx": []}
        pc = _pc()
        mask = pc.match_substring(self.table["text"], q, ignore_case=True)
        hit = self.table.filter(mask)["idx"].to_numpy()
        return {"q": q, "total": len(hit), "idx": hit[:limit].tolist()}

    # ------------------------------------------------------------------ one event
    def index(self, ref: str) -> int:
        """Index of an event given by index (``"12"``) or id (``"e13"``)."""
        position = decimal(ref)
        if position is not None and position < self.n:
            return position
        try:
            return self.graph.index_of(ref)
        except (KeyError, TraceError):
            raise ConfigError(f"no event {ref[:80]!r} in trace {self.trace.trace_id!r}") from None

    def event(self, i: int, *, offset: int = 0, limit: int = CONTENT_PAGE) -> dict[str, Any]:
        """Every field of event ``i``, a page of its content, its attrs and its edges.

        Raises:
            ConfigError: No such event.
        """
        if not 0 <= i < self.n:
            raise ConfigError(f"no event at index {i}; the trace has {self.n} events")
        e = self.trace.events[i]
        content = e.content or ""
        offset = max(0, min(offset, len(content)))
        page = content[offset : offset + max(0, limit)]
        attrs_text = None
        if e.attrs is not None:
            attrs_text = json.dumps(e.attrs, indent=1, ensure_ascii=False, default=str)
        g = self.graph
        ins = np.flatnonzero(g.dst == i)
        outs = np.flatnonzero(g.src == i)
        events = self.trace.events

        def edge(k: int, other: int) -> dict[str, Any]:
            o = events[other] if other >= 0 else None
            return {
                "type": _EDGE_NAMES[int(g.edge_code[k])],
                "idx": other,
                "id": o.id
                if o is not None
                else g.edge_ref(k, "src" if other == g.src[k] else "dst"),
                "agent": o.agent if o is not None else None,
                "event_type": o.type if o is not None else None,
            }

        lane = int(self.event_lane[i]) if self.n else -1
        return {
            "idx": i,
            "id": e.id,
            "type": e.type,
            "agent": e.agent,
            "role": e.role or (self.lanes[lane]["role"] if lane >= 0 else None),
            "lane": lane,
            "t": e.t,
            "dur": e.dur,
            "end": e.end,
            "from": e.from_,
            "to": e.to,
            "tool": e.tool,
            "decision": e.decision,
            "step": e.step,
            "trusted": e.trusted,
            "tokens_in": e.tokens_in,
            "tokens_out": e.tokens_out,
            "cost": e.cost,
            "error": e.error,
            "content_ref": e.content_ref,
            "content": page,
            "content_offset": offset,
            "content_length": len(content),
            "has_content": e.content is not None,
            "attrs": attrs_text[:CONTENT_PAGE] if attrs_text is not None else None,
            "attrs_length": len(attrs_text) if attrs_text is not None else 0,
            "in": [edge(k, int(g.src[k])) for k in ins[:200].tolist()],
            "out": [edge(k, int(g.dst[k])) for k in outs[:200].tolist()],
            "n_in": len(ins),
            "n_out": len(outs),
            "on_critical_path": i in self._critical_set(),
            "diff": self._diff_of(i),
        }


def _agent_roles(g: TraceGraph) -> dict[int, str]:
    """Name code -> role, as ``analyze`` counts roles.

    The role a spawn gave the spawned agent, else the first role the agent used on its own
    (non-spawn) events; a spawn's role never names the spawner.
    """
    role_of: dict[int, str] = {}
    if not g.n:
        return role_of
    roles, rc = g.roles, g.role_code
    spawn = g.type_code == _SPAWN_CODE
    sp = np.flatnonzero(spawn & (g.to_code >= 0) & (rc >= 0))
    for child, r in zip(g.to_code[sp].tolist(), rc[sp].tolist(), strict=True):
        role_of.setdefault(int(child), roles[r])
    own = np.flatnonzero((rc >= 0) & ~spawn)
    if len(own):
        codes, first = np.unique(g.agent_code[own], return_index=True)
        for a, i in zip(codes.tolist(), own[first].tolist(), strict=True):
            role_of.setdefault(int(a), roles[rc[i]])
    return role_of


def _search_text(e: Event) -> str:
    parts = [e.id, e.agent, e.type, e.tool or "", e.role or "", e.content or ""]
    return "\x1f".join(parts)


def _fork_of(tr: Trace) -> str | None:
    fork = tr.meta.get("fork") if isinstance(tr.meta, dict) else None
    of = fork.get("of") if isinstance(fork, dict) else None
    return of if isinstance(of, str) else None


def _empty_window() -> dict[str, Any]:
    return {
        "total": 0,
        "idx": [],
        "t": [],
        "dur": [],
        "type": [],
        "lane": [],
        "row": [],
        "count": [],
        "edges": None,
    }
