"""Counterfactual credit of turns: stop-at and spawn-one-more, on topology and episode traces."""

import pytest

from orchestrace import ConfigError, TraceError, dump
from orchestrace.cli import main
from orchestrace.credit import make_assigner
from orchestrace.credit.base import unit_members
from orchestrace.learn.env import make_env
from orchestrace.runtime import run
from orchestrace.runtime.replay import ForceStop, fork


@pytest.fixture(scope="module")
def central():
    tr = run("centralized", "arith", agents=3, seed=1, task_size=12).trace
    assert tr.metrics["task_success"] == 1.0
    return tr


def test_stop_at_credits_every_turn(central):
    t = make_assigner("counterfactual", samples=3, intervention="stop-at").assign(central, "turn")
    assert {r.id for r in t.rows} == set(unit_members(central, "turn"))
    assert t.stats["intervention"] == "stop-at" and t.stats["calls_per_turn"] > 0
    # stopping the orchestrator before its aggregate leaves the run without an answer: that
    # turn earned the whole reward, in every sample
    last = max(e.step for e in central.events if e.agent == "orchestrator")
    row = t.estimates[f"orchestrator@{last}"]
    assert (row["kept"], row["intervened"], row["se"]) == (1.0, 0.0, 0.0)
    stopped = fork(central, [ForceStop(last)])
    assert stopped.trace.meta["result"]["answer"] is None


def test_spawn_one_more_credits_the_team_size_decision(central):
    t = make_assigner("counterfactual", samples=2, intervention="spawn-one-more").assign(
        central, "turn"
    )
    assert [r.id for r in t.rows] == ["orchestrator@0"]
    assert t.estimates["orchestrator@0"]["samples"] == 2
    assert t.stats["backend_calls"] > 0


def test_spawn_one_more_on_an_episode_has_a_row_per_round():
    env = make_env("orchestrate-v0", task="arith")
    env.reset(seed=4, options={"size": 10})
    info = {}
    for d in [
        {"spawn": 1, "role": "novice", "comm": "none", "aggregate": "vote", "stop": False},
        {"spawn": 2, "role": "novice", "comm": "broadcast", "aggregate": "vote", "stop": False},
        {"spawn": 0, "role": "worker", "comm": "none", "aggregate": "vote", "stop": True},
    ]:
        *_, info = env.step(env.encode(d))
    env.close()
    tr = info["trace"]
    t = make_assigner("counterfactual", samples=2, intervention="spawn-one-more").assign(tr, "turn")
    assert sorted(r.id for r in t.rows) == ["orchestrator@0", "orchestrator@1"]
    assert all(e["samples"] == 2 for e in t.estimates.values())


def test_units_and_kinds_that_do_not_fit(central):
    with pytest.raises(ConfigError, match=r"--intervention stop-at is defined for turns"):
        make_assigner("counterfactual", intervention="stop-at").assign(central, "message")
    with pytest.raises(ConfigError, match=r"--intervention drop is defined for messages"):
        make_assigner("counterfactual").assign(central, "turn")
    critic = run("critic_loop", "arith", agents=2, seed=0, task_size=8).trace
    with pytest.raises(TraceError, match=r"takes no team-size decision \(n_workers\)"):
        make_assigner("counterfactual", intervention="spawn-one-more").assign(critic, "turn")


def test_cli(central, tmp_path, capsys):
    path = tmp_path / "c.json"
    dump(central, path)
    argv = ["credit", str(path), "--method", "counterfactual", "--unit", "turn"]
    assert main([*argv, "--intervention", "stop-at", "--samples", "2"]) == 0
    out = capsys.readouterr().out
    assert "counterfactual credit at unit turn" in out and "orchestrator@0" in out
    assert main([*argv, "--intervention", "stop-at", "--unit", "message"]) == 1
    assert "defined for turns (--unit turn)" in capsys.readouterr().err
