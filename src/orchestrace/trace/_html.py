"""The notebook view of a trace: a compact summary and a mini-timeline as inline SVG.

:func:`trace_html` is what ``Trace._repr_html_`` shows in Jupyter. Its size is bounded
whatever the trace holds: at most :data:`MAX_ROWS` agent rows and about :data:`MAX_BARS`
bars (a larger trace's events are merged into busy spans per row), and every string from the
trace is cut, cleared of control characters and HTML-escaped, so nothing in a trace can add
markup or run a script. The markup uses only ``div``, ``table``, ``svg`` shapes, ``title``
and ``text`` elements with inline styles: no scripts, event handlers or links.

Example:
    >>> from orchestrace.trace.generate import generate_trace
    >>> html = trace_html(generate_trace(agents=4, steps=60, seed=0))
    >>> html.startswith("<div") and "<svg" in html and "<script" not in html
    True
"""

from __future__ import annotations

import math
from collections import Counter
from html import escape
from typing import TYPE_CHECKING

from orchestrace.trace._layout import Lane, layout, short

if TYPE_CHECKING:
    from orchestrace.trace.model import Event, Trace

__all__ = ["MAX_BARS", "MAX_ROWS", "trace_html"]

#: Agent rows drawn in the mini-timeline (the rest are counted).
MAX_ROWS = 30
#: Bars drawn in the mini-timeline, about (events are merged into spans beyond it).
MAX_BARS = 300
_CP_BARS = 120  # critical-path marks
_WIDTH = 640  # px of the time axis
_LABEL = 130  # px of the agent labels
_ROW = 14  # px per row
_LISTED = 12  # names, rewards, ... listed before "and N more"
COLORS = {
    "orchestrator_decision": "#8e6c8a",
    "spawn": "#4e79a7",
    "despawn": "#9c9c9c",
    "message": "#f28e2b",
    "tool_call": "#59a14f",
    "tool_result": "#8cd17d",
    "return": "#76b7b2",
    "aggregate": "#b07aa1",
    "human_intervention": "#edc948",
    "safety_event": "#e15759",
    "llm_call": "#a0cbe8",
}
_OTHER = "#bab0ac"
_CP = "#d62728"


def _t(text: object, limit: int = 60) -> str:
    """Trace text, cut, cleared and escaped for HTML text and attributes."""
    return escape(short(text, limit), quote=True)


def _num(x: float) -> str:
    if not math.isfinite(x):
        return escape(str(x))
    return f"{x:.4g}"


def _listed(items: list[str], limit: int = _LISTED) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def trace_html(trace: Trace) -> str:
    """A self-contained HTML fragment: summary table and mini-timeline of ``trace``."""
    events = trace.events
    lanes = layout(trace)
    agents = [lane for lane in lanes if not lane.tool]
    tools = [lane for lane in lanes if lane.tool]
    by_type = Counter(e.type for e in events)
    edge_types = Counter(e.type for e in trace.edges)
    t0 = min((e.t for e in events), default=0.0)
    t1 = max((e.t + e.dur for e in events), default=0.0)
    cp_ids: set[str] = set()
    try:
        g = trace.graph
        cp = g.critical_path()
        cp_ids = set(cp.ids)
        work = g.work()
        cp_text = (
            f"{_num(cp.length)} s over {len(cp.ids)} events "
            f"(work {_num(work)} s, speedup {_num(work / cp.length if cp.length > 0 else 1.0)})"
        )
    except Exception as err:  # a view never fails: an invalid trace still shows
        cp_text = f"n/a ({_t(err, 120)})"
    tokens = sum(e.tokens_in + e.tokens_out for e in events)
    cost = sum(e.cost for e in events)
    roles = Counter(lane.role or "unknown" for lane in agents)
    rows: list[tuple[str, str]] = [
        ("trace", f"{_t(trace.trace_id, 80)} &middot; task {_t(trace.task_id, 80)}"),
        (
            "system",
            f"{_t(trace.system or '-')} &middot; topology {_t(trace.topology or '-')}",
        ),
        (
            "events",
            f"{len(events)}: "
            + _listed([f"{_t(k)} {v}" for k, v in sorted(by_type.items(), key=lambda x: -x[1])]),
        ),
        (
            "edges",
            f"{len(trace.edges)}"
            + (
                ": " + _listed([f"{_t(k)} {v}" for k, v in edge_types.most_common()])
                if edge_types
                else ""
            ),
        ),
        (
            "agents",
            f"{len(agents)} ("
            + _listed([f"{_t(k, 30)} {v}" for k, v in roles.most_common()], 6)
            + "): "
            + _listed([_t(a.name, 30) for a in agents])
            + (f"; tools: {_listed([_t(a.name, 30) for a in tools], 6)}" if tools else ""),
        ),
        ("makespan", f"{_num(t1 - t0)} s"),
        ("critical path", cp_text),
        ("tokens / cost", f"{tokens} / {_num(cost)}"),
    ]
    for label, values in (("rewards", trace.rewards), ("metrics", trace.metrics)):
        if values:
            items = [f"{_t(k, 30)}={_num(float(v))}" for k, v in values.items()]
            rows.append((label, _listed(items)))
    table = "".join(
        f'<tr><th style="text-align:left;padding:1px 8px 1px 0;vertical-align:top;white-space:nowrap">{k}</th>'
        f'<td style="text-align:left;padding:1px 0">{v}</td></tr>'
        for k, v in rows
    )
    return (
        '<div style="font:12px/1.35 system-ui,sans-serif;max-width:780px">'
        f'<table style="border-collapse:collapse;margin-bottom:6px">{table}</table>'
        f"{_timeline(events, lanes, cp_ids, t0, t1, set(by_type))}</div>"
    )


def _timeline(
    events: tuple[Event, ...],
    lanes: list[Lane],
    cp_ids: set[str],
    t0: float,
    t1: float,
    types: set[str],
) -> str:
    shown = lanes[:MAX_ROWS]
    row_of = {lane.name: k for k, lane in enumerate(shown)}
    span = t1 - t0 if t1 > t0 else 1.0
    scale = _WIDTH / span
    per_row: list[list[Event]] = [[] for _ in shown]
    for e in events:
        k = row_of.get(e.agent)
        if k is not None:
            per_row[k].append(e)
    n_bars = sum(len(r) for r in per_row)
    parts: list[str] = []
    height = _ROW * len(shown) + 34
    for k, lane in enumerate(shown):
        y = 4 + k * _ROW
        indent = 8 * min(lane.depth, 6)  # spawn-tree depth
        label = f"tool: {lane.name}" if lane.tool else lane.name
        parts.append(f'<text x="{2 + indent}" y="{y + 10}">{_t(label, 22 - indent // 6)}</text>')
        if k % 2 == 0:
            parts.append(
                f'<rect x="{_LABEL}" y="{y}" width="{_WIDTH}" height="{_ROW}" fill="#f4f4f4"/>'
            )

    def x_of(t: float) -> float:
        return _LABEL + (t - t0) * scale

    if n_bars <= MAX_BARS:
        for k, row in enumerate(per_row):
            y = 4 + k * _ROW
            for e in row:
                x = x_of(e.t)
                w = max(e.dur * scale, 1.0)
                mark = f' stroke="{_CP}" stroke-width="1.2"' if e.id in cp_ids else ""
                parts.append(
                    f'<rect x="{x:.1f}" y="{y + 2}" width="{w:.1f}" height="{_ROW - 4}" '
                    f'fill="{COLORS.get(e.type, _OTHER)}"{mark}>'
                    f"<title>{_t(e.type)} {_t(e.id, 40)} t={_num(e.t)} s "
                    f"dur={_num(e.dur)} s</title></rect>"
                )
        merged = False
    else:
        merged = True
        runs = _merge(per_row, scale, t0, MAX_BARS)
        for k, row_runs in enumerate(runs):
            y = 4 + k * _ROW
            kinds = Counter(e.type for e in per_row[k])
            fill = COLORS.get(kinds.most_common(1)[0][0], _OTHER) if kinds else _OTHER
            for a, b, n in row_runs:
                parts.append(
                    f'<rect x="{_LABEL + a:.1f}" y="{y + 2}" width="{max(b - a, 1.0):.1f}" '
                    f'height="{_ROW - 4}" fill="{fill}"><title>{n} events, '
                    f"t={_num(t0 + a / scale)}-{_num(t0 + b / scale)} s</title></rect>"
                )
    if cp_ids:
        cp_rows = [[e for e in row if e.id in cp_ids] for row in per_row]
        for k, row_runs in enumerate(_merge(cp_rows, scale, t0, _CP_BARS)):
            y = 4 + k * _ROW + _ROW - 2
            for a, b, _n in row_runs:
                parts.append(
                    f'<rect x="{_LABEL + a:.1f}" y="{y}" width="{max(b - a, 1.0):.1f}" '
                    f'height="2" fill="{_CP}"/>'
                )
    axis_y = 4 + len(shown) * _ROW
    parts.append(
        f'<line x1="{_LABEL}" y1="{axis_y}" x2="{_LABEL + _WIDTH}" y2="{axis_y}" '
        'stroke="#888"/>'
        f'<text x="{_LABEL}" y="{axis_y + 12}">{_num(t0)} s</text>'
        f'<text x="{_LABEL + _WIDTH}" y="{axis_y + 12}" text-anchor="end">{_num(t1)} s</text>'
    )
    notes = []
    if len(lanes) > len(shown):
        notes.append(f"{len(lanes) - len(shown)} more rows not shown")
    if merged:
        notes.append(f"{n_bars} events merged into busy spans")
    notes.append("red: critical path")
    parts.append(
        f'<text x="{_LABEL + _WIDTH / 2}" y="{axis_y + 12}" text-anchor="middle" '
        f'fill="#555">{escape("; ".join(notes))}</text>'
    )
    legend = " ".join(
        f'<span style="white-space:nowrap"><span style="display:inline-block;width:9px;'
        f'height:9px;background:{c}"></span> {t}</span>'
        for t, c in COLORS.items()
        if t in types
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_LABEL + _WIDTH + 4}" '
        f'height="{height}" style="font-size:10px">{"".join(parts)}</svg>'
        f'<div style="font-size:10px;color:#444">{legend}</div>'
    )


def _merge(
    rows: list[list[Event]], scale: float, t0: float, budget: int
) -> list[list[tuple[float, float, int]]]:
    """Per row, spans ``(x0, x1, events)`` in px covering its events, at most ~``budget``.

    Events closer than a gap are merged; the gap doubles until the spans fit the budget.
    """
    spans = [sorted(((e.t - t0) * scale, (e.t + e.dur - t0) * scale) for e in r) for r in rows]
    gap = 0.5
    while True:
        out: list[list[tuple[float, float, int]]] = []
        total = 0
        for row in spans:
            runs: list[tuple[float, float, int]] = []
            for a, b in row:
                if runs and a <= runs[-1][1] + gap:
                    ra, rb, n = runs[-1]
                    runs[-1] = (ra, max(rb, b), n + 1)
                else:
                    runs.append((a, b, 1))
            out.append(runs)
            total += len(runs)
        if total <= budget or gap > _WIDTH:
            return out
        gap *= 2
