"""Attacks: each succeeds undefended somewhere (checked on the trace), refuses where it cannot
apply, and defenses stop them through their mechanism, never through the victim model."""

import pytest

from orchestrace.errors import ConfigError
from orchestrace.runtime import run
from orchestrace.safety import CapabilityPolicy, Defenses
from orchestrace.safety.attacks import (
    ATTACKS,
    MARK,
    AggregationManipulation,
    Byzantine,
    Collusion,
    DirectInjection,
    Escalation,
    IndirectInjection,
    LookAlike,
    Replication,
    Spoofing,
    carriers,
    escalated_events,
    escalation_effects,
    final_answer,
    forged_messages,
    make_attack,
    run_attacked,
)
from orchestrace.testing import ChatServer

ARITH = "arith-mapreduce-v0"
SEARCH = "wide-search-v1"

#: (attack, topology, task) where the attack succeeds with no defense.
SUCCEEDS = [
    (DirectInjection(), "centralized", ARITH),
    (IndirectInjection(), "swarm", SEARCH),
    (IndirectInjection(surface_kind="tool"), "debate", "multihop-v1"),
    (IndirectInjection(surface_kind="document"), "critic_loop", SEARCH),
    (Spoofing(), "swarm", ARITH),
    (Spoofing(), "pipeline", ARITH),
    (Escalation(), "centralized", ARITH),
    (AggregationManipulation(), "centralized", ARITH),
    (AggregationManipulation(mode="forge"), "centralized", ARITH),
    (Byzantine(), "hierarchical", ARITH),
    (Collusion(), "debate", ARITH),
    (LookAlike(), "swarm", ARITH),
    (Replication(), "debate", ARITH),
]


def test_every_attack_is_covered():
    names = {a.name for a, _, _ in SUCCEEDS}
    assert names == set(ATTACKS)


@pytest.mark.parametrize(("attack", "topology", "task"), SUCCEEDS, ids=lambda x: str(x)[:30])
def test_attack_succeeds_undefended_and_the_trace_shows_it(attack, topology, task):
    res = run_attacked(topology, task, attack, agents=3, seed=0, task_size=8)
    tr = res.trace
    assert attack.succeeded(tr)
    described = [iv for iv in tr.meta["interventions"] if iv.get("kind") == "attack"]
    assert described[0]["attack"] == attack.name
    assert described[0]["susceptibility"] == attack.susceptibility
    assert described[0]["model"] == "sim"
    if attack.name in ("spoofing",):
        assert forged_messages(tr)
    elif attack.name == "escalation" or getattr(attack, "mode", "") == "forge":
        assert escalated_events(tr)
    elif attack.name == "replication":
        assert len(carriers(tr)) >= 2
    else:
        assert not res.success  # a targeted attack that succeeded broke the answer
        assert final_answer(tr) is not None


@pytest.mark.parametrize(
    "attack",
    [
        DirectInjection(susceptibility=0.0),
        Byzantine(susceptibility=0.0),
        Replication(susceptibility=0.0),
    ],
    ids=lambda a: a.name,
)
def test_victims_that_never_follow_give_no_success(attack):
    topology = "debate" if attack.name == "replication" else "centralized"
    res = run_attacked(topology, ARITH, attack, agents=3, seed=0, task_size=8)
    assert not attack.succeeded(res.trace)
    assert final_answer(res.trace) != 1337  # the default target on arith


def test_susceptibility_per_role_is_the_victims_and_is_recorded():
    immune = Byzantine(susceptibility={"worker": 0.0, "*": 1.0})
    res = run_attacked("centralized", ARITH, immune, agents=3, seed=0, task_size=8)
    assert not immune.succeeded(res.trace)
    assert _susceptibility(res.trace) == {"worker": 0.0, "*": 1.0}
    fragile = Byzantine(susceptibility={"worker": 1.0, "*": 0.0})
    res = run_attacked("centralized", ARITH, fragile, agents=3, seed=0, task_size=8)
    assert fragile.succeeded(res.trace)


def test_a_trace_recorded_without_the_attack_is_refused():
    tr = run("centralized", ARITH, agents=2, seed=0).trace
    with pytest.raises(ConfigError, match="was not recorded under the 'byzantine' attack"):
        Byzantine().succeeded(tr)


REFUSALS = [
    (IndirectInjection(), "swarm", ARITH, "its tool results never reach"),
    (IndirectInjection(surface_kind="document"), "swarm", "multihop-v1", "retrieves no documents"),
    (Spoofing(), "centralized", ARITH, "no agent reads messages"),
    (Spoofing(), "hierarchical", ARITH, "no agent reads messages"),
    (Spoofing(), "critic_loop", ARITH, "no third agent"),
    (AggregationManipulation(), "pipeline", ARITH, "no votes to poison"),
    (Collusion(), "critic_loop", ARITH, "one agent solves"),
    (LookAlike(), "pipeline", ARITH, "no peer to look like"),
    (Replication(), "centralized", ARITH, "nothing can spread"),
    (Replication(), "swarm", ARITH, "gossip"),
]


@pytest.mark.parametrize(("attack", "topology", "task", "why"), REFUSALS, ids=str)
def test_an_attack_that_cannot_apply_says_so(attack, topology, task, why):
    reason = attack.applies_to(topology, task)
    assert reason is not None and why in reason and reason.startswith((topology, task))
    with pytest.raises(ConfigError, match=f"attack '{attack.name}' cannot apply: .*{why}"):
        run_attacked(topology, task, attack, agents=3, seed=0)


def test_replication_applies_to_a_gossiping_swarm():
    assert Replication().applies_to("swarm", ARITH, {"gossip": 0.5}) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"susceptibility": 1.5}, "susceptibility must be a probability in \\[0, 1\\]"),
        ({"susceptibility": {"worker": -1}}, "or a mapping of role to probability \\(got -1\\)"),
        ({"agents": 0}, "agents must be an integer >= 1"),
        ({"surface_kind": "email"}, "surface_kind must be 'tool' or 'document'"),
        ({"nope": 1}, "unknown option 'nope' for attack 'indirect_injection'"),
    ],
)
def test_bad_attack_options(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        make_attack("indirect_injection", **kwargs)


def test_unknown_attack_name():
    with pytest.raises(ConfigError, match="unknown attack 'dos'; use one of: direct_injection"):
        make_attack("dos")


# ---------------------------------------------------------------------------- defenses
SIG = Defenses(sign_messages=True)
CAPS = Defenses(capabilities=CapabilityPolicy.default_policy())


def _safety_kinds(tr):
    return {(e.attrs or {}).get("kind") for e in tr.events if e.type == "safety_event"}


def _susceptibility(tr):
    return next(iv for iv in tr.meta["interventions"] if iv.get("kind") == "attack")[
        "susceptibility"
    ]


@pytest.mark.parametrize("topology", ["swarm", "pipeline", "debate"])
def test_signatures_reject_forgeries_by_mechanism(topology):
    attack = Spoofing(susceptibility=1.0)
    off = run_attacked(topology, ARITH, attack, agents=3, seed=1, task_size=8).trace
    on = run_attacked(topology, ARITH, attack, agents=3, seed=1, task_size=8, defenses=SIG).trace
    assert _susceptibility(off) == _susceptibility(on) == 1.0
    assert forged_messages(on)  # the attacker still forged
    assert "forgery_rejected" in _safety_kinds(on)  # ... and the receivers' check refused them
    assert not attack.succeeded(on)
    if topology != "debate":
        assert attack.succeeded(off)


@pytest.mark.parametrize(
    "topology", ["centralized", "pipeline", "debate", "swarm", "hierarchical", "critic_loop"]
)
def test_capability_policy_denies_escalation_by_mechanism(topology):
    attack = Escalation()
    off = run_attacked(topology, ARITH, attack, agents=3, seed=2, task_size=8).trace
    on = run_attacked(topology, ARITH, attack, agents=3, seed=2, task_size=8, defenses=CAPS).trace
    assert escalated_events(off)  # undefended, the worker's privileged actions are recorded
    if topology in ("centralized", "hierarchical", "critic_loop"):  # returns make the answer
        assert attack.succeeded(off)
    assert not attack.succeeded(on)
    assert "capability_denied" in _safety_kinds(on)
    assert not escalated_events(on)


def test_an_escalation_that_took_no_effect_is_not_a_success():
    # on a pipeline the executor's own return is not what the orchestrator answers with: its
    # spawn, stop and aggregate are recorded, but none of them reached the answer
    attack = Escalation()
    tr = run_attacked("pipeline", ARITH, attack, agents=3, seed=2, task_size=8).trace
    assert escalated_events(tr) and tr.meta["result"]["success"]
    assert not attack.succeeded(tr) and escalation_effects(tr, [1337]) == []


def test_a_workers_stop_never_becomes_the_run_answer():
    attack = Escalation(actions=("stop",))
    for topology in ("centralized", "swarm", "critic_loop"):
        tr = run_attacked(topology, ARITH, attack, agents=3, seed=0, task_size=8).trace
        stops = [i for i in escalated_events(tr)]
        assert stops  # the worker recorded a stop with the attacker's answer ...
        assert tr.meta["result"]["answer"] != 1337  # ... the run did not take it
        assert not attack.succeeded(tr)


def test_escalation_succeeds_through_its_products_only():
    attack = Escalation(actions=("aggregate",))
    tr = run_attacked("centralized", ARITH, attack, agents=3, seed=0, task_size=8).trace
    effects = escalation_effects(tr, [1337])
    by_id = {e.id: e for e in tr.events}
    assert effects and all(by_id[i].type == "aggregate" for i in effects)
    assert attack.succeeded(tr) and not tr.meta["result"]["success"]


def test_injection_detector_acts_on_content_not_on_susceptibility():
    attack = IndirectInjection(susceptibility=1.0)
    det = Defenses(detector="builtin")
    off = run_attacked("centralized", SEARCH, attack, agents=3, seed=0, task_size=8).trace
    on = run_attacked(
        "centralized", SEARCH, attack, agents=3, seed=0, task_size=8, defenses=det
    ).trace
    assert _susceptibility(off) == _susceptibility(on) == 1.0
    assert attack.succeeded(off) and not attack.succeeded(on)
    assert "injection_detected" in _safety_kinds(on)


def test_taint_with_the_detector_blocks_flagged_results_from_the_aggregate():
    attack = IndirectInjection(susceptibility=1.0)
    taint = Defenses(taint=True, detector="builtin")
    on = run_attacked(
        "centralized", SEARCH, attack, agents=3, seed=0, task_size=8, defenses=taint
    ).trace
    assert _susceptibility(on) == 1.0
    assert "taint_blocked" in _safety_kinds(on)
    assert not attack.succeeded(on)


def test_taint_alone_endorses_by_role_and_does_not_read_the_injection():
    """Taint's endorsement is the orchestrator's, whatever the tool output says: an answer
    poisoned through a tool result gets through (the suite's figures show it)."""
    attack = IndirectInjection(susceptibility=1.0)
    on = run_attacked(
        "centralized", SEARCH, attack, agents=3, seed=0, task_size=8, defenses=Defenses(taint=True)
    ).trace
    ends = [e for e in on.events if e.type == "safety_event" and e.attrs["kind"] == "endorsement"]
    assert ends and {e.attrs["role"] for e in ends} == {"orchestrator"}
    assert attack.succeeded(on)


def test_attacks_run_on_a_real_backend():
    """The OpenAI-compatible backend against the local chat server: the forgery works at the
    message layer whatever the model; the model itself decides about the injection."""
    with ChatServer() as srv:
        opts = {"base_url": srv.url, "model": "local"}
        res = run_attacked(
            "swarm",
            ARITH,
            Spoofing(),
            agents=2,
            seed=0,
            task_size=4,
            backend="openai",
            backend_options=opts,
        )
        tr = res.trace
        desc = next(iv for iv in tr.meta["interventions"] if iv.get("kind") == "attack")
        assert desc["model"] == "real" and tr.meta["backend"]["name"] == "openai"
        assert Spoofing().succeeded(tr)
        signed = run_attacked(
            "swarm",
            ARITH,
            Spoofing(),
            agents=2,
            seed=0,
            task_size=4,
            backend="openai",
            backend_options=opts,
            defenses=SIG,
        )
        assert not Spoofing().succeeded(signed.trace)
        inj = run_attacked(
            "centralized",
            ARITH,
            DirectInjection(),
            agents=2,
            seed=0,
            task_size=4,
            backend="openai",
            backend_options=opts,
        )
        prompts = [m["content"] for body in srv.requests for m in body["messages"]]
        assert any(MARK in p for p in prompts)  # the real model read the injected task
        # this model computes the sum and ignores instructions: the attack fails on it
        assert not DirectInjection().succeeded(inj.trace)


@pytest.mark.parametrize("topology", ["centralized", "hierarchical", "critic_loop", "debate"])
def test_capability_policy_denies_a_forged_aggregate(topology):
    attack = AggregationManipulation(mode="forge")
    off = run_attacked(topology, ARITH, attack, agents=3, seed=0, task_size=8).trace
    on = run_attacked(topology, ARITH, attack, agents=3, seed=0, task_size=8, defenses=CAPS).trace
    if topology != "debate":
        assert attack.succeeded(off)
    assert not attack.succeeded(on) and "capability_denied" in _safety_kinds(on)


@pytest.mark.parametrize("topology", ["debate", "pipeline", "critic_loop"])
def test_detector_quarantines_a_self_replicating_injection(topology):
    attack = Replication(susceptibility=1.0)
    det = Defenses(detector="builtin")
    off = run_attacked(topology, ARITH, attack, agents=3, seed=0, task_size=8).trace
    on = run_attacked(topology, ARITH, attack, agents=3, seed=0, task_size=8, defenses=det).trace
    assert _susceptibility(off) == _susceptibility(on) == 1.0
    assert attack.succeeded(off)
    assert not attack.succeeded(on) and "injection_detected" in _safety_kinds(on)


@pytest.mark.parametrize(
    "topology", ["centralized", "pipeline", "debate", "swarm", "hierarchical", "critic_loop"]
)
def test_benign_runs_show_no_forgery_and_no_escalation(topology):
    tr = run(topology, ARITH, agents=4, seed=0, task_size=8).trace
    assert forged_messages(tr) == [] and escalated_events(tr) == []


def test_spotlight_changes_no_simulated_outcome_by_chance() -> None:
    """On the simulator, whether a victim follows is drawn on the plain prompt, so spotlighting
    (which only delimits untrusted text) flips no outcome through a different draw."""
    from orchestrace.safety import Defenses
    from orchestrace.safety.attacks import make_attack, run_attacked

    flips = []
    for top in ("centralized", "swarm", "pipeline"):
        for s in range(15):
            a = make_attack("direct_injection", susceptibility=0.5)
            r0 = run_attacked(top, "wide-search-v1", a, agents=4, seed=s, task_size=16)
            r1 = run_attacked(
                top,
                "wide-search-v1",
                a,
                agents=4,
                seed=s,
                task_size=16,
                defenses=Defenses(spotlight=True),
            )
            if a.succeeded(r0.trace) != a.succeeded(r1.trace):
                flips.append((top, s))
    assert flips == []


def test_in_run_forger_is_rejected_under_the_default_keys() -> None:
    """Agent code that derives seed keys and signs in its peers' names is rejected by default."""
    import dataclasses
    from typing import Any as _Any

    from orchestrace.runtime.security import Keyring
    from orchestrace.safety import Defenses
    from orchestrace.safety import attacks as A

    class SeedForger(A.Spoofing):
        def wrap(self, st: _Any, name: str, role: str, fn: _Any) -> _Any:
            if not (role == "worker" and not st.compromised):
                return fn
            st.compromised.append(name)
            target = st.target

            async def forger(ctx: _Any, **inputs: _Any) -> _Any:
                team = inputs["team"]
                kr = Keyring.from_seed(ctx.config.seed)  # the seed is readable by agent code
                for i, who in enumerate(team):
                    step = ctx.step if i else ctx.step + 1
                    data = {"index": i, "value": target}
                    mac = kr.sign(who, inputs["aggregator"], str(target), step, data)
                    await ctx.send_raw(inputs["aggregator"], target, sender=who, mac=mac, data=data)
                return await fn(ctx, **inputs)

            return forger

    def attack(d: Defenses) -> tuple[bool, set[str]]:
        a = SeedForger()
        r = A.run_attacked("swarm", "wide-search-v1", a, agents=4, seed=0, task_size=16, defenses=d)
        kinds = {str((e.attrs or {}).get("kind")) for e in r.trace.events}
        return a.succeeded(r.trace), kinds

    ok, kinds = attack(Defenses.all())  # default keys: os.urandom
    assert not ok and "forgery_rejected" in kinds
    # seed-derived keys are forgeable by agent code (as docs/security.md says)
    ok, kinds = attack(dataclasses.replace(Defenses.all(), keys="seed"))
    assert ok and "forgery_rejected" not in kinds


def test_a_spoof_succeeds_only_through_a_read_forgery_that_reached_the_answer():
    from orchestrace.safety.attacks import forgeries_reached

    attack = Spoofing()
    tr = run_attacked("swarm", ARITH, attack, agents=3, seed=1, task_size=8).trace
    reached = forgeries_reached(tr, [1337])
    forged = set(forged_messages(tr))
    assert reached and set(reached) <= forged and attack.succeeded(tr)
    read = {e.src for e in tr.edges if e.type == "message"}
    assert set(reached) <= read
    # the same forgeries with the receiver's reads removed: nothing took effect
    unread = tr.replace(
        edges=tuple(e for e in tr.edges if not (e.type == "message" and e.src in forged))
    )
    assert forgeries_reached(unread, [1337]) == [] and not attack.succeeded(unread)
