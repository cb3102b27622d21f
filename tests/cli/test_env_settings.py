"""``ORCHESTRACE_*`` settings with bad values: one line from the command that reads them.

They were read with ``float()`` when the package was imported: a bad value was a traceback
from every command, ``nan`` made a FIFO wait for ever, ``inf`` an "unexpected" error.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from orchestrace.cli import main
from orchestrace.io import dump
from orchestrace.trace.generate import generate_trace

BAD = ["abc", "", "nan", "inf", "-1", "0", "1e400"]


@pytest.mark.parametrize("value", BAD)
def test_max_json_mb(tmp_path, capsys, monkeypatch, value):
    path = tmp_path / "t.json"
    dump(generate_trace(agents=3, steps=30, seed=0), path)
    monkeypatch.setenv("ORCHESTRACE_MAX_JSON_MB", value)
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ORCHESTRACE_MAX_JSON_MB" in err and "unexpected" not in err
    assert "the limit follows the available memory" in err


@pytest.mark.parametrize("name", ["ORCHESTRACE_PIPE_IDLE_S", "ORCHESTRACE_FIFO_WRITER_S"])
@pytest.mark.parametrize("value", ["abc", "nan", "-1"])
def test_stream_waits(tmp_path, name, value):
    env = {**os.environ, name: value}
    cmd = [sys.executable, "-m", "orchestrace"]
    # a command that reads no stream is not affected
    assert (
        subprocess.run(
            [*cmd, "schema"], check=False, env=env, capture_output=True, timeout=60
        ).returncode
        == 0
    )
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    source = str(fifo) if name == "ORCHESTRACE_FIFO_WRITER_S" else "-"
    done = subprocess.run(
        [*cmd, "validate", source],
        check=False,
        env=env,
        input=b"{}",
        capture_output=True,
        timeout=60,  # nan made the FIFO wait for ever
    )
    err = done.stderr.decode()
    assert done.returncode == 1 and err.count("\n") == 1, err
    assert f"{name}={value!r} is not a number of seconds > 0" in err
