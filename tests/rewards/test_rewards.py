import math

import pytest

from orchestrace import ConfigError, TraceBuilder
from orchestrace.rewards import (
    REGISTRY,
    Anneal,
    Composite,
    agent_reward,
    hybrid_reward,
    load_spec,
    make,
    orchestration_reward,
    parl_components,
    parl_reward,
    process_reward,
    role_reward,
    team_reward,
    tool_reward,
    verifier_reward,
)
from orchestrace.rewards.families import aggregation_quality, split_correctness
from orchestrace.runtime import TOPOLOGIES, run


@pytest.fixture(scope="module")
def traces():
    return {t: run(t, "search", agents=6, seed=5).trace for t in sorted(TOPOLOGIES)}


def test_every_family_registered_and_in_range(traces):
    assert {f"R{i}" for i in range(1, 9)} <= set(REGISTRY) and "parl" in REGISTRY
    for tr in traces.values():
        for name in ("R1", "R2", "R3", "R4", "R6", "R7", "R8"):
            v = make(name)([tr])[0]
            assert v is None or 0.0 <= v <= 1.0, (name, v)


def test_team_reward_uses_the_task_checker(traces):
    for tr in traces.values():
        assert team_reward()([tr]) == [tr.metrics["task_success"]]
    assert team_reward(checker=lambda tr, answer: True)(list(traces.values())) == [1.0] * 6


def test_agent_and_role_rewards_count_correct_answers():
    tr = run("centralized", "arith", agents=8, seed=3).trace
    solves = [e for e in tr.events if e.type == "llm_call" and e.attrs.get("kind") == "solve"]
    right = sum(e.attrs["answer"] == e.attrs["truth"] for e in solves)
    assert agent_reward()([tr]) == [right / len(solves)]
    one = solves[0].agent
    assert agent_reward(agent=one)([tr]) == [
        float(solves[0].attrs["answer"] == solves[0].attrs["truth"])
    ]
    assert agent_reward(role="critic")([tr]) == [None]
    r = role_reward(weights={"worker": 1.0, "orchestrator": 0.0})([tr])[0]
    assert r == pytest.approx(right / len(solves))


def test_critic_and_judge_scored_in_role_and_verifier():
    tr = run("critic_loop", "arith", agents=2, seed=1, task_size=8).trace
    crit = [e for e in tr.events if e.attrs and e.attrs.get("kind") == "critique"]
    assert crit and all("candidate" in e.attrs for e in crit)
    expected = [
        float((e.attrs["answer"] == "accept") == (e.attrs["candidate"] == e.attrs["truth"]))
        for e in crit
    ]
    assert verifier_reward()([tr])[0] == pytest.approx(sum(expected) / len(expected))


def test_process_and_tool_rewards():
    tr = run("swarm", "search", agents=4, seed=2, tool_failure_rate=0.5).trace
    results = [e for e in tr.events if e.type == "tool_result"]
    ok = sum(e.error is None for e in results) / len(results)
    assert tool_reward()([tr]) == [pytest.approx(ok)]
    assert tool_reward(cost_weight=0.1)([tr])[0] == pytest.approx(ok - 0.1 * len(results))
    assert process_reward(rule=lambda e, t: 1.0 if e.type == "spawn" else None)([tr]) == [1.0]
    assert tool_reward()([run("debate", "arith", agents=2, seed=0).trace]) == [None]
    with pytest.raises(ConfigError):
        tool_reward(cost_weight=-1)


def test_orchestration_components():
    tr = run("hierarchical", "arith", agents=9, seed=1).trace
    assert split_correctness(tr) == 1.0  # every level partitions its span exactly
    assert aggregation_quality(tr) in (None, 1.0)
    b = TraceBuilder()
    b.spawn("lead", "w1", attrs={"part": {"index": 0, "size": 5, "lo": 0, "hi": 5}})
    b.spawn("lead", "w2", attrs={"part": {"index": 1, "size": 5, "lo": 3, "hi": 8}})
    bad = b.build().replace(meta={"task": {"name": "arith-mapreduce-v0", "seed": 0, "size": 10}})
    # covers 8 of 10, overlaps 2: 0.8 - 0.2
    assert split_correctness(bad) == pytest.approx(0.6)
    v = orchestration_reward(w_parallel=0, w_split=1, w_aggregate=0)([bad])[0]
    assert v == pytest.approx(0.6)


def test_hybrid_mixes_local_and_global():
    tr = run("centralized", "arith", agents=8, seed=3).trace
    a, t = agent_reward()([tr])[0], team_reward()([tr])[0]
    assert hybrid_reward(alpha=0.25)([tr])[0] == pytest.approx(0.25 * a + 0.75 * t)
    with pytest.raises(ConfigError, match="alpha"):
        hybrid_reward(alpha=2)


def test_parl_components_and_annealing():
    wide = run("centralized", "arith", agents=16, seed=4).trace
    serial = run("centralized", "multihop", agents=4, seed=4).trace
    cw, cs = parl_components(wide), parl_components(serial)
    assert cw["r_parallel"] > 0.5 > cs["r_parallel"] >= 0
    assert cw["r_finish"] == 1.0 and cw["critical_steps"] < cw["total_steps"]
    lam = Anneal(0.3, 0.0, steps=10, kind="cosine")
    r = parl_reward(lambda1=lam, lambda2=0.2)
    assert r([wide], step=0)[0] == pytest.approx(cw["r_perf"] + 0.3 * cw["r_parallel"] + 0.2)
    assert r([wide], step=10)[0] == pytest.approx(cw["r_perf"] + 0.2)
    assert Anneal(1.0, 0.0, 4, "exp")(4) == 0.0
    assert math.isclose(Anneal(1.0, 0.0, 4, "linear")(2), 0.5)


def test_parl_finish_counts_failed_subagents():
    tr = run("centralized", "arith", agents=4, seed=1, max_steps=4).trace
    assert parl_components(tr)["r_finish"] < 1.0


def test_composite_and_spec(tmp_path):
    trs = [run("swarm", "search", agents=4, seed=s).trace for s in range(3)]
    spec = tmp_path / "rewards.toml"
    spec.write_text("""
[reward.team]
weight = 1.0
[reward.parl]
weight = 0.5
lambda1 = { start = 0.2, end = 0.0, steps = 100 }
[reward.tools]
family = "R5"
weight = 0.25
cost_weight = 0.001
""")
    combo = load_spec(spec)
    parts = combo.components(trs, step=50)
    totals = combo(trs, step=50)
    for i in range(3):
        assert totals[i] == pytest.approx(
            parts["team"][i] + 0.5 * parts["parl"][i] + 0.25 * parts["tools"][i]
        )
    out = combo.annotate(trs, step=50)
    assert out[0].rewards["rewards/total"] == pytest.approx(totals[0])
    assert out[0].rewards["team"] == trs[0].rewards["team"]
    for bad, msg in (
        ("[reward.x]\nweight = 1", "unknown reward 'x'"),
        ('[reward.team]\nweight = "high"', "weight must be a number"),
        ("not toml ]", "not valid TOML"),
        ("[reward.parl]\nlambda1 = { start = 1, steps = 0 }", "steps must be >= 1"),
    ):
        spec.write_text(bad)
        with pytest.raises(ConfigError, match=msg):
            load_spec(spec)
    with pytest.raises(ConfigError, match="at least one reward"):
        Composite({})
