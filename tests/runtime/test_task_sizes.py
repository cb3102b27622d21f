"""Task seeds and sizes are bounded and typed: a hostile size fails at once, naming the limit."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrace.cli import main
from orchestrace.errors import ConfigError
from orchestrace.runtime import run
from orchestrace.tasks import TASKS, make_task

PURE = ["arith-mapreduce-v0", "wide-search-v0", "multihop-v0", "math-v0"]


@pytest.mark.parametrize("name", PURE)
def test_every_task_has_a_limit_and_builds_at_it_quickly(name: str) -> None:
    cls = TASKS[name]
    assert 1_000 <= cls.max_size <= 120_000  # wide-search: 10,000 workers x 12 documents
    t0 = time.perf_counter()
    task = make_task(name, seed=3, size=cls.max_size)
    task.check(task.answer)
    assert time.perf_counter() - t0 < 5.0
    with pytest.raises(ConfigError) as err:
        make_task(name, seed=3, size=cls.max_size + 1)
    assert str(err.value) == (
        f"--task-size: task size {cls.max_size + 1} is too large for {name} (the limit is "
        f"{cls.max_size}); use a size from 1 to {cls.max_size}"
    )


@pytest.mark.parametrize(
    ("size", "message"),
    [
        (100_000_000, "task size 100000000 is too large for arith-mapreduce-v0 (the limit is"),
        (10**30, "task size 1000000000000000000000000000000 is too large"),
        (10**400, "task size with 1329 bits is too large"),
        (0, "task size 0 is too small for arith-mapreduce-v0; use a size from 1 to 100000"),
        (-5, "task size -5 is too small"),
        ("64", "the task size must be an integer, got str '64'; use a size from 1 to 100000"),
        (2.5, "the task size must be an integer, got float 2.5"),
        (True, "the task size must be an integer, got bool True"),
        ({"a": 1}, "the task size must be an integer, got a dict"),
        ([64], "the task size must be an integer, got a list"),
    ],
)
def test_bad_sizes_name_the_option_and_the_range(size: Any, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        make_task("arith", seed=0, size=size)
    assert str(err.value).startswith("--task-size: ")
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("seed", "message"),
    [
        (
            -1,
            "--task-seed: task seed -1 is out of range; use an integer from 0 to 9223372036854775807",
        ),
        (2**64, "--task-seed: task seed 18446744073709551616 is out of range"),
        ("1", "--task-seed: the task seed must be an integer, got str '1'"),
        (None, "--task-seed: the task seed must be an integer, got a NoneType"),
    ],
)
def test_bad_seeds_name_the_option(seed: Any, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        make_task("multihop", seed=seed, size=4)
    assert str(err.value).startswith(message)


def test_the_source_names_the_trace_field() -> None:
    with pytest.raises(ConfigError) as err:
        make_task("math", seed=1, size=10**8, source="trace t1: meta.task")
    assert str(err.value).startswith("trace t1: meta.task.size: task size 100000000 is too large")
    with pytest.raises(ConfigError) as err:
        make_task(["arith"], source="trace t1: meta.task")  # type: ignore[arg-type]
    assert str(err.value).startswith("trace t1: meta.task.name: unknown task 'list'")


def test_direct_construction_is_bounded_too() -> None:
    from orchestrace.tasks import ArithmeticTask

    with pytest.raises(ConfigError, match="the limit is 100000"):
        ArithmeticTask(seed=0, size=10**8)


def test_humaneval_size_is_checked_before_loading_problems() -> None:
    with pytest.raises(ConfigError, match="got str 'x'"):
        make_task("humaneval", seed=0, size="x")  # type: ignore[arg-type]


def test_run_api_refuses_a_hostile_size_at_once() -> None:
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match="--task-size: task size 100000000 is too large"):
        run("swarm", "arith", agents=4, task_size=100_000_000)
    assert time.perf_counter() - t0 < 2.0


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_run_hostile_task_size(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    t0 = time.perf_counter()
    out_file = tmp_path / "big.jsonl"
    code, _, err = _cli(
        capsys, "run", "swarm", "--task-size", "100000000", "--agents", "4",
        "-o", str(out_file), "--no-progress",
    )  # fmt: skip
    assert time.perf_counter() - t0 < 5.0
    assert code == 1
    assert err.strip() == (
        "error: --task-size: task size 100000000 is too large for arith-mapreduce-v0 "
        "(the limit is 100000); use a size from 1 to 100000"
    )


@pytest.fixture(scope="module")
def recorded_doc() -> dict[str, Any]:
    from orchestrace.io import dumps

    doc: dict[str, Any] = json.loads(dumps(run("swarm", "arith", agents=3, seed=2).trace))
    return doc


@pytest.mark.parametrize(
    ("size", "message"),
    [
        (100_000_000, "meta.task.size: task size 100000000 is too large for arith-mapreduce-v0"),
        (10**30, "meta.task.size: task size 1000000000000000000000000000000 is too large"),
        ("64", "meta.task.size: the task size must be an integer, got str '64'"),
        ({"n": 1}, "meta.task.size: the task size must be an integer, got a dict"),
    ],
)
@pytest.mark.parametrize(
    "argv",
    [
        ["reward"],
        ["reward", "--json"],
        ["credit"],
        ["credit", "--method", "loo"],
        ["replay"],
        ["export", "-o", "{out}"],
    ],
)
def test_trace_with_hostile_task_size(
    recorded_doc: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    size: Any,
    message: str,
    argv: list[str],
) -> None:
    doc = json.loads(json.dumps(recorded_doc))
    doc["meta"]["task"]["size"] = size
    path = tmp_path / "sized.json"
    path.write_text(json.dumps(doc))
    args = [a.replace("{out}", str(tmp_path / "rows.jsonl")) for a in argv]
    t0 = time.perf_counter()
    code, out, err = _cli(capsys, *args, str(path))
    assert time.perf_counter() - t0 < 10.0
    assert code == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: trace {doc['trace_id']}: ")
    assert message in lines[0]
    assert "use a size from 1 to 100000" in lines[0]
