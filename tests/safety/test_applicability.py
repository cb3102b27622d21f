"""An attack refuses what it cannot act on, judged from the team and from what the task does."""

from __future__ import annotations

import pytest

from orchestrace.errors import ConfigError
from orchestrace.safety.attacks import (
    Collusion,
    IndirectInjection,
    LookAlike,
    Replication,
    Spoofing,
    run_attacked,
)


@pytest.mark.parametrize(
    ("topology", "attack", "why"),
    [
        ("swarm", Spoofing(), "no other agent whose name a forgery could take"),
        ("debate", Spoofing(), "no other agent whose name a forgery could take"),
        ("centralized", Collusion(), "a colluding subset needs two or more"),
        ("swarm", LookAlike(), "no honest peer to look like"),
        ("debate", Replication(), "nothing can spread"),
    ],
)
def test_a_team_of_one_is_refused(topology: str, attack: object, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        run_attacked(topology, "arith-mapreduce-v0", attack, agents=1, seed=0, task_size=8)  # type: ignore[arg-type]


def test_collusion_of_one_agent_is_not_collusion() -> None:
    with pytest.raises(ConfigError, match="collusion: agents must be >= 2"):
        Collusion(agents=1)


@pytest.mark.parametrize("task", ["wide-search-v2", "multihop-v2"])
def test_indirect_injection_applies_to_every_task_that_reads_its_tool_results(task: str) -> None:
    attack = IndirectInjection(susceptibility=1.0)
    assert attack.applies_to("centralized", task) is None
    hits = sum(
        attack.succeeded(
            run_attacked("centralized", task, attack, agents=3, seed=s, task_size=8).trace
        )
        for s in range(3)
    )
    assert hits == 3


@pytest.mark.parametrize("task", ["arith-mapreduce-v0", "wide-search-v0", "math-v0"])
def test_indirect_injection_refuses_tasks_whose_tool_results_reach_no_prompt(task: str) -> None:
    why = IndirectInjection().applies_to("centralized", task)
    assert why is not None and "never reach the model's prompt" in why
