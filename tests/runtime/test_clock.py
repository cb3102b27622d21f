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
