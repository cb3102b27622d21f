"""Held-out evaluation in batches scores exactly what playing the episodes one by one scores."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrace.learn import evaluate as ev
from orchestrace.learn.policies import FixedN, KAgree


def _seeds(seeds: int, episodes: int) -> list[int]:
    return [ev.HELD_OUT + s * 1_000_003 + i for s in range(seeds) for i in range(episodes)]


@pytest.mark.parametrize(
    ("policy", "task"),
    [(KAgree(k=2), "arith-mapreduce-v0"), (FixedN(n=2), "multihop"), (KAgree(k=3), "multihop")],
)
def test_batched_heuristics_equal_one_by_one(policy: Any, task: str) -> None:
    seeds = _seeds(2, 40)  # more episodes than one batch: environments start again
    batched = ev._batched(policy, "stop-v0", task, {}, seeds)
    assert batched is not None
    assert batched == ev._one_by_one(policy, "stop-v0", task, {}, seeds)


def test_evaluate_per_seed_scores_equal_one_by_one() -> None:
    got = ev.evaluate(KAgree(k=2), seeds=2, episodes=40)
    alone = ev._one_by_one(KAgree(k=2), "stop-v0", "arith-mapreduce-v0", {}, _seeds(2, 40))
    for s in range(2):
        mine = alone[s * 40 : (s + 1) * 40]
        assert got.per_seed["reward"][s] == sum(x[0] for x in mine) / 40
        assert got.per_seed["success"][s] == sum(x[1] for x in mine) / 40


def test_greedy_network_batched_equals_one_by_one() -> None:
    pytest.importorskip("torch")
    from orchestrace.learn.env import make_env
    from orchestrace.learn.policies.torch_policy import MLPPolicy

    env = make_env("stop-v0", task="arith-mapreduce-v0")
    policy = MLPPolicy.for_env(env, hidden=16, seed=3)
    env.close()
    seeds = _seeds(1, 48)
    batched = ev._batched(policy, "stop-v0", "arith-mapreduce-v0", {}, seeds)
    assert batched is not None
    assert batched == ev._one_by_one(policy, "stop-v0", "arith-mapreduce-v0", {}, seeds)
    policy.greedy = False  # sampling draws from one stream in episode order: played one by one
    assert ev._batched(policy, "stop-v0", "arith-mapreduce-v0", {}, seeds) is None


class _Counting:
    """A policy without reset(): it may carry state between episodes."""

    def __init__(self) -> None:
        self.inner = FixedN(n=1)

    def act(self, obs: Any, info: dict[str, Any], env: Any) -> Any:
        return self.inner.act(obs, info, env)


def test_policies_without_reset_and_other_backends_play_one_by_one() -> None:
    assert ev._batched(_Counting(), "stop-v0", "multihop", {}, [1, 2]) is None
    assert ev._batched(KAgree(k=2), "stop-v0", "multihop", {"backend": "mock"}, [1]) is None
