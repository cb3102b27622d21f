"""A SIGTERM or Ctrl-C sent to the process group of a command with worker processes.

Forked workers inherit the command line's handlers; each must end quietly, and the command
reports the interrupt once, with its exit status, and removes the output it had started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from process_group import live_group

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="reads /proc for the group's processes"),
]


COMMANDS = {
    "train workers": (
        [
            "train",
            "--task",
            "arith",
            "--steps",
            "100000000",
            "--batch",
            "64",
            "--num-workers",
            "2",
            "--no-progress",
        ],
        3,
    ),
    "security jobs": (["bench", "--suite", "security-v1", "--jobs", "2", "--no-progress"], 3),
    "process executor": (
        ["bench", "--suite", "sim-v2", "--executor", "process", "--workers", "2", "--no-progress"],
        5,
    ),
}


#: Starts ``orchestrace ARGV[2:]`` with SIGINT's disposition ARGV[1] (``default`` or
#: ``ignore``), whatever the test process has: a suite run in the background (``&``) has it
#: ignored, as does a command started so.
_START = (
    "import os, signal, sys; "
    "signal.signal(signal.SIGINT, signal.SIG_IGN if sys.argv[1] == 'ignore' else signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'orchestrace', *sys.argv[2:]])"
)


def _start(argv: list[str], sigint: str = "default") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _START, sigint, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for(proc: subprocess.Popen[str], ready: int) -> None:
    deadline = time.monotonic() + 60
    while len(live_group(proc.pid)) < ready and proc.poll() is None:
        assert time.monotonic() < deadline, "the workers did not start within 60 s"
        time.sleep(0.05)


def _interrupt(
    argv: list[str], sig: int, ready: int, settle: float
) -> tuple[str, str, int, list[int]]:
    """Start ``orchestrace ARGV`` in a session of its own; once its group holds ``ready``
    processes and ``settle`` seconds more have passed, send ``sig`` to the group.

    Returns stdout, stderr, the exit status, and the processes of the group still alive 10 s
    after the command ended.
    """
    proc = _start(argv)
    try:
        _wait_for(proc, ready)
        time.sleep(settle)
        assert proc.poll() is None, proc.communicate()
        os.killpg(proc.pid, sig)
        out, err = proc.communicate(timeout=60)
        deadline = time.monotonic() + 10
        while live_group(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = live_group(proc.pid)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return out, err, proc.returncode, left


@pytest.mark.parametrize(
    ("command", "sig", "code", "line"),
    [
        ("train workers", signal.SIGTERM, 143, "terminated"),
        ("security jobs", signal.SIGINT, 130, "interrupted"),
        ("process executor", signal.SIGTERM, 143, "terminated"),
        ("process executor", signal.SIGINT, 130, "interrupted"),
    ],
)
def test_a_signal_to_the_group_ends_every_worker_quietly(tmp_path, command, sig, code, line):
    if command == "train workers":
        pytest.importorskip("torch")
    argv, ready = COMMANDS[command]
    out = tmp_path / "out"
    _, err, returncode, left = _interrupt([*argv, "-o", str(out)], sig, ready, settle=0.3)
    assert "Traceback" not in err, err[-3000:]
    assert err.strip() == line, err[-3000:]  # one line, from the command, not the workers
    assert returncode == code
    assert not out.exists()
    assert left == []  # no worker is left behind


@pytest.mark.parametrize(
    ("sig", "code", "line"),
    [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")],
)
def test_a_signal_during_snapshot_forks_ends_the_command_with_one_line(tmp_path, sig, code, line):
    """Credit on the local executor forks copies of a run from inside an agent's task: the
    signal arrives while asyncio runs that task, and must still end the command."""
    from orchestrace.cli import main

    trace = tmp_path / "swarm.jsonl"
    argv = ["run", "swarm", "-k", "250", "--task-size", "2500", "--seed", "3", "--no-progress"]
    assert main([*argv, "-o", str(trace)]) == 0
    credit = ["credit", str(trace), "--method", "counterfactual", "--unit", "message"]
    # once a copy of the run is alive (the group holds two processes): copies being made
    out, err, returncode, _ = _interrupt([*credit, "--samples", "8"], sig, 2, settle=0.3)
    assert err.strip() == line, err[-3000:]
    assert returncode == code
    assert out == ""  # no table: the command did not carry on


def test_a_command_started_ignoring_sigint_keeps_ignoring_it_in_its_workers(tmp_path):
    """``nohup`` or a background job: Ctrl-C is ignored by the command and by its workers,
    which then end with the command on SIGTERM."""
    argv, ready = COMMANDS["security jobs"]
    out = tmp_path / "out"
    proc = _start([*argv, "-o", str(out)], sigint="ignore")
    try:
        _wait_for(proc, ready)
        workers = live_group(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()
        assert sorted(live_group(proc.pid)) == sorted(workers)  # no worker ended either
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert err.strip() == "terminated", err[-3000:]
    assert proc.returncode == 143
    assert not out.exists()


def test_a_security_worker_that_dies_is_reported_in_one_line(tmp_path):
    argv, ready = COMMANDS["security jobs"]
    out = tmp_path / "out"
    proc = _start([*argv, "-o", str(out)])
    try:
        _wait_for(proc, ready)
        worker = max(pid for pid in live_group(proc.pid) if pid != proc.pid)
        os.kill(worker, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert err.strip() == (
        "error: a security-suite worker process died (out of memory or killed); "
        "rerun with fewer --jobs, or --jobs 1"
    ), err[-3000:]
    assert proc.returncode == 1
    assert not out.exists()
