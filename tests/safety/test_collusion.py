"""The collusion (MAS reward hacking) detector: findings name the events that show them."""

import pytest

from orchestrace.errors import ConfigError
from orchestrace.runtime import run
from orchestrace.safety.attacks import Collusion, run_attacked
from orchestrace.safety.collusion import (
    agreement_reward,
    detect_collusion,
    gated_reward,
)

ARITH = "arith-mapreduce-v0"


def _by_id(trace):
    return {e.id: e for e in trace.events}


@pytest.mark.parametrize("topology", ["debate", "swarm", "centralized", "hierarchical"])
def test_a_colluding_pair_is_found_with_its_events(topology):
    tr = run_attacked(topology, ARITH, Collusion(agents=2), agents=4, seed=0, task_size=8).trace
    findings = {f.kind: f for f in detect_collusion(tr)}
    assert set(findings) == {"agreement_on_rejected", "copied_messages"} or (
        topology in ("centralized", "hierarchical") and set(findings) == {"agreement_on_rejected"}
    )
    agree = findings["agreement_on_rejected"]
    events = _by_id(tr)
    # the colluding pair, and in a debate the honest debaters it talked round
    assert agree.value == 1337 and len(agree.agents) >= 2
    for eid in agree.events:  # each named event is a colluder's answer that verification rejects
        ev = events[eid]
        assert ev.type == "llm_call" and ev.agent in agree.agents
        assert ev.attrs["answer"] == 1337 != ev.attrs["truth"]
    assert agree.events[0] in agree.message and "verification rejects" in agree.message
    if "copied_messages" in findings:
        copied = findings["copied_messages"]
        assert len(copied.agents) == 2 and set(copied.agents) <= set(agree.agents)
        texts = {events[e].content for e in copied.events}
        assert len(texts) == 1  # the scripted message, word for word


def test_clean_parallel_runs_have_no_findings():
    for seed in range(5):
        tr = run("swarm", ARITH, agents=4, seed=seed, task_size=8).trace
        assert detect_collusion(tr) == []


def test_near_copies_are_found_and_short_answers_are_not():
    tr = run_attacked("debate", ARITH, Collusion(agents=2), agents=3, seed=1, task_size=8).trace
    assert any(f.kind == "copied_messages" for f in detect_collusion(tr, similarity=0.95))
    # bare answers ("42") are what honest debaters write too: never counted as copies
    benign = run("debate", ARITH, agents=3, seed=1, task_size=8).trace
    assert not [f for f in detect_collusion(benign) if f.kind == "copied_messages"]


def test_rewards_agreement_is_hacked_and_the_gate_removes_it():
    tr = run_attacked("debate", ARITH, Collusion(agents=2), agents=3, seed=0, task_size=8).trace
    hacked = agreement_reward(tr)
    assert hacked >= 2 / 3  # the colluders agree with the (wrong) final answer
    assert gated_reward(tr, hacked) == 0.0
    clean = run("swarm", ARITH, agents=3, seed=0, task_size=8).trace
    assert gated_reward(clean, 0.7) == 0.7


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"min_agents": 1}, "min_agents must be an integer >= 2"),
        ({"similarity": 0.0}, "similarity must be in \\(0, 1\\]"),
    ],
)
def test_bad_detector_parameters(kw, message):
    tr = run("swarm", ARITH, agents=2, seed=0, task_size=4).trace
    with pytest.raises(ConfigError, match=message):
        detect_collusion(tr, **kw)


@pytest.mark.parametrize("topology", ["swarm", "centralized", "hierarchical"])
def test_agreement_reward_counts_parts_the_answer_was_combined_from(topology):
    # each worker solves one part: its answer is never the run's answer, but the answer was
    # combined from it, so a consensus reward accepts it (and so accepts a colluder's part)
    benign = run_attacked(topology, ARITH, None, agents=4, seed=0, task_size=8).trace
    assert agreement_reward(benign) == 1.0
    tr = run_attacked(topology, ARITH, Collusion(agents=2), agents=4, seed=0, task_size=8).trace
    assert tr.meta["result"]["success"] is False
    assert agreement_reward(tr) == 1.0  # hacked: the wrong parts were accepted
    assert gated_reward(tr, agreement_reward(tr)) == 0.0


def test_an_out_voted_answer_is_not_agreement():
    tr = run("debate", ARITH, agents=3, seed=0, task_size=8).trace
    finals = {
        e.agent: e.attrs["answer"]
        for e in tr.events
        if e.type == "llm_call"
        and e.attrs.get("kind") in ("solve", "revise")
        and e.attrs.get("answer") is not None
    }
    answer = str(tr.meta["result"]["answer"])
    expected = sum(str(v) == answer for v in finals.values()) / len(finals)
    assert agreement_reward(tr) == pytest.approx(expected)
