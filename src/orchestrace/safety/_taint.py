"""Taint in a recorded trace: the runtime's labels checked, or taint derived from the graph.

:func:`check_taint` and :func:`derive_taint` are re-exported by :mod:`orchestrace.safety.audit`.

Example:
    >>> from orchestrace.trace.build import TraceBuilder
    >>> b = TraceBuilder(task_id="demo")
    >>> sp = b.add("spawn", "orchestrator", to="w1", role="worker")
    >>> call = b.add("tool_call", "w1", tool="search", after=[(sp, "causal")])
    >>> res = b.add("tool_result", "search", tool="search", after=[(call, "tool_dependency")])
    >>> _ = b.add("orchestrator_decision", "w1", decision="stop", after=[(res, "causal")])
    >>> [(p.code, p.severity) for p in check_taint(b.build())]
    [('tainted-decision', 'warning')]
"""

from __future__ import annotations

from collections.abc import Iterator

from orchestrace.errors import Problem
from orchestrace.runtime.guard import ENDORSEMENT, endorsement_text
from orchestrace.safety._audit_view import _actions, _attrs, _View, _view
from orchestrace.trace.model import Event, Trace

__all__ = ["check_endorsements", "check_taint", "derive_taint"]


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
    if not v.tainting:
        yield from _derived_taint_findings(v)
        return
    side = tuple(v.policy.side_effect_tools)
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


def _labelled_data_step(v: _View, e: Event) -> bool:
    """An aggregate of a role that may not endorse, carrying its inputs' taint label.

    The runtime lets such an aggregate go on as a data step: its output stays labelled and
    reaches a decision only through a role that may endorse it.
    """
    return e.type == "aggregate" and _tainted(e, True) and not v.may_endorse(e.agent)


_TAINT_FIX = (
    "tainted content may drive spawn, stop, aggregate or side-effecting tools only after an "
    "endorsement step (a safety_event with kind 'endorsement'); run with "
    "Defenses(taint=True) so the runtime gates it"
)


def _endorsed(v: _View, e: Event) -> list[str]:
    """The events an endorsement names (``attrs.endorses``, else its ``safety_flow`` edges)."""
    ids = _attrs(e).get("endorses")
    if isinstance(ids, list):
        return [str(i) for i in ids]
    return [src for src, t in v.preds[e.id] if t == "safety_flow"]


def _endorsement_problem(v: _View, e: Event) -> Problem | None:
    """Why endorsement ``e`` does not count (``None``: it does).

    Nothing is taken from fields a tamperer could set to clear findings: an endorsement
    counts only in a run whose events carry taint labels, for events that carry one, by an
    agent whose role may endorse, and, when the run's messages are signed, with the
    endorser's MAC (re-verified when the audit has the keys).
    """
    a = _attrs(e)
    ids = _endorsed(v, e)
    fix = (
        "only the runtime records endorsements, for labelled events, by a role that may "
        "endorse (signed when messages are); treat the trace as tampered with"
    )
    if not v.tainting:
        return v.problem(
            e,
            "forged-endorsement",
            f"endorsement '{e.id}' in a run without taint tracking (no event carries a taint "
            "label)",
            fix,
        )
    unlabelled = [i for i in ids if i not in v.by_id or not _tainted(v.by_id[i], False)]
    if unlabelled:
        return v.problem(
            e,
            "forged-endorsement",
            f"endorsement '{e.id}' names {unlabelled[0]!r}, which is not a tainted event",
            fix,
        )
    if "by" in a and a["by"] != e.agent:
        return v.problem(
            e,
            "forged-endorsement",
            f"endorsement '{e.id}' was recorded by {e.agent!r} but names {a['by']!r} as endorser",
            fix,
        )
    if not v.may_endorse(e.agent):
        role = v.roles.get(e.agent) or "?"
        return v.problem(
            e,
            "endorsement-not-allowed",
            f"endorsement '{e.id}' by {e.agent!r} (role {role!r}): the role may not endorse",
            "give the role may_endorse = true in the policy if intended; otherwise the "
            "tainted data it endorsed drove decisions unchecked",
        )
    if v.signing:
        mac = a.get("mac")
        keys = v.keys
        if not isinstance(mac, str):
            return v.problem(
                e,
                "forged-endorsement",
                f"endorsement '{e.id}' carries no MAC although the run's messages are signed",
                fix,
            )
        if keys is not None and not keys.verify(
            e.agent, ENDORSEMENT, endorsement_text(ids), 0, mac, None
        ):
            return v.problem(
                e,
                "forged-endorsement",
                f"endorsement '{e.id}': its MAC does not verify for {e.agent!r} (the endorser "
                "or what it endorses changed after signing)",
                fix,
            )
    return None


def check_endorsements(trace: Trace | _View) -> Iterator[Problem]:
    """Endorsements that do not count (see :func:`_endorsement_problem`)."""
    v = _view(trace)
    for e in v.safety("endorsement"):
        p = _endorsement_problem(v, e)
        if p is not None:
            yield p


def _covered(v: _View) -> set[str]:
    """Events a valid endorsement cleared, or a ``taint_blocked`` event kept out."""
    covered: set[str] = set()
    for s in v.safety("endorsement"):
        if _endorsement_problem(v, s) is None:
            covered.update(_endorsed(v, s))
    for s in v.safety("taint_blocked"):
        ids = _attrs(s).get("blocked")
        if isinstance(ids, list):
            covered.update(str(i) for i in ids)
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
        if e.type in ("tool_result", "safety_event", "aggregate") or not _is_decision(e, side):
            continue  # an aggregate is a data step: its output carries the taint on
        if v.may_endorse(e.agent):
            continue  # a role that may endorse would have endorsed it
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
            + " (derived from the trace: the run did not track taint, and the role may not "
            "endorse)",
            _DERIVED_FIX,
            severity="warning",
        )


_DERIVED_FIX = (
    "a role that may not endorse acted on tool output or untrusted messages; run with "
    "Defenses(taint=True) so the runtime blocks it, or pass --policy naming the roles that "
    "may endorse"
)
