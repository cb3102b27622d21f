"""Batch rollouts on every executor: the same episodes, in seed order."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from orchestrace.errors import ConfigError
from orchestrace.executors import make_executor
from orchestrace.learn.env import make_env, rollouts
from orchestrace.learn.policies.heuristic import FixedN, KAgree
from orchestrace.trace.model import Trace

OPTS = {"task": "arith"}


@pytest.fixture(scope="module")
def pool() -> Iterator[Any]:
    """Two process workers shared by this module's tests (a worker that dies is replaced)."""
    with make_executor("process", 2) as ex:
        yield ex


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
def test_rollouts_are_the_same_on_every_executor(pool: Any, shared_ray: str | None) -> None:
    seeds = list(range(10))
    local = rollouts(FixedN(n=3), seeds, "stop-v0", env_options=OPTS)
    assert [r["seed"] for r in local] == seeds
    process = rollouts(FixedN(n=3), seeds, "stop-v0", env_options=OPTS, executor=pool)
    assert process == local
    if shared_ray is not None:
        on_ray = rollouts(
            FixedN(n=3), seeds, "stop-v0", env_options=OPTS, executor=make_executor("ray", 2)
        )
        assert on_ray == local


def test_bad_env_options_are_refused_before_any_episode() -> None:
    with pytest.raises(ConfigError, match="max_rounds and max_workers must be >= 1"):
        rollouts(FixedN(n=1), [0], "stop-v0", env_options={"max_rounds": 0})


class BreaksOnSeed(FixedN):
    """Fixed-N, except on the episode of seed ``bad``: it raises there (or, with ``die``, kills
    its worker process: a crash mid-episode)."""

    def __init__(self, n: int, bad: int, die: bool = False) -> None:
        super().__init__(n=n)
        self.bad, self.die, self.parent = bad, die, os.getpid()

    def act(self, obs, info, env):  # type: ignore[no-untyped-def]
        if env.seed == self.bad:
            if self.die and os.getpid() != self.parent:
                os._exit(3)
            raise ValueError(f"policy fails on seed {self.bad}")
        return super().act(obs, info, env)


def _check(results: list, failed: list, good: list, died: bool) -> None:  # type: ignore[type-arg]
    assert [r for r in results if r is not None] == [r for r in good if r["seed"] != 2]
    assert results[2] is None and [f["seed"] for f in failed] == [2]
    if died:
        assert failed[0]["kind"] == "worker-died" and failed[0]["attempts"] >= 2
    else:
        assert failed[0]["error"] == "ValueError: policy fails on seed 2"


def test_a_failed_episode_keeps_the_others_and_is_named() -> None:
    from orchestrace.learn.env import RolloutsFailed

    good = rollouts(FixedN(n=2), range(5), "stop-v0", env_options=OPTS)
    with pytest.raises(RolloutsFailed) as err:
        rollouts(BreaksOnSeed(2, 2), range(5), "stop-v0", env_options=OPTS)
    assert str(err.value) == (
        "1 of 5 episodes failed (seed 2: ValueError: policy fails on seed 2); the other 4 finished"
    )
    _check(err.value.results, err.value.failures, good, died=False)
    recorded = rollouts(
        BreaksOnSeed(2, 2), range(5), "stop-v0", env_options=OPTS, on_error="record"
    )
    assert recorded[2] == {
        "seed": 2,
        "error": "ValueError: policy fails on seed 2",
        "attempts": 1,
        "kind": "raised",
    }


@pytest.mark.slow
def test_failed_and_crashed_episodes_on_process_and_ray(pool: Any, shared_ray: str | None) -> None:
    from orchestrace.learn.env import RolloutsFailed

    good = rollouts(FixedN(n=2), range(5), "stop-v0", env_options=OPTS)
    for ex in [pool] + ([make_executor("ray", 2)] if shared_ray is not None else []):
        for die in (False, True):
            with pytest.raises(RolloutsFailed) as err:
                rollouts(
                    BreaksOnSeed(2, 2, die), range(5), "stop-v0", env_options=OPTS, executor=ex
                )
            _check(err.value.results, err.value.failures, good, died=die)
