"""A run whose loop stops before it ends can be discarded without an error.

``Runtime.run`` awaited its agents while handling the ``GeneratorExit`` of a discarded
coroutine, which Python reports as "coroutine ignored GeneratorExit" (an unraisable error
printed when the garbage collector closes it).
"""

from __future__ import annotations

import asyncio

from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.core import Runtime
from orchestrace.tasks import make_task


async def _worker(ctx, part):
    r = await ctx.generate("solve", ctx.payload(part))
    return r.answer


async def _lead(ctx):
    kids = [await ctx.spawn("worker", _worker, part=p) for p in ctx.task.subtasks(2)]
    return await ctx.aggregate(await ctx.wait(kids), "combine")


def test_a_run_discarded_from_a_stopped_loop_closes_quietly():
    rt = Runtime(task=make_task("arith", seed=0, size=8), backend=SimBackend(seed=1))
    loop = asyncio.new_event_loop()
    try:
        coro = rt.run(_lead)
        task = loop.create_task(coro)
        loop.call_soon(loop.stop)
        loop.run_forever()  # the run starts and waits for its agents; then the loop stops
        assert coro.cr_frame is not None  # suspended, not finished
        coro.close()  # as the garbage collector does: RuntimeError before the fix
        assert coro.cr_frame is None and not task.done()  # the task never resumes it
    finally:
        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()
