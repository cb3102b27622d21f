"""The process pools the package starts: how their workers start, and how a pool is stopped.

Part of the ``executors`` layer. The process executor, the training collectors' worker pool
and the security suite's pool share these, so that every pool ends its workers the same way,
including the workers a pool's own thread cannot stop (see :func:`stop_pool`).

Example:
    >>> from concurrent.futures import ProcessPoolExecutor
    >>> pool = ProcessPoolExecutor(1, mp_context=mp_context())
    >>> pool.submit(abs, -3).result()
    3
    >>> stop_pool(pool, wait=True)
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
from concurrent.futures import InvalidStateError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

__all__ = ["guard_breakage", "mp_context", "stop_pool"]

#: What a forkserver imports once for all the workers it forks.
_PRELOAD = "orchestrace.executors"
#: Heavy libraries a worker's jobs import when this process has (training jobs import torch
#: and transformers): the server imports those this process holds, once, instead of each
#: worker importing them again (about 1.5 s of CPU per worker for the two). Not pyarrow: its
#: import starts allocator threads, and the server forks every worker.
_HEAVY = ("torch", "transformers")


def mp_context() -> Any:
    """``forkserver`` (``spawn`` where that is missing), never ``fork``.

    The server imports the package once, before it forks any worker, so each worker starts
    with it loaded instead of importing it again; so too the heavy libraries of
    :data:`_HEAVY` (torch, transformers) that this process has imported when the server
    starts. These are added to
    what the server is asked to load already (``__main__`` by default; an explicit ``[]``
    stays without it). A server already running keeps what it loaded.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    from multiprocessing import forkserver  # noqa: PLC0415  only where forkserver exists

    server = getattr(forkserver, "_forkserver", None)
    preload = list(getattr(server, "_preload_modules", ["__main__"]))
    wanted = [_PRELOAD, *(name for name in _HEAVY if sys.modules.get(name) is not None)]
    missing = [name for name in wanted if name not in preload]
    if missing:
        ctx.set_forkserver_preload([*preload, *missing])
    return ctx


class _JobTable(dict[int, Any]):
    """A pool's table of queued jobs that its thread may walk while a job is submitted.

    When a worker dies, Python 3.11's pool thread fails every queued job by walking this
    table without the lock ``submit`` holds (3.12 takes it): a job submitted at that moment
    made the walk raise "dictionary changed size during iteration", printed as the thread's
    traceback, and left the jobs after it without their error. Here the walk goes over a
    copy, and a job added meanwhile gets the error when the table is emptied.
    """

    def items(self) -> Any:
        return list(super().items())

    def clear(self) -> None:
        for item in list(self.values()):
            future = item.future
            with contextlib.suppress(InvalidStateError):  # done (or cancelled) meanwhile
                if not future.done():
                    future.set_exception(
                        BrokenProcessPool(
                            "A process in the process pool was terminated abruptly while "
                            "the future was running or pending."
                        )
                    )
        super().clear()


def guard_breakage(pool: ProcessPoolExecutor) -> ProcessPoolExecutor:
    """``pool``, whose thread can fail its queued jobs while a job is being submitted.

    Call it before the first ``submit``. Nothing to do from Python 3.12 on (see
    :class:`_JobTable`).

    Example:
        >>> pool = guard_breakage(ProcessPoolExecutor(1, mp_context=mp_context()))
        >>> pool.submit(abs, -2).result()
        2
        >>> stop_pool(pool, wait=True)
    """
    if sys.version_info >= (3, 12):
        return pool
    table = getattr(pool, "_pending_work_items", None)
    queue = getattr(pool, "_call_queue", None)
    if type(table) is dict and not table and queue is not None:
        pool._pending_work_items = safe = _JobTable()
        queue.pending_work_items = safe
    return pool


def stop_pool(pool: ProcessPoolExecutor, *, wait: bool = False) -> None:
    """Shut ``pool`` down and end every worker it started.

    Queued jobs are cancelled; with ``wait`` the running ones finish first, without it they end
    with their workers. Workers the pool's own thread cannot stop end here too: an interrupt
    while the pool started its workers leaves it without that thread, and a worker it had
    started would wait for work for ever (and the interpreter for that worker at exit).
    """
    procs = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=wait, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=5)
    if manager is not None:
        # the pool's thread closes its wake-up pipe as it ends; Python 3.11 writes to every
        # pool's pipe at exit, and one still ending then prints an "Exception ignored" error
        manager.join(timeout=5)
