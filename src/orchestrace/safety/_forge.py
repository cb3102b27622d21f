"""The channel side of a spoofing attack: a message written under another agent's name.

A forged message is recorded as what it is on the channel (``from`` the claimed sender,
written by the attacking agent, the MAC the attacker could produce) and goes through the
runtime's delivery: with signed messages on, the receiver's check rejects it (a
``forgery_rejected`` safety event) because the attacker holds only its own key.
"""

from __future__ import annotations

from typing import Any

from orchestrace.runtime.aggregate import text_of
from orchestrace.runtime.context import Context, Message

__all__ = ["forge"]


async def forge(ctx: Context, claimed: str, to: str, content: Any, data: Any = None) -> str | None:
    """Write a message claiming to be from ``claimed``; return its event id."""
    rt, a = ctx._rt, ctx._a
    rt.check_alive(a)
    rt.open_step(a)
    text = text_of(content)
    guard = rt.guard
    if guard is not None:
        mac = guard.sign(a.name, to, text, a.step)  # the only key the attacker holds
        return rt.guarded_send(a, claimed, to, text, data, None, mac)
    eid = rt.record(
        a,
        "message",
        rt.now(),
        from_=claimed,
        to=to,
        content=text,
        attrs={"data": data} if data is not None else None,
    )
    target = rt.agents.get(to)
    if target is not None:
        target.inbox.put_nowait(Message(eid, claimed, text, data))
    return eid
