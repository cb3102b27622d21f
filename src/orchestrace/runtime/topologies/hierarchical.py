"""Hierarchical: orchestrator -> managers -> workers (multi-level spawning, optional stages).

Each manager spawns workers on its share, combines and returns; the orchestrator combines the
managers' answers. Options:

* ``managers``: managers under the orchestrator (default: about the square root of the team
  size);
* ``depth``: levels of managers between the orchestrator and the workers (default 1); with
  ``depth=2`` the orchestrator's managers spawn sub-managers that spawn the workers, so workers
  sit at spawn depth 3;
* ``branching``: sub-managers a manager above the last level spawns (default: about the
  ``depth``-th root of its share of workers);
* ``stages``: orchestrator stages (default 1). The task is cut into ``stages`` consecutive
  slices; in each stage the orchestrator plans (one recorded decision), spawns a fresh manager
  tree with its share of the workers over that slice, waits, and keeps the stage's answer; the
  final answer combines the stages. ``--agents`` counts the workers of all stages together.

With the defaults the run is the classic two-level hierarchy.
"""

from __future__ import annotations

import math
from typing import Any

from orchestrace.runtime.core import Context
from orchestrace.runtime.tasks.base import Subtask
from orchestrace.runtime.topologies.common import solver, worker_role

__all__ = ["orchestrate"]


def _shares(n: int, k: int) -> list[int]:
    """``n`` workers over ``k`` groups, as even as possible."""
    return [n // k + (1 if i < n % k else 0) for i in range(k)]


async def manager(ctx: Context, part: Subtask, workers: int, levels: int = 1) -> Any:
    """Split the part among workers (``levels`` = 1) or sub-managers, combine their answers."""
    if levels <= 1:
        await ctx.generate("plan", {"prompt": part.prompt, "suggest": workers})
        pieces = ctx.task.split(part, workers)
        kids = [
            await ctx.spawn(worker_role(ctx, i), solver, part=p, content=p.prompt)
            for i, p in enumerate(pieces)
        ]
    else:
        default = max(1, round(workers ** (1.0 / levels)))
        b = max(1, min(int(ctx.option("branching", default)), workers))
        await ctx.generate("plan", {"prompt": part.prompt, "suggest": b})
        pieces = ctx.task.split(part, b)
        share = _shares(workers, len(pieces))
        kids = [
            await ctx.spawn(
                "manager",
                manager,
                part=p,
                workers=max(1, share[i]),
                levels=levels - 1,
                content=p.prompt,
            )
            for i, p in enumerate(pieces)
        ]
    results = await ctx.wait(kids)
    return await ctx.aggregate(results, "combine")


async def orchestrate(ctx: Context) -> Any:
    """The orchestrator."""
    task = ctx.task
    n = int(ctx.decide("n_workers", ctx.config.agents))
    levels = int(ctx.option("depth", 1))
    stages = int(ctx.option("stages", 1))
    if stages <= 1:
        return await _stage(ctx, task.whole(), n, levels, 0)
    slices = task.subtasks(stages)
    per_stage = _shares(n, len(slices))
    answers = []
    for s, part in enumerate(slices):
        answers.append(await _stage(ctx, part, max(1, per_stage[s]), levels, s + 1))
        ctx.remember(answers[-1])
    return await ctx.aggregate(answers, "combine")


async def _stage(ctx: Context, whole: Subtask, n: int, levels: int, stage: int) -> Any:
    """One manager tree over ``whole`` with ``n`` workers; its combined answer.

    ``stage`` is the stage number (0 when the run has a single stage).
    """
    task = ctx.task
    m = int(ctx.option("managers", max(1, round(math.sqrt(n)))))
    m = max(1, min(m, n))
    plan: dict[str, Any] = {"prompt": task.question, "suggest": m}
    if stage:
        plan["stage"] = stage
        plan["part"] = whole.prompt
    await ctx.generate("plan", plan)
    parts = task.split(whole, m)
    share = _shares(n, len(parts))
    extra: dict[str, Any] = {"levels": levels} if levels > 1 else {}
    kids = [
        await ctx.spawn(
            "manager", manager, content=p.prompt, part=p, workers=max(1, share[i]), **extra
        )
        for i, p in enumerate(parts)
    ]
    results = await ctx.wait(kids)
    return await ctx.aggregate(results, "combine")
