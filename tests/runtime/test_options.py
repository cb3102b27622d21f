"""Options and budgets are checked before a run starts; the virtual clock works at any time."""

import asyncio
import json
import math
import time

import pytest

from orchestrace.cli import main
from orchestrace.errors import ConfigError
from orchestrace.runtime import RunConfig, run
from orchestrace.runtime.clock import Deadlock, run_virtual
from orchestrace.runtime.topologies import OPTIONS, check_options, team_note


def cli(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


# --------------------------------------------------------------------------- option names
@pytest.mark.parametrize(
    "topology,key,message",
    [
        ("debate", "round", "unknown option 'round' for topology 'debate'; did you mean 'rounds'?"),
        ("hierarchical", "manager", "did you mean 'managers'?"),
        ("swarm", "gosip", "did you mean 'gossip'?"),
        (
            "swarm",
            "rounds",
            "unknown option 'rounds' for topology 'swarm' (its options: aggregate, chunks,",
        ),
        ("critic_loop", "xyz", "unknown option 'xyz' for topology 'critic_loop' (its options:"),
        ("committee", "debater", "for topology 'debate'; did you mean 'debaters'?"),
    ],
)
def test_unknown_option_names(topology, key, message):
    with pytest.raises(ConfigError) as info:
        check_options(topology, {key: 1})
    assert message in str(info.value)


# -------------------------------------------------------------------------- option values
BAD_VALUES = [
    ("debate", "rounds", "abc", "must be an integer from 1 to 1000000 (got 'abc')"),
    ("debate", "rounds", -1, "must be an integer from 1 to 1000000 (got -1)"),
    ("debate", "rounds", 0, "(got 0)"),
    ("debate", "rounds", 2.5, "(got 2.5)"),
    ("debate", "rounds", True, "(got True)"),
    ("debate", "rounds", 10**27, "(got 1000000000000000000000000000)"),
    ("debate", "debaters", 1, "must be an integer from 2 to"),
    ("critic_loop", "rounds", 0, "must be an integer from 1 to"),
    ("pipeline", "rounds", -1, "must be an integer from 0 to"),
    ("hierarchical", "managers", 0, "option 'managers' for topology 'hierarchical' must be an"),
    ("hierarchical", "managers", -3, "(got -3)"),
    ("swarm", "chunks", 0, "option 'chunks' for topology 'swarm' must be an integer from 1"),
    ("swarm", "patience", -1, "option 'patience' for topology 'swarm' must be a number from 0"),
    ("swarm", "patience", math.inf, "(got inf)"),
    (
        "swarm",
        "gossip",
        math.nan,
        "option 'gossip' for topology 'swarm' must be a number from 0 to 1",
    ),
    ("swarm", "gossip", "nan", "(got 'nan')"),
    ("swarm", "gossip", "inf", "(got 'inf')"),
    ("swarm", "gossip", 5, "(got 5)"),
    ("swarm", "gossip", -0.1, "(got -0.1)"),
    ("swarm", "gossip", [0.5], "(got [0.5])"),
    ("swarm", "roles", [], "must be a non-empty list of role names"),
    ("swarm", "roles", "expert", "must be a non-empty list of role names"),
    ("swarm", "roles", ["a", 3], "must be a non-empty list of role names"),
    ("swarm", "worker_role", "", "must be a non-empty name"),
]


@pytest.mark.parametrize("topology,key,value,message", BAD_VALUES)
def test_bad_option_values(topology, key, value, message):
    with pytest.raises(ConfigError) as info:
        check_options(topology, {key: value})
    assert message in str(info.value)


def test_good_option_values_are_normalised():
    assert check_options("debate", {"rounds": "3", "debaters": 4.0, "patience": "2.5"}) == {
        "rounds": 3,
        "debaters": 4,
        "patience": 2.5,
    }
    assert check_options("swarm", {"gossip": 1, "roles": ("expert", "novice")}) == {
        "gossip": 1.0,
        "roles": ["expert", "novice"],
    }
    assert check_options("pipeline", {"rounds": 0}) == {"rounds": 0}


def test_every_option_a_topology_reads_is_known():
    import inspect
    import re

    from orchestrace.runtime.topologies import (
        centralized,
        common,
        critic_loop,
        debate,
        hierarchical,
        pipeline,
        swarm,
    )

    def read(mod):
        return set(re.findall(r'ctx\.option\("(\w+)"', inspect.getsource(mod)))

    shared = read(common)
    uses = {
        "centralized": read(centralized) | shared,
        "hierarchical": read(hierarchical) | shared,
        "swarm": read(swarm) | shared,
        "critic_loop": read(critic_loop) | {"chunks"},
        "debate": read(debate),
        "pipeline": read(pipeline) | {"chunks"},
    }
    for name, options in uses.items():
        assert options == set(OPTIONS[name]), name


def test_run_api_rejects_bad_options_before_running(tmp_path):
    out = tmp_path / "t.jsonl"
    with pytest.raises(ConfigError, match="option 'rounds' for topology 'debate'"):
        run("debate", agents=2, rounds="abc", output=out)
    assert not out.exists()
    res = run("debate", agents=2, rounds="1")
    assert res.trace.meta["config"]["options"] == {"rounds": 1}


@pytest.mark.parametrize(
    "argv,message",
    [
        (["run", "debate", "-O", "round=5"], "unknown option 'round' for topology 'debate'; did "),
        (["run", "debate", "-O", "rounds=abc"], "option 'rounds' for topology 'debate' must be"),
        (["run", "swarm", "-O", "gossip=nan"], "option 'gossip' for topology 'swarm' must be"),
        (["run", "swarm", "-O", "gossip=NaN"], "(got nan)"),
        (["run", "swarm", "-O", "gossip=5"], "(got 5)"),
        (["run", "hierarchical", "-O", "managers=0"], "option 'managers'"),
        (["run", "swarm", "-O", "patience=-1"], "option 'patience'"),
        (["run", "swarm", "-O", "chunks=0"], "option 'chunks'"),
        (["run", "swarm", "--seed", "-1"], "--seed must be an integer from 0 to 2**63-1 (got -1)"),
        (["run", "swarm", "--task-seed", "-1"], "--task-seed must be an integer from 0"),
        (["run", "swarm", "--seed", str(10**27)], "--seed must be an integer from 0 to 2**63-1"),
        (["generate", "--seed", "-1", "-o", "x.json"], "--seed must be an integer from 0"),
        (["train", "--seed", "-1"], "--seed must be an integer from 0"),
        (["demo", "--seed", "-1"], "--seed must be an integer from 0"),
        (["study", "stopping", "--train-seed", "-1"], "--train-seed must be an integer from 0"),
        (["run", "swarm", "--max-wall", "inf"], "max_wall_s must be a finite number of seconds"),
        (["run", "swarm", "--max-wall", "nan"], "leave it out (no --max-wall) for no time limit"),
        (["run", "swarm", "--max-wall", "-1"], "max_wall_s must be a finite number of seconds"),
        (
            ["run", "swarm", "--max-steps", str(10**27)],
            "--max-steps is out of range (got a 28-digit number); use a value below 2**63",
        ),
        (
            ["run", "swarm", "--max-tokens", str(2**63)],
            "--max-tokens is out of range (got a 19-digit number); use a value below 2**63",
        ),
        (["run", "swarm", "--tool-failure-rate", "nan"], "tool_failure_rate must be a finite"),
    ],
)
def test_cli_bad_options_one_line_exit_1(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    rc, _out, err = cli(capsys, *argv)
    assert rc == 1
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err
    assert list(tmp_path.iterdir()) == []  # nothing was written


def test_largest_budgets_are_accepted(capsys):
    rc, out, _err = cli(
        capsys, "run", "swarm", "-k", "2", "--max-steps", str(2**63 - 1), "--no-progress", "--json"
    )
    assert rc == 0 and json.loads(out)["events"] > 0


# ---------------------------------------------------------------------------- team notes
def test_capped_agents_print_a_note(capsys):
    rc, _out, err = cli(capsys, "run", "swarm", "-k", "300", "--no-progress")
    assert rc == 0
    assert (
        "note: arith-mapreduce-v0 has 64 items; using 64 workers (pass --task-size 300 for more)"
        in err
    )
    rc, _out, err = cli(capsys, "run", "swarm", "-k", "4", "--no-progress")
    assert rc == 0 and "note:" not in err


@pytest.mark.parametrize(
    "topology,agents,options,expected",
    [
        ("centralized", 8, {}, None),
        ("hierarchical", 300, {}, "using 64 workers"),
        ("hierarchical", 4, {"managers": 9}, "note: using 4 managers"),
        ("debate", 300, {}, "note: debate uses 7 debaters and a judge (--agents 300)"),
        ("debate", 1, {}, "debate uses 2 debaters"),
        ("debate", 5, {"debaters": 5}, None),
        ("critic_loop", 8, {}, "critic_loop uses one worker and one critic"),
        ("pipeline", 100, {}, "using 64 parts"),
    ],
)
def test_team_notes(topology, agents, options, expected):
    note = team_note(topology, "arith-mapreduce-v0", 64, agents, options)
    if expected is None:
        assert note is None
    else:
        assert note is not None and expected in note


# ---------------------------------------------------------------------------- RunConfig
@pytest.mark.parametrize(
    "kw,message",
    [
        ({"seed": -1}, "seed must be an integer from 0 to 2**63-1 (got -1)"),
        ({"seed": 2**63}, "seed must be an integer from 0"),
        ({"seed": 1.5}, "seed must be an integer"),
        ({"max_wall_s": math.inf}, "max_wall_s must be a finite number of seconds > 0"),
        ({"max_wall_s": math.nan}, "max_wall_s must be a finite number"),
        ({"max_wall_s": "10"}, "max_wall_s must be a finite number"),
        ({"max_steps": 10**27}, "max_steps must be at most 2**63-1"),
        ({"agents": 2**64}, "agents must be at most 2**63-1"),
        ({"tool_latency_s": math.inf}, "tool_latency_s must be a finite number"),
        ({"options": [1]}, "options must be a mapping"),
    ],
)
def test_run_config_checks(kw, message):
    with pytest.raises(ConfigError) as info:
        RunConfig(**kw)
    assert message in str(info.value)


# ---------------------------------------------------------------------------- the clock
@pytest.mark.parametrize("delay", [1.7e7, 2e7, 1e9, 1e12, 1e15, 1e300])
def test_virtual_timers_fire_at_any_time(delay):
    async def main():
        loop = asyncio.get_running_loop()
        await asyncio.sleep(delay)
        return loop.time()

    t0 = time.perf_counter()
    assert run_virtual(main()) == delay
    assert time.perf_counter() - t0 < 1.0


def test_virtual_timers_keep_order_at_large_times():
    async def main():
        loop = asyncio.get_running_loop()
        seen = []

        async def at(d, tag):
            await asyncio.sleep(d)
            seen.append((tag, loop.time()))

        await asyncio.gather(at(1e9 + 2, "b"), at(1e9, "a"), at(1e15, "c"))
        await asyncio.sleep(1e9)
        return seen, loop.time()

    t0 = time.perf_counter()
    seen, end = run_virtual(main())
    assert seen == [("a", 1e9), ("b", 1e9 + 2), ("c", 1e15)]
    assert end == 1e15 + 1e9
    assert time.perf_counter() - t0 < 1.0


def test_wait_for_with_a_huge_timeout_is_virtual():
    async def main():
        try:
            await asyncio.wait_for(asyncio.Event().wait(), 1e9)
        except TimeoutError:
            return asyncio.get_running_loop().time()

    t0 = time.perf_counter()
    assert run_virtual(main()) == 1e9
    assert time.perf_counter() - t0 < 1.0


def test_an_infinite_timer_alone_is_a_deadlock():
    async def main():
        await asyncio.sleep(math.inf)

    t0 = time.perf_counter()
    with pytest.raises(Deadlock, match="deadlocked"):
        run_virtual(main(), watchdog_s=0.05)
    assert time.perf_counter() - t0 < 1.0


def test_run_with_a_huge_wall_budget_and_patience_finishes():
    t0 = time.perf_counter()
    res = run("swarm", agents=3, max_wall_s=1e12, patience=1e9)
    assert res.trace.meta["result"]["stop_reason"] == "done"
    assert time.perf_counter() - t0 < 5.0
