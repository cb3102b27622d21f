"""Shared pieces of the topologies: the solving worker, verifier requests and role assignment."""

from __future__ import annotations

from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.runtime.core import Context
from orchestrace.tasks.base import Subtask

__all__ = [
    "VOTES",
    "gather_evidence",
    "how_to_combine",
    "solve_part",
    "solver",
    "uses_evidence",
    "verify_payload",
    "verify_request",
    "worker_role",
]


async def solve_part(ctx: Context, part: Subtask, input: Any = None, **extra: Any) -> Any:
    """Solve one part: call the task's tools, then ask the model.

    A part is worked through in ``chunks`` sequential turns (option ``chunks``, default 1),
    each on a slice of the part; the chunk answers are combined.

    On tasks whose answers rest on tool results (class attribute ``evidence``: ``wide-search-v1``,
    ``multihop-v1``), what the tools returned (or the error they raised) goes into the request:
    ``tool_results`` is rendered into the prompt, and ``supported`` (the answer those results
    support, ``None`` when they settle nothing) is what the simulator answers from. On the
    ``-v0`` tasks the tools are called and recorded but their results are not shown.
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
        if uses_evidence(task):
            payload.update(await gather_evidence(ctx, piece, input))
        else:
            if input is not None:
                payload["input"] = input
                payload["expected_input"] = piece.data.get("start")
            await _call_tools(ctx, piece, input)
        resp = await ctx.generate("solve", payload)
        answers.append(resp.answer)
        ctx.remember(answers[-1])
    return answers[0] if len(answers) == 1 else task.combine(answers)


async def _call_tools(ctx: Context, piece: Subtask, input: Any) -> None:
    """The ``-v0`` tool calls: recorded, their results not shown to the model."""
    tool = _tool_for(ctx.task.name)
    if tool == "search":
        await ctx.call_tool("search", {k: piece.data[k] for k in ("start", "end", "city")})
    elif tool == "lookup":
        entity = input if input is not None else piece.data.get("start")
        for rel in piece.data.get("relations", []):
            res = await ctx.call_tool("lookup", {"entity": entity, "relation": rel})
            entity = res.value if res.ok else entity


async def gather_evidence(ctx: Context, piece: Subtask, input: Any) -> dict[str, Any]:
    """Call the tools a part needs; return what the request shows and what it supports.

    Returns:
        ``tool_results`` (lines a model reads), ``supported`` (the answer a faithful reader of
        those results gives; ``None`` when a call failed and the results settle nothing),
        ``guess`` (an answer from the question alone) and, for chained lookups, ``input``
        (the entity the chain started from).
    """
    task = ctx.task
    lines: list[str] = []
    out: dict[str, Any] = {}
    supported: Any = None
    tool = _tool_for(task.name)
    if tool == "search":
        args = {k: piece.data[k] for k in ("start", "end", "city")}
        res = await ctx.call_tool("search", args)
        head = f"search(documents {args['start']}..{int(args['end']) - 1}, city={args['city']})"
        if res.ok and isinstance(res.value, list):
            lines.append(f"{head} -> {len(res.value)} matching documents:")
            lines += [f"- {doc}" for doc in res.value]
            supported = task.read_evidence(piece, res.value)  # type: ignore[attr-defined]
        else:
            lines.append(f"{head} failed: {res.error}")
    elif tool == "lookup":
        entity = input if input is not None else piece.data.get("start")
        out["input"] = entity
        reached: list[Any] = []
        for rel in piece.data.get("relations", []):
            res = await ctx.call_tool("lookup", {"entity": entity, "relation": rel})
            if not res.ok:
                lines.append(f"lookup({entity}, {rel}) failed: {res.error}")
                reached = []  # the chain is broken: the rest is a guess
                break
            lines.append(f"lookup({entity}, {rel}) -> {res.value}")
            entity = res.value
            reached.append(entity)
        supported = task.read_evidence(piece, reached)  # type: ignore[attr-defined]
    out["tool_results"] = lines
    out["supported"] = supported
    read = getattr(task, "read_hardness", None)
    if read is not None:  # reading retrieved evidence is easier than solving unaided
        out["hardness"] = float(read)
    guess = task.guess(piece)  # type: ignore[attr-defined]
    if guess is not None:
        out["guess"] = guess
    return out


def uses_evidence(task: Any) -> bool:
    """Whether ``task`` answers from its tool results (its class sets ``evidence = True``)."""
    return bool(getattr(task, "evidence", False))


def _tool_for(task_name: str) -> str | None:
    if task_name.startswith("wide-search"):
        return "search"
    if task_name.startswith("multihop"):
        return "lookup"
    return None


def verify_payload(ctx: Context, **fields: Any) -> dict[str, Any]:
    """The request of a judge, critic or reviser of the whole task.

    It holds the question and ``fields`` (candidates, own and peer answers), plus what the
    simulator needs to model the verifier's own noisy solving of the task (ground truth,
    hardness of the whole task, how wrong answers look). The simulator decides from its own
    solving and what it is shown; only with ``oracle_verifiers`` does it compare with the
    truth directly. Real models see the rendered question and fields alone.
    """
    task = ctx.task
    whole = task.whole().payload(task)
    solving: dict[str, Any] = {
        k: whole[k] for k in ("hardness", "size", "wrong", "choices") if k in whole
    }
    return {"prompt": task.question, **fields, "truth": task.answer, **solving}


async def verify_request(ctx: Context, **fields: Any) -> dict[str, Any]:
    """:func:`verify_payload`, plus, on tasks that answer from tool results, the verifier's own.

    On tasks whose verifiers look things up (class attribute ``verifiers_look_up``:
    ``wide-search-v2``, ``multihop-v2``) a judge, critic or reviser does not know the answer
    unaided: it runs the task's tools on the whole task itself (recorded
    ``tool_call`` events, subject to tool faults) and decides from what they return
    (``supported``); when they settle nothing it guesses. With ``oracle_verifiers`` (the
    simulator reads the ground truth anyway) no tools are called, as before.
    """
    payload = verify_payload(ctx, **fields)
    task = ctx.task
    backend = getattr(getattr(ctx, "_rt", None), "backend", None)
    looks_up = bool(getattr(task, "verifiers_look_up", False))
    if looks_up and not getattr(backend, "oracle_verifiers", False):
        payload.update(await gather_evidence(ctx, task.whole(), None))
    return payload


async def solver(ctx: Context, part: Subtask, input: Any = None) -> Any:
    """A worker that solves its part and returns the answer."""
    return await solve_part(ctx, part, input)


#: Methods of option ``aggregate`` that take a vote over whole-task answers.
VOTES = ("vote", "trust", "trust_weighted", "trimmed", "quorum")


def how_to_combine(method: Any, default: str) -> str:
    """The final answer's method: option ``aggregate`` (``default`` or one of :data:`VOTES`).

    With a vote, every worker answers the whole task and the answers are voted on (under
    ``Defenses.aggregation`` a plain vote becomes the robust method); otherwise the topology
    combines as it always does (``default``).

    Raises:
        ConfigError: The option names another method.
    """
    if method != default and method not in VOTES:
        raise ConfigError(
            f"option 'aggregate' must be {default!r} or a vote ({', '.join(VOTES)}); "
            f"got {method!r}; pass e.g. -O aggregate=vote"
        )
    return str(method)


def worker_role(ctx: Context, i: int) -> str:
    """Role of the i-th worker (an O2 choice): option ``roles`` cycles through a list."""
    roles = ctx.option("roles") or [ctx.option("worker_role", "worker")]
    return str(roles[i % len(roles)])
