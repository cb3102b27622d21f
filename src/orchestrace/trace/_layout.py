r"""How a trace is laid out for display: agent order by spawn tree, roles, safe short text.

Shared by the notebook view (:mod:`orchestrace.trace._html`) and the Perfetto export
(:mod:`orchestrace.io.perfetto`), so both show agents in the same order.

Example:
    >>> from orchestrace.trace.build import TraceBuilder
    >>> b = TraceBuilder(task_id="demo")
    >>> s = b.spawn("lead", "w1", role="worker")
    >>> c, r = b.tool("w1", "search", after=[s], dur=1.0)
    >>> lay = layout(b.build())
    >>> [(a.name, a.depth, a.role, a.tool) for a in lay]
    [('lead', 0, None, False), ('w1', 1, 'worker', False), ('search', 0, None, True)]
    >>> short("a\x1b[31mb" + "x" * 100, 10) == "a\ufffd[31mbxx…"
    True
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrace.trace.model import Event, Trace

__all__ = ["Lane", "layout", "short"]

# C0/C1 controls (ANSI escapes start with ESC), DEL, lone surrogates, line/paragraph separators
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029]")


def short(text: object, limit: int = 80) -> str:
    """``text`` as one displayable line of at most ``limit`` characters.

    Control characters (ANSI escape sequences included), lone surrogates and line breaks
    become U+FFFD; a longer text is cut and ends with ``…``. The result is plain text:
    escape it for the markup it goes into.
    """
    s = text if isinstance(text, str) else str(text)
    if len(s) <= limit and s.isprintable():  # the common case, checked in C
        return s
    if len(s) > limit:
        s = s[: max(limit - 1, 0)] + "…"
    return _UNSAFE.sub("\ufffd", s)


@dataclass(frozen=True)
class Lane:
    """One row of a display: an agent (or a tool) and where it sits in the spawn tree.

    Attributes:
        name: The agent (or tool) name, as in ``Event.agent``.
        depth: Depth in the spawn tree (0 for a root; tools are 0).
        parent: The agent that first spawned it, if any.
        role: Its role: the one its spawn gave it, else the first it used itself.
        tool: Whether the name only ever produces tool results.
    """

    name: str
    depth: int
    parent: str | None
    role: str | None
    tool: bool


def layout(trace: Trace | Sequence[Event]) -> list[Lane]:
    """The agents of a trace in spawn-tree order (depth first), then the tools.

    Roots come in order of first appearance, children in the order they were spawned. A
    spawn cycle (which a valid trace does not have) does not loop: each name is listed once.
    """
    events: Sequence[Event] = trace if isinstance(trace, Sequence) else trace.events
    first: dict[str, int] = {}
    actors: set[str] = set()
    spawned: set[str] = set()
    role: dict[str, str] = {}
    own_role: dict[str, str] = {}
    spawns: list[tuple[float, int, str, str]] = []
    for i, e in enumerate(events):
        first.setdefault(e.agent, len(first))
        if e.type != "tool_result":
            actors.add(e.agent)
        if e.type == "spawn" and e.to is not None:
            first.setdefault(e.to, len(first))
            spawned.add(e.to)
            spawns.append((e.t, i, e.agent, e.to))
            if e.role is not None:
                role.setdefault(e.to, e.role)
        elif e.role is not None:
            own_role.setdefault(e.agent, e.role)
    for name, r in own_role.items():
        role.setdefault(name, r)
    parent: dict[str, str] = {}
    children: dict[str, list[str]] = {}
    for _t, _i, par, child in sorted(spawns):
        if child != par and child not in parent:
            parent[child] = par
            children.setdefault(par, []).append(child)
    tools = {n for n in first if n not in actors and n not in spawned}
    order: list[Lane] = []
    seen: set[str] = set()

    def visit(root: str) -> None:
        stack = [(root, 0)]
        while stack:
            name, depth = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            order.append(Lane(name, depth, parent.get(name), role.get(name), False))
            for child in reversed(children.get(name, ())):
                if child not in seen:
                    stack.append((child, depth + 1))

    names = sorted(first, key=first.__getitem__)
    for name in names:
        if name not in tools and name not in parent:
            visit(name)
    for name in names:  # members of a spawn cycle have no root
        if name not in tools and name not in seen:
            visit(name)
    order += [Lane(n, 0, None, role.get(n), True) for n in names if n in tools]
    return order
