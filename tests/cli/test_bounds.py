"""Counts, sizes and rewards beyond what the command can do give one clear line, exit 1."""

from __future__ import annotations

import math

import pytest

from orchestrace.cli import main
from orchestrace.credit import DiscountedCredit, UniformCredit
from orchestrace.errors import ConfigError
from orchestrace.learn.evaluate import evaluate
from orchestrace.runtime import run
from orchestrace.trace.generate import generate_trace


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["generate", "--steps", str(10**27), "-o", "OUT.json"],
            "error: --steps is out of range (got a 28-digit number); use a value below 2**63",
        ),
        (
            ["generate", "--agents", str(-(10**20)), "-o", "OUT.json"],
            "error: --agents is out of range (got a 21-digit number); use a value below 2**63",
        ),
        (
            ["generate", "--steps", str(10**9), "-o", "OUT.json"],
            "error: steps must be at most 100,000,000 (got 1,000,000,000); a generated trace is "
            "held in memory, so generate several smaller ones",
        ),
        (
            ["evaluate", "--seeds", str(10**9), "--episodes", "1000"],
            "error: 1000000000 seeds x 1000 episodes is more than 100,000,000 episodes per "
            "policy; use fewer seeds or episodes",
        ),
    ],
)
def test_hostile_counts_are_refused(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err == message
    assert not (tmp_path / "OUT.json").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["credit", "T.json", "--top", "-1"],
        ["analyze", "T.json", "--max-path", "-1"],
        ["convert", "T.json", "-o", "OUT.json", "--indent", "-5"],
        ["reward", "T.json", "--step", "-1"],
        ["run", "swarm", "--agents", "-3", "-o", "OUT.json"],
        ["bench", "--jobs", "-2", "-o", "OUT.json"],
    ],
)
def test_negative_counts_are_refused_before_anything_runs(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    flag = next(a for a in argv if a.startswith("--"))
    value = argv[argv.index(flag) + 1]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"error: {flag} must not be negative (got {value}); e.g. {flag} {value[1:]}"
    assert not (tmp_path / "OUT.json").exists()


def test_generate_api_bounds():
    with pytest.raises(ConfigError, match="agents must be at most 10,000,000"):
        generate_trace(agents=10**7 + 1, steps=10)


def test_evaluate_api_bounds():
    with pytest.raises(ConfigError, match="seeds and episodes must be >= 1"):
        evaluate(object(), seeds=0)


@pytest.mark.parametrize("assigner", [UniformCredit, DiscountedCredit])
@pytest.mark.parametrize("reward", [math.nan, math.inf, -math.inf, True, "1"])
def test_credit_refuses_a_reward_that_is_not_a_finite_number(assigner, reward):
    trace = run("centralized", "arith-mapreduce-v0", agents=2, seed=0).trace
    with pytest.raises(ConfigError, match=r"^reward must be a finite number \(got "):
        assigner().assign(trace, unit="agent", reward=reward)
    assert assigner().assign(trace, unit="agent", reward=0.5).reward == 0.5


@pytest.mark.parametrize(
    "argv",
    [
        ["convert", "T.json", "-o", "OUT.json", "--indent", str(10**9)],
        ["schema", "--indent", "33"],
    ],
)
def test_an_indent_beyond_32_spaces_is_refused_before_anything_is_written(
    argv, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    out = capsys.readouterr()
    value = int(argv[-1])
    assert out.err.strip() == f"error: indent must be at most 32 spaces (got {value:,}); e.g. 2"
    assert out.out == ""
    assert not (tmp_path / "OUT.json").exists()
