"""Perfetto export: traces as a Chrome trace event format JSON file.

Open the file in the Perfetto UI (ui.perfetto.dev, or a locally served build of it), in
``chrome://tracing``, or query it with Perfetto's trace processor. What it holds:

- **One process per trace** (``pid`` 1, 2, ... in the order given), named
  ``task_id · trace_id``, labelled with the topology and system.
- **One track (thread) per agent**, named ``agent (role)``, ordered by the spawn tree (a root,
  then the agents it spawned, depth first), then one track per tool (``tool: name``). An
  agent whose events overlap in time gets extra tracks ``agent [2]``, ``agent [3]``, ... right
  below its first, so that no event is dropped or cut (the format needs the slices of one
  track to nest, and two slices of an agent seldom do).
- **Every event**: a complete event (``ph: "X"``) from ``t`` for ``dur``, or an instant
  (``ph: "i"``) when ``dur`` is 0; ``cat`` is the event type; ``args`` hold the id, type,
  agent, role, tool, from/to, decision, step, tokens, cost, error, exact ``t_s``/``dur_s``,
  a content preview (at most :data:`PREVIEW` characters, with the full length) and
  ``attrs``.
- **Every edge**: a flow arrow (``ph: "s"`` on the source's slice, ``ph: "f"`` with
  ``bp: "e"`` on the destination's slice), ``cat`` and name the edge type (spawn, message,
  return, aggregate, causal, ...). An edge whose destination starts before its source cannot
  be drawn by the format; such edges and edges to unknown events are counted in
  ``otherData``.
- **Counters** (``ph: "C"``): cumulative tokens and cost of each agent (``tokens: agent``,
  ``cost: agent``) and of the whole trace (``tokens``, ``cost``), stepping at the end of each
  event that used them.

Times are whole microseconds (``ts``/``dur``), exact to the format's own resolution; the exact
seconds are in ``args``. Strings are cut to a display length and cleared of control
characters; the file is valid JSON whatever the trace holds.

Example:
    >>> import msgspec
    >>> from orchestrace.trace.generate import generate_trace
    >>> doc = msgspec.json.decode(export_bytes([generate_trace(agents=3, steps=20, seed=0)]))
    >>> doc["displayTimeUnit"], sorted({e["ph"] for e in doc["traceEvents"]})
    ('ms', ['C', 'M', 'X', 'f', 'i', 's'])
    >>> sum(1 for e in doc["traceEvents"] if e["ph"] in "Xi")
    20
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import msgspec

from orchestrace.errors import TraceError
from orchestrace.trace._layout import Lane, layout, short
from orchestrace.trace.model import Event, Trace

__all__ = ["PREVIEW", "export_bytes", "to_chrome_trace"]

#: Characters of an event's content kept in the export (the full length is stated).
PREVIEW = 200
#: Largest timestamp the format holds exactly, in microseconds (readers multiply by 1000
#: into a signed 64-bit count of nanoseconds, and parse numbers as doubles).
MAX_US = 2**53 - 1
_NAME = 80  # characters of a slice, track or process name
_ATTRS = 2000  # bytes of attrs kept as nested args; larger attrs become a cut JSON text
_SAFE_KEY = re.compile(r"[A-Za-z0-9_.\-:/ ]{1,64}")
# order of records at one timestamp: slices, then flow starts, then flow ends, then counters
_SLICE, _FLOW_OUT, _FLOW_IN, _COUNTER = range(4)
_ENC = msgspec.json.Encoder()


def export_bytes(traces: Sequence[Trace]) -> bytes:
    """Encode ``traces`` as one Chrome trace event format JSON document (UTF-8).

    Raises:
        TraceError: An event time is not finite or beyond what the format holds (the
            message names the trace and event).
    """
    return _ENC.encode(to_chrome_trace(traces))


def to_chrome_trace(traces: Sequence[Trace], *, preview: int = PREVIEW) -> dict[str, Any]:
    """The Chrome trace event format document of ``traces``, as a JSON-ready dict.

    Args:
        traces: The traces; each becomes one process.
        preview: Characters of each event's content to keep.

    Raises:
        TraceError: An event time is not finite or beyond what the format holds.

    Example:
        >>> from orchestrace.trace.generate import generate_trace
        >>> doc = to_chrome_trace([generate_trace(agents=2, steps=10, seed=1)] * 2)
        >>> sorted({e["pid"] for e in doc["traceEvents"]})
        [1, 2]
    """
    records: list[dict[str, Any]] = []
    timed: list[tuple[int, int, int, int, dict[str, Any]]] = []
    meta: list[dict[str, Any]] = []
    flow_ids = iter(range(1, 2**62))
    tids = iter(range(1, 2**31))
    for pid, tr in enumerate(traces, 1):
        meta.append(_Process(tr, pid, preview, flow_ids, tids, records, timed).summary)
    # metadata first, then every timed record in time order (ties: slices, flow starts,
    # flow ends, counters), the order in which readers bind flows to slices
    timed.sort(key=itemgetter(0, 1, 2, 3))
    records += [x[4] for x in timed]
    return {
        "displayTimeUnit": "ms",
        "otherData": {"producer": "orchestrace", "traces": meta},
        "traceEvents": records,
    }


def _us(tr: Trace, e: Event, seconds: float, what: str) -> int:
    if not math.isfinite(seconds) or seconds < 0 or seconds * 1e6 > MAX_US:
        raise TraceError(
            f"trace {short(tr.trace_id)!r}, event {short(e.id)!r}: {what}={seconds!r} s cannot "
            f"be written in the Chrome trace format (at most {MAX_US / 1e6:.3g} s); shift "
            "the trace's times so that it starts near 0"
        )
    return round(seconds * 1e6)


class _Process:
    """One trace written as one process: tracks, slices, flows, counters."""

    def __init__(
        self,
        tr: Trace,
        pid: int,
        preview: int,
        flow_ids: Any,
        tids: Any,
        out: list[dict[str, Any]],
        timed: list[tuple[int, int, int, int, dict[str, Any]]],
    ) -> None:
        self.tr = tr
        self.pid = pid
        self.preview = preview
        lanes = layout(tr)
        events = tr.events
        ts = [_us(tr, e, e.t, "t") for e in events]
        end = [_us(tr, e, e.t + e.dur, "t + dur") for e in events]
        tid_of, tracks = self._tracks(lanes, events, ts, end, tids)
        # process-wide records (names, counters) sit on the first track: no empty thread
        self.tid = tracks[0][0] if tracks else next(tids)
        seq = 0
        for i, e in enumerate(events):
            rec: dict[str, Any] = {
                "ph": "X" if e.dur > 0 else "i",
                "ts": ts[i],
                "pid": pid,
                "tid": tid_of[i],
                "name": _slice_name(e),
                "cat": e.type,
                "args": self._args(e),
            }
            if e.dur > 0:
                rec["dur"] = end[i] - ts[i]
            else:
                rec["s"] = "t"
            timed.append((ts[i], _SLICE, pid, seq, rec))
            seq += 1
        index: dict[str, int] = {}
        for i, e in enumerate(events):
            index.setdefault(e.id, i)
        skipped: dict[str, int] = {}
        drawn: dict[str, int] = {}
        for edge in tr.edges:
            a, b = index.get(edge.src), index.get(edge.dst)
            if a is None or b is None:
                skipped["unknown event"] = skipped.get("unknown event", 0) + 1
                continue
            if ts[b] < ts[a]:
                skipped["destination starts before source"] = (
                    skipped.get("destination starts before source", 0) + 1
                )
                continue
            fid = next(flow_ids)
            common = {"id": fid, "name": edge.type, "cat": edge.type, "pid": pid}
            s = {"ph": "s", "ts": ts[a], **common, "tid": tid_of[a]}
            f = {"ph": "f", "ts": ts[b], "bp": "e", **common, "tid": tid_of[b]}
            timed.append((ts[a], _FLOW_OUT, pid, seq, s))
            timed.append((ts[b], _FLOW_IN, pid, seq + 1, f))
            seq += 2
            drawn[edge.type] = drawn.get(edge.type, 0) + 1
        for rec in self._counters(lanes, events, end):
            timed.append((rec["ts"], _COUNTER, pid, seq, rec))
            seq += 1
        out += self._metadata(tracks)
        self.summary: dict[str, Any] = {
            "pid": pid,
            "trace_id": short(tr.trace_id, _NAME),
            "task_id": short(tr.task_id, _NAME),
            "events": len(events),
            "edges": len(tr.edges),
            "flows": drawn,
            "edges_not_drawn": skipped,
            "tracks": len(tracks),
        }

    # ------------------------------------------------------------------ tracks
    def _tracks(
        self,
        lanes: list[Lane],
        events: Sequence[Event],
        ts: list[int],
        end: list[int],
        tids: Any,
    ) -> tuple[list[int], list[tuple[int, str]]]:
        """Give each event a track; return its tid per event and (tid, name) per track.

        An agent's events go to its first track when they fit: each track holds events
        that start strictly one after another and do not overlap, so every slice is alone
        on its track at its start time and flows bind to it unambiguously.
        """
        by_agent: dict[str, list[int]] = {}
        for i, e in enumerate(events):
            by_agent.setdefault(e.agent, []).append(i)
        tid_of = [0] * len(events)
        tracks: list[tuple[int, str]] = []
        for lane in lanes:
            idx = by_agent.get(lane.name, [])
            idx.sort(key=lambda i: (ts[i], -end[i], i))
            free: list[int] = []  # track numbers free now (min-heap)
            busy: list[tuple[int, int]] = []  # (free from, track number)
            n_tracks = 0
            for i in idx:
                while busy and busy[0][0] <= ts[i]:
                    heapq.heappush(free, heapq.heappop(busy)[1])
                if free:
                    k = heapq.heappop(free)
                else:
                    k, n_tracks = n_tracks, n_tracks + 1
                heapq.heappush(busy, (max(end[i], ts[i] + 1), k))
                tid_of[i] = k  # local for now
            base = len(tracks)
            label = _track_name(lane)
            for k in range(max(n_tracks, 1)):
                tracks.append((next(tids), label if k == 0 else f"{label} [{k + 1}]"))
            for i in idx:
                tid_of[i] = tracks[base + tid_of[i]][0]
        return tid_of, tracks

    def _metadata(self, tracks: list[tuple[int, str]]) -> list[dict[str, Any]]:
        tr, pid = self.tr, self.pid
        name = f"{short(tr.task_id, _NAME // 2)} · {short(tr.trace_id, _NAME // 2)}"
        labels = ", ".join(
            short(x, 40) for x in (tr.topology, tr.system) if x is not None and x != ""
        )
        out: list[dict[str, Any]] = [
            {
                "ph": "M",
                "name": "process_name",
                "pid": pid,
                "tid": self.tid,
                "args": {"name": name},
            },
            {
                "ph": "M",
                "name": "process_sort_index",
                "pid": pid,
                "tid": self.tid,
                "args": {"sort_index": pid},
            },
        ]
        if labels:
            out.append(
                {
                    "ph": "M",
                    "name": "process_labels",
                    "pid": pid,
                    "tid": self.tid,
                    "args": {"labels": labels},
                }
            )
        for k, (tid, label) in enumerate(tracks):
            out.append(
                {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": label}}
            )
            out.append(
                {
                    "ph": "M",
                    "name": "thread_sort_index",
                    "pid": pid,
                    "tid": tid,
                    "args": {"sort_index": k},
                }
            )
        return out

    # ------------------------------------------------------------------ events
    def _args(self, e: Event) -> dict[str, Any]:
        args: dict[str, Any] = {"id": short(e.id, _NAME), "type": e.type, "agent": short(e.agent)}
        for key, value in (
            ("role", e.role),
            ("from", e.from_),
            ("to", e.to),
            ("tool", e.tool),
            ("decision", e.decision),
            ("content_ref", e.content_ref),
            ("error", e.error),
        ):
            if value is not None:
                args[key] = short(value, self.preview)
        if e.step is not None:
            args["step"] = e.step
        if e.trusted is not None:
            args["trusted"] = e.trusted
        args["t_s"] = e.t
        args["dur_s"] = e.dur
        if e.tokens_in or e.tokens_out:
            args["tokens_in"] = e.tokens_in
            args["tokens_out"] = e.tokens_out
            args["tokens"] = e.tokens_in + e.tokens_out
        if e.cost:
            args["cost"] = e.cost
        if e.content is not None:
            args["content"] = short(e.content, self.preview)
            args["content_chars"] = len(e.content)
        if e.attrs:
            args["attrs"] = _attrs(e.attrs, self.preview)
        return args

    def _counters(
        self, lanes: list[Lane], events: Sequence[Event], end: list[int]
    ) -> list[dict[str, Any]]:
        """Cumulative tokens and cost per agent and for the trace, one sample per end time."""
        out: list[dict[str, Any]] = []
        order = sorted(range(len(events)), key=lambda i: (end[i], i))
        by_agent: dict[str, list[int]] = {}
        for i in order:
            by_agent.setdefault(events[i].agent, []).append(i)
        series: list[tuple[str | None, list[int]]] = [
            (lane.name, by_agent.get(lane.name, [])) for lane in lanes if not lane.tool
        ]
        series.append((None, order))
        taken: set[str] = set()
        for agent, idx in series:
            for kind in ("tokens", "cost"):
                values = [
                    (i, events[i].tokens if kind == "tokens" else events[i].cost) for i in idx
                ]
                used = [(i, v) for i, v in values if v]
                if not used:
                    continue
                name = kind if agent is None else f"{kind}: {short(agent)}"
                while name in taken:  # two long names cut to the same text
                    name += "'"
                taken.add(name)
                total: float = 0
                samples = [(0, total)]
                for i, v in used:
                    total += v
                    if samples[-1][0] == end[i]:
                        samples[-1] = (end[i], total)
                    else:
                        samples.append((end[i], total))
                for at, v in samples:
                    out.append(
                        {
                            "ph": "C",
                            "ts": at,
                            "pid": self.pid,
                            "tid": self.tid,
                            "name": name,
                            "args": {kind: v},
                        }
                    )
        return out


def _track_name(lane: Lane) -> str:
    if lane.tool:
        return f"tool: {short(lane.name, _NAME - 6)}"
    name = short(lane.name, _NAME)
    return f"{name} ({short(lane.role, 40)})" if lane.role else name


def _slice_name(e: Event) -> str:
    t = e.type
    if t in ("tool_call", "tool_result", "llm_call") and e.tool:
        return f"{t} {short(e.tool, 40)}"
    if t in ("spawn", "message", "return") and e.to:
        return f"{t} → {short(e.to, 40)}"
    if t == "orchestrator_decision" and e.decision:
        return f"decision {e.decision}"
    return t


def _attrs(attrs: dict[str, Any], preview: int) -> Any:
    """``attrs`` as nested args when small and plainly keyed, else as a cut JSON text."""
    try:
        raw = _ENC.encode(attrs)
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        return short(repr(attrs), preview)
    if len(raw) <= _ATTRS and _plain(attrs):
        return attrs
    return short(raw.decode("utf-8", "replace"), preview)


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` has only short plain keys, few levels, no control characters."""
    if depth > 4:
        return False
    if isinstance(value, dict):
        return all(
            isinstance(k, str) and _SAFE_KEY.fullmatch(k) is not None and _plain(v, depth + 1)
            for k, v in value.items()
        )
    if isinstance(value, list):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, str):
        return short(value, len(value)) == value
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return -(2**63) <= value < 2**63
    return value is None or isinstance(value, bool)
