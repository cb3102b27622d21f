"""Hierarchical: orchestrator -> managers -> workers (multi-level spawning).

Each manager spawns workers on its share, combines and returns; the orchestrator combines the
managers' answers. Option ``managers`` (default: about the square root of the team size).
"""

from __future__ import annotations

import math
from typing import Any

from orchestrace.runtime.core import Context
from orchestrace.runtime.tasks.base import Subtask
from orchestrace.runtime.topologies.common import solver, worker_role

__all__ = ["orchestrate"]


async def manager(ctx: Context, part: Subtask, workers: int) -> Any:
    """Split the part among workers, combine their answers."""
    await ctx.generate("plan", {"prompt": part.prompt, "suggest": workers})
    pieces = ctx.task.split(part, workers)
    kids = [
        await ctx.spawn(worker_role(ctx, i), solver, part=p, content=p.prompt)
        for i, p in enumerate(pieces)
    ]
    results = await ctx.wait(kids)
    return await ctx.aggregate(results, "combine")


async def orchestrate(ctx: Context) -> Any:
    """The orchestrator."""
    task = ctx.task
    n = int(ctx.decide("n_workers", ctx.config.agents))
    m = int(ctx.option("managers", max(1, round(math.sqrt(n)))))
    m = max(1, min(m, n))
    await ctx.generate("plan", {"prompt": task.question, "suggest": m})
    parts = task.subtasks(m)
    share = [n // len(parts) + (1 if i < n % len(parts) else 0) for i in range(len(parts))]
    kids = [
        await ctx.spawn("manager", manager, part=p, workers=max(1, share[i]), content=p.prompt)
        for i, p in enumerate(parts)
    ]
    results = await ctx.wait(kids)
    return await ctx.aggregate(results, "combine")
