"""The survey schema's verdict on a JSON object: its problems, as the JSON Schema validator would find them.

Example:
    >>> [p.path for p in schema_problems({"events": []})][:2]
    ['$', '$']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from orchestrace.errors import Problem, _short
from orchestrace.io.upstream._names import (
    _REQUIRED_COSTS,
    _REQUIRED_EVENT,
    _TOP_FIELDS,
    UPSTREAM_EDGE_TYPES,
    UPSTREAM_EVENT_TYPES,
    UPSTREAM_TOPOLOGIES,
)

# ---------------------------------------------------------------------- the schema's verdict
#: Problems listed per document by :func:`schema_problems`; the rest are counted.
MAX_SCHEMA_PROBLEMS = 100


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object" if isinstance(v, dict) else "value"


def _schema_problem(path: str, message: str, fix: str) -> Problem:
    return Problem("schema", message, fix, path=path)


def _string(v: Any, path: str, *, nonempty: bool = False) -> Iterator[Problem]:
    if not isinstance(v, str):
        yield _schema_problem(path, f"is {_kind(v)}, not a string", "make it a string")
    elif nonempty and not v:
        yield _schema_problem(path, "is an empty string", "make it a non-empty string")


def _enum(v: Any, path: str, allowed: frozenset[str], what: str) -> Iterator[Problem]:
    if not isinstance(v, str) or v not in allowed:
        shown = _short(repr(v), 60) if isinstance(v, str) else _kind(v)
        yield _schema_problem(
            path, f"{shown} is not a survey {what}", f"use one of: {', '.join(sorted(allowed))}"
        )


def _number_map(
    v: Any, path: str, minimum: tuple[str, ...] = (), required: tuple[str, ...] = ()
) -> Iterator[Problem]:
    if not isinstance(v, dict):
        yield _schema_problem(path, f"is {_kind(v)}, not an object", "make it a JSON object")
        return
    for key in required:
        if key not in v:
            yield _schema_problem(
                path, f"missing required key `{key}`", f"add `{key}` (a number >= 0)"
            )
    for key, value in v.items():
        where = f"{path}.{_short(str(key))}"
        if not _is_number(value):
            yield _schema_problem(where, f"is {_kind(value)}, not a number", "record a number")
        elif key in minimum and value < 0:
            yield _schema_problem(where, f"{value!r} is below 0", "record a number >= 0")


def _event_problems(ev: Any, path: str) -> Iterator[Problem]:
    if not isinstance(ev, dict):
        yield _schema_problem(path, f"is {_kind(ev)}, not an object", "make each event an object")
        return
    for key in _REQUIRED_EVENT:
        if key not in ev:
            yield _schema_problem(
                path,
                f"missing required field `{key}`",
                f"add `{key}` (every event needs id, t, type and agent)",
            )
    if "id" in ev:
        yield from _string(ev["id"], f"{path}.id", nonempty=True)
    if "agent" in ev:
        yield from _string(ev["agent"], f"{path}.agent", nonempty=True)
    if "t" in ev:
        t = ev["t"]
        if not _is_number(t):
            yield _schema_problem(f"{path}.t", f"is {_kind(t)}, not a number", "record seconds")
        elif t < 0 or (isinstance(t, float) and math.isnan(t)):
            yield _schema_problem(f"{path}.t", f"{t!r} is below 0", "record t >= 0")
    if "type" in ev:
        yield from _enum(ev["type"], f"{path}.type", UPSTREAM_EVENT_TYPES, "event type")
    for key in ("role", "from", "to", "tool", "content_ref"):
        if key in ev:
            yield from _string(ev[key], f"{path}.{key}")
    if "trusted" in ev and not isinstance(ev["trusted"], bool):
        yield _schema_problem(
            f"{path}.trusted", f"is {_kind(ev['trusted'])}, not a boolean", "use true or false"
        )


def _edge_problems(ed: Any, path: str) -> Iterator[Problem]:
    if not isinstance(ed, dict):
        yield _schema_problem(path, f"is {_kind(ed)}, not an object", "make each edge an object")
        return
    for key in ("src", "dst", "type"):
        if key not in ed:
            yield _schema_problem(
                path, f"missing required field `{key}`", f"add `{key}` (edges need src, dst, type)"
            )
    for key in ed:
        if key not in ("src", "dst", "type"):
            yield _schema_problem(
                path,
                f"unknown field `{_short(str(key))}`",
                "edges allow only src, dst and type; remove it",
            )
    for key in ("src", "dst"):
        if key in ed:
            yield from _string(ed[key], f"{path}.{key}", nonempty=True)
    if "type" in ed:
        yield from _enum(ed["type"], f"{path}.type", UPSTREAM_EDGE_TYPES, "edge type")


def _all_schema_problems(obj: Any) -> Iterator[Problem]:
    if not isinstance(obj, dict):
        yield _schema_problem("$", f"is {_kind(obj)}, not an object", "a trace is a JSON object")
        return
    for key in ("trace_id", "task_id", "events", "edges", "rewards", "costs"):
        if key not in obj:
            yield _schema_problem("$", f"missing required field `{key}`", f"add `{key}`")
    for key in obj:
        if key not in _TOP_FIELDS:
            yield _schema_problem(
                "$",
                f"unknown top-level field `{_short(str(key))}`",
                "the survey schema allows no other top-level fields; remove it",
            )
    for key in ("trace_id", "task_id"):
        if key in obj:
            yield from _string(obj[key], f"$.{key}", nonempty=True)
    if "system" in obj:
        yield from _string(obj["system"], "$.system")
    if "topology" in obj:
        yield from _enum(obj["topology"], "$.topology", UPSTREAM_TOPOLOGIES, "topology")
    checks: tuple[tuple[str, Callable[[Any, str], Iterator[Problem]]], ...] = (
        ("events", _event_problems),
        ("edges", _edge_problems),
    )
    for name, each in checks:
        if name not in obj:
            continue
        items = obj[name]
        if not isinstance(items, list):
            yield _schema_problem(
                f"$.{name}", f"is {_kind(items)}, not an array", f"make `{name}` an array"
            )
            continue
        if name == "events" and not items:
            yield _schema_problem("$.events", "is empty", "record at least one event")
        for i, item in enumerate(items):
            yield from each(item, f"$.{name}[{i}]")
    if "rewards" in obj:
        yield from _number_map(obj["rewards"], "$.rewards")
    if "costs" in obj:
        yield from _number_map(
            obj["costs"],
            "$.costs",
            minimum=("tokens", "wall_clock_s", "tool_calls", "messages"),
            required=_REQUIRED_COSTS,
        )
    if "metrics" in obj:
        yield from _number_map(obj["metrics"], "$.metrics")


def schema_problems(obj: Any, *, limit: int = MAX_SCHEMA_PROBLEMS) -> list[Problem]:
    """Every way a decoded JSON value breaks the survey's ``trace_schema.json``.

    The verdict is exactly the schema's (Draft 2020-12): an empty list if and only if a JSON
    Schema validator accepts the value. Only the schema is applied; orchestrace's own rules
    are :func:`from_upstream`'s ``"semantic"`` problems.

    Args:
        obj: The decoded JSON value.
        limit: List at most this many problems, then one line counting the rest.

    Example:
        >>> schema_problems({"trace_id": "t", "task_id": "x", "events": [], "edges": [],
        ...                  "rewards": {}, "costs": {"tokens": 0, "wall_clock_s": 0}})[0].message
        'is empty'
    """
    out: list[Problem] = []
    extra = 0
    for p in _all_schema_problems(obj):
        if len(out) < limit:
            out.append(p)
        else:
            extra += 1
    if extra:
        out.append(
            _schema_problem(
                "$", f"{extra} more schema problem(s) not listed", "fix these and validate again"
            )
        )
    return out
