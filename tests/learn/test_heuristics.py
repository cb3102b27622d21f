from orchestrace.learn.env import make_env
from orchestrace.learn.policies import ConfThreshold, FixedN, KAgree, MaxParallel, heuristics


def run(policy, env, seed=0):
    obs, info = env.reset(seed=seed)
    policy.reset()
    while True:
        obs, _r, term, trunc, info = env.step(policy.act(obs, info, env))
        if term or trunc:
            return info


def test_fixed_n_answers_exactly_n():
    env = make_env("stop-v0", task="arith")
    for n in (1, 3, 5):
        assert run(FixedN(n=n), env)["answers"] == n


def test_k_agree_stops_at_k_agreeing():
    env = make_env("stop-v0", task="search")
    for seed in range(5):
        info = run(KAgree(k=2), env, seed)
        assert info["top"] >= 2 or info["answers"] == env.config.max_workers
        # it did not go on after reaching k
        assert info["answers"] == 2 or info["top"] <= 2


def test_max_parallel_spawns_at_once():
    env = make_env("orchestrate-v0", task="multihop")
    info = run(MaxParallel(n=4), env)
    assert info["answers"] == 4 and info["rounds"] == 1


def test_round_robin_roles():
    env = make_env("orchestrate-v0", task="multihop")
    info = run(FixedN(n=3, role="round_robin"), env)
    roles = [e.role for e in info["trace"].events if e.type == "spawn"]
    assert roles == ["novice", "worker", "expert"]


def test_confidence_threshold_stops_early_when_sure():
    env = make_env("stop-v0", task="multihop")
    infos = [run(ConfThreshold(tau=0.0), env, s) for s in range(3)]
    assert all(i["answers"] == 1 for i in infos)


def test_families():
    names = [str(h) for h in heuristics("stopping")]
    assert "fixed-3" in names and "agree-2" in names and "conf-0.8" in names
    assert len(heuristics("all")) > len(names)
