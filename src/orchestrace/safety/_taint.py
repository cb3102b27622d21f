"""Taint in a recorded trace: the runtime's labels checked, or taint derived from the graph.

:func:`check_taint` and :func:`derive_taint` are re-exported by :mod:`orchestrace.safety.audit`.

Example:
    >>> from orchestrace.trace.build import TraceBuilder
    >>> b = TraceBuilder(task_id="demo")
    >>> call = b.add("tool_call", "orchestrator", tool="search")
    >>> res = b.add("tool_result", "search", tool="search", after=[(call, "tool_dependency")])
    >>> _ = b.add("orchestrator_decision", "orchestrator", decision="stop", after=[(res, "causal")])
    >>> [p.code for p in check_taint(b.build())]
    ['tainted-decision']
"""

from __future__ import annotations

from collections.abc import Iterator

from orchestrace.errors import Problem
from orchestrace.runtime.security import ENDORSING_ROLES
from orchestrace.safety._audit_view import _actions, _attrs, _View, _view
from orchestrace.trace.model import Event, Trace

__all__ = ["check_taint", "derive_taint"]


def _tainted(e: Event, taint_on: bool) -> bool:
    if _attrs(e).get("taint"):
        return True
    return taint_on and e.type == "tool_result"


def _is_decision(e: Event, side: tuple[str, ...]) -> bool:
    acts = _actions(e)
    return any(a != "tool" or t in side for a, t in acts)


def check_taint(trace: Trace | _View) -> Iterator[Problem]:
    """Tool results marked trusted; tainted data driving decisions; labels dropped.

    With taint tracking on (``meta.config.defenses.taint``) the runtime's labels are checked.
    Without it (a run recorded with taint tracking off, or a trace imported from another
    framework) the taint is derived from the trace graph itself (:func:`derive_taint`), so
    untrusted data driving a decision is flagged on any trace.
    """
    v = _view(trace)
    for e in v.trace.events:
        if e.type == "tool_result" and e.trusted is True:
            yield v.problem(
                e,
                "trusted-tool-output",
                f"tool result '{e.id}' of {e.agent!r} is marked trusted",
                "tool output is untrusted data: record it with trusted=false",
            )
    d = v.defenses
    if not d.taint:
        yield from _derived_taint_findings(v)
        return
    side = tuple(d.capabilities.side_effect_tools) if d.capabilities else ()
    covered = _covered(v)
    for e in v.trace.events:
        if e.type in ("tool_result", "safety_event"):
            continue
        srcs = [s for s, t in v.preds[e.id] if t != "safety_flow" and s in v.by_id]
        live = [s for s in srcs if s not in covered and _tainted(v.by_id[s], True)]
        if _is_decision(e, side) and not _labelled_data_step(v, e):
            bad = live or ([e.id] if _tainted(e, True) else [])
            if bad:
                yield v.problem(
                    e,
                    "tainted-decision",
                    f"{e.type} '{e.id}' of {e.agent!r} is driven by tainted data "
                    f"({', '.join(repr(b) for b in bad[:3])}) with no endorsement",
                    _TAINT_FIX,
                )
        elif live and not _tainted(e, True):
            yield v.problem(
                e,
                "taint-dropped",
                f"{e.type} '{e.id}' consumed tainted '{live[0]}' but carries no taint label",
                "taint propagates along edges: label the event (trusted=false, attrs.taint)",
            )


def _may_endorse(v: _View, agent: str) -> bool:
    """Whether ``agent``'s role may endorse tainted data under the recorded defenses."""
    role = v.roles.get(agent, "")
    if agent in v.orchestrators and not role:
        role = "orchestrator"
    caps = v.defenses.capabilities
    if caps is not None:
        return bool(caps.role(role).may_endorse)
    return role in ENDORSING_ROLES


def _labelled_data_step(v: _View, e: Event) -> bool:
    """An aggregate of a role that may not endorse, carrying its inputs' taint label.

    The runtime lets such an aggregate go on as a data step: its output stays labelled and
    reaches a decision only through a role that may endorse it.
    """
    return e.type == "aggregate" and _tainted(e, True) and not _may_endorse(v, e.agent)


_TAINT_FIX = (
    "tainted content may drive spawn, stop, aggregate or side-effecting tools only after an "
    "endorsement step (a safety_event with kind 'endorsement'); run with "
    "Defenses(taint=True) so the runtime gates it"
)


def _covered(v: _View) -> set[str]:
    """Events an endorsement cleared, or a ``taint_blocked`` event kept out of a decision."""
    covered: set[str] = set()
    for kind, key in (("endorsement", "endorses"), ("taint_blocked", "blocked")):
        for s in v.safety(kind):
            ids = _attrs(s).get(key)
            if isinstance(ids, list):
                covered.update(str(i) for i in ids)
            elif kind == "endorsement":  # an endorsement names what it endorses by its edges
                covered.update(src for src, t in v.preds[s.id] if t == "safety_flow")
    return covered


def _untrusted_source(v: _View, e: Event) -> bool:
    """Whether untrusted data enters the run at ``e``.

    Tool results (and retrieved documents), events recorded ``trusted=false``, and messages
    or returns of agents whose role the policy distrusts.
    """
    if e.type == "tool_result" or e.trusted is False or _attrs(e).get("taint"):
        return True
    if e.type in ("message", "return"):
        role = v.roles.get(e.agent, "")
        return e.agent not in v.orchestrators and not v.policy.role(role).trusted
    return False


def derive_taint(trace: Trace | _View) -> dict[str, frozenset[str]]:
    """Taint derived from the trace graph: event id -> the untrusted sources that reach it.

    Sources are tool results (retrieved documents arrive as tool results), events recorded
    ``trusted=false`` or with ``attrs.taint``, and messages and returns of agents whose role
    the recorded policy marks untrusted. Taint propagates along every edge but
    ``safety_flow``; an event an ``endorsement`` safety event endorsed (``attrs.endorses``,
    else its ``safety_flow`` sources), or one a ``taint_blocked`` event kept out, passes none
    on. Only tainted events are listed.

    Example:
        >>> from orchestrace.trace.build import TraceBuilder
        >>> b = TraceBuilder(task_id="demo")
        >>> call = b.add("tool_call", "orchestrator", tool="search")
        >>> res = b.add("tool_result", "search", tool="search", after=[(call, "tool_dependency")])
        >>> stop = b.add("orchestrator_decision", "orchestrator", decision="stop",
        ...              after=[(res, "causal")])
        >>> sorted(derive_taint(b.build())[stop])
        ['e2']
    """
    v = _view(trace)
    covered = _covered(v)
    taint: dict[str, frozenset[str]] = {}
    order = sorted(v.trace.events, key=lambda e: v.index[e.id])
    changed = True
    rounds = 0
    while changed and rounds < 4:  # edges go forward in time; a few passes cover the rest
        changed = False
        rounds += 1
        for e in order:
            if e.type == "safety_event":
                continue
            got: set[str] = {e.id} if _untrusted_source(v, e) else set()
            for s, t in v.preds[e.id]:
                if t != "safety_flow" and s not in covered and s in taint:
                    got |= taint[s]
            new = frozenset(got)
            if new and taint.get(e.id) != new:
                taint[e.id] = new
                changed = True
    return taint


def _derived_taint_findings(v: _View) -> Iterator[Problem]:
    taint = derive_taint(v)
    if not taint:
        return
    side = tuple(v.policy.side_effect_tools)
    covered = _covered(v)
    for e in v.trace.events:
        if e.type in ("tool_result", "safety_event") or not _is_decision(e, side):
            continue
        srcs: set[str] = set()
        for s, t in v.preds[e.id]:
            if t != "safety_flow" and s not in covered and s in taint:
                srcs |= taint[s]
        if _untrusted_source(v, e):
            srcs.add(e.id)
        if not srcs:
            continue
        shown = sorted(srcs, key=lambda i: v.index.get(i, -1))
        yield v.problem(
            e,
            "tainted-decision",
            f"{e.type} '{e.id}' of {e.agent!r} is driven by untrusted data from "
            f"{', '.join(repr(b) for b in shown[:3])}"
            + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")
            + " with no endorsement (taint derived from the trace: the run did not track it)",
            _TAINT_FIX,
        )
