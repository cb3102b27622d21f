"""Batched collection: one forward pass for many environments, worker processes, exactness."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from orchestrace import dumps
from orchestrace.errors import ConfigError
from orchestrace.learn import _orchestration_env as oe
from orchestrace.learn.env import make_env

torch = pytest.importorskip("torch")

from orchestrace.learn.algorithms import TrainConfig, make_trainer  # noqa: E402
from orchestrace.learn.algorithms import collect as collect_mod  # noqa: E402
from orchestrace.learn.algorithms.collect import (  # noqa: E402
    WorkerPool,
    collect_batched,
    make_envs,
)
from orchestrace.learn.policies.torch_policy import MLPPolicy  # noqa: E402
from orchestrace.learn.vector import VectorEnv  # noqa: E402


# ---------------------------------------------------------------------- observations
@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 15, 16, 17, 64, 127, 128, 129, 300])
def test_mean_matches_numpy_bit_for_bit(n: int) -> None:
    rnd = random.Random(n)
    for _ in range(200):
        xs = [rnd.random() * rnd.choice([1.0, 1e-3, 1e6]) for _ in range(n)]
        assert oe._mean(xs) == float(np.mean(xs))
    assert oe._mean([0.5] * n) == float(np.mean([0.5] * n))
    assert oe._mean([1, 2, 3][: max(1, n % 3)]) == float(np.mean([1, 2, 3][: max(1, n % 3)]))


def _episodes(env, seeds, rng, *, fresh_loop: bool, abandon: int = 0):
    """Everything the env returns for ``seeds``, the trace as its JSON bytes."""
    out = []
    for k, seed in enumerate(seeds):
        if fresh_loop and env._own_loop is not None:
            env._own_loop.close()  # the next reset must build a new loop
        obs, info = env.reset(seed=seed)
        out.append((obs.tobytes(), sorted(info.items())))
        t = 0
        while True:
            if abandon and k % abandon == 0 and t == 1:
                break  # the next reset abandons this episode mid-way
            space = env.action_space
            act = (
                int(rng.integers(space.n))
                if hasattr(space, "n")
                else np.array([rng.integers(m) for m in space.nvec])
            )
            obs, r, term, trunc, info = env.step(act)
            t += 1
            trace = info.pop("trace", None)
            out.append((obs.tobytes(), r, term, trunc, sorted(info.items())))
            if trace is not None:
                out.append(dumps(trace))
            if term or trunc:
                break
    return out


@pytest.mark.parametrize("env_id", ["stop-v0", "orchestrate-v1"])
def test_a_kept_loop_gives_what_a_fresh_loop_gives(env_id: str) -> None:
    seeds = list(range(10))
    got = []
    for fresh in (False, True):
        env = make_env(env_id, task="arith")
        got.append(_episodes(env, seeds, np.random.default_rng(4), fresh_loop=fresh, abandon=3))
        env.close()
    assert got[0] == got[1]


def test_the_env_keeps_one_loop_across_episodes_and_closes_it() -> None:
    env = make_env("stop-v0", task="arith")
    env.reset(seed=1)
    loop = env._own_loop
    env.step(1)
    env.reset(seed=2)  # finished episode: the same loop, its clock back at 0
    assert env._own_loop is loop and loop is not None
    env.step(0)
    env.reset(seed=3)  # abandoned mid-way: its tasks are cancelled, the loop kept
    assert env._own_loop is loop
    env.close()
    assert loop.is_closed() and env._own_loop is None


# ---------------------------------------------------------------------- batched policy
def test_sample_batch_draws_each_choice_with_its_probability() -> None:
    policy = MLPPolicy(4, [3, 2], hidden=8, seed=0)
    with torch.no_grad():
        for h in policy.net.heads:
            torch.nn.init.normal_(h.weight, std=2.0)
    obs = np.tile(np.array([[0.2, 0.9, 0.4, 0.1]], np.float32), (20000, 1))
    u = np.random.default_rng(0).random((20000, 2))
    acts, logp, values = policy.sample_batch(obs, u)
    dists, _ = policy.distribution(obs[:1])
    for h, d in enumerate(dists):
        probs = d.probs[0].detach().numpy()
        freq = np.bincount(acts[:, h], minlength=len(probs)) / len(acts)
        assert np.abs(freq - probs).max() < 0.015, (freq, probs)
    want = sum(d.log_prob(torch.as_tensor(acts[:5, h])) for h, d in enumerate(dists))
    assert np.allclose(logp[:5], want.detach().numpy(), atol=1e-5)
    greedy, _, _ = policy.sample_batch(obs[:2])
    assert greedy.tolist() == [[int(d.probs.argmax()) for d in dists]] * 2
    assert acts.dtype == np.int64 and values.shape == (20000,)


def test_collect_batched_episodes_do_not_depend_on_the_number_of_environments() -> None:
    policy = MLPPolicy.for_env(make_env("orchestrate-v1", task="arith"), hidden=16, seed=2)
    seeds, keys = [11, 12, 13, 14, 15, 16, 17], [0, 1, 2, 3, 4, 5, 6]
    runs = []
    for n, shared in ((1, False), (3, False), (1, True), (3, True), (8, True)):
        kw = {"task": "arith"}
        envs = (
            make_envs(n, "orchestrate-v1", kw)
            if shared
            else [make_env("orchestrate-v1", **kw) for _ in range(n)]
        )
        for _ in range(2):  # the second batch runs on the rewound shared loop
            eps = collect_batched(envs, policy, seeds, keys, stream=5)
            runs.append([(e.acts, e.reward, [o.tobytes() for o in e.obs], e.info) for e in eps])
        for env in envs.envs if isinstance(envs, VectorEnv) else envs:
            env.close()
    assert all(r == runs[0] for r in runs)
    assert [r[3]["seed"] for r in runs[0]] == seeds
    # another stream draws other actions
    envs = [make_env("orchestrate-v1", task="arith") for _ in range(3)]
    other = collect_batched(envs, policy, seeds, keys, stream=6)
    assert [e.acts for e in other] != [r[0] for r in runs[0]]


def test_collected_episodes_replay_step_by_step_on_a_fresh_env() -> None:
    envs = make_envs(4, "stop-v0", {"task": "arith"})
    policy = MLPPolicy.for_env(envs.envs[0], hidden=8, seed=1)
    eps = collect_batched(envs, policy, [3, 4, 5, 6, 7], [0, 1, 2, 3, 4], stream=0)
    env = make_env("stop-v0", task="arith")
    for ep, seed in zip(eps, [3, 4, 5, 6, 7], strict=True):
        obs, _ = env.reset(seed=seed)
        for o, a in zip(ep.obs, ep.acts, strict=True):
            assert o.tobytes() == obs.tobytes()
            obs, r, term, trunc, info = env.step(a[0])
        assert term or trunc
        assert r == ep.reward and info["tokens"] == ep.info["tokens"]


def test_collect_batched_refuses_bad_input() -> None:
    policy = MLPPolicy(20, [2], hidden=4)
    with pytest.raises(ConfigError, match="at least one environment"):
        collect_batched([], policy, [1], [0], stream=0)
    with pytest.raises(ConfigError, match="one key per seed"):
        collect_batched([make_env("stop-v0", task="arith")], policy, [1, 2], [0], stream=0)


# ---------------------------------------------------------------------- trainers
def _log(seed: int = 3, **kw) -> tuple[list[float], list[bytes]]:
    """The rewards logged and the trained weights (as bytes)."""
    cfg = TrainConfig(task="arith", episodes=64, batch=32, seed=seed, **kw)
    res = make_trainer("ppo", cfg).train()
    weights = [t.numpy().tobytes() for t in res.policy.net.state_dict().values()]
    return [row["reward"] for row in res.log], weights


def test_training_does_not_depend_on_num_envs() -> None:
    one = _log(num_envs=1)
    assert one == _log(num_envs=16)
    assert one != _log(seed=4, num_envs=16)  # the comparison can tell runs apart


@pytest.mark.slow
def test_training_with_worker_processes_equals_training_in_process() -> None:
    assert _log(num_envs=4, num_workers=2) == _log(num_envs=8)


def test_worker_pool_returns_the_in_process_episodes() -> None:
    env = make_env("stop-v0", task="arith")
    policy = MLPPolicy.for_env(env, hidden=8, seed=0)
    seeds, keys = [21, 22, 23, 24, 25], [5, 6, 7, 8, 9]
    local = collect_batched([env], policy, seeds, keys, stream=1)
    with WorkerPool(2, 2, "stop-v0", {"task": "arith"}, policy) as pool:
        remote = pool.collect(policy, seeds, keys, stream=1, train_step=0)
    assert [(e.acts, e.reward, e.info) for e in remote] == [
        (e.acts, e.reward, e.info) for e in local
    ]


def test_bad_collection_settings() -> None:
    with pytest.raises(ConfigError, match="num_envs must be >= 1"):
        TrainConfig(num_envs=0)
    with pytest.raises(ConfigError, match="num_workers must be >= 0"):
        TrainConfig(num_workers=-1)
    with pytest.raises(ConfigError, match="num_workers must be an integer"):
        TrainConfig(num_workers=True)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"num_workers \(9\) must be at most batch \(8\)"):
        TrainConfig(num_workers=9, batch=8)
    TrainConfig(num_workers=8, batch=8)  # one episode each: allowed


def test_more_workers_than_the_machine_can_hold_are_refused_before_any_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(collect_mod, "WorkerPool", None)  # nothing may start a pool
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)
    cfg = TrainConfig(task="arith", num_workers=9, batch=64)
    with pytest.raises(
        ConfigError, match=r"num_workers=9 is more than 4 .* \(2 CPUs\).* at most 8"
    ):
        make_trainer("ppo", cfg)


def test_environments_beyond_the_batch_are_never_made() -> None:
    trainer = make_trainer("ppo", TrainConfig(task="arith", episodes=8, batch=8, num_envs=10**9))
    trainer.collect()
    envs = trainer._envs
    assert envs is not None
    assert len(envs.envs if isinstance(envs, VectorEnv) else envs) == 8
    trainer.close()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--steps", "0"], "--steps must be >= 1 (got 0): training episodes"),
        (["--group", "0"], "--group must be >= 1 (got 0): GRPO: episodes per task instance"),
        (["--lr", "0"], "--lr must be in (0, 1), got 0.0"),
        (["--batch", "12", "--group", "5"], "--batch (12) must be a multiple of --group (5)"),
        (
            ["--num-workers", "100000"],
            "--num-workers (100000) must be at most --batch (128): each worker process "
            "collects part of every batch",
        ),
    ],
)
def test_cli_train_names_its_options_in_errors(argv, message, tmp_path, capsys) -> None:
    from orchestrace.cli import main

    out = tmp_path / "out"
    assert main(["train", *argv, "--no-progress", "-o", str(out)]) == 1
    assert capsys.readouterr().err.strip() == f"error: {message}"
    assert not out.exists()


def test_spawned_workers_need_settings_that_pickle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collect_mod, "_start_method", lambda: "spawn")
    policy = MLPPolicy(20, [2], hidden=4)
    with pytest.raises(ConfigError, match="must pickle to reach worker processes"):
        WorkerPool(2, 1, "stop-v0", {"task": "arith", "reward_fn": lambda t, **k: [0.0]}, policy)


@pytest.mark.parametrize("task", ["arith", "wide-search-v0", "multihop"])
def test_the_env_reward_equals_parl_on_its_trace(task: str) -> None:
    from orchestrace.rewards.parl import parl_components

    env = make_env("orchestrate-v1", task=task)
    rng = np.random.default_rng(0)
    outcomes = set()
    for seed in range(12):
        env.reset(seed=seed)
        while True:
            act = np.array([rng.integers(m) for m in env.action_space.nvec])
            _, _, term, trunc, info = env.step(act)
            if term or trunc:
                break
        want = parl_components(info["trace"])  # the task rebuilt from the trace checks
        assert {k: info[k] for k in ("r_parallel", "r_finish", "critical_steps")} == {
            k: want[k] for k in ("r_parallel", "r_finish", "critical_steps")
        }
        tokens = info["trace"].costs.get("tokens", 0.0)
        assert info["r_perf"] == want["r_perf"] - env.config.token_cost * tokens / 1000.0
        outcomes.add(want["r_perf"])
    assert outcomes == {0.0, 1.0}  # both outcomes met: the check can tell them apart
    env.close()


@pytest.mark.slow  # writes the training report (the curve plot loads matplotlib)
def test_cli_train_takes_num_envs_and_num_workers(tmp_path, capsys) -> None:
    from orchestrace.cli import main

    args = ["train", "--task", "arith", "--steps", "32", "--batch", "16", "--no-progress"]
    code = main([*args, "--num-envs", "4", "--num-workers", "1", "-o", str(tmp_path / "a")])
    assert code == 0
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert (config["num_envs"], config["num_workers"]) == (4, 1)
    capsys.readouterr()
    assert main([*args, "--num-envs", "0", "-o", str(tmp_path / "b")]) == 1
    assert "--num-envs must be >= 1" in capsys.readouterr().err
