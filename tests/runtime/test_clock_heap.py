"""The virtual-time loop's timer heap fires timers in exactly asyncio's order.

:class:`~orchestrace.runtime.clock.VirtualTimeLoop` keeps float keys in its heap instead of
asyncio's ``TimerHandle`` objects (which compare through a Python method). The order in which
timers that fall due together run is an artefact of the heap's moves, and recorded traces
depend on it; this compares the loop with one running asyncio's own ``call_at`` and
``_run_once`` on programs full of ties, cancellations and heap rebuilds.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from typing import Any

import pytest

from orchestrace.runtime.clock import VirtualTimeLoop


class _StockHeap(VirtualTimeLoop):
    """The same virtual clock with asyncio's own timer heap (``TimerHandle`` entries)."""

    call_at = asyncio.BaseEventLoop.call_at
    _run_once = asyncio.BaseEventLoop._run_once

    def _next_timer(self) -> float | None:
        s: list[Any] = self._scheduled
        return s[0].when() if s and not s[0].cancelled() else None

    def settle_wait(self, timeout: float) -> bool:
        return False


def _program(seed: int) -> Any:
    """Agents sleeping durations from a small set (many ties), scheduling and cancelling."""
    rng = random.Random(seed)
    plan = [
        [
            (rng.choice((0, 0.5, 1, 1, 2, 3.25)), rng.random() < 0.3)
            for _ in range(rng.randint(1, 12))
        ]
        for _ in range(rng.randint(2, 60))
    ]

    async def main() -> list[tuple[float, int, int]]:
        loop = asyncio.get_running_loop()
        order: list[tuple[float, int, int]] = []

        async def agent(a: int) -> None:
            for k, (dt, cancel_some) in enumerate(plan[a]):
                if cancel_some:  # timers that never fire: many cancelled entries in the heap
                    for j in range(rng.randint(1, 30)):
                        loop.call_later(dt + j, order.append, (-1.0, a, k)).cancel()
                loop.call_later(dt / 2, order.append, (loop.time(), a, -k - 1))
                await asyncio.sleep(dt)
                order.append((loop.time(), a, k))

        await asyncio.gather(*(agent(a) for a in range(len(plan))))
        await asyncio.sleep(10)
        return order

    return main


def _order(loop_class: type[VirtualTimeLoop], seed: int) -> list[tuple[float, int, int]]:
    loop = loop_class(0.05)
    try:
        return loop.run_until_complete(_program(seed)())
    finally:
        loop.close()


@pytest.mark.parametrize("seed", range(40))
def test_timers_fire_in_asyncios_order(seed: int) -> None:
    want = _order(_StockHeap, seed)
    assert len(want) > 0
    assert _order(VirtualTimeLoop, seed) == want


class _FifoTimer(asyncio.TimerHandle):
    __slots__ = ("seq",)

    def __lt__(self, other: Any) -> bool:
        return (self._when, self.seq) < (other._when, other.seq)


class _Fifo(_StockHeap):
    """Timers that fall due together run first scheduled, first run (not asyncio's order)."""

    def call_at(self, when: float, callback: Any, *args: Any, context: Any = None) -> Any:
        timer = _FifoTimer(when, callback, args, self, context)
        timer.seq = next(self._seq)
        heapq.heappush(self._scheduled, timer)
        timer._scheduled = True
        return timer

    def __init__(self, watchdog_s: float) -> None:
        self._seq = itertools.count()
        super().__init__(watchdog_s)


def test_the_comparison_can_tell_orders_apart() -> None:
    """A heap that breaks ties another way gives another order: the test above can fail."""
    differ = [s for s in range(40) if _order(_Fifo, s) != _order(_StockHeap, s)]
    assert len(differ) >= 10, differ


def test_due_times_beyond_a_float_are_placed_at_infinity() -> None:
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        seen: list[str] = []
        never = loop.call_at(10**400, seen.append, "never")
        loop.call_at(1, seen.append, "at 1")
        await asyncio.sleep(2)
        never.cancel()
        return seen

    loop = VirtualTimeLoop(0.05)
    try:
        assert loop.run_until_complete(main()) == ["at 1"]
    finally:
        loop.close()
