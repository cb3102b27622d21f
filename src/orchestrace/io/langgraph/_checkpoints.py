"""LangGraph checkpoint history: ``get_state_history()`` snapshots to one trace per branch.

A branch made by ``update_state`` or a fork gets ``meta["fork"]`` and a ``human_intervention``
event; streamed runs that carry checkpoints keep their ids in ``meta``.

Example:
    >>> _conf_id({"configurable": {"checkpoint_id": "c1"}})
    'c1'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrace.errors import Problem, _short
from orchestrace.io._foreign import parse_time as _time
from orchestrace.io._foreign import text as _text
from orchestrace.io._repair import warning as _problem
from orchestrace.io.langgraph._runs import _import_runs
from orchestrace.io.langgraph._values import SYSTEM
from orchestrace.trace.model import Trace


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
