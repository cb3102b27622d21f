"""Credit forks that fail: the other rows are kept, the failed ones named, the command exits 1."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from orchestrace.credit import make_assigner
from orchestrace.errors import RuntimeError_
from orchestrace.executors import make_executor
from orchestrace.runtime import run


def _key(trace: Any) -> str:
    """What tells forks apart: every field of every event."""
    text = repr([(e.type, e.agent, e.content, e.attrs, e.error) for e in trace.events])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class FailOn:
    """The team reward, except that the run whose events hash to ``key`` (one fork) fails."""

    def __init__(self, key: str | None, die: bool = False) -> None:
        self.key, self.die, self.parent = key, die, os.getpid()
        self.seen: list[str] = []

    def __call__(self, traces: list[Any]) -> list[float]:
        from orchestrace.rewards.base import team_reward

        key = _key(traces[0])
        self.seen.append(key)
        if key == self.key:
            if self.die and os.getpid() != self.parent:
                os._exit(3)  # the worker process dies mid-task
            raise ValueError(f"no reward for fork {key}")
        return list(team_reward()(traces))


@pytest.fixture(scope="module")
def trace() -> Any:
    return run("debate", "arith", agents=3, seed=5, rounds=1, task_size=16).trace


@pytest.fixture(scope="module")
def full(trace: Any) -> tuple[Any, str]:
    """The complete table, and the key of a fork that one message alone uses."""
    probe = FailOn(None)
    table = make_assigner("counterfactual", samples=2, reward_fn=probe).assign(trace, "message")
    once = [k for k in probe.seen[1:] if probe.seen.count(k) == 1]
    return table, once[0]


def _check_partial(table: Any, full: Any, key: str, died: bool = False) -> None:
    """The rows that need the failed fork are left out and named; the others are unchanged."""
    rows = {r.id: r.value for r in table.rows}
    missing = table.stats["missing"]
    assert missing and not set(missing) & set(rows)
    assert rows == {r.id: r.value for r in full.rows if r.id not in missing}
    for lost in missing.values():
        if died:
            assert lost["kind"] == "worker-died" and lost["attempts"] >= 2  # chunk, then alone
            assert lost["error"].startswith("worker died (")
        else:
            assert lost["error"] == f"ValueError: no reward for fork {key}"
    n = len(missing)
    assert table.stats["error"].startswith(
        f"{n} message{'s' if n > 1 else ''} left out (a fork failed): {next(iter(missing))}"
    )


def test_a_fork_that_raises_leaves_out_its_row_only(trace: Any, full: Any) -> None:
    table, key = full
    bad = make_assigner("counterfactual", samples=2, reward_fn=FailOn(key))
    _check_partial(bad.assign(trace, "message"), table, key)
    probe = FailOn(None)
    make_assigner("shapley", samples=1, permutations=2, reward_fn=probe).assign(trace, "message")
    with pytest.raises(RuntimeError_, match=r"^shapley: 1 of \d+ forks failed .*no table"):
        make_assigner(
            "shapley",
            samples=1,
            permutations=2,
            reward_fn=FailOn(probe.seen[2]),
            executor=make_executor("local"),
        ).assign(trace, "message")


@pytest.mark.slow
def test_process_and_ray_keep_the_other_rows_when_a_fork_raises_or_its_worker_dies(
    trace: Any, full: Any, shared_ray: str | None
) -> None:
    table, key = full
    for name in ["process"] + (["ray"] if shared_ray is not None else []):
        with make_executor(name, 2) as ex:
            for die in (False, True):
                bad = make_assigner(
                    "counterfactual", samples=2, reward_fn=FailOn(key, die), executor=ex
                )
                _check_partial(bad.assign(trace, "message"), table, key, died=die)


def test_cli_prints_the_table_then_one_error_line_and_exits_1(
    trace: Any,
    full: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from orchestrace import dump
    from orchestrace.cli import main
    from orchestrace.credit import counterfactual

    key = full[1]
    path = tmp_path / "t.json"
    dump(trace, path)
    real = counterfactual.CounterfactualMessageCredit.__init__

    def init(self: Any, *a: Any, **kw: Any) -> None:
        real(self, *a, **kw)
        self.reward_fn = FailOn(key)

    monkeypatch.setattr(counterfactual.CounterfactualMessageCredit, "__init__", init)
    code = main(
        ["credit", str(path), "--method", "counterfactual", "--unit", "message", "--samples", "2"]
    )
    out, err = capsys.readouterr()
    assert code == 1 and " rows, sum " in out
    assert err.count("\n") == 1 and err.startswith("error: ") and "left out (a fork failed)" in err
    assert f"ValueError: no reward for fork {key}" in err
