"""Trace audit: small public ``check_*`` functions that read a recorded trace for attacks.

Each check yields :class:`~orchestrace.errors.Problem` records naming the event and the fix;
:func:`audit_trace` runs them all (so do ``check_trace(trace, level="security")`` and
``orchestrace audit TRACE...``). A clean run, defended or not, yields nothing.

* :func:`check_senders`: a message or return whose ``from`` is not the agent that produced it;
* :func:`check_signatures`: with signing on (``meta.config.defenses.sign_messages``): messages
  unsigned, with an invalid signature, whose MAC does not verify (keys derived from the
  seed, or from the run secret when the audit is given it), or rejected as forgeries and
  delivered all the same;
* :func:`check_capabilities`: spawns, delegations, stops, aggregations, tool calls and human
  interventions outside the role's capabilities under the recorded policy (the default
  policy when none was recorded); any spawn of an ``orchestrator``;
* :func:`check_taint`: tool results marked trusted; tainted data reaching a spawn,
  delegation, stop, aggregation or side-effecting tool call without an endorsement (the
  runtime's labels with taint tracking on; otherwise taint derived from the trace graph by
  :func:`derive_taint`, so an imported trace or a run recorded without defenses is audited
  too), and taint labels dropped along an edge;
* :func:`check_aggregates`: an aggregate that consumed nothing, or whose value is not what its
  method gives over its recorded inputs (returns, or the values reported in messages'
  ``attrs.data``);
* :func:`check_consumed_aggregates`: a return or stop answer that differs from the aggregate
  it passes on;
* :func:`check_returns`: a return addressed to an agent other than the one that spawned it;
* :func:`check_answer`: a run answer (``meta.result.answer``) that is not the orchestrator's
  final stop decision, or an answer only a non-orchestrator gave.

The taint checks live in :mod:`orchestrace.safety._taint`, the indexes the checks share in
:mod:`orchestrace.safety._audit_view`; this module re-exports :func:`check_taint` and
:func:`derive_taint`.

Example:
    >>> from orchestrace.trace.build import TraceBuilder
    >>> b = TraceBuilder(task_id="demo")
    >>> _ = b.add("message", "orchestrator", to="w1", from_="orchestrator")
    >>> _ = b.add("message", "w1", to="w2", from_="orchestrator")
    >>> [p.code for p in audit_trace(b.build())]
    ['spoofed-sender']
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import Any, cast

from orchestrace.errors import ConfigError, Problem
from orchestrace.runtime.aggregate import AGGREGATORS, text_of
from orchestrace.runtime.security import ROOT_ROLE, CapabilityPolicy, RunSecret
from orchestrace.safety._audit_view import _actions, _attrs, _View, _view
from orchestrace.safety._taint import _tainted, check_endorsements, check_taint, derive_taint
from orchestrace.trace.model import Event, Trace

__all__ = [
    "AUDIT_CHECKS",
    "audit_notes",
    "audit_trace",
    "check_aggregates",
    "check_answer",
    "check_capabilities",
    "check_consumed_aggregates",
    "check_endorsements",
    "check_record",
    "check_returns",
    "check_senders",
    "check_signatures",
    "check_taint",
    "derive_taint",
]


# ---------------------------------------------------------------------- senders & signatures
def check_senders(trace: Trace | _View) -> Iterator[Problem]:
    """A message or return whose ``from`` is not the agent that produced it (a spoof)."""
    v = _view(trace)
    rejected = {s for e in v.safety("forgery_rejected") for s, _ in v.preds[e.id]}
    for e in v.trace.events:
        if e.type in ("message", "return") and e.from_ is not None and e.from_ != e.agent:
            note = " (rejected by the receiver)" if e.id in rejected else ""
            yield v.problem(
                e,
                "spoofed-sender",
                f"{e.type} '{e.id}' claims to be from {e.from_!r} but agent {e.agent!r} "
                f"produced it{note}",
                "only the sending agent may appear in `from`; run with "
                "Defenses(sign_messages=True) so receivers reject forged senders",
            )


def check_record(trace: Trace | _View) -> Iterator[Problem]:
    """Recorded defenses the events contradict (a record edited to switch checks off)."""
    v = _view(trace)
    d = v.defenses
    first = v.trace.events[0] if v.trace.events else None
    if first is None:
        return
    fix = (
        "the trace's meta.config.defenses was edited or dropped; the audit checks what the "
        "events carry"
    )
    if v.signing_seen and not d.sign_messages:
        yield v.problem(
            first,
            "defenses-record-mismatch",
            "meta.config.defenses does not record signing, but messages carry signatures",
            fix,
        )
    if v.taint_seen and not d.taint:
        yield v.problem(
            first,
            "defenses-record-mismatch",
            "meta.config.defenses does not record taint tracking, but events carry taint labels",
            fix,
        )


def check_signatures(trace: Trace | _View) -> Iterator[Problem]:
    """With signing on: unsigned, invalid or non-verifying messages; forgeries delivered.

    Signing counts as on when the record says so or any message carries a signature; MACs
    are re-verified with the seed's keys (``keys="seed"``) or the run secret given to the
    audit. A secret under which no signed message verifies is reported once, as not this
    run's secret.
    """
    v = _view(trace)
    if not v.signing:
        return
    keys = v.keys
    valid = [e for e in v.trace.events if e.type == "message" and _attrs(e).get("sig") == "valid"]
    from_secret = keys is not None and not (v.recorded is not None and v.recorded.keys == "seed")
    if (
        from_secret
        and valid
        and keys is not None
        and not any(
            isinstance(_attrs(e).get("mac"), str)
            and keys.verify(
                str(e.from_),
                str(e.to),
                str(e.content or ""),
                e.step or 0,
                _attrs(e)["mac"],
                _attrs(e).get("data"),
            )
            for e in valid
        )
    ):
        yield v.problem(
            valid[0],
            "secret-mismatch",
            f"the run secret given does not match this run: none of its {len(valid)} "
            "signed messages verifies under it",
            "pass the secret file this run was signed with (--secret-file)",
        )
        keys = None  # the per-message checks below cannot tell anything with it
    rejected = {s: e for e in v.safety("forgery_rejected") for s, _ in v.preds[e.id]}
    for e in v.trace.events:
        if e.type != "message":
            continue
        a = _attrs(e)
        sig, mac = a.get("sig"), a.get("mac")
        fix = (
            "a message must carry its sender's valid signature; the receiver must reject "
            "it (a forgery_rejected safety event) and never act on it"
        )
        if sig not in ("valid", "invalid", "unsigned"):
            yield v.problem(
                e,
                "unsigned-message",
                f"message '{e.id}' has no signature status although signing was on",
                fix,
            )
            continue
        if sig != "valid":
            if e.id not in rejected:
                yield v.problem(
                    e,
                    "forgery-accepted",
                    f"message '{e.id}' is {sig} but no forgery_rejected event rejected it",
                    fix,
                )
            elif any(t == "message" for _, t in v.succs[e.id]):
                yield v.problem(
                    e,
                    "forgery-accepted",
                    f"message '{e.id}' was rejected as {sig} yet an event consumed it",
                    fix,
                )
            continue
        ok = isinstance(mac, str) and (
            keys is None
            or keys.verify(
                str(e.from_), str(e.to), str(e.content or ""), e.step or 0, mac, a.get("data")
            )
        )
        if not ok:
            yield v.problem(
                e,
                "invalid-signature",
                f"message '{e.id}' is marked valid but its MAC does not verify for sender "
                f"{e.from_!r}: its sender, recipient, content, data or step changed after signing",
                "treat the message as forged; re-record the run to get a trustworthy trace",
            )


# ---------------------------------------------------------------------- capabilities
def check_capabilities(trace: Trace | _View) -> Iterator[Problem]:
    """Actions outside a role's capabilities under the recorded (else the default) policy."""
    v = _view(trace)
    pol = v.policy
    recorded = v.defenses.capabilities is not None
    which = "the recorded policy" if recorded else "the default policy"
    for e in v.trace.events:
        if e.type == "tool_result" or e.agent in v.tools:
            continue
        role = v.roles.get(e.agent, "")
        if e.agent in v.orchestrators:
            role = ROOT_ROLE
        if e.type == "human_intervention" and (
            e.agent in v.spawned_by or e.agent in v.orchestrators
        ):
            yield v.problem(
                e,
                "capability",
                f"agent {e.agent!r} (role {role!r}) recorded a human_intervention",
                "only a person (an agent outside the team) intervenes; drop the event or "
                "find which agent forged it",
            )
            continue
        if e.type == "spawn" and e.role == ROOT_ROLE:
            yield v.problem(
                e,
                "role-escalation",
                f"agent {e.agent!r} spawned {e.to!r} with role {ROOT_ROLE!r}",
                f"no agent may create another {ROOT_ROLE}; run with a capability policy "
                "(Defenses(capabilities=...)) so the runtime refuses it",
            )
        for action, tool in _actions(e):
            if pol.allows(role, action, tool):
                continue
            what = f"call tool {tool!r}" if action == "tool" else action
            yield v.problem(
                e,
                "capability",
                f"agent {e.agent!r} (role {role!r}) did {what} ('{e.id}'), which {which} "
                f"does not allow",
                "grant the role this capability in the policy if intended; otherwise run "
                "with the policy on so the runtime denies it",
            )


# ---------------------------------------------------------------------- aggregates
def _recompute(
    v: _View, e: Event, method: str, srcs: list[Event], values: list[Any], oks: list[bool]
) -> Any:
    a = _attrs(e)
    d = v.defenses
    kw: dict[str, Any] = {"quorum": d.quorum, "trim": d.trim}
    if method in ("trust", "trust_weighted"):
        if method == "trust" or "requested" not in a:
            raise LookupError("trust weights are not recorded")
        kw["weights"] = [0.5 if _tainted(s, d.taint) else 1.0 for s in srcs]
    if method == "combine":
        task = v.task
        if task is None:
            raise LookupError("task cannot be rebuilt")
        return task.combine(values) if all(oks) else None

    how = AGGREGATORS.get(method)
    if how is None:
        raise LookupError(method)
    # these methods never await: drive the coroutine by hand (no event loop needed)
    coro = cast(Coroutine[Any, Any, Any], how(None, values, oks, kw))  # type: ignore[arg-type]
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise LookupError(method)


def check_aggregates(trace: Trace | _View) -> Iterator[Problem]:
    """An aggregate that consumed nothing, or whose value its inputs do not give."""
    v = _view(trace)
    for e in v.trace.events:
        if e.type != "aggregate":
            continue
        a = _attrs(e)
        method = str(a.get("method", ""))
        ins = [(s, t) for s, t in v.preds[e.id] if s in v.by_id]
        if method not in AGGREGATORS:
            yield v.problem(
                e,
                "aggregate-method-unknown",
                f"aggregate '{e.id}' records "
                + (f"method {method!r}" if method else "no method")
                + f"; the runtime records one of {', '.join(AGGREGATORS)}",
                "the aggregate was edited; its value cannot be checked: re-record the run",
            )
            continue
        if method == "judge" and "value" in a:
            offered = _offered(v, e)
            if offered is not None and text_of(a["value"]) not in offered:
                yield v.problem(
                    e,
                    "aggregate-mismatch",
                    f"aggregate '{e.id}' (judge) records {text_of(a['value'])[:60]!r}, which "
                    "is none of the candidates its inputs offered",
                    "a judge picks one of its inputs' values; the aggregate was forged",
                )
            continue
        agg = [s for s, t in ins if t == "aggregate"]
        if method != "judge" and not agg and not any(t == "message" for _, t in ins):
            yield v.problem(
                e,
                "aggregate-without-inputs",
                f"aggregate '{e.id}' ({method or 'unknown method'}) consumed no result",
                "an aggregate needs aggregate edges from the results it combined; "
                "re-record the run",
            )
            continue
        # an aggregator agent consumes reports as messages (message edges)
        agg = agg or [s for s, t in ins if t == "message"]
        if not agg or "value" not in a or method in ("judge", ""):
            continue
        srcs = [v.by_id[s] for s in agg]
        try:
            if all(s.type == "message" for s in srcs):
                srcs, values = _reported(srcs, method)
                oks = [True] * len(srcs)
            elif any(s.type not in ("return", "despawn") for s in srcs):
                continue
            else:
                excluded = set(a.get("excluded") or ())
                values = [_attrs(s).get("value") if s.type == "return" else None for s in srcs]
                oks = [s.type == "return" and s.id not in excluded for s in srcs]
            expected = _recompute(v, e, method, srcs, values, oks)
        except (LookupError, TypeError, ValueError, ArithmeticError):
            continue
        if text_of(expected) != text_of(a["value"]):
            yield v.problem(
                e,
                "aggregate-mismatch",
                f"aggregate '{e.id}' records {text_of(a['value'])[:60]!r} but {method!r} over "
                f"its {len(srcs)} inputs gives {text_of(expected)[:60]!r}",
                "the aggregate was forged or its inputs changed; re-record the run",
            )


def _offered(v: _View, e: Event) -> set[str] | None:
    """The values a judge aggregate's inputs offered (``None`` when none are recorded)."""
    out: set[str] = set()
    for s, t in v.preds[e.id]:
        src = v.by_id.get(s)
        if src is None or t not in ("aggregate", "message"):
            continue
        a = _attrs(src)
        if "value" in a:
            out.add(text_of(a["value"]))
        data = a.get("data")
        if isinstance(data, Mapping):
            out.update(text_of(data[k]) for k in ("value", "answer") if k in data)
    return out or None


def _reported(srcs: list[Event], method: str) -> tuple[list[Event], list[Any]]:
    """The values reported in messages, as an aggregator collects them from ``attrs.data``.

    Parts (``combine``) are keyed by ``data.index`` and taken in part order; votes are keyed
    by sender (the latest report of each) in the order senders first reported.

    Raises:
        LookupError: The reports do not say what the aggregator combined.
    """
    got: dict[Any, tuple[Event, Any]] = {}
    for s in srcs:
        data = _attrs(s).get("data")
        if not isinstance(data, Mapping) or "value" not in data:
            continue
        key = int(data["index"]) if method == "combine" else s.from_
        got[key] = (s, data["value"])
    if not got:
        raise LookupError("no reported values")
    if method == "combine":
        if sorted(got) != list(range(len(got))):
            raise LookupError("parts missing")
        ordered = [got[i] for i in range(len(got))]
    else:
        ordered = list(got.values())
    return [s for s, _ in ordered], [x for _, x in ordered]


def check_consumed_aggregates(trace: Trace | _View) -> Iterator[Problem]:
    """A return or stop answer that differs from the aggregate it passes on."""
    v = _view(trace)
    fix = "the aggregate or the answer built on it was changed; re-record the run"
    for e in v.trace.events:
        if e.type == "return" and "value" in _attrs(e):
            aggs = [
                v.by_id[s]
                for s, _ in v.preds[e.id]
                if s in v.by_id and v.by_id[s].type == "aggregate" and v.by_id[s].agent == e.agent
            ]
            if len(aggs) == 1 and "value" in _attrs(aggs[0]):
                want, got = text_of(_attrs(aggs[0])["value"]), text_of(_attrs(e)["value"])
                if want != got:
                    yield v.problem(
                        e,
                        "return-mismatch",
                        f"return '{e.id}' of {e.agent!r} passes on {got[:60]!r} but the "
                        f"aggregate '{aggs[0].id}' it returns gives {want[:60]!r}",
                        fix,
                    )
        elif e.type == "orchestrator_decision" and e.decision == "stop" and "answer" in _attrs(e):
            consumed = [
                v.by_id[s]
                for s, _ in v.preds[e.id]
                if s in v.by_id and v.by_id[s].type in ("aggregate", "return")
            ]
            if len(consumed) != 1 or "value" not in _attrs(consumed[0]):
                continue
            c = consumed[0]
            if c.type == "return" and not any(
                s in v.by_id and v.by_id[s].type == "aggregate" for s, _ in v.preds[c.id]
            ):
                continue
            want, got = text_of(_attrs(c)["value"]), text_of(_attrs(e)["answer"])
            if want != got:
                yield v.problem(
                    e,
                    "stop-answer-mismatch",
                    f"stop decision '{e.id}' answers {got[:60]!r} but the aggregate it consumed "
                    f"('{c.id}') gives {want[:60]!r}",
                    fix,
                )


# ---------------------------------------------------------------------- returns & answer
def check_returns(trace: Trace | _View) -> Iterator[Problem]:
    """A return addressed to an agent other than its parent."""
    v = _view(trace)
    for e in v.trace.events:
        if e.type != "return" or e.agent not in v.spawned_by:
            continue
        parent = v.spawned_by[e.agent].agent
        if e.to is not None and e.to != parent:
            yield v.problem(
                e,
                "misrouted-return",
                f"return '{e.id}' of {e.agent!r} goes to {e.to!r}, not to its parent {parent!r}",
                "an agent returns only to the agent that spawned it",
            )


def check_answer(trace: Trace | _View) -> Iterator[Problem]:
    """The run's answer must be the orchestrator's final stop decision."""
    v = _view(trace)
    stops = [
        e
        for e in v.trace.events
        if e.type == "orchestrator_decision" and e.decision == "stop" and "answer" in _attrs(e)
    ]
    own = [e for e in stops if e.agent in v.orchestrators]
    meta = v.trace.meta if isinstance(v.trace.meta, dict) else {}
    result = meta.get("result")
    if isinstance(result, Mapping) and "answer" in result:
        answer = text_of(result["answer"])
        if own and text_of(_attrs(own[-1])["answer"]) == answer:
            return
        other = [e for e in stops if e not in own and text_of(_attrs(e)["answer"]) == answer]
        if other:
            e = other[-1]
            yield v.problem(
                e,
                "answer-from-non-orchestrator",
                f"the run's answer {answer[:60]!r} is the stop decision of {e.agent!r}, "
                "not of the orchestrator",
                "the run's answer comes only from the orchestrator's final stop decision",
            )
        elif own:
            e = own[-1]
            yield v.problem(
                e,
                "answer-mismatch",
                f"meta.result.answer {answer[:60]!r} differs from the orchestrator's final "
                f"stop answer {text_of(_attrs(e)['answer'])[:60]!r}",
                "the recorded result was changed after the run; re-score from the stop event",
            )
        return
    if not own and stops:
        e = stops[-1]
        yield v.problem(
            e,
            "answer-from-non-orchestrator",
            f"only {e.agent!r}, not the orchestrator, took a stop decision with an answer",
            "the run's answer comes only from the orchestrator's final stop decision",
        )


#: Every audit check, in the order they run.
AUDIT_CHECKS: tuple[Callable[[Trace | _View], Iterator[Problem]], ...] = (
    check_record,
    check_senders,
    check_signatures,
    check_capabilities,
    check_endorsements,
    check_taint,
    check_aggregates,
    check_consumed_aggregates,
    check_returns,
    check_answer,
)


def audit_trace(
    trace: Trace,
    *,
    secret: RunSecret | None = None,
    policy: CapabilityPolicy | None = None,
    source: str | None = None,
) -> list[Problem]:
    """Run every check of :data:`AUDIT_CHECKS` on ``trace``; the findings, in event order.

    Args:
        trace: The trace.
        secret: The run secret of a run signed with ``keys="secret"``: every MAC is then
            re-verified (without it, the recorded verdicts are checked).
        policy: A capability policy to audit against instead of the recorded one (for
            imported traces, whose roles the default policy does not know).
        source: Where the trace came from (named in errors).

    Raises:
        ConfigError: The recorded defenses (``meta.config.defenses``) are malformed, or
            ``trace`` is not a Trace.
    """
    if not isinstance(trace, Trace):
        raise ConfigError(
            f"audit_trace takes a Trace, not a {type(trace).__name__}; read one with "
            "orchestrace.io.load"
        )
    v = _View(trace, secret, policy, source)
    out = [p for check in AUDIT_CHECKS for p in check(v)]
    out.sort(key=lambda p: v.index.get(p.event_id or "", -1))
    return out


def audit_notes(trace: Trace, *, secret: RunSecret | None = None) -> list[str]:
    """What the audit could not check, or was given and did not use (not findings).

    Example:
        >>> from orchestrace.runtime import run
        >>> from orchestrace.safety import Defenses
        >>> tr = run("swarm", "arith", agents=2, seed=0, defenses=Defenses.all()).trace
        >>> audit_notes(tr)[0][:40]
        'MACs were not re-checked: the run signs '
    """
    v = _View(trace, secret)
    if not v.signing:
        return ["--secret-file not used: the run's messages are not signed"] if secret else []
    rec = v.recorded
    if rec is not None and rec.keys == "seed":
        if secret is not None:
            return ["--secret-file not used: the run's keys derive from its seed (re-verified)"]
        return []
    if secret is None:
        return [
            "MACs were not re-checked: the run signs with a run secret; pass --secret-file "
            "with the file the run wrote to re-verify every MAC"
        ]
    return []
