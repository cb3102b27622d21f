"""Critical Steps as a training latency term: a reward penalty and a budget that truncates."""

from __future__ import annotations

import pytest

from orchestrace.errors import ConfigError
from orchestrace.learn.env import EnvConfig, make_env
from orchestrace.rewards import make
from orchestrace.rewards.compose import load_spec
from orchestrace.trace.steps import critical_steps


def play(env, actions, seed=0, options=None):
    env.reset(seed=seed, options=options)
    for a in actions:
        _obs, r, term, trunc, info = env.step(a)
        if term or trunc:
            return r, term, trunc, info
    raise AssertionError("episode did not end")


SHORT, LONG = [0, 1], [0, 0, 0, 0, 0, 1]  # stop-v0: continue (one more worker) or stop


def test_latency_weight_lowers_reward_by_critical_steps():
    rewards = {}
    for w in (0.0, 0.5, 2.0):
        env = make_env("stop-v0", task="arith", latency_weight=w, latency_norm=10)
        for name, acts in (("short", SHORT), ("long", LONG)):
            r, term, trunc, info = play(env, acts, seed=7)
            assert term and not trunc
            cs = critical_steps(info["trace"])
            assert info["critical_steps"] == cs
            assert info["latency"] == pytest.approx(w * cs / 10)
            rewards[w, name] = (r, cs)
    (short0, cs_short), (long0, cs_long) = rewards[0.0, "short"], rewards[0.0, "long"]
    assert cs_long > cs_short
    for w in (0.5, 2.0):
        assert rewards[w, "short"][0] == pytest.approx(short0 - w * cs_short / 10)
        assert rewards[w, "long"][0] == pytest.approx(long0 - w * cs_long / 10)
    # the longer episode loses more, and more so under a higher weight
    drop = {
        w: (rewards[w, "long"][0] - long0) - (rewards[w, "short"][0] - short0) for w in (0.5, 2)
    }
    assert drop[2] < drop[0.5] < 0


def test_default_latency_norm_is_the_budget_else_three_steps_a_round():
    env = make_env("stop-v0", task="arith", latency_weight=1.0, max_rounds=5)
    _r, _t, _tr, info = play(env, SHORT, seed=1)
    assert info["latency"] == pytest.approx(info["critical_steps"] / 15)
    env = make_env("stop-v0", task="arith", latency_weight=1.0, steps_budget=40)
    _r, _t, _tr, info = play(env, SHORT, seed=1)
    assert info["latency"] == pytest.approx(info["critical_steps"] / 40)


def test_latency_applies_on_top_of_a_custom_reward():
    env = make_env(
        "stop-v0", task="arith", latency_weight=1.0, latency_norm=4, reward_fn=lambda t, step: [1.0]
    )
    r, *_, info = play(env, SHORT, seed=2)
    assert r == pytest.approx(1.0 - info["critical_steps"] / 4)


def test_steps_budget_truncates_the_episode():
    free = make_env("stop-v0", task="arith", max_rounds=10)
    _r, term, trunc, info = play(free, [0] * 20, seed=3)
    assert trunc and not term and info["truncated_by"] == "max_rounds" and info["rounds"] == 10

    env = make_env("stop-v0", task="arith", max_rounds=10, steps_budget=6)
    _r, term, trunc, info = play(env, [0] * 20, seed=3)
    assert trunc and not term
    assert info["truncated_by"] == "steps_budget"
    assert info["rounds"] < 10
    # it ends at the first decision where the Critical Steps so far reach the budget
    assert info["critical_steps"] >= 6
    assert info["rounds"] == 3


def test_stopping_within_the_budget_terminates():
    env = make_env("stop-v0", task="arith", steps_budget=6)
    _r, term, trunc, info = play(env, SHORT, seed=3)
    assert term and not trunc and info["truncated_by"] is None


def test_other_limits_name_themselves():
    env = make_env("orchestrate-v0", task="arith", max_workers=2)
    act = env.encode(
        {"spawn": 2, "role": "worker", "comm": "none", "aggregate": "vote", "stop": False}
    )
    _r, term, trunc, info = play(env, [act] * 5, seed=0)
    assert trunc and not term and info["truncated_by"] == "max_workers"


def test_reset_options_set_latency_per_episode():
    env = make_env("stop-v0", task="arith")
    _r, _t, trunc, info = play(env, [0] * 20, seed=3, options={"steps_budget": 4})
    assert trunc and info["truncated_by"] == "steps_budget" and info["rounds"] == 2
    _r, _t, trunc, info = play(env, [0] * 20, seed=3)
    assert info["truncated_by"] == "max_rounds"
    r0, *_ = play(env, SHORT, seed=3)
    r1, *_, info = play(env, SHORT, seed=3, options={"latency_weight": 1.0, "latency_norm": 2})
    assert r1 == pytest.approx(r0 - info["critical_steps"] / 2)


@pytest.mark.parametrize(
    ("spec", "budget", "name", "latency"),
    [
        (
            "[reward.team]\nweight = 1.0\n[reward.latency]\nweight = 0.01\nsteps_budget = 6\n",
            6,
            "latency",
            lambda cs: -cs,  # the latency reward's own value; weight 0.01 in the total
        ),
        (
            "[reward.parl]\nlatency_weight = 0.5\nsteps_budget = 4\n",
            4,
            "parl",
            lambda cs: -0.5 * min(1.0, cs / 4),  # what PARL's r_perf loses
        ),
    ],
)
def test_toml_reward_spec_sets_latency_and_budget(tmp_path, spec, budget, name, latency):
    path = tmp_path / "rewards.toml"
    path.write_text(spec)
    combo = load_spec(path)
    env = make_env("stop-v0", task="arith", reward_fn=combo)
    r, term, trunc, info = play(env, [0] * 20, seed=3)
    assert trunc and not term and info["truncated_by"] == "steps_budget"
    tr = info["trace"]
    cs = critical_steps(tr)
    assert cs >= budget and info["critical_steps"] == cs
    assert r == pytest.approx(combo([tr])[0])
    part = combo.components([tr])[name][0]
    base = 0.0 if name == "latency" else make("parl")([tr])[0]  # PARL without latency
    assert part == pytest.approx(base + latency(cs))
    assert latency(cs) < 0


def test_latency_reward_counts_critical_steps():
    env = make_env("stop-v0", task="arith")
    _r, _t, _tr, info = play(env, LONG, seed=5)
    tr = info["trace"]
    assert make("latency")([tr]) == [-critical_steps(tr)]
    assert make("latency", norm=4)([tr]) == [pytest.approx(-critical_steps(tr) / 4)]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"latency_weight": -1},
            "EnvConfig: latency_weight must be a finite number >= 0, got -1; e.g. "
            "latency_weight=0.1",
        ),
        (
            {"latency_weight": float("nan")},
            "EnvConfig: latency_weight must be a finite number >= 0, got nan",
        ),
        (
            {"latency_norm": 0},
            "EnvConfig: latency_norm must be a finite number > 0, got 0; e.g. latency_norm=20",
        ),
        (
            {"steps_budget": 0},
            "EnvConfig: steps_budget must be an integer >= 1 (Critical Steps), got 0; e.g. "
            "steps_budget=12",
        ),
        ({"steps_budget": 2.5}, "EnvConfig: steps_budget must be an integer >= 1"),
        ({"steps_budget": True}, "EnvConfig: steps_budget must be an integer >= 1"),
    ],
)
def test_bad_latency_settings_are_refused(kwargs, message):
    with pytest.raises(ConfigError) as err:
        EnvConfig(**kwargs)
    assert message in str(err.value)


def test_bad_reset_options_are_refused():
    env = make_env("stop-v0", task="arith")
    with pytest.raises(ConfigError, match="reset options: steps_budget must be an integer"):
        env.reset(seed=0, options={"steps_budget": "5"})
    with pytest.raises(ConfigError, match="reset options must be a dict such as"):
        env.reset(seed=0, options=[("steps_budget", 5)])


def test_trainers_take_latency_as_env_options():
    pytest.importorskip("torch")
    from orchestrace.learn.algorithms import make_trainer
    from orchestrace.learn.algorithms.common import TrainConfig, rollout

    cfg = TrainConfig(
        env="stop-v0",
        task="arith",
        env_options={"latency_weight": 0.5, "latency_norm": 10, "steps_budget": 4},
    )
    trainer = make_trainer("reinforce", cfg)
    ep = rollout(trainer.env, trainer.policy, seed=0)
    assert ep.info["latency"] == pytest.approx(0.5 * ep.info["critical_steps"] / 10)
    assert ep.info["truncated_by"] in (None, "steps_budget")
    assert ep.info["rounds"] <= 2


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "[reward.latency]\nnorm = 0\n",
            "[reward.latency]: norm must be a finite number > 0, got 0",
        ),
        (
            "[reward.parl]\nlatency_weight = 0.5\n",
            "[reward.parl]: latency_weight needs steps_budget (the Critical Steps that cost "
            "latency_weight in full); add steps_budget, e.g. steps_budget = 20",
        ),
        (
            "[reward.latency]\nsteps_budget = 0\n",
            "[reward.latency]: steps_budget must be an integer >= 1 (Critical Steps), got 0",
        ),
    ],
)
def test_bad_latency_specs_are_refused(tmp_path, spec, message):
    path = tmp_path / "rewards.toml"
    path.write_text(spec)
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert message in str(err.value)
