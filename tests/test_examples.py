"""Every example runs."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
#: Examples that take more than a few seconds (they train).
SLOW = {"train_and_export.py"}
#: Examples with a ``--quick`` smoke mode (smaller budgets, every step still runs).
QUICK = {"train_and_export.py"}


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=[pytest.mark.slow] if p.name in SLOW else []) for p in EXAMPLES],
    ids=[p.name for p in EXAMPLES],
)
def test_example_runs(path, tmp_path):
    r = subprocess.run(
        [sys.executable, str(path), str(tmp_path), *(["--quick"] if path.name in QUICK else [])],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
