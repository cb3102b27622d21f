"""Credit forks on every executor: the same table, byte for byte, on the simulator."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrace.credit import make_assigner
from orchestrace.errors import ConfigError
from orchestrace.executors import make_executor
from orchestrace.runtime import run

CASES = [
    ("counterfactual", "message", {"samples": 2}),
    ("counterfactual", "message", {"samples": 2, "intervention": "resample"}),
    ("counterfactual", "turn", {"samples": 2, "intervention": "stop-at"}),
    ("loo", "agent", {"samples": 2}),
    ("loo", "message", {"samples": 1}),
    ("shapley", "agent", {"samples": 2}),
    ("shapley", "message", {"samples": 1, "permutations": 3}),
]


@pytest.fixture(scope="module")
def trace() -> Any:
    return run("debate", "arith", agents=3, seed=5, rounds=1, task_size=16).trace


def _tables(trace: Any, executor: Any) -> list[str]:
    out = []
    for method, unit, kw in CASES:
        t = make_assigner(method, executor=executor, **kw).assign(trace, unit)
        out.append(t.to_json() + repr(sorted(t.stats.items())))
    return out


@pytest.mark.slow
def test_forks_give_the_same_tables_on_every_executor(trace: Any, shared_ray: str | None) -> None:
    plain = _tables(trace, None)
    assert _tables(trace, make_executor("local")) == plain
    with make_executor("process", 2) as ex:
        assert _tables(trace, ex) == plain
    if shared_ray is not None:
        assert _tables(trace, make_executor("ray", 2)) == plain


def test_a_reward_that_cannot_be_pickled_is_refused_for_processes(trace: Any) -> None:
    credit = make_assigner(
        "loo", executor=make_executor("process", 2), reward_fn=lambda traces: [1.0 for _ in traces]
    )
    with pytest.raises(
        ConfigError, match=r"the forks cannot go to worker processes.*--executor local"
    ):
        credit.assign(trace, "agent")


def test_backend_factory_stays_local(trace: Any) -> None:
    from orchestrace.credit.counterfactual import CounterfactualMessageCredit

    credit = CounterfactualMessageCredit(
        backend_factory=lambda tr, k: None, executor=make_executor("process", 2)
    )
    with pytest.raises(ConfigError, match="backend_factory runs in this process only"):
        credit.assign(trace, "message")
