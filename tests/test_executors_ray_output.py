"""On Ray, stdout holds only the command's output: Ray's messages about dead workers go to stderr."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrace.cli import main

pytest.importorskip("ray")

HOOKS = """
import os
from orchestrace.credit import _forks

REAL = _forks.fork_job


def dies_on_debater2(ctx, job):
    ivs, k = job
    if k == 1 and "debater2" in repr(ivs):
        os._exit(3)
    return REAL(ctx, job)
"""

DRIVER = """
import sys
import hooks
from orchestrace.credit import _forks
from orchestrace.cli import main

_forks.fork_job = hooks.dies_on_debater2
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_credit_json_on_ray_with_a_dead_worker_keeps_stdout_json(
    tmp_path: Path, shared_ray: str | None
) -> None:
    """The command joins the test process's Ray instance (``--ray-address``), as a command
    joins a running cluster; starting one of its own would print the same way but cost a
    second cluster's start-up."""
    import ray

    from orchestrace.executors import make_executor

    assert shared_ray is not None
    make_executor("ray", 2)  # the instance this process runs now (a test may have moved it)
    address = str(ray.get_runtime_context().gcs_address)
    trace = tmp_path / "debate.jsonl"
    assert main(["run", "debate", "-k", "3", "-o", str(trace)]) == 0
    (tmp_path / "hooks.py").write_text(textwrap.dedent(HOOKS))
    (tmp_path / "driver.py").write_text(textwrap.dedent(DRIVER))
    args = [sys.executable, str(tmp_path / "driver.py"), "credit", str(trace), "--method"]
    args += ["loo", "--unit", "agent", "--samples", "2", "--json", "--executor", "ray"]
    done = subprocess.run(
        [*args, "--workers", "2", "--ray-address", address],
        check=False,
        env={**os.environ, "RAY_AUTH_MODE": "token"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr  # the dead worker's job is a failed row
    rows = [json.loads(line) for line in done.stdout.splitlines()]  # every line is JSON
    assert rows and all(isinstance(r, dict) for r in rows)
    assert "debater2" in done.stderr and "worker died" in done.stderr
