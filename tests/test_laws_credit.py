"""Law: every credit assigner that claims efficiency sums to what it distributes, at every unit.

Over the registry (``orchestrace.credit.ASSIGNERS``), every unit (``UNITS``) and recorded traces
of every topology (``TOPOLOGIES``) on two tasks and two seeds: a table that says it is efficient
(``CreditTable.efficient``) has rows summing to its ``reward``, with a row for each member of the
unit; an assigner's class flag and its tables agree; a unit an assigner does not define is
refused with a one-line ``ConfigError`` that says what to use instead.
"""

from __future__ import annotations

import math

import pytest

from orchestrace.credit import ASSIGNERS, UNITS, check_credit, make_assigner, unit_members
from orchestrace.errors import ConfigError
from orchestrace.runtime import TOPOLOGIES, run
from orchestrace.trace.model import Trace

TASKS = ("arith-mapreduce-v0", "multihop-v0")
SEEDS = (1, 4)
#: Assigner settings: defaults, plus Monte-Carlo Shapley (efficient along every permutation).
SETTINGS: dict[str, list[dict[str, object]]] = {
    "shapley": [{}, {"permutations": 5, "seed": 3}],
    "loo": [{"samples": 1}],
    "counterfactual": [{"samples": 1}],
}


def _cases() -> list[tuple[str, dict[str, object]]]:
    return [(name, kw) for name in sorted(ASSIGNERS) for kw in SETTINGS.get(name, [{}])]


@pytest.fixture(scope="module")
def traces() -> dict[str, list[Trace]]:
    """Recorded traces by topology (both tasks, both seeds), small teams and instances."""
    out: dict[str, list[Trace]] = {}
    for topo in sorted(TOPOLOGIES):
        out[topo] = [
            run(
                topo, task, agents=3, seed=seed, task_size=6 if task.startswith("arith") else 2
            ).trace
            for task in TASKS
            for seed in SEEDS
        ]
    return out


def test_the_registry_has_efficient_and_inefficient_assigners() -> None:
    flags = {name: bool(ASSIGNERS[name].efficient) for name in ASSIGNERS}
    assert {"uniform", "discounted", "shapley"} <= {n for n, f in flags.items() if f}
    assert not all(flags.values())


def _assert_law(trace: Trace, name: str, assigner: object, unit: str, reward: float | None) -> None:
    where = (
        f"{name} at {unit} on {trace.topology}/{trace.task_id} ({trace.trace_id}), reward={reward}"
    )
    try:
        table = assigner.assign(trace, unit, reward=reward)  # type: ignore[attr-defined]
    except ConfigError as err:
        # a unit the method does not define (or too many players for exact Shapley): refused
        # in one line that names what to do instead
        msg = str(err)
        assert "\n" not in msg and ("use " in msg or "pass " in msg), (where, msg)
        return
    assert table.efficient == type(assigner).efficient, where
    assert table.method == name, where
    assert {r.unit for r in table.rows} <= {unit}, where
    assert all(math.isfinite(r.value) for r in table.rows), where
    assert check_credit(table, trace) == [], where
    if not table.efficient:
        return
    members = unit_members(trace, unit)
    assert {r.id for r in table.rows} == set(members), where
    assert table.reward is not None, where
    if reward is not None:
        assert table.reward == reward, where
    if members:
        assert table.total(unit) == pytest.approx(table.reward, abs=1e-9), where
    else:
        assert table.rows == [], where


def _params() -> list[object]:
    out = []
    for name, kw in _cases():
        for reward in (None, 0.7):
            label = f"{name}-{kw or 'default'}-reward={reward}".replace(" ", "")
            out.append(pytest.param(name, kw, reward, id=label))
    return out


@pytest.mark.parametrize("topology", sorted(TOPOLOGIES))
@pytest.mark.parametrize(("name", "kw", "reward"), _params())
def test_efficient_assigners_sum_to_what_they_distribute_at_every_unit(
    traces: dict[str, list[Trace]],
    topology: str,
    name: str,
    kw: dict[str, object],
    reward: float | None,
) -> None:
    assigner = make_assigner(name, **kw)
    assert isinstance(assigner.efficient, bool)
    # an assigner that makes no claim is checked for not claiming it, on one trace
    checked = traces[topology] if assigner.efficient else traces[topology][:1]
    for trace in checked:
        for unit in UNITS:
            _assert_law(trace, name, assigner, unit, reward)


def test_the_law_sees_messages_and_actions() -> None:
    """The traces cover the units the law is about (not only empty message/action tables)."""
    units_seen: set[str] = set()
    for topo in sorted(TOPOLOGIES):
        trace = run(topo, "multihop-v0", agents=3, seed=1, task_size=2).trace
        units_seen |= {u for u in UNITS if unit_members(trace, u)}
    assert units_seen == set(UNITS)
