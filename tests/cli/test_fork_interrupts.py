"""An interrupt that comes while a command forks is raised after the fork, never lost.

Python drops an exception raised inside a fork hook ("Exception ignored") and a signal's
handler runs wherever the main thread is, so an interrupt that came during a fork used to be
lost in some library's hook while the command carried on. Each case runs a real command
(the security suite on two worker processes, which forks them) in a fresh interpreter, with a
fork hook that sends the signal during the second fork; the variants add what made it worse:
a Python hook registered after the command's own (as ``filelock`` does once ``transformers``
is imported) and a second thread the signal can be delivered to.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import pytest

from process_group import live_group

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="os.fork and its hooks")

SCRIPT = """
import os, signal, sys, threading, time
from orchestrace.cli import main

sig, variant, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
forks = []

def send():
    forks.append(1)
    if len(forks) == 2:  # the second worker
        os.kill(os.getpid(), sig)

os.register_at_fork(before=send)  # first registered: runs after the command's own
if variant == "late-hook-and-thread":
    assert main(["schema"]) == 0  # the command line's fork hooks are registered now
    os.register_at_fork(after_in_parent=lambda: None)  # a later library's Python hook
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
if sys.argv[4] == "train":  # a process pool of the trainer's, forked from a torch process
    argv = ["train", "--task", "arith", "--steps", "3", "--batch", "64", "--num-workers", "2"]
else:
    argv = ["bench", "--suite", "security-smoke-v1", "--jobs", "2"]
sys.exit(main([*argv, "--no-progress", "-o", out]))
"""


@pytest.mark.parametrize(
    ("command", "variant", "sig", "code", "line"),
    [
        ("bench", "plain", signal.SIGINT, 130, "interrupted"),
        ("bench", "plain", signal.SIGTERM, 143, "terminated"),
        ("bench", "late-hook-and-thread", signal.SIGINT, 130, "interrupted"),
        ("bench", "late-hook-and-thread", signal.SIGTERM, 143, "terminated"),
        ("train", "plain", signal.SIGINT, 130, "interrupted"),
    ],
)
def test_an_interrupt_during_a_fork_ends_the_command(tmp_path, command, variant, sig, code, line):
    """The signal goes to the command alone (as ``kill PID`` sends it), not to its workers:
    the command ends the copy whose fork it interrupted, which nothing else knows of, and the
    worker the pool had started before it (the pool never started the thread that stops its
    workers)."""
    if command == "train":
        pytest.importorskip("torch")
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(int(sig)), variant, str(out), command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=120)
        left = live_group(proc.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    tail = err.strip().splitlines()
    assert "Exception ignored" not in err, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert tail and tail[-1] == line, err[-3000:]
    assert proc.returncode == code
    assert left == []  # no worker left behind
    assert not out.exists()
