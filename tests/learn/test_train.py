import pytest

pytest.importorskip("torch")

from orchestrace.errors import ConfigError
from orchestrace.learn.algorithms import ALGOS, TrainConfig, make_trainer
from orchestrace.learn.evaluate import compare, evaluate, format_table
from orchestrace.learn.policies import FixedN
from orchestrace.learn.policies.torch_policy import load_policy


@pytest.mark.parametrize("algo", sorted(ALGOS))
def test_each_trainer_runs_and_writes(tmp_path, algo):
    cfg = TrainConfig(task="multihop", episodes=64, batch=32, seed=1, out=str(tmp_path))
    res = make_trainer(algo, cfg).train()
    assert len(res.log) == 2 and res.episodes_per_min > 0
    for name in ("train.csv", "policy.pt", "config.json", "curve.png"):
        assert (tmp_path / name).stat().st_size > 0
    pol = load_policy(tmp_path / "policy.pt")
    import numpy as np

    obs = np.full(20, 0.3, dtype=np.float32)
    assert pol.sample(obs, greedy=True)[0] == res.policy.sample(obs, greedy=True)[0]


def test_training_is_seeded():
    logs = []
    for _ in range(2):
        cfg = TrainConfig(task="arith", episodes=64, batch=32, seed=3)
        logs.append(make_trainer("reinforce", cfg).train().log)
    assert [r["reward"] for r in logs[0]] == [r["reward"] for r in logs[1]]


@pytest.mark.slow
def test_ppo_learns_to_stop_when_tokens_are_expensive():
    # with a steep token price, stopping after the first answer is best; a learner must find it
    # (four updates of 64 episodes find it on every seed tried, 0 to 6)
    opts = {"token_cost": 3.0}
    cfg = TrainConfig(task="multihop", episodes=256, batch=64, seed=0, env_options=opts)
    trainer = make_trainer("ppo", cfg)
    fixed3 = evaluate(FixedN(n=3), task="multihop", seeds=2, episodes=30, env_options=opts)
    before = evaluate(trainer.policy, task="multihop", seeds=2, episodes=30, env_options=opts)
    assert before.reward < fixed3.reward  # the untrained policy does not stop early
    policy = trainer.train().policy
    learned = evaluate(policy, task="multihop", seeds=2, episodes=30, env_options=opts)
    assert 1 <= learned.workers < 1.5
    assert learned.reward > fixed3.reward


def test_bad_train_config():
    with pytest.raises(ConfigError, match="episodes"):
        TrainConfig(episodes=0)
    with pytest.raises(ConfigError, match="multiple of group"):
        TrainConfig(batch=10, group=4)
    with pytest.raises(ConfigError, match="unknown algorithm"):
        make_trainer("dqn", TrainConfig())


def test_load_policy_rejects_garbage(tmp_path):
    bad = tmp_path / "x.pt"
    bad.write_bytes(b"\x00garbage")
    with pytest.raises(ConfigError, match="cannot load policy"):
        load_policy(bad)


def test_compare_same_seeds_and_table():
    rows = compare({"f1": FixedN(n=1), "f3": FixedN(n=3)}, task="multihop", seeds=3, episodes=4)
    assert [r.n_seeds for r in rows] == [3, 3]
    again = evaluate(FixedN(n=1), task="multihop", seeds=3, episodes=4)
    f1 = next(r for r in rows if r.name == "f1")
    assert again.reward == f1.reward and f1.workers == 1
    table = format_table(rows, "t")
    assert "| f1 |" in table and "±" in table
