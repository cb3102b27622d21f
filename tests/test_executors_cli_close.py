"""The commands close the executors they make, also when the work fails."""

from pathlib import Path
from typing import Any

import pytest

from orchestrace.cli import bench as bench_cli
from orchestrace.cli import credit as credit_cli
from orchestrace.cli import main
from orchestrace.cli import study as study_cli
from orchestrace.errors import ConfigError
from orchestrace.executors import LocalExecutor


class _Tracked(LocalExecutor):
    closed = 0

    def close(self) -> None:
        _Tracked.closed += 1


def _fails(*args: Any, **kw: Any) -> Any:
    raise ConfigError("the work failed")


@pytest.fixture
def tracked(monkeypatch: pytest.MonkeyPatch) -> type[_Tracked]:
    _Tracked.closed = 0
    for mod in (bench_cli, credit_cli, study_cli):
        monkeypatch.setattr(mod, "executor_from_args", lambda args, default="local": _Tracked())
    return _Tracked


def test_bench_closes_its_executor_when_the_suite_fails(
    tracked: type[_Tracked], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(bench_cli, "run_suite", _fails)
    rc = main(["bench", "--suite", "smoke-v2", "--executor", "local", "-o", str(tmp_path / "b")])
    assert rc == 1 and tracked.closed == 1


def test_study_closes_its_executor_when_the_study_fails(
    tracked: type[_Tracked], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(study_cli, "run_study", _fails)
    rc = main(["study", "stopping", "--quick", "--executor", "local", "-o", str(tmp_path / "s")])
    assert rc == 1 and tracked.closed == 1


def test_credit_closes_its_executor_when_the_method_fails(
    tracked: type[_Tracked], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    trace = tmp_path / "t.jsonl"
    assert main(["run", "debate", "-k", "3", "-o", str(trace)]) == 0
    monkeypatch.setattr(credit_cli, "make_assigner", _fails)
    rc = main(["credit", str(trace), "--method", "loo", "--executor", "local"])
    assert rc == 1 and tracked.closed == 1
