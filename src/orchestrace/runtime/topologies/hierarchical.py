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
  slices; in each stage the orchestrator plans, spawns a fresh manager tree with its share of
  the workers over that slice, waits, and keeps the stage's answer; the final answer combines
  the stages. ``--agents`` counts the workers of all stages together.

Each stage's plan is an LLM call (kind ``plan``) whose answer sets how many managers the stage
spawns: an integer from 1 to the stage's workers, read strictly (anything else, or a failed
call, keeps the default, ``managers`` or about the square root of the workers, and says so).
The orchestrator records that choice as an ``orchestrator_decision`` event (``spawn``; attrs
``stage``, ``managers``, ``source`` = ``plan`` or ``default``, ``suggested``, ``answer``,
``next`` = ``continue`` while stages remain, else ``stop``).

With the defaults the run is the classic two-level hierarchy.
"""

from __future__ import annotations

import math
from typing import Any

from orchestrace.runtime.core import Context
from orchestrace.runtime.topologies.common import solver, worker_role
from orchestrace.tasks.base import Subtask

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


def _managers(answer: Any, n: int) -> int | None:
    """The plan's manager count: an integer (or a string of digits) in 1..n, else ``None``."""
    if isinstance(answer, str) and answer.strip().isdecimal():  # not "²", which int() refuses
        answer = int(answer.strip())
    if isinstance(answer, int) and not isinstance(answer, bool) and 1 <= answer <= n:
        return answer
    return None


def _shown(answer: Any) -> Any:
    """The plan's answer as recorded (JSON scalars as they are, anything else as short text)."""
    if answer is None or isinstance(answer, (bool, int, float)):
        return answer
    return str(answer)[:200]


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
    resp = await ctx.generate("plan", plan)
    chosen = _managers(resp.answer if resp.error is None else None, n)
    last = stage == 0 or stage >= int(ctx.option("stages", 1))
    ctx.record_decision(
        "spawn",
        f"stage {stage}: {chosen or m} managers",
        {
            "stage": stage,
            "managers": chosen or m,
            "source": "plan" if chosen else "default",
            "suggested": m,
            "answer": None if resp.error is not None else _shown(resp.answer),
            "next": "stop" if last else "continue",
        },
    )
    m = chosen or m
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
