"""A JSON document too large to check in memory is refused in one line naming the fix."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from orchestrace.errors import TraceFormatError
from orchestrace.io import dump
from orchestrace.io._json_size import ENV, check_json_size, json_limit
from orchestrace.trace.generate import generate_trace


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "t.json"
    dump(generate_trace(agents=3, steps=200, seed=1), path)
    return path


def test_small_file_passes(trace_file):
    check_json_size(trace_file)
    assert json_limit() > trace_file.stat().st_size


def test_limit_names_size_and_fix(trace_file):
    with pytest.raises(TraceFormatError) as err:
        check_json_size(trace_file, limit=100)
    text = str(err.value)
    assert text.startswith(f"{trace_file}: file: this JSON document")
    assert "Parquet dataset" in text and ENV in text and "\n" not in text


def test_env_sets_limit(monkeypatch):
    monkeypatch.setenv(ENV, "2")
    assert json_limit() == 2 * 1024 * 1024


@pytest.mark.parametrize("command", [["validate"], ["analyze", "--json"]])
def test_commands_refuse_in_one_line(trace_file, command):
    out = subprocess.run(
        [sys.executable, "-m", "orchestrace", *command, str(trace_file)],
        capture_output=True,
        text=True,
        env={**os.environ, ENV: "0.001"},
        check=False,
    )
    assert out.returncode == 1
    lines = (out.stdout + out.stderr).strip().splitlines()
    assert len(lines) == 1 and "too large to check in memory" in lines[0], lines
    assert "Traceback" not in out.stderr
