"""Lint and type checks run as part of the suite (skipped when the tools are absent)."""

import shutil
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.mark.slow
@pytest.mark.parametrize(
    "cmd",
    [
        [sys.executable, "-m", "ruff", "check", "src", "tests", "benchmarks", "examples"],
        [sys.executable, "-m", "ruff", "format", "--check", "src", "tests"],
        [sys.executable, "-m", "mypy"],
    ],
    ids=["ruff", "ruff-format", "mypy"],
)
def test_tool_passes(cmd):
    tool = cmd[2]
    if (
        shutil.which(tool) is None
        and subprocess.run(
            [sys.executable, "-m", tool, "--version"], capture_output=True, check=False
        ).returncode
    ):
        pytest.skip(f"{tool} not installed")
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
