"""The analyses of a :class:`~orchestrace.viewer.data.TraceView`: graph, critical path, markers, overlays, diff marks.

:class:`AnalysesMixin` holds the queries that compute a figure from the whole trace once and
keep it in the view's shared cache (``_cache``); :class:`~orchestrace.viewer.data.TraceView`
inherits them, so they are called on the view as before.

Example:
    >>> from orchestrace.trace.generate import generate_trace
    >>> from orchestrace.viewer.data import TraceView
    >>> view = TraceView(generate_trace(agents=4, steps=60, seed=0), source="demo")
    >>> isinstance(view, AnalysesMixin), len(view.critical()["idx"]) > 0
    (True, True)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from orchestrace.credit import make_assigner
from orchestrace.credit.base import unit_members
from orchestrace.errors import ConfigError, OrchestraceError
from orchestrace.masbench.taxonomy import detect
from orchestrace.rewards.families import message_signals, step_scores
from orchestrace.trace.enums import EDGE_TYPES

if TYPE_CHECKING:
    from orchestrace.trace.graph import TraceGraph
    from orchestrace.trace.model import Trace

__all__ = ["DIFF_STATUS", "OVERLAYS", "AnalysesMixin"]

#: Diff status codes, as sent to the page.
DIFF_STATUS = ("same", "retimed", "changed", "appeared", "disappeared")
#: Overlays the page can ask for without a credit file; none re-executes the run.
OVERLAYS = (
    "credit:uniform",
    "credit:discounted",
    "reward:process",
    "reward:message",
)
_EDGE_NAMES = [t.value for t in EDGE_TYPES]
_CREDIT_UNITS_FINEST = (
    "token",
    "action",
    "message",
    "turn",
    "agent",
    "role",
    "orchestrator",
    "team",
)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


class AnalysesMixin:
    """Whole-trace analyses of a view, cached in its ``_cache`` (see the module docs)."""

    trace: Trace
    graph: TraceGraph
    credit_rows: list[dict[str, Any]] | None
    lanes: list[dict[str, Any]]
    t: np.ndarray
    dur: np.ndarray
    event_lane: np.ndarray
    table: Any
    _cache: dict[str, Any]

    if TYPE_CHECKING:

        @property
        def n(self) -> int: ...

        def _mask(
            self,
            t0: float,
            t1: float,
            lanes: Sequence[int] | None,
            types: Iterable[str] | None,
            q: str | None,
        ) -> Any: ...

    # ------------------------------------------------------------------ interaction graph
    def interaction_graph(
        self,
        *,
        mode: str = "agents",
        t0: float | None = None,
        t1: float | None = None,
        lanes: Sequence[int] | None = None,
        types: Iterable[str] | None = None,
        q: str | None = None,
        limit: int = 400,
    ) -> dict[str, Any]:
        """Nodes and edges for the graph view.

        ``mode="agents"``: one node per lane, the spawn tree, and every edge between two
        agents' events counted by type (``critical``: the critical path crosses it).
        ``mode="events"``: the first ``limit`` events of the window (filters applied) and
        the edges among them.
        """
        g = self.graph
        crit = self.critical()["idx"]
        if mode == "events":
            lo = float(self.t.min()) if self.n and t0 is None else (t0 or 0.0)
            hi = float((self.t + self.dur).max()) if self.n and t1 is None else (t1 or 0.0)
            mask = self._mask(lo, hi, lanes, types, q)
            idx = self.table.filter(mask)["idx"].to_numpy()
            total = len(idx)
            idx = np.sort(idx)[: max(1, limit)]
            chosen = np.zeros(g.n, dtype=bool)
            chosen[idx] = True
            cset = set(crit)
            ok = (g.src >= 0) & (g.dst >= 0)
            src, dst = np.where(ok, g.src, 0), np.where(ok, g.dst, 0)
            sel = ok & chosen[src] & chosen[dst]
            events = self.trace.events
            return {
                "mode": "events",
                "total": int(total),
                "nodes": [
                    {
                        "idx": int(i),
                        "label": events[i].id,
                        "type": events[i].type,
                        "lane": int(self.event_lane[i]),
                        "critical": int(i) in cset,
                    }
                    for i in idx.tolist()
                ],
                "edges": [
                    {
                        "src": int(s),
                        "dst": int(d),
                        "type": _EDGE_NAMES[int(c)],
                        "critical": False,
                    }
                    for s, d, c in zip(
                        g.src[sel].tolist(),
                        g.dst[sel].tolist(),
                        g.edge_code[sel].tolist(),
                        strict=True,
                    )
                ],
                "critical_pairs": [[a, b] for a, b in itertools.pairwise(crit)],
            }
        lane = self.event_lane
        ok = (g.src >= 0) & (g.dst >= 0)
        s_l = lane[np.where(ok, g.src, 0)][ok]
        d_l = lane[np.where(ok, g.dst, 0)][ok]
        codes = g.edge_code[ok]
        cross = s_l != d_l
        n_l = max(len(self.lanes), 1)
        key = (s_l[cross].astype(np.int64) * n_l + d_l[cross]) * len(_EDGE_NAMES) + codes[cross]
        uniq, counts = np.unique(key, return_counts=True)
        crit_lanes = lane[np.asarray(crit, dtype=np.int64)].tolist() if crit else []
        crit_pairs = {(a, b) for a, b in itertools.pairwise(crit_lanes) if a != b}
        edges = []
        for k, c in zip(uniq.tolist(), counts.tolist(), strict=True):
            pair, code = divmod(k, len(_EDGE_NAMES))
            a, b = divmod(pair, n_l)
            edges.append(
                {
                    "src": a,
                    "dst": b,
                    "type": _EDGE_NAMES[code],
                    "count": c,
                    "critical": (a, b) in crit_pairs,
                }
            )
        spawn_pairs = {(e["src"], e["dst"]) for e in edges if e["type"] == "spawn"}
        for ln in self.lanes:
            if ln["parent"] >= 0 and (ln["parent"], ln["i"]) not in spawn_pairs:
                edges.append(
                    {
                        "src": ln["parent"],
                        "dst": ln["i"],
                        "type": "spawn",
                        "count": 1,
                        "critical": False,
                    }
                )
        return {
            "mode": "agents",
            "total": len(self.lanes),
            "nodes": [
                {
                    "idx": ln["i"],
                    "label": ln["name"],
                    "type": ln["role"],
                    "lane": ln["i"],
                    "critical": ln["i"] in set(crit_lanes),
                    "n": ln["n"],
                }
                for ln in self.lanes
            ],
            "edges": edges,
        }

    # ------------------------------------------------------------------ analyses
    def critical(self) -> dict[str, Any]:
        """The critical path (indices, times, lanes) with work, speedup and Critical Steps."""
        if "critical" in self._cache:
            return dict(self._cache["critical"])
        g = self.graph
        try:
            cp = g.critical_path()
            steps = g.step_structure()
            crit_steps: int | None = steps.critical_steps()
            total_steps: int | None = steps.total_steps
            error = None
        except (OrchestraceError, ValueError, IndexError) as err:
            cp = None
            crit_steps = total_steps = None
            error = f"no critical path: {str(err).splitlines()[0][:300]}"
        idx = np.asarray(cp.indices if cp else (), dtype=np.int64)
        work = g.work()
        out = {
            "idx": idx.tolist(),
            "t": self.t[idx].tolist(),
            "dur": self.dur[idx].tolist(),
            "lane": self.event_lane[idx].tolist(),
            "length": cp.length if cp else None,
            "work": work,
            "speedup": (work / cp.length if cp.length > 0 else 1.0) if cp else None,
            "critical_steps": crit_steps,
            "total_steps": total_steps,
            "error": error,
        }
        self._cache["critical"] = out
        return dict(out)

    def _critical_set(self) -> set[int]:
        if "critical_set" not in self._cache:
            self._cache["critical_set"] = set(self.critical()["idx"])
        out: set[int] = self._cache["critical_set"]
        return out

    def markers(self) -> dict[str, Any]:
        """Failure-mode detections, safety events and failed actions, as event markers."""
        if "markers" in self._cache:
            return dict(self._cache["markers"])

        items: list[dict[str, Any]] = []
        try:
            findings = detect(self.trace)
            detect_error = None
        except Exception as err:  # a detector that cannot read an unusual trace
            findings = []
            detect_error = f"failure-mode detection skipped: {type(err).__name__}: {str(err)[:200]}"
        lookup = self._lookup()
        for f in findings:
            for eid in f.events:
                i = lookup.get(eid)
                if i is not None:
                    items.append(
                        {"idx": i, "kind": "failure", "label": f"{f.mast} {f.mode}".strip()}
                    )
        for i, e in enumerate(self.trace.events):
            if e.type == "safety_event":
                items.append({"idx": i, "kind": "safety", "label": "safety event"})
            elif e.error is not None:
                items.append({"idx": i, "kind": "error", "label": "failed"})
        if len(items) > 20_000:
            items = items[:20_000]
        for it in items:
            it["t"] = float(self.t[it["idx"]])
            it["lane"] = int(self.event_lane[it["idx"]])
        out = {
            "items": items,
            "findings": [f.to_dict() for f in findings[:500]],
            "error": detect_error,
        }
        self._cache["markers"] = out
        return dict(out)

    def _lookup(self) -> dict[str, int]:
        if "lookup" not in self._cache:
            self._cache["lookup"] = {e.id: i for i, e in enumerate(self.trace.events)}
        out: dict[str, int] = self._cache["lookup"]
        return out

    # ------------------------------------------------------------------ overlays
    def overlay(
        self, kind: str, *, unit: str | None = None, credit_rows: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """A value per event for the colour scale.

        Args:
            kind: ``"credit:file"`` (rows given in ``credit_rows``), ``"credit:uniform"`` or
                ``"credit:discounted"`` (computed here, neither re-executes the run),
                ``"reward:process"`` (R4 step scores) or ``"reward:message"`` (R6 signals).
            unit: Credit unit (default: ``agent``; for a file, its finest unit).
            credit_rows: ``{unit, id, value}`` rows of ``orchestrace credit --json``.

        Raises:
            ConfigError: Unknown overlay or unit, or no file rows for ``credit:file``.
        """
        key = f"overlay:{kind}:{unit}"
        if key in self._cache:
            return dict(self._cache[key])
        if credit_rows is None and kind == "credit:file":
            credit_rows = self.credit_rows
        values: dict[int, float] = {}
        label = kind
        if kind == "credit:file":
            if not credit_rows:
                raise ConfigError(
                    "no credit file was given; start the viewer with --credit FILE (the "
                    "output of `orchestrace credit TRACE --json`)"
                )
            present = {r["unit"] for r in credit_rows}
            unit = unit or next((u for u in _CREDIT_UNITS_FINEST if u in present), "agent")
            rows = {r["id"]: float(r["value"]) for r in credit_rows if r["unit"] == unit}
            values = self._spread(unit, rows)
            label = f"credit ({unit}, from file)"
        elif kind in ("credit:uniform", "credit:discounted"):
            unit = unit or "agent"
            method = kind.split(":", 1)[1]
            table = make_assigner(method).assign(self.trace, unit)
            values = self._spread(unit, table.by_unit(unit))
            label = f"credit ({unit}, {method})"
        elif kind == "reward:process":
            lookup = self._lookup()
            values = {lookup[k]: v for k, v in step_scores(self.trace).items() if k in lookup}
            label = "process reward (R4 step scores)"
        elif kind == "reward:message":
            lookup = self._lookup()
            values = {lookup[k]: v for k, v in message_signals(self.trace).items() if k in lookup}
            label = "message signal (R6)"
        else:
            raise ConfigError(
                f"unknown overlay {kind[:40]!r}; use one of credit:file, {', '.join(OVERLAYS)}"
            )
        arr = np.full(self.n, np.nan)
        finite = {i: v for i, v in values.items() if math.isfinite(v)}
        if finite:
            arr[np.fromiter(finite, dtype=np.int64, count=len(finite))] = list(finite.values())
        vals = list(finite.values())
        out = {
            "kind": kind,
            "unit": unit,
            "label": label,
            "n": len(vals),
            "min": min(vals) if vals else 0.0,
            "max": max(vals) if vals else 0.0,
            "rewards": {k: _finite(v) for k, v in self.trace.rewards.items()},
        }
        self._cache[key + ":values"] = arr
        self._cache[key] = out
        return dict(out)

    def overlay_values(self, kind: str, unit: str | None = None) -> np.ndarray:
        """The overlay's value per event (NaN where it has none)."""
        self.overlay(kind, unit=unit)
        out: np.ndarray = self._cache[f"overlay:{kind}:{unit}:values"]
        return out

    def _spread(self, unit: str, rows: dict[str, float]) -> dict[int, float]:
        """Give every event the credit of the unit it belongs to."""
        members = unit_members(self.trace, unit)
        out: dict[int, float] = {}
        if unit == "token":  # an llm_call holds many token units: show their sum
            for uid, value in rows.items():
                for i in members.get(uid, ()):
                    out[i] = out.get(i, 0.0) + value
            return out
        for uid, value in rows.items():
            for i in members.get(uid, ()):
                out[i] = value
        return out

    # ------------------------------------------------------------------ diff
    def mark_diff(self, status: np.ndarray, other: list[int], fields: dict[int, list[str]]) -> None:
        """Keep a diff's result (see :func:`orchestrace.viewer.diff.diff_traces`) on this view.

        Args:
            status: Code into :data:`DIFF_STATUS` of each event.
            other: Index of each event's partner in the other trace (-1: none).
            fields: Per differing event, the fields that differ.
        """
        self._cache["diff_status"] = status
        self._cache["diff_other"] = other
        self._cache["diff_fields"] = fields

    def _diff_of(self, i: int) -> dict[str, Any] | None:
        status = self._cache.get("diff_status")
        if status is None:
            return None
        other = self._cache["diff_other"][i]
        fields = self._cache["diff_fields"].get(i)
        return {"status": DIFF_STATUS[int(status[i])], "other": other, "fields": fields}
