"""Gymnasium contract (registration, check_env, seeding) and the vector environment."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

from orchestrace.errors import ConfigError
from orchestrace.learn import VectorEnv
from orchestrace.learn.env import make_env, rollouts
from orchestrace.learn.policies.heuristic import KAgree


def _episodes(env, seed, n=3):
    out = []
    for i in range(n):
        obs, info = env.reset(seed=seed) if i == 0 else env.reset()
        obs2, *_ = env.step(0)
        out.append((info["seed"], obs.tolist(), obs2.tolist()))
    return out


def test_reset_without_seed_continues_the_seeded_generator():
    a, b = make_env("stop-v0", task="arith"), make_env("stop-v0", task="arith")
    ea, eb = _episodes(a, 5), _episodes(b, 5)
    assert ea == eb
    assert ea[0][0] == 5 and len({s for s, *_ in ea}) == 3
    # reseeding starts the same sequence again; another seed another one
    assert _episodes(a, 5) == ea
    assert [s for s, *_ in _episodes(a, 6)][1:] != [s for s, *_ in ea][1:]
    a.close()
    b.close()


@pytest.mark.parametrize("first", ["orchestrace.learn", "gymnasium"])
def test_gymnasium_make_needs_no_register_call(first):
    pytest.importorskip("gymnasium")
    second = "gymnasium" if first == "orchestrace.learn" else "orchestrace.learn"
    code = (
        f"import {first}, {second}, gymnasium\n"
        "for gid in ('orchestrace/Stop-v0', 'orchestrace/Orchestrate-v1',"
        " 'orchestrace/Orchestrate-v0'):\n"
        "    env = gymnasium.make(gid, task='arith')\n"
        "    assert isinstance(env.unwrapped, gymnasium.Env)\n"
        "    assert isinstance(env.observation_space, gymnasium.spaces.Box)\n"
        "    assert isinstance(env.action_space, (gymnasium.spaces.Discrete,"
        " gymnasium.spaces.MultiDiscrete))\n"
        "    env.close()\n"
        "print('ok')\n"
    )
    r = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_import_orchestrace_learn_does_not_import_gymnasium():
    code = "import sys, orchestrace.learn.env; print('gymnasium' in sys.modules)"
    r = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr[-2000:]


def test_module_form_of_the_id_registers_by_import():
    pytest.importorskip("gymnasium")
    code = (
        "import gymnasium\n"
        "env = gymnasium.make('orchestrace.learn.gym:orchestrace/Stop-v0', task='arith')\n"
        "print(env.reset(seed=0)[0].shape)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and r.stdout.strip() == "(20,)", r.stderr[-2000:]


@pytest.mark.parametrize(
    "gid", ["orchestrace/Stop-v0", "orchestrace/Orchestrate-v1", "orchestrace/Orchestrate-v0"]
)
def test_check_env_passes_without_warnings_and_seeding_holds(gid):
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    import orchestrace.learn  # noqa: F401

    if gid.endswith("-v0") and "Orchestrate" in gid:
        # Gymnasium's version notice: v1 supersedes v0 (kept so earlier results reproduce)
        with pytest.warns(DeprecationWarning, match="out of date"):
            env = gymnasium.make(gid, task="arith")
    else:
        env = gymnasium.make(gid, task="arith")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        other = gymnasium.make(gid, task="arith")
    seqs = []
    for e in (env, other):
        first = e.reset(seed=11)[0]
        seqs.append([first, e.reset()[0], e.reset()[0]])
        e.close()
    for x, y in zip(*seqs, strict=True):
        assert np.array_equal(x, y)


def _random_actions(venv, rng):
    if venv.env_id == "stop-v0":
        return [int(rng.random() < 0.3) for _ in range(venv.num_envs)]
    acts = []
    for _ in range(venv.num_envs):
        a = np.asarray([rng.integers(n) for n in venv.single_action_space.nvec])
        a[-1] = int(rng.random() < 0.3)
        acts.append(a)
    return acts


@pytest.mark.parametrize("env_id", ["stop-v0", "orchestrate-v1"])
def test_vector_env_steps_equal_the_episodes_one_at_a_time(env_id):
    n, rng = 4, np.random.default_rng(1)
    solo = [make_env(env_id, task="arith") for _ in range(n)]
    with VectorEnv(n, env_id, task="arith") as venv:
        assert {id(e._episode_loop(0)[0]) for e in venv.envs} == {id(venv.loop)}
        vo, _ = venv.reset(seed=[3, 1, 4, 1])
        assert np.array_equal(
            vo, np.stack([e.reset(seed=s)[0] for e, s in zip(solo, [3, 1, 4, 1], strict=True)])
        )
        done = [False] * n
        ends = 0
        for _ in range(20):
            acts = _random_actions(venv, rng)
            vo, vr, vte, vtr, _ = venv.step(acts)
            for i, e in enumerate(solo):
                if done[i]:  # next-step autoreset, seed drawn from the seeded generator
                    o, r = e.reset()[0], 0.0
                else:
                    o, r, *_ = e.step(acts[i])
                assert np.array_equal(o, vo[i]) and r == vr[i]
            done = [bool(t or u) for t, u in zip(vte, vtr, strict=True)]
            ends += sum(done)
        assert ends >= n  # episodes ended and restarted along the way
    for e in solo:
        e.close()


def test_vector_rollouts_equal_rollouts_one_at_a_time_traces_included():
    policy, seeds = KAgree(k=2), list(range(10))
    one = rollouts(policy, seeds, "orchestrate-v1", env_options={"task": "arith"}, traces=True)
    with VectorEnv(4, "orchestrate-v1", task="arith") as venv:
        many = venv.rollouts(policy, seeds, traces=True)
    assert [r["seed"] for r in many] == seeds
    for a, b in zip(one, many, strict=True):
        ta, tb = a.pop("trace"), b.pop("trace")
        assert a == b
        assert [(e.t, e.type) for e in ta.events] == [(e.t, e.type) for e in tb.events]


def test_vector_env_refuses_bad_input():
    with pytest.raises(ConfigError, match="num_envs must be an integer from 1 to"):
        VectorEnv(0, "stop-v0")
    with pytest.raises(ConfigError, match="sim backend only"):
        VectorEnv(2, "stop-v0", backend="openai")
    with VectorEnv(2, "stop-v0", task="arith") as venv:
        with pytest.raises(ConfigError, match="needs 2 seeds"):
            venv.reset(seed=[1, 2, 3])
        venv.reset(seed=0)
        with pytest.raises(ConfigError, match="needs 2 actions"):
            venv.step([0])
        with pytest.raises(ConfigError, match="not in Discrete"):
            venv.step([0, 7])


class _RandomStop:
    """Stops at random: a generator that reset() leaves as it is."""

    def __init__(self) -> None:
        import random

        self.rng = random.Random(0)

    def reset(self) -> None:
        pass

    def act(self, obs, info, env):
        return env.encode(
            {
                "spawn": 1,
                "role": "worker",
                "comm": "none",
                "aggregate": "vote",
                "stop": self_stop(self.rng),
            }
        )


def self_stop(rng) -> bool:
    return rng.random() < 0.4


def test_results_do_not_depend_on_num_envs_for_a_policy_with_state_reset_leaves():
    seeds = list(range(8))
    runs = []
    for n in (1, 3, 8):
        with VectorEnv(n, "stop-v0", task="arith") as venv:
            runs.append([r["steps"] for r in venv.rollouts(_RandomStop(), seeds)])
    assert runs[0] == runs[1] == runs[2]
    assert len(set(runs[0])) == 1  # each episode starts from the policy as given


class _StopsAfter:
    """Stops after ``k`` decisions of the current episode: state that reset() clears."""

    def __init__(self, k: int) -> None:
        self.k, self.seen = k, 0

    def reset(self) -> None:
        self.seen = 0

    def act(self, obs, info, env):
        self.seen += 1
        return env.encode(
            {
                "spawn": 1,
                "role": "worker",
                "comm": "none",
                "aggregate": "vote",
                "stop": self.seen > self.k,
            }
        )


def test_a_stateful_policy_is_copied_and_reset_for_each_episode():
    seeds = list(range(9))
    one = rollouts(_StopsAfter(2), seeds, "stop-v0", env_options={"task": "arith"})
    policy = _StopsAfter(2)
    with VectorEnv(3, "stop-v0", task="arith") as venv:
        many = venv.rollouts(policy, seeds)
    assert many == one
    assert {r["steps"] for r in many} == {3}  # each episode counted from 0 (reset per episode)
    assert policy.seen == 0  # the caller's object is never stepped
