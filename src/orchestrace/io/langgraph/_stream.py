"""Streamed LangGraph output: ``graph.stream`` chunks and ``astream_events`` events to run records.

Example:
    >>> st = stream_runs([("$[0]", ["updates", {"a": {"x": 1}}])])
    >>> [st.runs[r]["name"] for r in st.order]
    ['LangGraph', 'a']
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from orchestrace.io._foreign import text as _text
from orchestrace.io.langgraph._checkpoints import _checkpoint
from orchestrace.io.langgraph._values import _is_stream_event


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
