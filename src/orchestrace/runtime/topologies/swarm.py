"""Parallel swarm with an aggregator agent.

Workers solve in parallel and report to the aggregator (with option ``gossip``, they also tell
a peer); the aggregator combines and returns. With option ``aggregate`` a vote (``vote``,
``trust``, ``trust_weighted``, ``trimmed``, ``quorum``), every worker answers the whole task
and the aggregator takes the vote of their reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrace.runtime.core import Context
from orchestrace.runtime.topologies.common import how_to_combine, solve_part, worker_role
from orchestrace.tasks.base import Subtask

__all__ = ["orchestrate"]


async def swarm_worker(
    ctx: Context, part: Subtask, aggregator: str, team: Sequence[str], index: int
) -> Any:
    """Solve, maybe tell a peer (another member of ``team``), report to the aggregator.

    ``team`` is shared by every worker (``index`` is this worker's place in it), so a team of
    ``n`` costs ``n`` names, not ``n`` lists of peers.
    """
    value = await solve_part(ctx, part)
    gossip = float(ctx.option("gossip", 0.0))
    if len(team) > 1 and gossip > 0 and ctx.random() < gossip:
        j = int(ctx.random() * (len(team) - 1))  # a uniform draw among the others
        peer = team[j if j < index else j + 1]
        await ctx.send(peer, f"part {part.index}: {value}", data={"index": part.index})
    await ctx.send(aggregator, value, data={"index": part.index, "value": value})
    return value


async def aggregator(ctx: Context, n: int, method: str = "combine") -> Any:
    """Collect ``n`` reports, combine them in part order (or vote on them: ``method``)."""
    values: dict[Any, Any] = {}
    patience = float(ctx.option("patience", 300.0))
    while len(values) < n:
        msg = await ctx.receive(timeout=patience)
        if msg is None:  # a report never came: combine what arrived
            break
        if isinstance(msg.data, dict) and "value" in msg.data:
            # parts are keyed by index; votes on the whole task by sender (one each)
            key = int(msg.data["index"]) if method == "combine" else msg.sender
            values[key] = msg.data["value"]
    # a vote takes the reports that arrived, in arrival order
    ordered = [values.get(i) for i in range(n)] if method == "combine" else list(values.values())
    return await ctx.aggregate(ordered, str(ctx.decide("aggregate", method)))


async def orchestrate(ctx: Context) -> Any:
    """The orchestrator."""
    task = ctx.task
    n = int(ctx.decide("n_workers", ctx.config.agents))
    await ctx.generate("plan", {"prompt": task.question, "suggest": n})
    method = how_to_combine(ctx.option("aggregate", "combine"), "combine")
    parts = task.subtasks(n) if method == "combine" else [task.whole()] * max(1, n)
    agg = await ctx.spawn(
        "aggregator", aggregator, n=len(parts), method=method, content="combine the reports"
    )
    names = tuple(f"{worker_role(ctx, i)}{i + 1}" for i in range(len(parts)))
    for i, p in enumerate(parts):
        await ctx.spawn(
            worker_role(ctx, i),
            swarm_worker,
            name=names[i],
            part=p,
            aggregator=agg.name,
            team=names,
            index=i,
            content=p.prompt,
        )
    (result,) = await ctx.wait([agg])
    ctx.remember(result.value)
    return result.value
