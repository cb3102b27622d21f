"""Reported bounds hold: intervals stay in a reward difference's range; the descendant bound
is reported only for interventions it bounds."""

from __future__ import annotations

import pytest

from orchestrace.credit.counterfactual import CounterfactualMessageCredit, _estimate
from orchestrace.credit.loo import LeaveOneOutCredit
from orchestrace.credit.shapley import estimate
from orchestrace.runtime import run


def test_t_interval_is_clipped_to_the_range_of_a_reward_difference():
    mean, e = _estimate([1.0, 1.0, -1.0, 1.0], False, 0, 1.0)
    assert mean == 0.5 and e["ci95"][0] == -1.0 and e["ci95"][1] == 1.0
    _, raw = _estimate([1.0, 1.0, -1.0, 1.0], False, 0)
    assert raw["ci95"][0] < -1.0 and raw["ci95"][1] > 1.0  # unclipped without a range
    assert estimate([1.0, 1.0, -1.0, 1.0], limit=1.0)["ci95"] == [-1.0, 1.0]


@pytest.fixture(scope="module")
def trace():
    return run("centralized", "arith", agents=3, seed=3, task_size=16).trace


def test_every_interval_lies_in_minus_one_one(trace):
    t = CounterfactualMessageCredit(samples=4).assign(trace, "message")
    loo = LeaveOneOutCredit(samples=4).assign(trace, "agent")
    for est in [*t.estimates.values(), *loo.estimates.values()]:
        lo, hi = est["ci95"]
        assert -1.0 <= lo <= hi <= 1.0


def test_descendant_bound_only_where_it_bounds(trace):
    drop = CounterfactualMessageCredit(samples=2).assign(trace, "message").stats
    assert drop["backend_calls"] <= drop["descendant_calls"]
    for iv, unit in (("spawn-one-more", "turn"), ("resample", "message")):
        s = CounterfactualMessageCredit(samples=2, intervention=iv).assign(trace, unit).stats
        assert "descendant_calls" not in s and "vs_descendants" not in s


def test_temperature_flag_reaches_the_backend_options():
    import argparse

    from orchestrace.cli._backend import add_backend_flags, backend_args
    from orchestrace.errors import ConfigError

    p = argparse.ArgumentParser()
    add_backend_flags(p, "forks")
    assert backend_args(p.parse_args(["--temperature", "0.7"]))["backend_options"] == {
        "temperature": 0.7
    }
    with pytest.raises(ConfigError, match="--temperature does not apply to --backend sim"):
        backend_args(p.parse_args(["--backend", "sim", "--temperature", "0.7"]))
    with pytest.raises(ConfigError, match="--temperature must be from 0 to 2"):
        backend_args(p.parse_args(["--temperature", "9"]))
