"""Centralized: one orchestrator plans, spawns workers on the parts, waits, combines.

Parts that depend on each other (``task.parallel`` is False) are handed out one after another,
each worker getting the previous answer.
"""

from __future__ import annotations

from typing import Any

from orchestrace.runtime.core import Context
from orchestrace.runtime.topologies.common import solver, worker_role

__all__ = ["orchestrate"]


async def orchestrate(ctx: Context) -> Any:
    """The orchestrator."""
    task = ctx.task
    n = int(ctx.decide("n_workers", ctx.config.agents))
    await ctx.generate("plan", {"prompt": task.question, "suggest": n})
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
