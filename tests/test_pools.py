"""The process pools' start method: a forkserver that loads, once, what its workers need."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    "forkserver" not in multiprocessing.get_all_start_methods(), reason="needs a forkserver"
)

PROBE = """
import json, sys
{imports}
from multiprocessing import forkserver
from orchestrace import _pools
from orchestrace._pools import mp_context, stop_pool
from concurrent.futures import ProcessPoolExecutor

def loaded(names):
    return [n for n in names if n in sys.modules]

if __name__ == "__main__":
    _pools._HEAVY = ("wave", "torch")  # a light module stands for a heavy one
    ctx = mp_context()
    pool = ProcessPoolExecutor(1, mp_context=ctx)
    try:
        seen = pool.submit(loaded, ["wave", "torch", "orchestrace.executors"]).result()
    finally:
        stop_pool(pool, wait=True)
    print(json.dumps({{"preload": forkserver._forkserver._preload_modules, "worker": seen}}))
"""


def _probe(tmp_path, imports: str) -> dict:
    script = tmp_path / "probe.py"
    script.write_text(PROBE.format(imports=imports))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_server_loads_the_heavy_libraries_this_process_holds(tmp_path) -> None:
    got = _probe(tmp_path, "import wave")
    assert got["preload"][:2] == ["__main__", "orchestrace.executors"]
    assert "wave" in got["preload"] and "torch" not in got["preload"]
    # a worker starts with what the server loaded, before its job imports anything
    assert "wave" in got["worker"] and "orchestrace.executors" in got["worker"]


def test_a_library_this_process_does_not_hold_is_not_loaded(tmp_path) -> None:
    got = _probe(tmp_path, "")
    assert not {"wave", "torch"} & set(got["preload"])
    assert "wave" not in got["worker"]


def test_the_heavy_libraries_are_the_training_ones() -> None:
    from orchestrace import _pools

    # not pyarrow: its import starts allocator threads, and the server forks every worker
    assert _pools._HEAVY == ("torch", "transformers")


class _Item:
    def __init__(self) -> None:
        from concurrent.futures import Future

        self.future: Future[int] = Future()


def test_the_job_table_can_be_walked_while_a_job_is_added() -> None:
    """What Python 3.11's pool thread does when a worker dies, with a submit in between."""
    from concurrent.futures.process import BrokenProcessPool

    from orchestrace._pools import _JobTable

    plain: dict[int, _Item] = {0: _Item(), 1: _Item()}
    with pytest.raises(RuntimeError, match="changed size"):
        for k, _item in plain.items():
            plain[k + 10] = _Item()
    table = _JobTable({0: _Item(), 1: _Item()})
    done = table[0].future
    for k, item in table.items():  # the walk: every job it sees gets the error
        item.future.set_exception(BrokenProcessPool("died"))
        table[k + 10] = _Item()  # a job submitted meanwhile
    late = [table[10].future, table[11].future]
    table.clear()  # as the thread empties it: the jobs added meanwhile get the error too
    assert not table and done.exception() is not None
    assert all(isinstance(f.exception(), BrokenProcessPool) for f in late)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 takes the lock itself")
def test_a_guarded_pool_fails_every_job_when_a_worker_dies() -> None:
    import os
    import signal
    import time
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from orchestrace._pools import _JobTable, guard_breakage, mp_context, stop_pool

    pool = guard_breakage(ProcessPoolExecutor(2, mp_context=mp_context()))
    assert type(pool._pending_work_items) is _JobTable
    assert pool._call_queue.pending_work_items is pool._pending_work_items
    try:
        futures = [pool.submit(time.sleep, 0.05) for _ in range(200)]
        futures[0].result()
        os.kill(next(iter(pool._processes)), signal.SIGKILL)
        outcomes = []
        for f in futures[1:]:  # none is left waiting (a TimeoutError fails the test)
            try:
                f.result(timeout=60)
                outcomes.append("ran")  # finished before the worker died
            except BrokenProcessPool:
                outcomes.append("broken")
        assert outcomes[-1] == "broken"
    finally:
        stop_pool(pool)
