"""Clocks: virtual time for simulated runs, wall time for real backends.

:class:`VirtualTimeLoop` is an asyncio event loop whose ``time()`` is virtual: when every task is
waiting for a timer, the loop jumps straight to the next one instead of sleeping. Agents use
plain ``asyncio.sleep``, ``gather``, queues and events; a 300-agent run that spans hours of
simulated time takes seconds of CPU. When every task waits and no timer is pending, the run is
deadlocked: the loop raises :class:`Deadlock` instead of hanging.

Time jumps straight to the next timer however far away it is (``asyncio.sleep(1e15)`` returns at
once), and a timer fires at any magnitude of time, where a float clock can no longer resolve a
nanosecond. A timer at an infinite time never fires: a run whose only pending timer is infinite
is treated like one with no timer at all (deadlock handling).

Example:
    >>> import asyncio
    >>> async def main():
    ...     loop = asyncio.get_running_loop()
    ...     await asyncio.gather(asyncio.sleep(3600), asyncio.sleep(60))
    ...     return loop.time()
    >>> run_virtual(main())
    3600.0
"""

from __future__ import annotations

import asyncio
import math
import selectors
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from orchestrace.errors import RuntimeError_

__all__ = ["Deadlock", "VirtualTimeLoop", "run_real", "run_virtual"]

T = TypeVar("T")


class Deadlock(RuntimeError_):
    """Every task waits on another task and no timer is pending: the run can never finish."""


class _VirtualSelector(selectors.BaseSelector):
    """Polls real file descriptors without blocking and advances virtual time instead."""

    def __init__(self, clock: list[float], watchdog_s: float) -> None:
        self._sel = selectors.DefaultSelector()
        self._clock = clock
        self._watchdog_s = watchdog_s
        self.on_deadlock: Any = None
        #: Returns the due time of the earliest pending timer (``None`` when there is none).
        self.next_timer: Any = None

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._sel.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._sel.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._sel.modify(fileobj, events, data)

    def get_map(self) -> Any:
        return self._sel.get_map()

    def close(self) -> None:
        self._sel.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._sel.select(0)
        if ready:
            return ready
        due = self.next_timer() if timeout and self.next_timer is not None else None
        if due is not None and not math.isfinite(due):
            timeout = None  # only a timer that never fires: nothing can wake the loop
        if timeout is None:
            # nothing scheduled: only real I/O (a worker thread, a socket) could wake us
            ready = self._sel.select(self._watchdog_s)
            if not ready and self.on_deadlock is not None:
                self.on_deadlock()  # schedules a callback: the loop goes on and can clean up
                return []
            if not ready:
                raise Deadlock(
                    "every agent is waiting and no timer is pending: the run is deadlocked "
                    "(an agent awaits a message or result that will never come); check the "
                    "topology's waits, or set a wall-time budget"
                )
            return ready
        if timeout > 0:
            # jump to the timer itself: asyncio caps a select at one day, and adding the
            # remaining time in floats can fall short of the due time by an ulp forever
            target = self._clock[0] + timeout if due is None else due
            self._clock[0] = max(self._clock[0], target)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop on virtual time (starts at 0.0).

    Args:
        watchdog_s: Real seconds to wait for real I/O when no timer is pending before
            declaring a deadlock.
    """

    def __init__(self, watchdog_s: float = 0.5) -> None:
        self._vclock = [0.0]
        self._base_resolution = 1e-9
        self._vsel = _VirtualSelector(self._vclock, watchdog_s)
        self._vsel.next_timer = self._next_timer
        super().__init__(self._vsel)

    def _next_timer(self) -> float | None:
        scheduled: list[Any] = getattr(self, "_scheduled", [])
        live = [h.when() for h in scheduled[:1] if not h.cancelled()]
        return live[0] if live else None

    # asyncio runs the timers due before ``time() + _clock_resolution``; at large virtual times
    # a fixed nanosecond vanishes in float rounding, so the resolution grows with the clock
    @property
    def _clock_resolution(self) -> float:
        return max(self._base_resolution, math.ulp(self._vclock[0]))

    @_clock_resolution.setter
    def _clock_resolution(self, value: float) -> None:
        self._base_resolution = value

    def set_deadlock_handler(self, handler: Any) -> None:
        """Call ``handler()`` (instead of raising :class:`Deadlock`) when nothing can run."""
        self._vsel.on_deadlock = handler

    def time(self) -> float:
        """Virtual seconds since the loop started."""
        return self._vclock[0]


def run_virtual(coro: Coroutine[Any, Any, T], *, watchdog_s: float = 0.5) -> T:
    """Run ``coro`` to completion on a fresh :class:`VirtualTimeLoop`."""
    loop = VirtualTimeLoop(watchdog_s)
    try:
        return loop.run_until_complete(coro)
    finally:
        _shutdown(loop)


def run_real(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a fresh ordinary event loop (wall-clock time)."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        _shutdown(loop)


def _shutdown(loop: asyncio.AbstractEventLoop) -> None:
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    except Exception:
        pass
    finally:
        loop.close()


def wall() -> float:
    """Monotonic wall-clock seconds."""
    return time.perf_counter()
