"""Taint on message data (every topology) and the voting path of the topologies that combine."""

from __future__ import annotations

import pytest

from orchestrace.errors import ConfigError
from orchestrace.runtime import run
from orchestrace.safety import Defenses
from orchestrace.safety.attacks import AggregationManipulation, IndirectInjection, run_attacked

TOPOLOGIES = ["centralized", "pipeline", "debate", "swarm", "hierarchical", "critic_loop"]
SEEDS = range(6)


def _outcomes(
    topology: str, kind: str, defenses: Defenses, task: str, wording: str
) -> list[tuple[bool, tuple[str, ...]]]:
    """Per seed: whether the attack succeeded, and the kinds of safety events recorded."""
    out = []
    for seed in SEEDS:
        # every victim follows: the simulator's draw depends on the prompt's text, and a
        # comparison across wordings must not turn on it
        attack = IndirectInjection(surface_kind=kind, susceptibility=1.0, wording=wording)
        res = run_attacked(topology, task, attack, defenses=defenses, seed=seed, task_size=16)
        kinds = [e.attrs.get("kind") for e in res.trace.events if e.type == "safety_event"]
        out.append((attack.succeeded(res.trace), tuple(kinds)))
    return out


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize(
    ("task", "kind"),
    [("wide-search-v1", "tool"), ("wide-search-v1", "document"), ("multihop-v1", "tool")],
)
def test_taint_decides_the_same_whatever_the_injection_says(
    topology: str, task: str, kind: str
) -> None:
    """Taint endorses by role: a reworded injection meets exactly what the template meets."""
    d = Defenses(taint=True)
    assert _outcomes(topology, kind, d, task, "template") == _outcomes(
        topology, kind, d, task, "reworded"
    )


def test_the_detector_filter_depends_on_the_wording() -> None:
    """The heuristic detector stops the wording it was written for, not the rewordings."""
    d = Defenses(taint=True, detector="builtin")
    template = _outcomes("centralized", "tool", d, "wide-search-v1", "template")
    reworded = _outcomes("centralized", "tool", d, "wide-search-v1", "reworded")
    assert not any(hit for hit, _ in template)
    assert any(hit for hit, _ in reworded)


@pytest.mark.parametrize("topology", ["pipeline", "swarm"])
def test_value_copied_out_of_a_blocked_message_cannot_become_the_answer(topology: str) -> None:
    attack = IndirectInjection(susceptibility=1.0)
    d = Defenses(taint=True, detector="builtin")
    res = run_attacked(topology, "wide-search-v1", attack, defenses=d, seed=0, task_size=16)
    blocks = [
        e
        for e in res.trace.events
        if e.type == "safety_event" and e.attrs.get("kind") == "taint_blocked"
    ]
    assert blocks, "the tainted report must be blocked and the block recorded"
    assert {b.attrs["action"] for b in blocks} & {"aggregate", "stop", "spawn"}
    assert not attack.succeeded(res.trace)
    plain = run_attacked(
        topology, "wide-search-v1", IndirectInjection(susceptibility=1.0), seed=0, task_size=16
    )
    assert res.trace.meta["result"].get("answer") != plain.trace.meta["result"].get("answer")


def test_benign_runs_with_taint_keep_their_answers() -> None:
    for topology in TOPOLOGIES:
        for seed in range(3):
            plain = run(topology, "wide-search-v1", agents=4, seed=seed, task_size=16)
            tainted = run(
                topology,
                "wide-search-v1",
                agents=4,
                seed=seed,
                task_size=16,
                defenses=Defenses(taint=True),
            )
            assert tainted.trace.meta["result"]["answer"] == plain.trace.meta["result"]["answer"]


@pytest.mark.parametrize("topology", ["centralized", "swarm", "debate"])
def test_vote_path_records_a_vote_over_whole_task_answers(topology: str) -> None:
    res = run(topology, "arith", agents=4, seed=1, task_size=16, aggregate="vote")
    aggs = [e for e in res.trace.events if e.type == "aggregate"]
    assert aggs and aggs[-1].attrs["method"] == "vote"
    assert res.trace.meta["result"]["answer"] == aggs[-1].attrs["value"]
    robust = run(
        topology,
        "arith",
        agents=4,
        seed=1,
        task_size=16,
        aggregate="vote",
        defenses=Defenses(aggregation="quorum"),
    )
    last = [e for e in robust.trace.events if e.type == "aggregate"][-1]
    assert (last.attrs["method"], last.attrs["requested"]) == ("quorum", "vote")


@pytest.mark.parametrize("topology", ["centralized", "swarm"])
def test_quorum_defends_vote_poisoning_at_the_same_susceptibility(topology: str) -> None:
    def asr(defenses: Defenses) -> int:
        hits = 0
        for seed in range(12):
            attack = AggregationManipulation(susceptibility=1.0)
            res = run_attacked(
                topology,
                "arith",
                attack,
                defenses=defenses,
                seed=seed,
                task_size=16,
                aggregate="vote",
            )
            hits += attack.succeeded(res.trace)
        return hits

    plain, quorum = asr(Defenses.none()), asr(Defenses(aggregation="quorum"))
    assert plain > 0
    assert quorum < plain


def test_bad_aggregate_option_is_one_clear_error() -> None:
    with pytest.raises(
        ConfigError,
        match=r"option 'aggregate' for topology 'centralized' must be 'combine' or a vote",
    ):
        run("centralized", "arith", agents=2, seed=0, aggregate="median")
