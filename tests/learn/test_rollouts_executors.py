"""Batch rollouts on every executor: the same episodes, in seed order."""

from __future__ import annotations

import os

import pytest

from orchestrace.errors import ConfigError
from orchestrace.executors import make_executor, shutdown_ray
from orchestrace.learn.env import make_env, rollouts
from orchestrace.learn.policies.heuristic import FixedN, KAgree
from orchestrace.trace.model import Trace

OPTS = {"task": "arith"}


def test_rollouts_match_stepping_the_env_by_hand() -> None:
    policy = KAgree(k=2)
    out = rollouts(policy, [3, 4], "stop-v0", env_options=OPTS, traces=True)
    for r in out:
        env = make_env("stop-v0", **OPTS)
        obs, info = env.reset(seed=r["seed"])
        policy.reset()
        total, steps = 0.0, 0
        while True:
            obs, reward, term, trunc, info = env.step(policy.act(obs, info, env))
            total, steps = total + reward, steps + 1
            if term or trunc:
                break
        assert (r["return"], r["steps"], r["info"]["answers"]) == (total, steps, info["answers"])
        assert isinstance(r["trace"], Trace) and r["trace"].task_id == env.trace.task_id
        assert len(r["trace"].events) == len(env.trace.events)
        env.close()


@pytest.mark.slow
def test_rollouts_are_the_same_on_every_executor() -> None:
    seeds = list(range(10))
    local = rollouts(FixedN(n=3), seeds, "stop-v0", env_options=OPTS)
    assert [r["seed"] for r in local] == seeds
    process = rollouts(
        FixedN(n=3), seeds, "stop-v0", env_options=OPTS, executor=make_executor("process", 2)
    )
    assert process == local
    try:
        import ray  # noqa: F401
    except ImportError:
        if os.environ.get("ORCHESTRACE_REQUIRE_RAY") == "1":
            raise
        return
    shutdown_ray()
    try:
        on_ray = rollouts(
            FixedN(n=3), seeds, "stop-v0", env_options=OPTS, executor=make_executor("ray", 2)
        )
    finally:
        shutdown_ray()
    assert on_ray == local


def test_bad_env_options_are_refused_before_any_episode() -> None:
    with pytest.raises(ConfigError, match="max_rounds and max_workers must be >= 1"):
        rollouts(FixedN(n=1), [0], "stop-v0", env_options={"max_rounds": 0})
