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
