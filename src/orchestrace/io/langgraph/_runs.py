"""Run records to traces: repair ids, parents and times, then replay each root run through the mapper.

Example:
    >>> recs = [("$[0]", {"id": "g", "name": "G", "run_type": "chain", "start_time": 0.0,
    ...                    "end_time": 1.0})]
    >>> found = []
    >>> _import_runs(recs, found, {}, "f.json", clock="wall"), found[0].code
    ([], 'no-events')
"""

from __future__ import annotations

from typing import Any

from orchestrace.errors import Problem, _short
from orchestrace.io._repair import prepare_spans as _prepare
from orchestrace.io._repair import replay_order as _replay
from orchestrace.io._repair import settle_spawns
from orchestrace.io._repair import warning as _problem
from orchestrace.io.langgraph._mapper import RunMapper
from orchestrace.io.langgraph._values import SYSTEM, _is_run, run_record
from orchestrace.trace.build import default_costs
from orchestrace.trace.model import Edge, Event, Trace


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
