"""``orchestrate-v1``: the judge and revisers of the environment never read the ground truth."""

import pytest

from orchestrace.learn.env import ENV_IDS, make_env
from orchestrace.runtime.backends import sim as sim_mod


def judge_episodes(env_id, seeds=range(30), **kw):
    """Eight novices answer a size-48 sum; a judge picks. Returns (judge wins, right workers)."""
    wins = right = 0
    for seed in seeds:
        env = make_env(env_id, task="arith", **kw)
        env.reset(seed=seed, options={"size": 48})
        _, _, term, trunc, _ = env.step([4, 0, 0, 2, 0])
        if not (term or trunc):
            env.step([0, 0, 0, 2, 1])
        wins += bool(env.trace.meta["result"]["success"])
        right += sum(e.attrs.get("answer") == e.attrs.get("truth") for e in env.trace.events
                     if e.type == "llm_call" and e.attrs.get("kind") == "solve")  # fmt: skip
    return wins, right


def test_v1_is_registered_and_v0_keeps_its_oracle():
    assert "orchestrate-v1" in ENV_IDS
    assert make_env("orchestrate-v1", task="arith").id == "orchestrate-v1"
    env = make_env("orchestrate-v0", task="arith")
    env.reset(seed=0)
    env.step([1, 0, 0, 0, 1])
    assert env.trace.meta["backend"]["options"]["oracle_verifiers"] is True
    env = make_env("orchestrate-v1", task="arith")
    env.reset(seed=0)
    env.step([1, 0, 0, 0, 1])
    assert env.trace.meta["backend"]["options"]["oracle_verifiers"] is False


def test_judge_solves_at_the_hardness_of_the_whole_task(monkeypatch):
    seen = []
    verify = sim_mod.SimBackend._verify

    def spy(self, kind, p, skill, rng):
        seen.append((kind, p.get("hardness")))
        return verify(self, kind, p, skill, rng)

    monkeypatch.setattr(sim_mod.SimBackend, "_verify", spy)
    env = make_env("orchestrate-v1", task="arith")
    env.reset(seed=1, options={"size": 48})
    env.step([2, 0, 0, 2, 0])  # two novices
    env.step([1, 0, 1, 2, 0])  # one more hears their answers (a broadcast) and revises
    env.step([0, 0, 0, 2, 1])  # stop: the judge decides
    kinds = {k for k, _ in seen}
    assert kinds == {"judge", "revise"}, seen
    assert all(h is not None and h > 1.0 for _, h in seen), seen


def test_judge_does_no_better_than_the_workers_it_judges():
    # measured (30 seeds): 0 judge wins with 4/240 right workers; before, the judge solved as
    # if the task were unit-size and won 4 of 30 (orchestrate-v0, oracle judge: also 4 of 30)
    wins, right = judge_episodes("orchestrate-v1")
    assert wins <= 1 and right <= 12, (wins, right)


@pytest.mark.parametrize("gid", ["orchestrace/Orchestrate-v1", "orchestrace/Stop-v0"])
def test_gymnasium_make_and_env_checker_pass(gid):
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    from orchestrace.learn.gym import register

    assert gid in register()
    env = gymnasium.make(gid, task="arith")
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
