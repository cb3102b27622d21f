"""`orchestrace run --sim-option KEY=VALUE`: every simulator option from the command line."""

import dataclasses

import pytest

from orchestrace import load
from orchestrace.cli import main
from orchestrace.cli.run import sim_option_names
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.replay import DropMessage, fork


def _cli(argv, capsys):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_every_result_changing_option_can_be_set():
    fields = {f.name for f in dataclasses.fields(SimBackend)}
    # name, virtual and the call counter are not options; the seed is --seed
    assert set(sim_option_names()) == fields - {"name", "virtual", "calls", "seed"}
    assert {"fail_rate", "skills", "role_tokens", "oracle_verifiers"} <= set(sim_option_names())


def test_options_change_the_run_and_are_recorded(tmp_path, capsys):
    base = ["run", "debate", "--task", "arith", "--agents", "3", "--no-progress", "--seed", "2"]
    plain, failing = tmp_path / "plain.json", tmp_path / "failing.json"
    assert _cli([*base, "-o", str(plain)], capsys)[0] == 0
    rc, _, err = _cli(
        [
            *base,
            "--sim-option",
            "fail_rate=1",
            "--sim-option",
            'role_tokens={"debater": 2}',
            "-o",
            str(failing),
        ],
        capsys,
    )
    assert rc == 1 and err.startswith("error: every LLM call failed"), err  # (the run is kept)
    a, b = load(plain), load(failing)
    assert a.meta["backend"]["options"]["fail_rate"] == 0.0
    assert b.meta["backend"]["options"]["fail_rate"] == 1.0
    assert b.meta["backend"]["options"]["role_tokens"] == {"debater": 2.0}
    assert not any(e.error for e in a.events if e.type == "llm_call")
    assert all(e.error for e in b.events if e.type == "llm_call")
    assert a.meta["result"]["answer"] is not None and b.meta["result"]["answer"] is None
    # a fork rebuilds the recorded options: its changed calls fail as the recording's did
    msg = next(e for e in b.events if e.type == "message")
    forked = fork(b, [DropMessage.of(b, msg.id)])
    assert forked.trace.meta["backend"]["options"] == b.meta["backend"]["options"]
    changed = [e for e in forked.trace.events if "answered_by" in (e.attrs or {})]
    assert changed and all(e.error for e in changed)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("nope=1", "the simulator has no option 'nope'; its options: error_correlation, fail_rate"),
        ("fail_rate", "--sim-option takes KEY=VALUE, got 'fail_rate'"),
        ("fail_rate=abc", "--sim-option fail_rate must be a finite number, got abc"),
        ("fail_rate=NaN", "--sim-option fail_rate must be a finite number, got NaN"),
        ("fail_rate=2", "--sim-option: fail_rate must be in [0, 1], got 2.0"),
        ("oracle_verifiers=1", "--sim-option oracle_verifiers must be true or false, got 1"),
        ("skills=3", "--sim-option skills must be a JSON object of role -> number"),
    ],
)
def test_bad_options_are_one_line(option, message, capsys):
    rc, _, err = _cli(["run", "swarm", "--no-progress", "--sim-option", option], capsys)
    assert rc == 1 and err.startswith("error: ") and message in err and err.count("\n") == 1


def test_sim_options_need_the_simulator(capsys):
    rc, _, err = _cli(
        ["run", "swarm", "--backend", "openai", "--sim-option", "fail_rate=0.1"], capsys
    )
    assert rc == 1 and "not of --backend openai" in err
