"""Debate / committee with a judge: debaters answer, exchange and revise; a judge picks.

Option ``rounds`` (default 2) rounds of exchange; option ``debaters`` (default: the team size,
at most 7). With option ``aggregate`` a vote (``vote``, ``trust``, ``trust_weighted``,
``trimmed``, ``quorum``), the orchestrator takes the vote of the debaters' final answers
instead of asking a judge.
"""

from __future__ import annotations

from typing import Any

from orchestrace.runtime.core import Context
from orchestrace.runtime.topologies.common import (
    gather_evidence,
    how_to_combine,
    uses_evidence,
    verify_request,
)

__all__ = ["orchestrate"]


async def debater(ctx: Context, others: list[str], rounds: int) -> Any:
    """Answer, then revise after hearing the others, round by round."""
    task = ctx.task
    whole = task.whole()
    payload = ctx.payload(whole)
    if uses_evidence(task):  # the debater reads its own tool results
        payload.update(await gather_evidence(ctx, whole, None))
    r = await ctx.generate("solve", payload)
    own = r.answer
    ctx.remember(own)
    for k in range(rounds):
        await ctx.broadcast(others, own, data={"round": k, "answer": own})
        heard: list[Any] = []
        patience = float(ctx.option("patience", 300.0))
        while len(heard) < len(others):
            msg = await ctx.receive(timeout=patience)
            if msg is None:  # a peer went silent: revise with what was heard
                break
            if isinstance(msg.data, dict) and msg.data.get("round") == k:
                heard.append(msg.data["answer"])
        r = await ctx.generate("revise", await verify_request(ctx, own=own, peers=heard))
        own = r.answer
        ctx.remember(own)
    return own


async def judge(ctx: Context, candidates: list[Any]) -> Any:
    """Pick the best candidate."""
    return await ctx.aggregate(candidates, "judge", payload=await verify_request(ctx))


async def orchestrate(ctx: Context) -> Any:
    """The orchestrator."""
    n = int(ctx.decide("n_workers", min(ctx.config.agents, int(ctx.option("debaters", 7)))))
    n = max(2, n)
    rounds = int(ctx.option("rounds", 2))
    names = [f"debater{i + 1}" for i in range(n)]
    kids = [
        await ctx.spawn(
            "debater", debater, name=name, others=[m for m in names if m != name], rounds=rounds
        )
        for name in names
    ]
    results = await ctx.wait(kids)
    method = how_to_combine(ctx.option("aggregate", "judge"), "judge")
    if method != "judge":  # a vote across the debaters instead of a judge
        return await ctx.aggregate(results, str(ctx.decide("aggregate", method)))
    j = await ctx.spawn("judge", judge, candidates=[r.value for r in results], content="judge")
    (verdict,) = await ctx.wait([j])
    return verdict.value
