import asyncio

import pytest

from orchestrace import ConfigError
from orchestrace.runtime.backends.base import LLMRequest
from orchestrace.runtime.backends.sim import SimBackend


def ask(sim, kind="solve", agent="w", role="worker", **payload):
    req = LLMRequest(agent, role, kind, [{"role": "user", "content": "q" * 40}], payload)
    return asyncio.run(sim.complete(req))


def accuracy(sim, role, hardness, n=600):
    ok = 0
    for i in range(n):
        r = ask(sim, agent=f"a{i}", role=role, truth=10, hardness=hardness, wrong="int")
        ok += r.answer == 10
    return ok / n


def test_skill_and_hardness_set_accuracy():
    sim = SimBackend(seed=0, skill_spread=0.0)
    assert accuracy(sim, "expert", 1.0) == pytest.approx(0.97, abs=0.03)
    assert accuracy(sim, "novice", 1.0) == pytest.approx(0.75, abs=0.05)
    assert accuracy(sim, "worker", 4.0) == pytest.approx(0.6, abs=0.06)
    assert accuracy(sim, "worker", 0.0) == 1.0


def test_same_key_same_answer_different_agents_differ():
    sim = SimBackend(seed=3)
    a = [ask(sim, truth=5, hardness=50.0).answer for _ in range(3)]
    assert len(set(a)) == 1
    b = {ask(sim, agent=f"x{i}", truth=5, hardness=50.0).answer for i in range(20)}
    assert len(b) > 3


def test_wrong_input_propagates():
    sim = SimBackend(seed=0)
    r = ask(
        sim,
        truth="e2",
        hardness=0.0,
        wrong="choice",
        choices=["e1", "e2", "e3"],
        input="e9",
        expected_input="e1",
    )
    assert r.answer in ("e1", "e3")


def test_latency_tokens_and_zero_latency():
    r = ask(SimBackend(seed=1), size=40, truth=1, hardness=0)
    assert r.tokens_in == 40 // 4 + 8 and r.tokens_out > 60 and r.latency > 0.2
    assert ask(SimBackend(latency_scale=0), truth=1, hardness=0).latency == 0.0


def test_verification_kinds():
    sim = SimBackend(seed=0, skills={"critic": 1.0, "judge": 1.0}, skill_spread=0.0)
    assert ask(sim, "critique", role="critic", candidate=3, truth=3).answer == "accept"
    assert ask(sim, "critique", role="critic", candidate=4, truth=3).answer == "reject"
    assert ask(sim, "judge", role="judge", candidates=[1, 7, 2], truth=7).answer == 1


def test_bad_settings():
    with pytest.raises(ConfigError, match="skill of role 'worker'"):
        SimBackend(skills={"worker": 1.5})
    with pytest.raises(ConfigError, match="fail_rate"):
        SimBackend(fail_rate=2)
