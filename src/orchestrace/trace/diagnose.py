"""Diagnose a document that did not decode as a trace: every structural problem, with a fix.

The fast path decodes a file straight into frozen records and checks them
(:func:`~orchestrace.trace.check.check_trace`). When decoding fails, msgspec stops at the first
error; :func:`check_structure` takes the decoded JSON value instead, converts each event and
edge on its own, reports every missing field, wrong type and unknown value it finds
(:func:`problem_from_msgspec` turns msgspec's messages into problems that name the place and the
fix), then runs the format rules on whatever could be salvaged, pointing their findings at the
document's own indices.

Example:
    >>> doc = {"trace_id": "t1", "task_id": "demo", "events": [
    ...     {"id": "e1", "t": 0.0, "type": "message", "agent": "a"},
    ...     {"id": "e2", "t": "soon", "type": "message", "agent": "a"},
    ...     {"id": "e3", "type": "thinking", "agent": "a", "t": 1.0}]}
    >>> trace, problems = check_structure(doc)
    >>> [e.id for e in trace.events]
    ['e1']
    >>> for p in problems:
    ...     print(p)
    $.events[1].t: expected float, got str; make the value a float
    $.events[2].type: unknown event type 'thinking'; use one of: orchestrator_decision, ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from orchestrace.errors import Problem
from orchestrace.trace.check import check_trace
from orchestrace.trace.model import (
    MAX_INT,
    Decision,
    Edge,
    EdgeType,
    Event,
    EventType,
    Topology,
    Trace,
)

__all__ = ["check_structure", "problem_from_msgspec"]

_FIELD = re.compile(r"`([^`]*)`")
_BOUND = re.compile(r"^Expected `(\w+)` (<=|>=|<|>) (\S+)$")
_EVENT_INDEX = re.compile(r"\$\.events\[(\d+)\]")
_EDGE_INDEX = re.compile(r"\$\.edges\[(\d+)\]")


def _clip(text: str, limit: int = 300) -> str:
    text = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    if len(text) > limit:
        text = f"{text[: limit // 2]}...({len(text)} chars)...{text[-limit // 4 :]}"
    return text


def _enum_for(path: str) -> type[Any] | None:
    if path.endswith(".decision"):
        return Decision
    if path.endswith(".topology"):
        return Topology
    if path.endswith(".type"):
        return EdgeType if "$.edges[" in path else EventType
    return None


def _split_at(text: str) -> tuple[str, str]:
    """Split a msgspec message ``"<message> - at `$.path`"`` into ``(message, "$.path")``.

    The path is ``$`` when there is none. It holds no backquote: it opens at the last but one.
    """
    end = len(text) - 1 if text.endswith("\n") else len(text)  # as a regex `$` would
    if text.endswith("`", 0, end):
        j = text.rfind("`", 0, end - 1)
        if j >= 6 and text.startswith(" - at `", j - 6) and text[j + 1 : j + 2] == "$":
            return text[: j - 6].strip(), text[j + 1 : end - 1]
    return text.strip(), "$"


def problem_from_msgspec(err: Exception, prefix: str, *, where: str = "event") -> Problem:
    """Turn a msgspec validation message into a :class:`Problem` with a fix."""
    msg, sub = _split_at(str(err))
    path = prefix + sub[1:]
    names = _FIELD.findall(msg)
    if msg.startswith("Object missing required field") and names:
        required = {
            "event": "id, t, type and agent",
            "edge": "src, dst and type",
            "trace": "trace_id, task_id and events",
        }.get(where, "")
        return Problem(
            "missing-field",
            f"missing required field `{names[0]}`",
            f"add `{names[0]}` (every {where} needs {required})",
            path=path,
        )
    if msg.startswith("Object contains unknown field") and names:
        home = "attrs" if where == "event" else "meta"
        return Problem(
            "unknown-field",
            f"unknown field `{_clip(names[0], 60)}`",
            f"remove it, or move it under `{home}`",
            path=path,
        )
    if msg.startswith("Invalid enum value"):
        enum = _enum_for(path)
        value = msg[len("Invalid enum value") :].strip()
        what = "event type" if enum is EventType else "edge type" if enum is EdgeType else "value"
        choices = (
            f"use one of: {', '.join(str(x) for x in enum)}" if enum else "see `orchestrace schema`"
        )
        return Problem(
            "unknown-type" if enum in (EventType, EdgeType) else "unknown-value",
            f"unknown {what} {_clip(value, 80)}",
            choices,
            path=path,
        )
    if msg.startswith("Number out of range"):
        return Problem(
            "out-of-range",
            "number out of range (beyond the largest float)",
            "record a finite number",
            path=path,
        )
    bound = _BOUND.match(msg)
    if bound:
        kind, op, limit = bound.groups()
        kind = {"int": "an integer", "float": "a number", "str": "a string"}.get(kind, kind)
        if limit == str(MAX_INT):
            limit = f"{limit} (2^63-1)"
        return Problem(
            "out-of-range",
            f"value out of range: expected {kind} {op} {limit}",
            f"record {kind} {op} {limit}",
            path=path,
        )
    if msg.startswith("Expected") and len(names) >= 2:
        return Problem(
            "wrong-type",
            f"expected {names[0]}, got {names[1]}",
            f"make the value a {names[0]}",
            path=path,
        )
    return Problem(
        "invalid-value", _clip(msg), "see `orchestrace schema` for the expected form", path=path
    )


@dataclass
class _Converted:
    """Items that converted, where each sat in the document, and what was dropped."""

    good: list[Any] = field(default_factory=list)
    index: list[int] = field(default_factory=list)
    bad_ids: list[str] = field(default_factory=list)
    bad_targets: set[str] = field(default_factory=set)


def _convert_each(
    items: list[Any], kind: type[Any], prefix: str, where: str, problems: list[Problem]
) -> _Converted:
    out = _Converted()
    for i, item in enumerate(items):
        try:
            out.good.append(msgspec.convert(item, kind))
            out.index.append(i)
        except msgspec.ValidationError as err:
            problems.append(
                _as_checked(problem_from_msgspec(err, f"{prefix}[{i}]", where=where), item)
            )
            if isinstance(item, dict):
                if isinstance(item.get("id"), str):
                    out.bad_ids.append(item["id"])
                if isinstance(item.get("to"), str):
                    out.bad_targets.add(item["to"])
    return out


#: The event fields that are times, durations or costs: numbers >= 0.
_NUMBER_FIELDS = ("t", "dur", "cost")


def _as_checked(problem: Problem, item: Any) -> Problem:
    """A negative time, duration or cost named as ``check_trace`` names it in memory.

    (msgspec's words, "value out of range: expected a number >= 0.0", name neither the value
    nor the unit; a Parquet dataset and a trace built in Python get these.)
    """
    if problem.code != "out-of-range" or not isinstance(item, dict):
        return problem
    name = problem.path.rsplit(".", 1)[-1]
    value = item.get(name)
    if name not in _NUMBER_FIELDS or isinstance(value, bool):
        return problem
    if not isinstance(value, int | float) or not value < 0:
        return problem
    return replace(
        problem,
        code="negative-value",
        message=f"{name} is negative {float(value)!r}",
        fix=f"record {name} as a finite number >= 0"
        + (" (seconds since the trace start)" if name == "t" else ""),
    )


def _renumber(problem: Problem, events: list[int], edges: list[int]) -> Problem:
    """Point a problem found on the salvaged trace at the document's own indices."""

    def fix(text: str) -> str:
        text = _EVENT_INDEX.sub(lambda m: f"$.events[{events[int(m.group(1))]}]", text)
        return _EDGE_INDEX.sub(lambda m: f"$.edges[{edges[int(m.group(1))]}]", text)

    if "$.events[" not in problem.path + problem.message and "$.edges[" not in problem.path:
        return problem
    return replace(problem, path=fix(problem.path), message=fix(problem.message))


def knock_on(problem: Problem, trace: Trace, dropped_targets: set[str]) -> bool:
    """Whether ``problem`` only follows from a malformed spawn (or other event) being dropped."""
    if problem.code not in ("return-without-spawn", "event-before-spawn") or not dropped_targets:
        return False
    m = _EVENT_INDEX.match(problem.path)
    if m is None or int(m.group(1)) >= len(trace.events):
        return False
    return trace.events[int(m.group(1))].agent in dropped_targets


def check_structure(
    obj: Any, *, partial: bool = False, semantic: bool = True
) -> tuple[Trace | None, list[Problem]]:
    """Check a decoded JSON value that did not decode as a :class:`Trace`.

    Reports every structural problem (one per bad event or edge), then, with ``semantic``,
    runs :func:`check_trace` on the events and edges that were well formed.

    Returns:
        ``(trace, problems)``: the salvaged trace (``None`` when the top level is unusable)
        and every problem found.
    """
    problems: list[Problem] = []
    if not isinstance(obj, dict):
        kind = type(obj).__name__
        return None, [
            Problem(
                "not-an-object",
                f"top-level JSON value is a {kind}, not an object",
                "a trace file holds one JSON object; store many traces as JSONL",
                path="$",
            )
        ]
    events_raw = obj.get("events")
    edges_raw = obj.get("edges", [])
    for name, value in (("events", events_raw), ("edges", edges_raw)):
        if value is not None and not isinstance(value, list):
            problems.append(
                Problem(
                    "wrong-type",
                    f"{name} is a {type(value).__name__}, not an array",
                    f"make `{name}` a JSON array",
                    path=f"$.{name}",
                )
            )
    if events_raw is None:
        problems.append(
            Problem(
                "missing-field",
                "missing required field `events`",
                "add `events` (every trace needs trace_id, task_id and events)",
                path="$",
            )
        )
    events_list = events_raw if isinstance(events_raw, list) else []
    edges_list = edges_raw if isinstance(edges_raw, list) else []
    ev = _convert_each(events_list, Event, "$.events", "event", problems)
    ed = _convert_each(edges_list, Edge, "$.edges", "edge", problems)
    events, bad_ids = ev.good, ev.bad_ids
    edges = ed.good
    head = {k: v for k, v in obj.items() if k not in ("events", "edges")}
    header: Trace | None = None
    try:
        header = msgspec.convert({**head, "events": [], "edges": []}, Trace)
    except msgspec.ValidationError as err:
        problems.append(problem_from_msgspec(err, "$", where="trace"))
    if header is None:
        return None, problems
    trace = header.replace(events=tuple(events), edges=tuple(edges))._mark_decoded()
    if semantic:
        found = check_trace(trace, partial=partial, known_ids=bad_ids)
        if events_list:  # events exist, they were just malformed
            found = [p for p in found if p.code != "no-events"]
        found = [p for p in found if not knock_on(p, trace, ev.bad_targets)]
        problems.extend(_renumber(p, ev.index, ed.index) for p in found)
    problems.sort(key=lambda p: p.severity != "error")
    return trace, problems
