"""An environment left open at interpreter exit prints nothing (no asyncio noise)."""

from __future__ import annotations

import subprocess
import sys

SNIPPET = """
from orchestrace.learn.env import make_env
env = make_env("orchestrate-v0", task="arith")
env.reset(seed=0)
env.step(env.action_space.sample())
"""


def test_unclosed_env_exits_quietly():
    r = subprocess.run(
        [sys.executable, "-c", SNIPPET], capture_output=True, text=True, timeout=120, check=False
    )
    assert r.returncode == 0
    assert r.stderr == ""
