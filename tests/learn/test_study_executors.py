"""The learned-stopping study on every executor: the same results (timings aside)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

pytest.importorskip("torch")

from orchestrace.executors import make_executor, shutdown_ray
from orchestrace.learn.stopping import StudyConfig, run_study

TINY = StudyConfig(
    budget=32,
    train_seeds=2,
    train_episodes=64,
    weights=(0.1,),
    eval_seeds=1,
    episodes=8,
    live_episodes=2,
    samples=20,
)


def _stable(study: dict[str, Any]) -> str:
    """The study without wall-clock and CPU timings."""

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if not k.endswith(("_s", "cpu_s"))}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return json.dumps(strip(study), sort_keys=True, default=repr)


@pytest.mark.slow
def test_study_is_the_same_on_every_executor() -> None:
    local = _stable(run_study(["multihop"], config=TINY, executor=make_executor("local")))
    process = _stable(run_study(["multihop"], config=TINY, executor=make_executor("process", 2)))
    assert local == process
    try:
        import ray  # noqa: F401
    except ImportError:
        if os.environ.get("ORCHESTRACE_REQUIRE_RAY") == "1":
            raise
        return
    shutdown_ray()
    try:
        on_ray = _stable(run_study(["multihop"], config=TINY, executor=make_executor("ray", 2)))
    finally:
        shutdown_ray()
    assert local == on_ray
