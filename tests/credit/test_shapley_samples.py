"""Shapley and leave-one-out credit from K paired draws per coalition or arm, with error bars."""

import math

import pytest

from orchestrace import ConfigError
from orchestrace.cli import main
from orchestrace.credit import (
    LeaveOneOutCredit,
    ShapleyCredit,
    check_credit,
    shapley_exact,
)
from orchestrace.credit.shapley import TraceGame, downstream_llm_keys, redraw, unit_starts
from orchestrace.credit.target import counterfactual_reward
from orchestrace.io import dump
from orchestrace.runtime import run
from orchestrace.runtime.replay import DropMessage, Silence, backend_for, fork


@pytest.fixture(scope="module")
def debate():
    """A 3-debater debate whose outcome varies across draws (task size 16)."""
    return run("debate", "arith", agents=3, seed=2, task_size=16, rounds=2).trace


@pytest.fixture(scope="module")
def team():
    return run("centralized", "arith", agents=3, seed=2, task_size=6).trace


def test_estimate_is_efficient_for_the_estimated_values(debate):
    t = ShapleyCredit(samples=6).assign(debate, "agent")
    s = t.stats
    players = [p for p in t.by_unit("agent") if p != "orchestrator"]
    # the players share v(all) - v(empty) of the estimated values, the root v(empty)
    assert sum(t.by_unit("agent")[p] for p in players) == pytest.approx(s["v_all"] - s["v_empty"])
    assert t.total("agent") == pytest.approx(t.reward) and t.reward == pytest.approx(s["v_all"])
    assert check_credit(t, debate) == []
    assert s["samples"] == 6 and s["paired"] is True and s["backend_calls"] > 0


def test_rows_carry_standard_errors_and_intervals(debate):
    t = ShapleyCredit(samples=6).assign(debate, "agent")
    values = t.by_unit("agent")
    assert set(t.estimates) == set(values)
    spread = False
    for unit, e in t.estimates.items():
        assert e["samples"] == 6 and e["se"] >= 0
        low, high = e["ci95"]
        assert low <= values[unit] <= high
        spread |= e["se"] > 0
    assert spread  # the draws differ: the error bar is not a formality
    rows = {r["id"]: r for r in t.to_rows()}
    assert rows["debater1"]["se"] == t.estimates["debater1"]["se"]


def test_the_estimate_is_the_mean_of_per_draw_shapley_values(debate):
    k = 4
    game = TraceGame(debate, "agent", samples=k)
    per_draw = [shapley_exact(game.players, game.draw(j)) for j in range(k)]
    t = ShapleyCredit(samples=k).assign(debate, "agent")
    for p in game.players:
        draws = [d[p] for d in per_draw]
        mean = sum(draws) / k
        sd = math.sqrt(sum((x - mean) ** 2 for x in draws) / (k - 1))
        assert t.by_unit("agent")[p] == pytest.approx(mean)
        assert t.estimates[p]["se"] == pytest.approx(sd / math.sqrt(k))


def test_draw_zero_is_the_recorded_run_and_later_draws_are_paired(debate):
    game = TraceGame(debate, "agent", samples=5)
    everyone = frozenset(game.players)
    draws = game.draws(everyone)
    assert draws[0] == debate.rewards["team"]  # draw 0: the recorded run, no fork
    assert len(set(draws)) > 1  # later draws redraw the players' calls
    # draw k of a coalition is a fork that redraws the same calls on seed + k, by hand:
    starts = sorted({i for p in game.players for i in unit_starts(debate, "agent", p)})
    keys = downstream_llm_keys(debate, starts)
    without = frozenset(p for p in game.players if p != "debater1")
    for k in (1, 3):
        backend = backend_for(debate, None, seed_offset=k)
        res = fork(debate, [redraw(keys), Silence("debater1")], backend=backend)
        assert game.draws(without)[k] == counterfactual_reward(res.trace)
        full = fork(debate, [redraw(keys)], backend=backend_for(debate, None, seed_offset=k))
        assert game.draws(everyone)[k] == counterfactual_reward(full.trace)


def test_one_draw_keeps_the_single_realisation_and_says_so(debate):
    t = ShapleyCredit().assign(debate, "agent")
    assert t.stats["samples"] == 1 and t.stats["v_all"] == debate.rewards["team"]
    assert all(e["se"] is None and e["ci95"] is None for e in t.estimates.values())
    assert "no error bar" in t.stats["note"]


def test_same_recorded_seed_same_estimate(team):
    a = ShapleyCredit(samples=3).assign(team, "agent")
    b = ShapleyCredit(samples=3).assign(team, "agent")
    assert a.by_unit("agent") == b.by_unit("agent")
    assert a.stats["backend_calls"] == b.stats["backend_calls"]


def test_monte_carlo_permutations_per_draw_stay_efficient(team):
    t = ShapleyCredit(samples=3, permutations=4).assign(team, "agent")
    assert t.stats["exact"] is False and t.stats["permutations"] == 4
    assert t.total("agent") == pytest.approx(t.reward)
    assert t.stats["hoeffding"] == pytest.approx(2.0 * math.sqrt(math.log(40) / 8))
    one = ShapleyCredit(permutations=20).assign(team, "agent")  # one draw: permutation error
    assert one.total("agent") == pytest.approx(one.reward)
    assert all(e["se"] is not None for k, e in one.estimates.items() if k != "orchestrator")


def test_message_players(team):
    msgs = [e.id for e in team.events if e.type == "message"]
    t = ShapleyCredit(samples=2, permutations=3).assign(team, "message")
    assert set(t.by_unit("message")) <= set(msgs)
    assert t.total("message") == pytest.approx(t.stats["v_all"] - t.stats["v_empty"])


def test_leave_one_out_with_paired_draws(debate):
    t = LeaveOneOutCredit(samples=5).assign(debate, "agent")
    assert t.stats["samples"] == 5 and t.stats["paired"] is True
    assert t.stats["backend_calls"] == sum(e["backend_calls"] for e in t.estimates.values()) > 0
    for unit, value in t.by_unit("agent").items():
        e = t.estimates[unit]
        assert value == pytest.approx(e["kept"] - e["intervened"])
        low, high = e["ci95"]
        assert low <= value <= high and e["se"] >= 0
    assert any(e["se"] > 0 for e in t.estimates.values())


def test_leave_one_out_draw_zero_is_the_classic_difference_reward(debate):
    t = LeaveOneOutCredit().assign(debate, "agent")
    base = debate.rewards["team"]
    for agent, value in t.by_unit("agent").items():
        res = fork(debate, [Silence(agent)])
        assert value == base - counterfactual_reward(res.trace)
    msg = next(e.id for e in debate.events if e.type == "message")
    m = LeaveOneOutCredit().assign(debate, "message")
    res = fork(debate, [DropMessage.of(debate, msg)])
    assert m.by_unit("message")[msg] == base - counterfactual_reward(res.trace)
    assert all(e["se"] is None for e in m.estimates.values())


@pytest.mark.parametrize("bad", [0, -1, True, 10**30, 2.5])
def test_bad_sample_counts_are_one_clear_error(bad):
    for cls in (ShapleyCredit, LeaveOneOutCredit):
        with pytest.raises(
            ConfigError, match=r"samples must be an integer from 1 to .*--samples K"
        ):
            cls(samples=bad)
    with pytest.raises(ConfigError, match=r"permutations must be .*--permutations M"):
        ShapleyCredit(permutations=bad)


def test_too_many_players_names_permutations(team):
    with pytest.raises(ConfigError, match=r"too many for exact Shapley.*--permutations M"):
        ShapleyCredit(exact_limit=2).assign(team, "agent")


def test_cli_samples_and_permutations(team, tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    dump(team, path)
    argv = ["credit", str(path), "--unit", "agent"]
    assert main([*argv, "--method", "shapley", "--samples", "3"]) == 0
    out = capsys.readouterr().out
    assert "samples: 3" in out and "paired: True" in out and " ± " in out and "95% CI" in out
    assert main([*argv, "--method", "loo", "--samples", "3"]) == 0
    out = capsys.readouterr().out
    assert "samples: 3" in out and " ± " in out
    assert main([*argv, "--method", "shapley", "--permutations", "5"]) == 0
    assert "permutations: 5" in capsys.readouterr().out
    assert main([*argv, "--method", "loo", "--permutations", "5"]) == 1
    err = capsys.readouterr().err
    assert err == "error: --permutations applies to --method shapley, not to loo; leave it out\n"
    # a flag of another method is refused, not dropped
    assert main([*argv, "--method", "uniform", "--samples", "3"]) == 1
    assert "--samples applies to the methods that re-execute the run" in capsys.readouterr().err
    assert main([*argv, "--method", "loo", "--gamma", "0.5"]) == 1
    err = capsys.readouterr().err
    assert err == "error: --gamma applies to --method discounted, not to loo; leave it out\n"
    assert main([*argv, "--method", "discounted", "--gamma", "0.5"]) == 0
    capsys.readouterr()
    assert main([*argv, "--method", "shapley", "--samples", "0"]) == 1
    assert "samples must be an integer from 1 to 1,000,000 (--samples K)" in capsys.readouterr().err
