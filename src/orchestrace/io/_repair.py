"""Repairs of foreign span trees, shared by the OTel, Agents SDK and LangGraph importers.

Exports of other frameworks arrive with duplicate ids, parents that were never exported,
cycles of parent ids, missing or reversed times and children that start before their parents.
Each importer repairs these the same way, and names each repair as a warning
:class:`~orchestrace.errors.Problem` saying what was done and how to fix the export:

- :func:`unique_id`: a second span with a taken id is renamed ``ID~2`` (``~3`` ...);
- :func:`break_cycles`: the span that closes a cycle of parent ids becomes top-level (its
  descendants keep their parents), in linear time;
- :func:`prepare_spans`: all of the above for span records with ISO or epoch times, plus
  missing parents, missing and reversed times and children that start before their parents;
- :func:`replay_order`: repaired spans as the start and end callbacks a live tracer made;
- :func:`settle_spawns`: events of an agent that act before the agent's spawn move to it.

Example:
    >>> found = []
    >>> spans = [("$[0]", {"id": "a", "parent_id": "b", "started_at": 0, "ended_at": 1}),
    ...          ("$[1]", {"id": "b", "parent_id": "a", "started_at": 2, "ended_at": 1})]
    >>> [(s["id"], s["parent_id"]) for s in prepare_spans("t", spans, found, "f.json")]
    [('a', None), ('b', 'a')]
    >>> [p.code for p in found]
    ['clock-skew', 'parent-cycle']
"""

from __future__ import annotations

from collections.abc import Callable, Container, Hashable, Iterable
from typing import Any, TypeVar

import msgspec

from orchestrace.errors import Problem, _short
from orchestrace.io._foreign import EPS, parse_time
from orchestrace.trace.model import Event

__all__ = [
    "break_cycles",
    "prepare_spans",
    "replay_order",
    "settle_spawns",
    "unique_id",
    "warning",
]

_T = TypeVar("_T")


def warning(
    code: str, message: str, fix: str, where: str, source: str, event_id: str | None = None
) -> Problem:
    """A repair made while importing, as a warning naming the place and the fix.

    Example:
        >>> warning("missing-id", "span has no id", "export ids", "$[0]", "f.json").severity
        'warning'
    """
    return Problem(
        code, message, fix, path=where, event_id=event_id, severity="warning", source=source
    )


def unique_id(sid: str, taken: Container[str]) -> str:
    """The id a second span that reuses ``sid`` is imported under: ``sid~2``, ``sid~3`` ...

    Example:
        >>> unique_id("s", {"s", "s~2"})
        's~3'
    """
    k = 2
    while f"{sid}~{k}" in taken:
        k += 1
    return f"{sid}~{k}"


def break_cycles(
    items: Iterable[_T],
    key: Callable[[_T], Hashable],
    parent: Callable[[_T], _T | None],
    cut: Callable[[_T], None],
) -> None:
    """Call ``cut`` on each item that closes a cycle of parents, in the order of ``items``.

    The item cut is the first one met again while walking up from an item; ``cut`` must make
    it parentless (its descendants keep their parents). Linear time, no recursion.

    Example:
        >>> up = {"a": "b", "b": "a", "c": "a"}
        >>> break_cycles(["c", "a", "b"], str, up.get, lambda x: up.update({x: None}))
        >>> up
        {'a': None, 'b': 'a', 'c': 'a'}
    """
    state: dict[Hashable, int] = {}  # 1: on the path being walked, 2: known to reach a root
    for item in items:
        path: list[_T] = []
        x: _T | None = item
        while x is not None and key(x) not in state:
            state[key(x)] = 1
            path.append(x)
            x = parent(x)
        if x is not None and state[key(x)] == 1:
            cut(x)
        for y in path:
            state[key(y)] = 2


def prepare_spans(
    tid: str,
    spans: list[tuple[str, dict[str, Any]]],
    problems: list[Problem],
    source: str,
    noun: str = "span",
    scope: str | None = None,
) -> list[dict[str, Any]]:
    """Repair what can be repaired (each repair named in ``problems``); return the spans.

    ``spans`` are ``(where, record)`` pairs of records with ``id``, ``parent_id``,
    ``started_at`` and ``ended_at``; the records returned are copies that add ``_start``,
    ``_end`` (epoch seconds) and ``_where``. ``noun`` names a record in messages and ``scope``
    names where the records are (default: trace ``tid``).

    Example:
        >>> found = []
        >>> out = prepare_spans("t", [("$", {"id": "a", "parent_id": "x", "started_at": 1})],
        ...                     found, "f.json")
        >>> out[0]["parent_id"], out[0]["_end"], [p.code for p in found]
        (None, 1.0, ['unfinished-span', 'missing-parent'])
    """
    where_all = scope or f"trace {_short(tid)!r}"

    def warn(code: str, where: str, sid: str | None, msg: str, fix: str) -> None:
        problems.append(warning(code, msg, fix, where, source, sid))

    by_id: dict[str, dict[str, Any]] = {}
    raws: dict[str, object] = {}
    order: list[dict[str, Any]] = []
    for where, raw in spans:
        sp = dict(raw)
        sid = sp.get("id")
        if not isinstance(sid, str) or not sid:
            sid = f"{where}"
            warn(
                "missing-id",
                where,
                None,
                f"{noun} has no id",
                f"it was imported under the id {sid!r}; export {noun}s with their ids",
            )
            sp["id"] = sid
        if sid in by_id:
            if raws[sid] == raw:
                warn(
                    "duplicate-id",
                    where,
                    sid,
                    f"{noun} {_short(sid)!r} appears twice with the same content",
                    f"the copy was dropped; export each {noun} once",
                )
                continue
            new = unique_id(sid, by_id)
            warn(
                "duplicate-id",
                where,
                sid,
                f"{noun} id {_short(sid)!r} is used by two different {noun}s",
                f"the later one was imported as {new!r} (children keep the first); "
                f"give every {noun} a unique id",
            )
            sp["id"] = sid = new
        start = parse_time(sp.get("started_at"))
        end = parse_time(sp.get("ended_at"))
        if start is None and end is None:
            warn(
                "missing-time",
                where,
                sid,
                f"{noun} {_short(sid)!r} has no readable started_at or ended_at",
                f"it was placed at its parent's start with no duration; export finished {noun}s",
            )
        elif start is None:
            warn(
                "missing-time",
                where,
                sid,
                f"{noun} {_short(sid)!r} has no readable started_at",
                f"it was placed at its end with no duration; export {noun}s with both times",
            )
            start = end
        elif end is None:
            warn(
                "unfinished-span",
                where,
                sid,
                f"{noun} {_short(sid)!r} has no ended_at (it had not ended when exported)",
                f"it was imported with no duration; export {noun}s when they end",
            )
            end = start
        elif end < start:
            warn(
                "clock-skew",
                where,
                sid,
                f"{noun} {_short(sid)!r} ends before it starts",
                "its duration was set to 0; check the clock of the process that recorded it",
            )
            end = start
        sp["_start"], sp["_end"], sp["_where"] = start, end, where
        by_id[sid] = sp
        raws[sid] = raw
        order.append(sp)
    # parents: missing ones and cycles make a span a root
    for sp in order:
        pid = sp.get("parent_id")
        if pid is None:
            continue
        if not isinstance(pid, str) or pid not in by_id:
            warn(
                "missing-parent",
                sp["_where"],
                sp["id"],
                f"{noun} {_short(sp['id'])!r} names parent {_short(str(pid))!r}, which is not "
                f"in {where_all}",
                f"it was attached to the trace root; export the parent {noun} too",
            )
            sp["parent_id"] = None

    def parent_of(sp: dict[str, Any]) -> dict[str, Any] | None:
        pid = sp.get("parent_id")
        return by_id.get(pid) if isinstance(pid, str) else None

    def cut(node: dict[str, Any]) -> None:
        warn(
            "parent-cycle",
            node["_where"],
            node["id"],
            f"{noun} {_short(node['id'])!r} is its own ancestor through parent "
            f"{_short(str(node.get('parent_id')))!r}",
            "it was attached to the trace root (its descendants keep their parents); "
            "fix the parent ids",
        )
        node["parent_id"] = None

    break_cycles(order, lambda sp: sp["id"], parent_of, cut)
    # times: untimed spans take their parent's start; children start no earlier than parents
    done: set[str] = set()

    def settle(leaf: dict[str, Any]) -> None:
        chain: list[dict[str, Any]] = []
        node: dict[str, Any] | None = leaf
        while node is not None and node["id"] not in done:  # parents first (no recursion)
            done.add(node["id"])
            chain.append(node)
            node = parent_of(node)
        for sp in reversed(chain):
            settle_one(sp)

    def settle_one(sp: dict[str, Any]) -> None:
        parent = parent_of(sp)
        if sp["_start"] is None:
            base = parent["_start"] if parent is not None else None
            sp["_start"] = sp["_end"] = base
            return
        if (
            parent is not None
            and parent["_start"] is not None
            and sp["_start"] < parent["_start"] - EPS
        ):
            warn(
                "clock-skew",
                sp["_where"],
                sp["id"],
                f"{noun} {_short(sp['id'])!r} starts {parent['_start'] - sp['_start']:.6f}s "
                f"before its parent {_short(parent['id'])!r}",
                "it was moved to its parent's start; check the clocks of the processes "
                "that recorded them",
            )
            sp["_end"] = max(sp["_end"], parent["_start"])
            sp["_start"] = parent["_start"]

    for sp in order:
        settle(sp)
    known = [s["_start"] for s in order if s["_start"] is not None]
    floor = min(known, default=0.0)
    for sp in order:
        if sp["_start"] is None:
            sp["_start"] = sp["_end"] = floor
    return order


def replay_order(order: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Start and end callbacks in the order a live tracer made them (by time; ends first on ties).

    ``order`` holds records returned by :func:`prepare_spans`.

    Example:
        >>> a = {"id": "a", "parent_id": None, "_start": 0.0, "_end": 1.0}
        >>> b = {"id": "b", "parent_id": "a", "_start": 0.0, "_end": 1.0}
        >>> [(c, s["id"]) for c, s in replay_order([b, a])]
        [('start', 'a'), ('start', 'b'), ('end', 'b'), ('end', 'a')]
    """
    depth: dict[str, int] = {}
    by_id = {sp["id"]: sp for sp in order}

    def d(sp: dict[str, Any]) -> int:
        chain: list[dict[str, Any]] = []
        node: dict[str, Any] | None = sp
        while node is not None and node["id"] not in depth:  # no recursion on deep trees
            chain.append(node)
            pid = node.get("parent_id")
            node = by_id.get(pid) if isinstance(pid, str) else None
        base = depth[node["id"]] if node is not None else -1
        for k, x in enumerate(reversed(chain)):
            depth[x["id"]] = base + k + 1
        return depth[sp["id"]]

    calls: list[tuple[float, int, int, int, str, dict[str, Any]]] = []
    for i, sp in enumerate(order):
        calls.append((sp["_start"], 1, d(sp), i, "start", sp))
        calls.append((sp["_end"], 0, -d(sp), i, "end", sp))
    calls.sort(key=lambda c: c[:4])
    return [(c[4], c[5]) for c in calls]


def settle_spawns(events: list[Event], problems: list[Problem], source: str) -> list[Event]:
    """Move events of a spawned agent that start before its first spawn to the spawn's time.

    Only input with broken times (lost or skewed span times) has such events; each agent
    moved is named in ``problems``.

    Example:
        >>> evs = [Event(id="s", t=2.0, type="spawn", agent="a", to="b"),
        ...        Event(id="x", t=0.0, type="llm_call", agent="b")]
        >>> found = []
        >>> [e.t for e in settle_spawns(evs, found, "f")], found[0].code
        ([2.0, 2.0], 'event-before-spawn')
    """
    first: dict[str, tuple[float, str]] = {}
    for e in events:
        if (
            e.type == "spawn"
            and e.to
            and e.to != e.agent
            and (e.to not in first or e.t < first[e.to][0])
        ):
            first[e.to] = (e.t, e.id)
    out: list[Event] = []
    named: set[str] = set()
    for e in events:
        limit = first.get(e.agent)
        if limit is not None and e.type != "tool_result" and e.t < limit[0] - EPS:
            if e.agent not in named:
                named.add(e.agent)
                problems.append(
                    warning(
                        "event-before-spawn",
                        f"agent {_short(e.agent)!r} acts at t={e.t} before its spawn "
                        f"{_short(limit[1])!r} at t={limit[0]} (lost or skewed times)",
                        "its earlier events were moved to the spawn's time; export complete "
                        "span times",
                        "$",
                        source,
                        e.id,
                    )
                )
            e = msgspec.structs.replace(e, t=limit[0])
        out.append(e)
    return out
