"""The learned-stopping study: replay fidelity, disjoint seeds, the oracle reference, the report."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from orchestrace.errors import ConfigError
from orchestrace.learn import stopping
from orchestrace.learn.env import make_env
from orchestrace.learn.policies import ConfThreshold, FixedN, KAgree, SizeAware
from orchestrace.learn.policies.posterior import PosteriorStop, SimModel
from orchestrace.learn.stopping import (
    DENSE_WEIGHTS,
    ENV_OPTIONS,
    FAMILIES,
    StudyConfig,
    eval_seeds,
    posterior_stops,
    record_bank,
    run_study,
    train_seeds,
    tune_rules,
    tune_seeds,
)


def _live(policy, task, seeds, weight=0.1):
    """Outcomes of ``policy`` in the real environment: (success, tokens, answers, reward)."""
    env = make_env("stop-v0", task=task, token_cost=weight, **ENV_OPTIONS)
    out = []
    for seed in seeds:
        obs, info = env.reset(seed=int(seed))
        while True:
            obs, reward, term, trunc, info = env.step(policy.act(obs, info, env))
            if term or trunc:
                break
        out.append((bool(info["success"]), float(info["tokens"]), info["answers"], reward))
    env.close()
    return out


def test_replayed_records_score_like_the_real_environment():
    seeds = eval_seeds(1, 25)
    bank = record_bank("arith", seeds)
    rules = [
        FixedN(n=3),
        KAgree(k=2),
        ConfThreshold(tau=0.8),
        ConfThreshold(tau=0.7, k=3),
        SizeAware(buckets=((6, 14), (15, 24)), rules=(KAgree(k=2), ConfThreshold(tau=0.9))),
    ]
    for rule in rules:
        want = bank.outcome(stopping._rule_stops(rule, bank), 0.1)
        got = _live(rule, "arith", seeds)
        assert [g[2] for g in got] == want["n"].tolist(), rule
        assert [g[0] for g in got] == want["success"].astype(bool).tolist(), rule
        assert [g[1] for g in got] == want["tokens"].tolist(), rule
        assert np.allclose([g[3] for g in got], want["reward"]), rule


def test_posterior_rule_replays_exactly_and_never_reads_the_truth(monkeypatch):
    seeds = eval_seeds(1, 12)
    bank = record_bank("multihop", seeds)
    stops = posterior_stops(bank, [0.1], horizon=9, samples=100)[0.1]
    rule = PosteriorStop(token_cost=0.1, samples=100)
    assert [g[2] for g in _live(rule, "multihop", seeds)] == stops.tolist()
    # the decision depends on the answers, not on the task's answer
    env = make_env("stop-v0", task="multihop", **ENV_OPTIONS)
    env.reset(seed=seeds[0])
    env.step(0)
    _obs, _, _, _, info = env.step(0)
    before = rule.stop(info, env)
    env.task.answer = "entity_not_there"
    assert rule.stop(info, env) == before
    env.close()


def test_sim_model_matches_the_simulator():
    model = SimModel("arith")
    assert model.error_rate(8) == pytest.approx(0.1)
    assert model.error_rate(40) == pytest.approx(0.98)  # capped like the simulator
    cands, post = model.posterior([7, 7, 9], [0.8, 0.7, 0.5], size=12)
    assert cands[int(np.argmax(post))] == 7 and post.sum() == pytest.approx(1.0)
    now, gains = model.gains([7], [0.7], 12, 3, np.random.default_rng(0), 300)
    assert 0 < now < 1 and gains[0] == pytest.approx(0.0)  # one more answer cannot beat a tie
    with pytest.raises(ConfigError, match="unknown task"):
        SimModel("nope")


def test_seed_sets_are_disjoint():
    info = stopping._check_disjoint(StudyConfig())
    assert info["disjoint"] and info["eval"][0] > info["train"][-1][1]
    assert info["tune"][0][0] > info["eval"][1]
    held = set(eval_seeds(10, 300))
    for r in range(5):
        assert not set(train_seeds(r, 2048)) & held
        assert not set(tune_seeds(r, 2048)) & held
        assert not set(train_seeds(r, 2048)) & set(tune_seeds(r, 2048))
    assert eval_seeds(2, 3)[3] == 10**9 + 1_000_003  # the instances `orchestrace evaluate` uses


@pytest.mark.slow
def test_tuning_and_training_read_only_their_own_seeds(monkeypatch):
    cfg = StudyConfig(
        budget=24, train_seeds=2, train_episodes=48, weights=(0.1,), eval_seeds=1, episodes=8
    )
    seen: dict[str, list[int]] = {"tune": [], "train": []}
    real_tune, real_trainer = stopping.tune_rules, stopping._bank_trainer

    def spy_tune(bank, *a, **kw):
        seen["tune"] += bank.seeds.tolist()
        return real_tune(bank, *a, **kw)

    def spy_trainer(algo, tc, bank):
        seen["train"] += bank.seeds.tolist()
        return real_trainer(algo, tc, bank)

    monkeypatch.setattr(stopping, "tune_rules", spy_tune)
    monkeypatch.setattr(stopping, "_bank_trainer", spy_trainer)
    ev = record_bank("multihop", eval_seeds(cfg.eval_seeds, cfg.episodes))
    for r in range(cfg.train_seeds):
        stopping._job_replicate("multihop-v0", r, cfg, ev)
    tune = set(seen["tune"])
    train = set(seen["train"])
    held = set(ev.seeds.tolist())
    assert tune == {s for r in range(2) for s in tune_seeds(r, 24)}
    assert train == {s for r in range(2) for s in train_seeds(r, 24)}
    assert not tune & train and not tune & held and not train & held


@pytest.mark.slow
def test_posterior_rule_is_not_beaten_by_any_tuned_rule():
    """At the tokens any tuned rule spends, the posterior rule's curve reaches its success.

    Not true by construction: the posterior rule decides with a model of the simulator and a
    Monte-Carlo look-ahead; the rules are tuned on their own records of the same task.
    """
    for task in ("multihop", "arith"):
        ev = record_bank(task, eval_seeds(2, 200))
        tune = record_bank(task, tune_seeds(0, 400))
        weights = (0.025, 0.05, 0.1, 0.2, 0.4)
        tuned = tune_rules(tune, weights, 4)
        post = posterior_stops(ev, DENSE_WEIGHTS, horizon=9, samples=400)
        curve = []
        for w in DENSE_WEIGHTS:
            o = ev.outcome(post[w], w)
            curve.append((float(o["tokens"].mean()), float(o["success"].mean())))
        for fam in FAMILIES:
            for w in weights:
                o = ev.outcome(stopping._rule_stops(tuned[fam][w], ev), w)
                tokens, success = float(o["tokens"].mean()), float(o["success"].mean())
                reach = stopping._frontier_at(curve, tokens)
                assert success <= reach, (task, fam, w, tokens, success, reach)


def test_study_config_refuses_bad_budgets():
    with pytest.raises(ConfigError, match="budget must be an integer >= 1"):
        StudyConfig(budget=0)
    with pytest.raises(ConfigError, match=r"reference_weight 0\.1 must be one of the weights"):
        StudyConfig(weights=(0.2, 0.4))
    with pytest.raises(ConfigError, match="weights must be finite numbers >= 0"):
        StudyConfig(weights=(float("nan"),))
    with pytest.raises(ConfigError, match="one rule per size bucket"):
        SizeAware(buckets=((1, 2),), rules=())
    with pytest.raises(ConfigError, match="no stop-v0 size range"):
        run_study(["math"], quick=True)


#: The study's whole pipeline at the smallest budgets that still give every table two weights,
#: two evaluation seeds, two replicates, size buckets and a live check.
SMALL = StudyConfig(
    budget=32,
    train_seeds=2,
    train_episodes=64,
    weights=(0.1, 0.4),
    eval_seeds=2,
    episodes=8,
    live_episodes=2,
    samples=20,
    size_buckets=2,
)


def test_quick_runs_the_quick_config(monkeypatch):
    seen = []
    monkeypatch.setattr(stopping, "_run", lambda tasks, cfg, *a, **kw: seen.append(cfg) or {})
    run_study(["multihop"], quick=True)
    run_study(["multihop"])
    assert seen == [StudyConfig.quick(), StudyConfig()]


@pytest.mark.slow
def test_small_study_writes_every_table(tmp_path: Path):
    out = tmp_path / "study"
    study = run_study(["multihop"], config=SMALL, out=out, jobs=1)
    cfg = study["config"]
    res = study["tasks"]["multihop-v0"]
    # every method, with its replicates, a Wilson interval and the live check
    learned = f"learned ({cfg['algo']})"
    assert set(res["methods"]) == {
        *FAMILIES,
        learned,
        "posterior (oracle reference)",
        "hindsight (not causal)",
    }
    for name, m in res["methods"].items():
        for w in cfg["weights"]:
            row = m["by_weight"][str(w)]
            lo, hi = row["success_wilson"]
            assert 0 <= lo <= row["success"] <= hi <= 1, name
            assert hi > lo and row["episodes"] == cfg["eval_seeds"] * cfg["episodes"]
    assert res["methods"][learned]["by_weight"]["0.1"]["n_replicates"] == cfg["train_seeds"]
    assert res["methods"]["size-aware"]["by_weight"]["0.1"]["n_replicates"] == cfg["train_seeds"]
    assert res["live_check"]["episodes"] > 0 and res["live_check"]["mismatches"] == 0
    assert study["seeds"]["disjoint"]
    files = {p.name for p in out.iterdir()}
    assert {"results.json", "results.md", "pareto.csv", "sweep.csv", "train.csv"} <= files
    assert "policy-multihop-v0.pt" in files
    md = (out / "results.md").read_text()
    assert "Wilson" in md and "size-aware" in md and "posterior (oracle reference)" in md
    rows = list(csv.DictReader((out / "pareto.csv").open()))
    assert {"success_lo", "success_hi", "tokens", "reward", "replicate"} <= set(rows[0])
    assert json.loads((out / "results.json").read_text())["tasks"]["multihop-v0"]["sweep"]
    # the policy written is the one evaluated: `orchestrace evaluate` can load it
    from orchestrace.learn.policies.torch_policy import load_policy

    assert load_policy(out / "policy-multihop-v0.pt").nvec == [2]


def test_cli_names_a_bad_option(tmp_path, capsys):
    from orchestrace.cli import main

    code = main(["study", "stopping", "--weights", "a,b", "-o", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 1
    assert err == (
        "error: --weights must be comma-separated numbers, e.g. 0.05,0.1,0.2; got 'a,b'\n"
    )
    code = main(["study", "stopping", "--budget", "0", "-o", str(tmp_path / "x")])
    assert code == 1 and "--budget must be >= 1, got 0" in capsys.readouterr().err


def test_stop_v0_calls_no_verifier_so_oracle_verifiers_change_nothing():
    seeds = eval_seeds(1, 10)
    plain = record_bank("search", seeds)
    oracle = record_bank("search", seeds, {"backend_options": {"oracle_verifiers": True}})
    for field in ("obs", "top", "top_conf", "tokens", "success"):
        assert np.array_equal(getattr(plain, field), getattr(oracle, field)), field
    env = make_env("stop-v0", task="search", **ENV_OPTIONS)
    env.reset(seed=seeds[0])
    for _ in range(3):
        *_, info = env.step(0)
    *_, info = env.step(1)
    kinds = {e.attrs.get("kind") for e in info["trace"].events if e.type == "llm_call"}
    env.close()
    assert kinds == {"solve"}
