"""Agent communication in the runtime: messages (under defenses too), returns, decisions.

Aggregation of children's results is here too.

These are methods of :class:`~orchestrace.runtime.core.Runtime` (``Runtime.send``,
``Runtime.guarded_send``, ``Runtime.return_value``, ``Runtime.record_decision``,
``Runtime.stop_decision``, ``Runtime.aggregate``), kept here as functions of the runtime so
each concern of the runtime reads on its own; agents reach them through the
:class:`~orchestrace.runtime.context.Context` methods of the same names.

Example:
    >>> from orchestrace.runtime.backends.sim import SimBackend
    >>> from orchestrace.runtime.clock import run_virtual
    >>> from orchestrace.runtime.core import Runtime
    >>> from orchestrace.tasks import make_task
    >>> async def lead(ctx):
    ...     await ctx.send("user", "hello")
    ...     return await ctx.aggregate([1, 2, 2], "vote")
    >>> rt = Runtime(task=make_task("arith", size=4), backend=SimBackend(seed=1))
    >>> trace = run_virtual(rt.run(lead))
    >>> [e.type for e in trace.events][:2], rt.answer
    (['message', 'aggregate'], 2)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrace.errors import ConfigError
from orchestrace.runtime.aggregate import AGGREGATORS
from orchestrace.runtime.aggregate import text_of as _text
from orchestrace.runtime.context import Message, Result
from orchestrace.runtime.guard import TaintBlocked

if TYPE_CHECKING:
    from orchestrace.runtime.context import AgentState, Context
    from orchestrace.runtime.core import Runtime

__all__ = [
    "aggregate",
    "guarded_send",
    "record_decision",
    "return_value",
    "send",
    "stop_decision",
]


def send(
    rt: Runtime, a: AgentState, to: str, content: Any, data: Any, decision: str | None
) -> str | None:
    """:meth:`Context.send`: record the ``message`` and deliver it (``None``: dropped)."""
    rt.check_alive(a)
    rt.open_step(a)
    k = a.sent.get(a.step, 0)
    a.sent[a.step] = k + 1
    text = content if isinstance(content, str) else _text(content)
    for iv in rt.interventions:
        out = iv.message(a.name, a.step, k, to, text, data)
        if out is None:
            return None
        text, data = out
    if decision is None and a.parent is None:
        decision = "communicate"
    if rt.guard is not None:
        return rt.guarded_send(a, a.name, to, text, data, decision, None, sign=True)
    eid = rt.emit(
        a,
        "message",
        rt.now(),
        from_=a.name,
        to=to,
        content=text,
        decision=decision,
        attrs={"data": data} if data is not None else None,
    )
    target = rt.agents.get(to)
    if target is not None:
        target.inbox.put_nowait(Message(eid, a.name, text, data))
    return eid


def guarded_send(
    rt: Runtime,
    a: AgentState,
    sender: str,
    to: str,
    text: str,
    data: Any,
    decision: str | None,
    mac: str | None,
    *,
    sign: bool = False,
) -> str | None:
    """Send under defenses: gate a delegation, sign, verify for the receiver, screen.

    ``sign=True`` is the runtime's own path (:func:`send`): the message is signed with the
    key of the agent that sends it, never of a claimed sender. Otherwise ``mac`` is taken as
    the message's MAC as written on the channel, whatever its value (``None``: unsigned).
    """
    g = rt.guard
    assert g is not None
    if decision == "delegate":
        g.require(a, "delegate")
        if g.gate(a, "delegate", g.carriers(text, data)):
            raise TaintBlocked(f"agent {a.name!r}: tainted inputs may not drive a delegation")
    attrs: dict[str, Any] = {} if data is None else {"data": data}
    status = None
    if g.keys is not None:
        if sign:
            mac = g.sign(a.name, to, text, a.step, data)
        status = g.status(sender, to, text, a.step, mac, data)
        attrs["sig"] = status
        if mac is not None:
            attrs["mac"] = mac
    eid = rt.record(
        a,
        "message",
        rt.now(),
        from_=sender,
        to=to,
        content=text,
        decision=decision,
        attrs=attrs or None,
    )
    if status is not None and status != "valid":
        g.safety(
            to,
            "forgery_rejected",
            {"claimed": sender, "by": a.name, "sig": status},
            [eid],
            content=f"message claiming to be from {sender!r} failed verification",
        )
        return eid
    if g.screen_message(to, eid, text):
        return eid
    target = rt.agents.get(to)
    if target is not None:
        target.inbox.put_nowait(Message(eid, sender, text, data))
    return eid


def return_value(rt: Runtime, a: AgentState, value: Any) -> str:
    """:meth:`Context.return_`: record the ``return``; the agent is done."""
    rt.check_alive(a)
    rt.open_step(a)
    for iv in rt.interventions:
        value = iv.returned(a.name, value)
    eid = rt.emit(
        a,
        "return",
        rt.now(),
        from_=a.name,
        to=a.parent or "user",
        content=_text(value),
        attrs={"value": value},
    )
    a.returned = True
    if a.handle_future is not None and not a.handle_future.done():
        a.handle_future.set_result(Result(a.name, value, True, None, eid))
    return eid


def record_decision(
    rt: Runtime, a: AgentState, decision: str, content: str, attrs: dict[str, Any]
) -> str:
    """:meth:`Context.record_decision`: record an ``orchestrator_decision``."""
    rt.check_alive(a)
    if rt.guard is not None and decision != "communicate":
        rt.guard.require(a, decision)
        if rt.guard.gate(a, decision):
            raise TaintBlocked(f"agent {a.name!r}: tainted inputs may not drive {decision}")
    rt.open_step(a)
    return rt.record(
        a, "orchestrator_decision", rt.now(), decision=decision, content=content, attrs=attrs
    )


def stop_decision(rt: Runtime, a: AgentState, reason: str, answer: Any) -> str:
    """:meth:`Context.stop`: record the stop decision; the root's answer ends the run."""
    rt.check_alive(a)
    attrs: dict[str, Any] = {"answer": answer}
    if rt.guard is not None:
        rt.guard.require(a, "stop")
        if rt.guard.gate(a, "stop", rt.guard.carriers(answer)):
            answer = None  # a tainted answer that could not be endorsed is withheld
            attrs = {"answer": None, "withheld": True}
    rt.open_step(a)
    eid = rt.record(
        a,
        "orchestrator_decision",
        rt.now(),
        decision="stop",
        content=reason,
        attrs=attrs,
    )
    a.stopped = True
    if a.parent is None:
        rt.answer = answer
        rt.stop_reason = reason
    return eid


async def aggregate(
    rt: Runtime, ctx: Context, a: AgentState, results: list[Any], method: str, kw: dict[str, Any]
) -> Any:
    """:meth:`Context.aggregate`: combine ``results`` and record the ``aggregate``."""
    rt.check_alive(a)
    ids = [r.event_id for r in results if isinstance(r, Result) and r.event_id]
    values = [r.value if isinstance(r, Result) else r for r in results]
    oks = [r.ok if isinstance(r, Result) else True for r in results]
    requested = method
    if rt.guard is not None:
        rt.guard.require(a, "aggregate")
        method, kw = rt.guard.aggregation(method, kw, results)
        carried = [rt.guard.carriers(v) for v in values]
        extra = [s for c in carried for s in c]
        blocked = set(rt.guard.gate(a, "aggregate", [*ids, *extra]))
        # a value is left out when it came from a blocked return or was copied out of a
        # blocked message
        out = [
            (isinstance(r, Result) and r.event_id in blocked) or bool(blocked & set(c))
            for r, c in zip(results, carried, strict=True)
        ]
        if any(out):
            kw = {**kw, "excluded": sorted(blocked)}
            oks = [ok and not o for ok, o in zip(oks, out, strict=True)]
    how = AGGREGATORS.get(method)
    if how is None:
        raise ConfigError(
            f"unknown aggregation method {method!r}; use one of: {', '.join(AGGREGATORS)}"
        )
    value = await how(ctx, values, oks, kw)
    consumed = set(ids)
    a.pending = [(s, k) for s, k in a.pending if s not in consumed]
    rt.open_step(a)
    rt.record(
        a,
        "aggregate",
        rt.now(),
        decision="aggregate",
        content=_text(value),
        attrs={"method": method, "value": value}
        if method == requested and not kw.get("excluded")
        else {
            "method": method,
            "requested": requested,
            "value": value,
            **({"excluded": kw["excluded"]} if kw.get("excluded") else {}),
        },
        extra=[(i, "aggregate") for i in ids],
    )
    a.best = value
    return value
