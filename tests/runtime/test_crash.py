"""Crash-safe recording: kill -9 mid-run leaves a loadable, truncated trace."""

import os
import signal
import subprocess
import sys
import time

from orchestrace import load
from orchestrace.cli import main
from orchestrace.io import iter_jsonl

SCRIPT = """
import sys
from orchestrace.runtime import run
from orchestrace.testing import MockModel
run("swarm", "arith", agents=40, task_size=80, output=sys.argv[1],
    backend=MockModel(["ANSWER: 1"], latency=0.02, virtual=False))
"""


def test_kill_9_mid_run_keeps_every_complete_event(tmp_path, capsys):
    out = tmp_path / "run.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(out)])
    deadline = time.time() + 60
    while time.time() < deadline:
        if out.exists() and out.read_bytes().count(b"\n") > 40:
            break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    data = out.read_bytes()
    assert b'"footer"' not in data
    complete = data[: data.rfind(b"\n") + 1].count(b'{"event"')
    trace = load(out, check=False)
    assert trace.meta["partial"] is True
    assert trace.n_events >= complete >= 20
    assert main(["validate", str(out)]) == 1
    assert "trace is truncated" in capsys.readouterr().out
    assert main(["validate", "--partial", str(out)]) == 0
    report = capsys.readouterr().out
    assert "warning: trace is truncated" in report and "ok with" in report
    (item,) = list(iter_jsonl(out, partial=True))
    assert [p for p in item.problems if p.severity == "error"] == []
