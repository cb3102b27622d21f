import asyncio
import time

import pytest

from orchestrace.runtime.clock import Deadlock, VirtualTimeLoop, run_virtual


def test_virtual_time_jumps():
    async def main():
        loop = asyncio.get_running_loop()
        t = [loop.time()]
        await asyncio.sleep(1000)
        t.append(loop.time())
        await asyncio.gather(asyncio.sleep(5), asyncio.sleep(7))
        t.append(loop.time())
        return t

    start = time.perf_counter()
    assert run_virtual(main()) == [0.0, 1000.0, 1007.0]
    assert time.perf_counter() - start < 0.5


def test_wait_for_timeouts_are_virtual():
    async def main():
        try:
            await asyncio.wait_for(asyncio.Event().wait(), 3600)
        except TimeoutError:
            return asyncio.get_running_loop().time()

    assert run_virtual(main()) == 3600.0


def test_deadlock_raises_quickly_without_handler():
    async def main():
        await asyncio.Event().wait()

    t0 = time.perf_counter()
    with pytest.raises(Deadlock, match="deadlocked"):
        run_virtual(main(), watchdog_s=0.05)
    assert time.perf_counter() - t0 < 2


def test_deadlock_handler_lets_the_loop_clean_up():
    loop = VirtualTimeLoop(watchdog_s=0.05)
    stop = loop.create_future()
    loop.set_deadlock_handler(lambda: stop.done() or stop.set_result("deadlock"))

    async def main():
        waiter = asyncio.ensure_future(asyncio.Event().wait())
        _done, _ = await asyncio.wait({waiter, stop}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        return stop.result()

    try:
        assert loop.run_until_complete(main()) == "deadlock"
    finally:
        loop.close()


# ---------------------------------------------------------------- real I/O on virtual time
# The loop polls real files on every iteration only when it has some besides its own wake-up
# socket, or signal handlers; otherwise it checks its ready queue for what other threads
# handed it. Each test fails if that rule misses the case it covers.


def test_a_thread_wakes_a_loop_with_nothing_else_to_do():
    async def main():
        loop = asyncio.get_running_loop()
        got = await loop.run_in_executor(None, lambda: time.sleep(0.05) or "done")
        return got, loop.time()

    assert run_virtual(main(), watchdog_s=5) == ("done", 0.0)


def test_a_callback_handed_over_by_a_thread_runs_before_time_moves():
    loop = VirtualTimeLoop()
    try:
        handle = asyncio.Handle(lambda: None, (), loop)
        loop._ready.append(handle)  # what call_soon_threadsafe does, from another thread
        loop._vsel.next_timer = lambda: 100.0
        assert loop._vsel.select(100.0) == []
        assert loop.time() == 0.0  # the callback runs first, at the time it arrived
        loop._ready.clear()
        assert loop._vsel.select(100.0) == []
        assert loop.time() == 100.0
    finally:
        loop.close()


def test_a_signal_handler_runs_while_timers_keep_the_loop_busy():
    import os
    import signal

    async def main():
        loop = asyncio.get_running_loop()
        seen = []
        loop.add_signal_handler(signal.SIGUSR1, lambda: seen.append(loop.time()))
        try:
            os.kill(os.getpid(), signal.SIGUSR1)
            for _ in range(5):
                await asyncio.sleep(1)
        finally:
            loop.remove_signal_handler(signal.SIGUSR1)
        return seen

    assert run_virtual(main()) == [0.0]


def test_a_readable_file_is_read_before_time_moves():
    import os

    async def main():
        loop = asyncio.get_running_loop()
        r, w = os.pipe()
        seen = []
        loop.add_reader(r, lambda: seen.append((os.read(r, 10), loop.time())))
        try:
            os.write(w, b"x")
            for _ in range(5):
                await asyncio.sleep(1)
        finally:
            loop.remove_reader(r)
            os.close(r)
            os.close(w)
        return seen

    assert run_virtual(main()) == [(b"x", 0.0)]


def test_a_full_wake_up_socket_loses_no_callback_and_deadlocks_are_still_found():
    async def main():
        loop = asyncio.get_running_loop()
        seen = []
        for i in range(300_000):  # more bytes than the socket holds: later writes fail
            loop.call_soon_threadsafe(seen.append, i)
        await asyncio.sleep(1)
        assert seen == list(range(300_000))
        await asyncio.Event().wait()

    with pytest.raises(Deadlock, match="deadlocked"):
        run_virtual(main(), watchdog_s=0.05)


def test_a_signal_handler_set_after_many_thread_hand_overs_still_runs():
    """Each callback a thread hands over writes a byte to the wake-up socket; with a timer
    pending the whole time, those bytes are still drained, so the socket has room for the
    signal number of a handler set afterwards."""
    import threading

    async def ticker():
        while True:
            await asyncio.sleep(60)

    async def main():
        loop = asyncio.get_running_loop()
        tick = asyncio.ensure_future(ticker())
        done = loop.create_future()

        def hand_over():  # more bytes than the socket holds (278 here), were they left there
            for _ in range(2000):
                loop.call_soon_threadsafe(int)
            loop.call_soon_threadsafe(done.set_result, None)

        worker = threading.Thread(target=hand_over)
        worker.start()
        await done
        worker.join()
        try:
            return await _sigusr1_heard()
        finally:
            tick.cancel()

    assert run_virtual(main()) == ["handled"]


async def _sigusr1_heard() -> list[str]:
    """Set a SIGUSR1 handler on the running loop, send SIGUSR1 to this process, wait a
    virtual second and remove the handler; what the handler noted."""
    import os
    import signal

    loop = asyncio.get_running_loop()
    seen: list[str] = []
    loop.add_signal_handler(signal.SIGUSR1, lambda: seen.append("handled"))
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.sleep(1)
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)
    return seen


def test_wake_ups_are_read_before_what_their_callbacks_scheduled_runs():
    """The wake-up bytes of callbacks that already ran are read before the code those
    callbacks resumed runs: a handler it sets hears its signal although the socket was full.

    Without threads: the bytes are written from the loop itself, as a thread's hand-overs
    would, and the coroutine resumes (``sleep(0)``) in the iteration whose poll finds them.
    """

    async def main():
        loop = asyncio.get_running_loop()
        for _ in range(2000):  # more than the socket holds (278 writes here)
            loop._write_to_self()
        await asyncio.sleep(0)
        return await _sigusr1_heard()

    assert run_virtual(main()) == ["handled"]


def test_an_interrupt_during_the_final_cleanup_leaves_no_noise_behind(tmp_path):
    """A Ctrl-C that lands while the run's pending tasks are being cancelled still ends the
    program with only what it prints itself: no "Task was destroyed but it is pending!",
    "exception was never retrieved" or "Event loop is closed" when the tasks are collected."""
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "interrupted.py"
    script.write_text(
        textwrap.dedent(
            """
            import asyncio, gc
            from orchestrace.runtime.clock import run_virtual

            async def main():
                q = asyncio.Queue()

                async def waiter():
                    await asyncio.wait_for(q.get(), 1e9)

                async def interrupted():  # the signal arrives while it is being cancelled
                    try:
                        await asyncio.sleep(1e9)
                    except asyncio.CancelledError:
                        raise KeyboardInterrupt from None

                keep = [asyncio.ensure_future(interrupted())]
                keep += [asyncio.ensure_future(waiter()) for _ in range(3)]
                await asyncio.sleep(1)
                raise RuntimeError("the run ends with tasks pending")

            try:
                run_virtual(main())
            except KeyboardInterrupt:
                print("interrupted")
            gc.collect()
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "interrupted\n", "")


def test_a_signal_that_came_before_its_handler_was_removed_is_not_kept_for_the_next():
    """A signal whose handler is removed before the loop reads its number is dropped, as with
    no handler; a handler set later does not hear it."""
    import os
    import signal

    async def main():
        loop = asyncio.get_running_loop()
        seen = []
        loop.add_signal_handler(signal.SIGUSR1, lambda: seen.append("first"))
        os.kill(os.getpid(), signal.SIGUSR1)  # its number waits on the wake-up socket
        loop.remove_signal_handler(signal.SIGUSR1)
        await asyncio.sleep(10)
        await asyncio.sleep(10)
        loop.add_signal_handler(signal.SIGUSR1, lambda: seen.append("second"))
        try:
            await asyncio.sleep(5)
        finally:
            loop.remove_signal_handler(signal.SIGUSR1)
        return seen

    assert run_virtual(main()) == []
