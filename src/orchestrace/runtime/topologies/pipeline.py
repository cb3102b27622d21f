"""Planner-executor-critic pipeline.

A planner splits the task, an executor (a persistent agent that takes work by delegation)
solves the parts in order, a critic reviews the answer; a rejected answer goes back to the
executor, up to option ``rounds`` (default 2) times.
"""

from __future__ import annotations

from typing import Any

from orchestrace.runtime.core import Context
from orchestrace.runtime.topologies.common import solve_part, verify_request

__all__ = ["orchestrate"]


async def planner(ctx: Context, n: int) -> int:
    """Decide how many parts."""
    r = await ctx.generate("plan", {"prompt": ctx.task.question, "suggest": n})
    return int(r.answer) if isinstance(r.answer, int) and r.answer > 0 else n


async def executor(ctx: Context) -> Any:
    """Serve delegated work until told to finish."""
    last = None
    while True:
        msg = await ctx.receive(timeout=float(ctx.option("patience", 600.0)))
        if msg is None or msg.data == "finish" or not isinstance(msg.data, dict):
            return last
        n = int(msg.data["parts"])
        answers = []
        previous = None
        for part in ctx.task.subtasks(n):
            value = await solve_part(ctx, part, previous if not ctx.task.parallel else None)
            answers.append(value)
            previous = value
        last = ctx.task.combine(answers)
        await ctx.send(msg.sender, last, data={"answer": last})


async def critic(ctx: Context, candidate: Any) -> str:
    """Review one answer."""
    r = await ctx.generate("critique", await verify_request(ctx, candidate=candidate))
    return str(r.answer)


async def orchestrate(ctx: Context) -> Any:
    """The orchestrator."""
    n = int(ctx.decide("n_workers", ctx.config.agents))
    plan = await ctx.spawn("planner", planner, n=n, content="plan the split")
    (planned,) = await ctx.wait([plan])
    parts = int(planned.value or n)
    ex = await ctx.spawn("executor", executor, content="solve the parts in order")
    answer = None
    rounds = int(ctx.option("rounds", 2))
    for r in range(rounds + 1):
        await ctx.delegate(ex, f"solve the task in {parts} parts", data={"parts": parts})
        msg = await ctx.receive(timeout=float(ctx.option("patience", 600.0)))
        answer = msg.data["answer"] if msg is not None and isinstance(msg.data, dict) else None
        ctx.remember(answer)
        review = await ctx.spawn("critic", critic, candidate=answer, content="review")
        (verdict,) = await ctx.wait([review])
        if verdict.value == "accept" or r == rounds:
            break
    await ctx.delegate(ex, "finish", data="finish")
    await ctx.wait([ex])
    return answer
