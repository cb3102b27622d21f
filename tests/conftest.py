"""Shared fixtures: reference files from ../shared (skipped when absent), small traces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrace import Trace, TraceBuilder, generate_trace

ROOT = Path(__file__).resolve().parents[1]


def reference_dir() -> Path | None:
    env = os.environ.get("ORCHESTRACE_REFERENCE")
    candidates = [Path(env)] if env else []
    candidates += [ROOT.parent / "shared" / "reference", ROOT / ".." / "shared" / "reference"]
    for c in candidates:
        if (c / "trace_schema.json").exists():
            return c.resolve()
    return None


@pytest.fixture
def reference() -> Path:
    ref = reference_dir()
    if ref is None:
        pytest.skip("shared reference files (trace_schema.json, example_trace.json) not present")
    return ref


@pytest.fixture
def small_trace() -> Trace:
    b = TraceBuilder(task_id="demo", topology="centralized")
    plan = b.llm("lead", dur=1.0, step=0, tokens_in=100, tokens_out=20)
    spawns = [b.spawn("lead", f"w{i}", role="worker", after=[plan], step=1) for i in range(3)]
    rets = []
    for i, s in enumerate(spawns):
        _c, r = b.tool(f"w{i}", "search", after=[s], dur=float(i + 1))
        rets.append(b.ret(f"w{i}", "lead", after=[r], content=str(i)))
    b.aggregate("lead", rets, dur=0.5, step=2, content="0,1,2")
    b.stop("lead", "done", step=3)
    return b.build(rewards={"team": 1.0})


@pytest.fixture
def medium_trace() -> Trace:
    return generate_trace(agents=40, steps=600, depth=2, seed=7)
