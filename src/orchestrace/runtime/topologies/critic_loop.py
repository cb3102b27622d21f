"""Critic loop: a worker answers, a critic reviews; the worker retries until accepted.

At most option ``rounds`` (default 3) attempts.
"""

from __future__ import annotations

from typing import Any

from orchestrace.runtime.core import Context
from orchestrace.runtime.topologies.common import solve_part, verify_request

__all__ = ["orchestrate"]


async def loop_worker(ctx: Context, critic: str, rounds: int) -> Any:
    """Answer, send to the critic, retry on rejection."""
    whole = ctx.task.whole()
    answer = None
    for attempt in range(rounds):
        answer = await solve_part(ctx, whole, attempt=attempt)
        ctx.remember(answer)
        await ctx.send(critic, answer, data={"answer": answer, "final": attempt == rounds - 1})
        verdict = await ctx.receive(timeout=float(ctx.option("patience", 300.0)))
        if verdict is None or verdict.data == "accept":
            break
    return answer


async def loop_critic(ctx: Context) -> str:
    """Review every answer the worker sends."""
    verdict = "reject"
    while True:
        msg = await ctx.receive(timeout=float(ctx.option("patience", 300.0)))
        if msg is None:
            return verdict
        r = await ctx.generate("critique", await verify_request(ctx, candidate=msg.data["answer"]))
        verdict = "accept" if r.answer == "accept" else "reject"
        await ctx.send(msg.sender, verdict, data=verdict)
        if verdict == "accept" or msg.data.get("final"):
            return verdict


async def orchestrate(ctx: Context) -> Any:
    """The orchestrator."""
    rounds = int(ctx.option("rounds", 3))
    c = await ctx.spawn("critic", loop_critic, content="review answers")
    w = await ctx.spawn("worker", loop_worker, critic=c.name, rounds=rounds, content="solve")
    (result, _) = await ctx.wait([w, c])
    return result.value
