"""How ``ctx.aggregate`` combines results (an O4 decision): a registry of methods.

Each method takes the agent's context, the results' values, whether each is a success, and
the call's keyword arguments, and gives the combined value:

* ``combine``: the task's reduce (``None`` when any result failed);
* ``vote``: the most common successful value (ties go to the value seen first);
* ``trust``: ``vote`` weighted by ``weights``;
* ``first``: the first successful value;
* ``judge``: an LLM judge (a ``judge`` call) picks one of the values;
* ``trust_weighted``: ``trust`` (robust aggregation under ``Defenses.aggregation``);
* ``trimmed``: numbers: drop the ``trim`` share (default 0.2) at each end, take the lower
  median of the rest; other values: ``vote``;
* ``quorum``: the most common value only when it has more than the ``quorum`` share
  (default 0.5) of all the votes, failed ones included; else ``None``.

Example:
    >>> sorted(AGGREGATORS)
    ['combine', 'first', 'judge', 'quorum', 'trimmed', 'trust', 'trust_weighted', 'vote']
    >>> import asyncio
    >>> asyncio.run(AGGREGATORS["vote"](None, [3, 4, 4], [True, True, True], {}))
    4
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from orchestrace.runtime.context import Context

__all__ = ["AGGREGATORS", "Aggregator", "text_of"]

#: ``method(ctx, values, oks, kw) -> value``.
Aggregator = Callable[["Context", list[Any], list[bool], dict[str, Any]], Awaitable[Any]]

_ENC = msgspec.json.Encoder(order="deterministic")


def text_of(value: Any) -> str:
    """A value as recorded text: itself if a string, else canonical JSON (else its repr)."""
    if isinstance(value, str):
        return value
    try:
        return _ENC.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        return repr(value)


async def _combine(ctx: Context, values: list[Any], oks: list[bool], kw: dict[str, Any]) -> Any:
    return ctx.task.combine(values) if all(oks) else None


async def _vote(ctx: Context, values: list[Any], oks: list[bool], kw: dict[str, Any]) -> Any:
    weights: Sequence[Any] = kw.get("weights") or [1.0] * len(values)
    tally: dict[str, float] = {}
    first: dict[str, Any] = {}
    for v, ok, w in zip(values, oks, weights, strict=False):
        if ok:
            k = text_of(v)
            tally[k] = tally.get(k, 0.0) + float(w)
            first.setdefault(k, v)
    # most votes; max() keeps the first of equal counts: ties go to the answer seen first
    return first[max(tally, key=tally.__getitem__)] if tally else None


async def _first(ctx: Context, values: list[Any], oks: list[bool], kw: dict[str, Any]) -> Any:
    return next((v for v, ok in zip(values, oks, strict=True) if ok), None)


async def _judge(ctx: Context, values: list[Any], oks: list[bool], kw: dict[str, Any]) -> Any:
    resp = await ctx.generate("judge", {**kw.get("payload", {}), "candidates": values})
    pick = resp.answer
    return values[pick] if isinstance(pick, int) and 0 <= pick < len(values) else None


async def _trimmed(ctx: Context, values: list[Any], oks: list[bool], kw: dict[str, Any]) -> Any:
    nums = [v for v, ok in zip(values, oks, strict=True) if ok]
    if not nums or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and not math.isnan(v) for v in nums
    ):
        return await _vote(ctx, values, oks, kw)
    nums.sort()
    k = int(float(kw.get("trim", 0.2)) * len(nums))
    kept = nums[k : len(nums) - k] or nums
    return kept[(len(kept) - 1) // 2]


async def _quorum(ctx: Context, values: list[Any], oks: list[bool], kw: dict[str, Any]) -> Any:
    weights: Sequence[Any] = kw.get("weights") or [1.0] * len(values)
    total = sum(float(w) for w in weights[: len(values)])
    best = await _vote(ctx, values, oks, kw)
    if best is None or total <= 0:
        return None
    key = text_of(best)
    share = sum(
        float(w) for v, ok, w in zip(values, oks, weights, strict=False) if ok and text_of(v) == key
    )
    return best if share / total > float(kw.get("quorum", 0.5)) else None


#: The aggregation methods by name.
AGGREGATORS: dict[str, Aggregator] = {
    "combine": _combine,
    "vote": _vote,
    "trust": _vote,
    "first": _first,
    "judge": _judge,
    "trust_weighted": _vote,
    "trimmed": _trimmed,
    "quorum": _quorum,
}
