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
import contextlib
import contextvars
import gc
import heapq
import math
import selectors
import sys
import threading
import time
from asyncio import base_events
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from orchestrace.errors import RuntimeError_

__all__ = ["Deadlock", "VirtualTimeLoop", "outside_running_loop", "run_real", "run_virtual"]

T = TypeVar("T")

# ``asyncio.wait_for`` of CPython 3.11 runs its awaitable in a task of its own, so even an
# awaitable that is already done costs three loop iterations (later versions await it directly)
_WAIT_FOR_YIELDS = sys.version_info[:2] == (3, 11)


def _noop() -> None:
    pass


_NO_CONTEXT = contextvars.Context()

# what asyncio's ``_run_once`` uses, from the module that defines it
_MAX_SELECT_S: float = base_events.MAXIMUM_SELECT_TIMEOUT  # type: ignore[attr-defined]
_LOG: Any = base_events.logger  # type: ignore[attr-defined]
_FORMAT: Any = base_events._format_handle  # type: ignore[attr-defined]
_MIN_TIMERS: int = base_events._MIN_SCHEDULED_TIMER_HANDLES  # type: ignore[attr-defined]
_MAX_CANCELLED: float = base_events._MIN_CANCELLED_TIMER_HANDLES_FRACTION  # type: ignore[attr-defined]


class _Due(float):
    """A timer's place in the loop's heap: its due time, compared in C, and the timer (``h``).

    asyncio keeps ``TimerHandle`` objects in its heap, which compare through a Python method
    (``TimerHandle.__lt__``: ``self._when < other._when``), called about 30 times per event
    of a 3,000-agent swarm. A float key compares the same due times with the same results, so
    ``heapq`` moves every entry exactly as it moves the handles (the same order of timers that
    fall due together, the same traces), at a fraction of the cost.
    """

    __slots__ = ("h",)
    h: asyncio.TimerHandle


def _earliest_live(scheduled: list[_Due]) -> float | None:
    """Due time of the earliest timer not cancelled in the heap ``scheduled`` (``None``: none).

    A best-first walk from the heap's root past the cancelled timers: it visits only those the
    loop's next iteration pops anyway, plus their children.
    """
    frontier: list[tuple[float, int]] = [(scheduled[0].h.when(), 0)] if scheduled else []
    while frontier:
        when, i = heapq.heappop(frontier)
        if not scheduled[i].h.cancelled():
            return when
        for j in (2 * i + 1, 2 * i + 2):
            if j < len(scheduled):
                heapq.heappush(frontier, (scheduled[j].h.when(), j))
    return None


class Deadlock(RuntimeError_):
    """Every task waits on another task and no timer is pending: the run can never finish."""


class _VirtualSelector(selectors.BaseSelector):
    """Polls real file descriptors without blocking and advances virtual time instead.

    The loop's own wake-up socket is always registered; while it is the only file and no
    signal handler is installed (their numbers arrive on it), an iteration polls it only
    after something wrote to it (``woken``, set by the loop's ``_write_to_self``): what
    another thread hands the loop (``call_soon_threadsafe``) is already in the loop's ready
    queue, which is checked before time moves on, and the poll that follows drains the byte,
    so the socket never fills (a full one would lose the signal numbers written to it once a
    handler is set; the numbers of signals that came before their handler was removed are
    drained at the next iteration, see ``remove_signal_handler``). That saves a system call on
    every other loop iteration of a simulated run. Any other file registered (a socket, a
    subprocess pipe) or a signal handler brings the poll back on every iteration. A poll that
    finds the wake-up socket readable reads it at once (:meth:`_drain_wake_ups`).
    """

    def __init__(self, clock: list[float], watchdog_s: float) -> None:
        self._sel = selectors.DefaultSelector()
        self._clock = clock
        self._watchdog_s = watchdog_s
        self._files = 0
        self.on_deadlock: Any = None
        #: Returns the due time of the earliest pending timer (``None`` when there is none).
        self.next_timer: Any = None
        #: The loop's ready queue and signal handlers (set by the loop once it has them).
        self.ready: Any = ()
        self.signals: Any = {}
        #: Set when a byte was written to the loop's wake-up socket since the last poll.
        self.woken = False
        #: The loop's wake-up socket (its descriptor) and what reads it (set by the loop).
        self.wake_up_fd = -1
        self.wake_up: Any = None

    def _drain_wake_ups(
        self, ready: list[tuple[selectors.SelectorKey, int]]
    ) -> list[tuple[selectors.SelectorKey, int]]:
        """Read the wake-up socket now, not in a callback queued behind this iteration's.

        A poll finds it readable one iteration after the callbacks its bytes announced ran
        (they were already in the ready queue); what they scheduled comes first in the queue,
        and asyncio's reading of the socket after it. A signal handler set by that code found
        the socket still full of those bytes and its signal's number was lost. Read here, the
        signal numbers' handlers are queued as asyncio's reading queues them.
        """
        if self.wake_up is None:
            return ready
        rest = [(key, mask) for key, mask in ready if key.fd != self.wake_up_fd]
        if len(rest) < len(ready):
            self.wake_up()
        return rest

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = self._sel.register(fileobj, events, data)
        self._files += 1
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        key = self._sel.unregister(fileobj)
        self._files -= 1
        return key

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._sel.modify(fileobj, events, data)

    def get_map(self) -> Any:
        return self._sel.get_map()

    def close(self) -> None:
        self._sel.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if self._files > 1 or self.signals or self.woken:
            self.woken = False  # before the poll: a byte written after it is polled next time
            ready = self._sel.select(0)
            if ready:
                ready = self._drain_wake_ups(ready)
                if ready:
                    return ready
        if self.ready:
            return []  # another thread handed the loop a callback: it runs now, time stays
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
        self._vsel.ready = self._ready  # type: ignore[attr-defined]
        self._vsel.signals = getattr(self, "_signal_handlers", {})
        self._vsel.wake_up_fd = self._ssock.fileno()  # type: ignore[attr-defined]
        self._vsel.wake_up = self._read_from_self  # type: ignore[attr-defined]

    def _write_to_self(self) -> None:
        # noted before the byte is written (from any thread): the next iteration drains it
        self._vsel.woken = True
        super()._write_to_self()  # type: ignore[misc]

    def remove_signal_handler(self, sig: int) -> bool:
        """Remove the handler of ``sig``, as asyncio's ``remove_signal_handler`` does.

        A signal number already written to the wake-up socket is drained and dropped on the
        next iteration, as with no handler, instead of waiting there for a handler set later.
        """
        removed = super().remove_signal_handler(sig)
        self._vsel.woken = True
        return removed

    def _next_timer(self) -> float | None:
        scheduled: list[_Due] = getattr(self, "_scheduled", [])
        live = [k.h.when() for k in scheduled[:1] if not k.h.cancelled()]
        return live[0] if live else None

    # ------------------------------------------------------------------ the timer heap
    # ``call_at`` and ``_run_once`` are asyncio's (CPython 3.11 and 3.12; 3.13 computes the
    # select timeout without clamping, which only a NaN due time can tell apart: here it runs
    # at once, as on 3.11), with the heap holding :class:`_Due` keys instead of the handles;
    # nothing else in asyncio reads the heap's entries (``close`` clears it, the rest only its
    # length). Due times compare as floats, as the loop's clock is one: an int beyond 2**53 or
    # a ``Fraction`` is placed at its nearest float, an int beyond a float's range at infinity.
    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        """Schedule ``callback(*args)`` at virtual time ``when`` (as asyncio's ``call_at``)."""
        if when is None:
            raise TypeError("when cannot be None")
        self._check_closed()  # type: ignore[attr-defined]
        if self._debug:  # type: ignore[attr-defined]
            self._check_thread()  # type: ignore[attr-defined]
            self._check_callback(callback, "call_at")  # type: ignore[attr-defined]
        timer = asyncio.TimerHandle(when, callback, args, self, context)
        if timer._source_traceback:  # type: ignore[attr-defined]
            del timer._source_traceback[-1]  # type: ignore[attr-defined]
        try:
            key = _Due(when)
        except OverflowError:  # an int beyond a float's range: its nearest float is infinite
            key = _Due(math.inf if when > 0 else -math.inf)
        key.h = timer
        heapq.heappush(self._scheduled, key)
        timer._scheduled = True  # type: ignore[attr-defined]
        return timer

    def _run_once(self) -> None:
        """One iteration: asyncio's, on the heap of :class:`_Due` keys."""
        scheduled: list[_Due] = self._scheduled  # type: ignore[has-type]
        n = len(scheduled)
        if n > _MIN_TIMERS and self._timer_cancelled_count / n > _MAX_CANCELLED:  # type: ignore[has-type]
            # remove the cancelled timers when there are many
            kept = []
            for key in scheduled:
                if key.h._cancelled:
                    key.h._scheduled = False  # type: ignore[attr-defined]
                else:
                    kept.append(key)
            heapq.heapify(kept)
            self._scheduled = scheduled = kept
            self._timer_cancelled_count = 0
        else:
            # remove the cancelled timers from the head of the heap
            while scheduled and scheduled[0].h._cancelled:
                self._timer_cancelled_count -= 1
                heapq.heappop(scheduled).h._scheduled = False  # type: ignore[attr-defined]
        ready = self._ready  # type: ignore[attr-defined]
        timeout = None
        if ready or self._stopping:  # type: ignore[attr-defined]
            timeout = 0.0
        elif scheduled:
            when = scheduled[0].h._when  # type: ignore[attr-defined]
            timeout = min(max(0, when - self.time()), _MAX_SELECT_S)
        event_list = self._selector.select(timeout)  # type: ignore[attr-defined]
        self._process_events(event_list)  # type: ignore[attr-defined]
        event_list = None  # breaks cycles when an exception occurs
        # the timers that are due
        end_time = self.time() + self._clock_resolution
        handle: Any
        while scheduled:
            handle = scheduled[0].h
            if handle._when >= end_time:
                break
            heapq.heappop(scheduled)
            handle._scheduled = False
            ready.append(handle)
        # run what is ready now (not what these callbacks schedule: that runs next time)
        for _ in range(len(ready)):
            handle = ready.popleft()
            if handle._cancelled:
                continue
            if self._debug:  # type: ignore[attr-defined]
                try:
                    self._current_handle = handle
                    t0 = self.time()
                    handle._run()
                    dt = self.time() - t0
                    if dt >= self.slow_callback_duration:
                        _LOG.warning("Executing %s took %.3f seconds", _FORMAT(handle), dt)
                finally:
                    self._current_handle = None
            else:
                handle._run()
        handle = None  # breaks cycles when an exception occurs

    # asyncio runs the timers due before ``time() + _clock_resolution``; at large virtual times
    # a fixed nanosecond vanishes in float rounding, so the resolution grows with the clock
    @property
    def _clock_resolution(self) -> float:
        return max(self._base_resolution, math.ulp(self._vclock[0]))

    @_clock_resolution.setter
    def _clock_resolution(self, value: float) -> None:
        self._base_resolution = value

    def settle_wait(self, timeout: float) -> bool:
        """Whether ``wait_for(aw, timeout)`` of an awaitable that is already done may end now.

        On CPython 3.11 ``asyncio.wait_for`` gives the loop three iterations before it returns
        even when its awaitable has nothing to wait for. When nothing else is ready and no timer
        falls due meanwhile, those iterations run nothing else, and the caller may take the
        result at once: this schedules and cancels the wait's timeout timer as ``wait_for``
        does (the loop's timers are left exactly as they would be) and returns ``True``.
        Otherwise (or on other Python versions, where ``wait_for`` does not yield) it returns
        ``False`` and changes nothing: the caller awaits ``wait_for`` as usual.

        Example:
            >>> async def main():
            ...     loop = asyncio.get_running_loop()
            ...     return loop.settle_wait(5.0) in (True, False)
            >>> run_virtual(main())
            True
        """
        if not _WAIT_FOR_YIELDS or not timeout > 0 or self._ready or self._stopping:  # type: ignore[attr-defined]
            return False
        scheduled: list[_Due] = self._scheduled
        n = len(scheduled) + 1
        if n > _MIN_TIMERS and self._timer_cancelled_count / n > _MAX_CANCELLED:
            return False  # the next iteration would rebuild the timer heap
        now = self.time()
        end = now + self._clock_resolution
        live = _earliest_live(scheduled)
        if now + timeout < end or (live is not None and live < end):
            return False  # a timer falls due in those iterations
        # the timer wait_for schedules (``call_later``, without its debug checks and with a
        # fixed context: the timer never runs)
        timer = asyncio.TimerHandle(now + timeout, _noop, (), self, _NO_CONTEXT)
        key = _Due(timer.when())
        key.h = timer
        heapq.heappush(scheduled, key)
        timer._scheduled = True  # type: ignore[attr-defined]
        while scheduled and scheduled[0].h.cancelled():  # what the next iteration does first
            self._timer_cancelled_count -= 1
            heapq.heappop(scheduled).h._scheduled = False  # type: ignore[attr-defined]
        timer.cancel()
        return True

    def run_forever(self) -> None:
        """Run the loop; Python's cyclic garbage collector is paused while it runs.

        A simulated run allocates objects that live until its end (events, agent states), so
        collections would find nothing to free while re-scanning everything recorded so far,
        at a cost per event that grows with the run. Reference counting frees memory as
        usual, and the collector is switched back on (when it was on) whenever the loop stops,
        so code between runs or between environment steps is left alone.
        """
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            super().run_forever()
        finally:
            if paused:
                gc.enable()

    def set_deadlock_handler(self, handler: Any) -> None:
        """Call ``handler()`` (instead of raising :class:`Deadlock`) when nothing can run."""
        self._vsel.on_deadlock = handler

    def time(self) -> float:
        """Virtual seconds since the loop started."""
        return self._vclock[0]


def run_virtual(coro: Coroutine[Any, Any, T], *, watchdog_s: float = 0.5) -> T:
    """Run ``coro`` to completion on a fresh :class:`VirtualTimeLoop`.

    Called where an event loop already runs in this thread (a Jupyter cell, an async
    program calling the synchronous API, Playwright's synchronous API), the run goes to a
    thread of its own and this call waits for it, instead of failing with asyncio's
    "Cannot run the event loop while another loop is running".
    """
    if asyncio.events._get_running_loop() is not None:
        return _in_a_thread(lambda: run_virtual(coro, watchdog_s=watchdog_s))
    loop = VirtualTimeLoop(watchdog_s)
    try:
        return loop.run_until_complete(coro)
    finally:
        _shutdown(loop)


def run_real(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a fresh ordinary event loop (wall-clock time).

    As :func:`run_virtual`, it runs in a thread of its own where a loop already runs here.
    """
    if asyncio.events._get_running_loop() is not None:
        return _in_a_thread(lambda: run_real(coro))
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        _shutdown(loop)


def outside_running_loop(fn: Callable[[], T]) -> T:
    """``fn()``, in a thread of its own where an event loop already runs in this thread.

    For code that drives an event loop of its own (``run_forever``, ``run_until_complete``)
    from synchronous code that may itself be called inside a running loop (a Jupyter cell).

    Example:
        >>> import asyncio
        >>> async def cell():
        ...     loop = asyncio.new_event_loop()
        ...     try:
        ...         return outside_running_loop(lambda: loop.run_until_complete(asyncio.sleep(0, 7)))
        ...     finally:
        ...         loop.close()
        >>> asyncio.run(cell())
        7
    """
    if asyncio.events._get_running_loop() is not None:
        return _in_a_thread(fn)
    return fn()


def _in_a_thread(fn: Callable[[], T]) -> T:
    """``fn()`` in a new thread (no loop runs there); its result or exception, here."""
    out: list[T] = []
    err: list[BaseException] = []

    def target() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # handed to the caller, whatever it is
            err.append(e)

    worker = threading.Thread(target=target, name="orchestrace-run", daemon=True)
    worker.start()
    worker.join()
    if err:
        raise err[0]
    return out[0]


def _shutdown(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks still pending, let them end, and close ``loop``.

    An interrupt (Ctrl-C, a handler raising for SIGTERM) that arrives during this cleanup
    ends what is left without running it (:func:`_abandon`) and goes on: the tasks left
    pending no longer print "Task was destroyed but it is pending!" or "Event loop is closed"
    when they are collected, after the command has printed its one line.
    """
    pending: list[asyncio.Task[Any]] = []
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    except Exception:
        pass
    except BaseException:
        _abandon(loop, pending)
        raise
    finally:
        loop.close()


def _abandon(loop: asyncio.AbstractEventLoop, cancelled: list[asyncio.Task[Any]]) -> None:
    """End the tasks of ``loop`` without running the loop again, quietly.

    ``cancelled`` are the tasks the cleanup was ending; with those the loop still has pending,
    each pending task's coroutine is closed while the loop is still open (its ``finally`` and
    ``except`` clauses run and may schedule callbacks, which never run), and a finished
    task's exception counts as read.
    """
    for task in {*cancelled, *asyncio.all_tasks(loop)}:
        if task.done():
            if not task.cancelled():
                task.exception()  # read: no "exception was never retrieved"
            continue
        task._log_destroy_pending = False  # type: ignore[attr-defined]  # asyncio's own flag
        with contextlib.suppress(BaseException):
            task.get_coro().close()


def wall() -> float:
    """Monotonic wall-clock seconds."""
    return time.perf_counter()
