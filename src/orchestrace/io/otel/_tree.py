"""The span tree of one OTel trace: repaired ids, parents and times, pre-order, and agent names.

:class:`_SpanTree` holds what the importer knows of one trace's spans and the problems found;
the event and edge mapping (:mod:`orchestrace.io.otel._mapper`) builds on it. Duplicate span ids,
missing parents and parent cycles are repaired with :mod:`orchestrace.io._repair`; a subtree that
starts before its parent is shifted into it; an open span ends with its last descendant.

Example:
    >>> _shift_demo = _Node(None, "root", 5, 9)
    >>> _shift(_shift_demo, 2); (_shift_demo.start, _shift_demo.end)
    (7, 11)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrace.errors import Problem, _short
from orchestrace.io._common import format_ns
from orchestrace.io._repair import break_cycles, unique_id, warning
from orchestrace.io.otel._keys import (
    _agent_name,
    _classify,
)
from orchestrace.io.otel._read import OtelSpan

#: Problems of one kind listed before they are summarised in one line.
_LISTED = 20


# ---------------------------------------------------------------------- mapping one trace
@dataclass(slots=True)
class _Node:
    sp: OtelSpan | None  # None: the virtual root
    role: str
    start: int
    end: int
    children: list[_Node] = field(default_factory=list)
    parent: _Node | None = None
    agent: str = ""  # the agent this span acts for (its own identity for an agent span)
    ident: str = ""  # agent spans: the invoked agent's identity
    base: str = ""  # agent spans: the agent's name before a concurrency suffix
    entry: str | None = None
    exits: list[str] = field(default_factory=list)
    first_own: str | None = None  # agent spans: the first event of the invoked agent
    pre: int = 0  # position in pre-order
    last: int = 0  # the last pre-order position in this span's subtree
    depth: int = 0


class _SpanTree:
    """The spans of one OTel trace as a repaired tree, and the problems found on the way."""

    def __init__(self, spans: list[OtelSpan], fmt: str, source: str, live: bool) -> None:
        self.spans = spans
        self.fmt = fmt
        self.source = source
        self.live = live
        self.problems: list[Problem] = []
        self.counts: dict[str, int] = {}
        self.unmapped: dict[str, int] = {}
        self.attr_keys: dict[str, int] = {}  # unmapped attribute keys kept, by key
        self.events: dict[str, tuple[tuple[float, int, int, int], dict[str, Any]]] = {}
        self.edges: list[tuple[str, str, str]] = []
        self.extra_edges: list[tuple[str, str, str, str]] = []  # src, dst, type, why
        self.extra_spans: dict[int, OtelSpan] = {}  # position in extra_edges -> span it is from

    # -------------------------------------------------------------- problems
    def problem(
        self, code: str, msg: str, fix: str, sp: OtelSpan | None, event_id: str | None = None
    ) -> None:
        n = self.counts.get(code, 0)
        self.counts[code] = n + 1
        if n < _LISTED:
            where = sp.where if sp is not None else "$"
            eid = event_id if event_id is not None else (sp.span_id if sp else None)
            self.problems.append(warning(code, msg, fix, where, self.source, eid))

    def _summarise(self) -> None:
        for code, n in self.counts.items():
            if n > _LISTED:
                more = f"{n - _LISTED} more problem(s) of this kind not listed"
                fix = "fix the ones above and import again"
                self.problems.append(warning(code, more, fix, "$", self.source))

    def keep(self, what: str, n: int = 1) -> None:
        self.unmapped[what] = self.unmapped.get(what, 0) + n

    # -------------------------------------------------------------- the tree
    def build_tree(self) -> tuple[_Node, list[_Node]]:
        by_id: dict[str, _Node] = {}
        nodes: list[_Node] = []
        for sp in self.spans:
            if sp.span_id in by_id:
                new = unique_id(sp.span_id, by_id)
                was = by_id[sp.span_id].sp
                self.problem(
                    "duplicate-span-id",
                    f"span id {sp.span_id} is used twice (spans "
                    f"{_short(was.name if was else '')!r} and {_short(sp.name)!r})",
                    f"the second was imported as {new!r}, children stay with the first; give every "
                    "span a unique id",
                    sp,
                    new,
                )
                sp.span_id = new
            role, unknown = _classify(sp)
            if unknown:
                self.problem(
                    "unknown-span-kind",
                    f"span {sp.span_id} ({_short(sp.name)!r}) has unknown {unknown}",
                    "imported as an orchestrator_decision of its agent, attributes kept in attrs; "
                    "use a GenAI operation name or OpenInference span kind orchestrace maps",
                    sp,
                )
                self.keep(f"span kind {unknown.split()[-1]}")
            elif unknown == "":
                self.keep("span without a GenAI kind")
            end = sp.end
            if end is None:
                if not self.live:
                    self.problem(
                        "no-end-time",
                        f"span {sp.span_id} ({_short(sp.name)!r}) has no end time (still open when "
                        "exported?)",
                        "imported as ending with its last child; export spans after they end",
                        sp,
                    )
                end = sp.start
            elif end < sp.start:
                self.problem(
                    "negative-duration",
                    f"span {sp.span_id} ({_short(sp.name)!r}) ends before it starts",
                    "imported with duration 0; fix the span's clock",
                    sp,
                )
                end = sp.start
            node = _Node(sp, role, sp.start, end)
            by_id[sp.span_id] = node
            nodes.append(node)
        parent_of: dict[int, _Node | None] = {}
        for node in nodes:
            assert node.sp is not None
            pid = node.sp.parent_id
            parent = by_id.get(pid) if pid else None
            if pid and parent is None:
                self.problem(
                    "missing-parent",
                    f"span {node.sp.span_id} ({_short(node.sp.name)!r}) names parent {pid}, which "
                    "is not in the input",
                    "imported as a top-level span; export the whole trace (a sampler or a "
                    "truncated export dropped the parent)",
                    node.sp,
                )
            parent_of[id(node)] = parent
        self._break_cycles(nodes, parent_of)
        tops: list[_Node] = []
        for node in nodes:
            parent = parent_of[id(node)]
            if parent is None:
                tops.append(node)
            else:
                node.parent = parent
                parent.children.append(node)
        for node in nodes:
            node.children.sort(key=_order)
        tops.sort(key=_order)
        return self._root(tops), nodes

    def _break_cycles(self, nodes: list[_Node], parent_of: dict[int, _Node | None]) -> None:
        """Make the span that closes a cycle of parent ids top-level (linear time)."""

        def cut(x: _Node) -> None:
            assert x.sp is not None
            self.problem(
                "parent-cycle",
                f"span {x.sp.span_id} ({_short(x.sp.name)!r}) is its own ancestor through "
                f"parent {x.sp.parent_id}",
                "imported as a top-level span; fix the parent ids",
                x.sp,
            )
            parent_of[id(x)] = None

        break_cycles(nodes, id, lambda x: parent_of[id(x)], cut)

    def _root(self, tops: list[_Node]) -> _Node:
        if len(tops) == 1 and tops[0].role == "agent":
            root = tops[0]
            root.role = "root-agent"
            return root
        first = tops[0].sp
        assert first is not None
        name = first.attrs.get("gen_ai.workflow.name")
        if not isinstance(name, str) or not name or tops[0].role == "agent":
            name = first.name if tops[0].role != "agent" else "workflow"
        root = _Node(None, "root", min(n.start for n in tops), max(n.end for n in tops), tops)
        root.ident = root.base = name or "workflow"
        for n in tops:
            n.parent = root
        return root

    # -------------------------------------------------------------- times and agents
    def walk(self, root: _Node) -> list[_Node]:
        """Pre-order; shifts clock-skewed subtrees into their parent; open spans end last."""
        order: list[_Node] = []
        stack = [root]
        while stack:
            node = stack.pop()
            node.pre = len(order)
            node.depth = node.parent.depth + 1 if node.parent is not None else 0
            order.append(node)
            for c in node.children:
                if c.start < node.start:
                    shift = node.start - c.start
                    assert c.sp is not None
                    self.problem(
                        "clock-skew",
                        f"span {c.sp.span_id} ({_short(c.sp.name)!r}) starts "
                        f"{format_ns(shift)} before its parent",
                        "its subtree was moved to start with the parent; synchronise the clocks of "
                        "the processes that recorded them",
                        c.sp,
                    )
                    _shift(c, shift)
            stack.extend(reversed(node.children))
        # an open span (no end time) ends with its last descendant
        for node in reversed(order):
            node.last = max([node.pre, *(c.last for c in node.children)])
            if node.sp is not None and node.sp.end is None:
                node.end = max([node.end, *(c.end for c in node.children)])
        if root.sp is None:
            root.start = min(c.start for c in root.children)
            root.end = max(c.end for c in root.children)
        return order

    def agents(self, root: _Node, order: list[_Node]) -> None:
        invocations = sorted((n for n in order if n.role == "agent"), key=_order)
        slots: dict[str, list[int]] = {}
        for n in invocations:
            assert n.sp is not None
            _, n.base = _agent_name(n.sp)
            ends = slots.setdefault(n.base, [])
            k = next((i for i, e in enumerate(ends) if e <= n.start), len(ends))
            if k == len(ends):
                ends.append(n.end)
            else:
                ends[k] = n.end
            n.ident = n.base if k == 0 else f"{n.base}#{k + 1}"
        if root.role == "root-agent":
            assert root.sp is not None
            _, root.base = _agent_name(root.sp)
            root.ident = root.base
        taken = {n.ident for n in invocations}
        if root.role == "root" and root.ident in taken:
            root.ident = root.base = f"{root.ident} (workflow)"
        for n in order:
            if n is root:
                n.agent = n.ident
            else:
                assert n.parent is not None
                n.agent = n.ident if n.role == "agent" else n.parent.agent


def _order(n: _Node) -> tuple[int, int, str]:
    return (n.start, n.end, n.sp.span_id if n.sp is not None else "")


def _shift(node: _Node, delta: int) -> None:
    stack = [node]
    while stack:
        x = stack.pop()
        x.start += delta
        x.end += delta
        stack.extend(x.children)
