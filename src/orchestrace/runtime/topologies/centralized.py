"""Centralized: one orchestrator plans, spawns workers on the parts, waits, combines.

Parts that depend on each other (``task.parallel`` is False) are handed out one after another,
each worker getting the previous answer. With option ``aggregate`` a vote (``vote``, ``trust``,
``trust_weighted``, ``trimmed``, ``quorum``), every worker answers the whole task instead and
the final answer is their vote.
"""

from __future__ import annotations

from typing import Any

from orchestrace.runtime.core import Context
from orchestrace.runtime.topologies.common import how_to_combine, solver, worker_role

__all__ = ["orchestrate"]


async def orchestrate(ctx: Context) -> Any:
    """The orchestrator."""
    task = ctx.task
    n = int(ctx.decide("n_workers", ctx.config.agents))
    await ctx.generate("plan", {"prompt": task.question, "suggest": n})
    method = how_to_combine(ctx.option("aggregate", "combine"), "combine")
    if method != "combine":  # a vote: every worker answers the whole task
        whole = task.whole()
        kids = [
            await ctx.spawn(worker_role(ctx, i), solver, part=whole, content=whole.prompt)
            for i in range(max(1, n))
        ]
        return await ctx.aggregate(await ctx.wait(kids), str(ctx.decide("aggregate", method)))
    parts = task.subtasks(n)
    if task.parallel:
        kids = [
            await ctx.spawn(worker_role(ctx, i), solver, part=p, content=p.prompt)
            for i, p in enumerate(parts)
        ]
        results = await ctx.wait(kids)
    else:
        results = []
        previous = None
        for i, p in enumerate(parts):
            kid = await ctx.spawn(
                worker_role(ctx, i), solver, part=p, input=previous, content=p.prompt
            )
            (r,) = await ctx.wait([kid])
            results.append(r)
            previous = r.value
    method = str(ctx.decide("aggregate", "combine"))
    return await ctx.aggregate(results, method)
