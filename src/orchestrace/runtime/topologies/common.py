"""Shared pieces of the topologies: the solving worker and role assignment."""

from __future__ import annotations

from typing import Any

from orchestrace.runtime.core import Context
from orchestrace.runtime.tasks.base import Subtask

__all__ = ["solve_part", "solver", "worker_role"]


async def solve_part(ctx: Context, part: Subtask, input: Any = None, **extra: Any) -> Any:
    """Solve one part: look up what the task's tools offer, then ask the model.

    A part is worked through in ``chunks`` sequential turns (option ``chunks``, default 1),
    each on a slice of the part; the chunk answers are combined.
    """
    task = ctx.task
    chunks = max(1, int(ctx.option("chunks", 1)))
    pieces = task.split(part, chunks) if chunks > 1 and task.parallel else [part]
    answers = []
    for piece in pieces:
        payload = ctx.payload(piece, **extra)
        notes = [m.content for m in ctx.poll()]  # what peers shared so far
        if notes:
            payload["notes"] = notes
        if input is not None:
            payload["input"] = input
            payload["expected_input"] = piece.data.get("start")
        tool = _tool_for(task.name)
        if tool == "search":
            await ctx.call_tool("search", {k: piece.data[k] for k in ("start", "end", "city")})
        elif tool == "lookup":
            entity = input if input is not None else piece.data.get("start")
            for rel in piece.data.get("relations", []):
                res = await ctx.call_tool("lookup", {"entity": entity, "relation": rel})
                entity = res.value if res.ok else entity
        resp = await ctx.generate("solve", payload)
        answers.append(resp.answer)
        ctx.remember(answers[-1])
    return answers[0] if len(answers) == 1 else task.combine(answers)


def _tool_for(task_name: str) -> str | None:
    if task_name.startswith("wide-search"):
        return "search"
    if task_name.startswith("multihop"):
        return "lookup"
    return None


async def solver(ctx: Context, part: Subtask, input: Any = None) -> Any:
    """A worker that solves its part and returns the answer."""
    return await solve_part(ctx, part, input)


def worker_role(ctx: Context, i: int) -> str:
    """Role of the i-th worker (an O2 choice): option ``roles`` cycles through a list."""
    roles = ctx.option("roles") or [ctx.option("worker_role", "worker")]
    return str(roles[i % len(roles)])
