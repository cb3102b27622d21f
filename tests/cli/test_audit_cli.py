"""``orchestrace audit``: exit 0 on clean traces, 1 with one line per finding, 1 on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from orchestrace import dump
from orchestrace._safe import display
from orchestrace.cli import main
from orchestrace.runtime import run
from orchestrace.safety import Defenses
from orchestrace.trace.model import Trace


@pytest.fixture(scope="module")
def clean() -> Trace:
    return run("centralized", "multihop", agents=2, seed=2, defenses=Defenses.all()).trace


def _forged(tr: Trace) -> tuple[Trace, str]:
    agg = next(e for e in tr.events if e.type == "aggregate")
    new = msgspec.structs.replace(agg, attrs={**(agg.attrs or {}), "value": 999999})
    return tr.replace(events=tuple(new if e.id == agg.id else e for e in tr.events)), agg.id


def test_clean_trace_exits_0(
    tmp_path: Path, clean: Trace, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "clean.json"
    dump(clean, path)
    assert main(["audit", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: clean (1 trace, 0 findings)\n"
    assert main(["audit", "-q", str(path)]) == 0
    assert capsys.readouterr().out == ""


def test_findings_exit_1_one_line_each(
    tmp_path: Path, clean: Trace, capsys: pytest.CaptureFixture[str]
) -> None:
    bad, eid = _forged(clean)
    good_path, bad_path = tmp_path / "clean.json", tmp_path / "forged.json"
    dump(clean, good_path)
    dump(bad, bad_path)
    assert main(["audit", str(good_path), str(bad_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{display(good_path)}: clean (1 trace, 0 findings)"
    # the forged aggregate, then the stop answer that no longer matches it
    assert len(lines) == 3
    assert "stop decision" in lines[2] and "gives '999999'" in lines[2]
    index = [e.id for e in bad.events].index(eid)
    assert lines[1].startswith(
        f"{bad_path}: $.events[{index}]: aggregate '{eid}' records '999999' but 'combine'"
    )
    assert lines[1].endswith("the aggregate was forged or its inputs changed; re-record the run")
    assert main(["audit", "--json", str(bad_path)]) == 1
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert (rows[0]["code"], rows[0]["event"]) == ("aggregate-mismatch", eid)
    assert rows[1]["code"] == "stop-answer-mismatch"


def test_bad_input_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.json"
    assert main(["audit", str(missing)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(missing) in err and err.count("\n") == 1
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    assert main(["audit", str(junk)]) == 1
    assert capsys.readouterr().err.startswith("error: ")


def test_malformed_recorded_policy_exits_1(
    tmp_path: Path, clean: Trace, capsys: pytest.CaptureFixture[str]
) -> None:
    meta = dict(clean.meta)
    meta["config"] = {**meta["config"], "defenses": {"taint": "yes"}}
    path = tmp_path / "odd.json"
    dump(clean.replace(meta=meta), path)
    assert main(["audit", str(path), str(path)]) == 1  # every file is still audited
    assert capsys.readouterr().err == 2 * (
        f"error: {path}: cannot audit: defenses.taint must be true or false (got 'yes'); "
        "fix or remove meta.config.defenses in the trace\n"
    )


def test_run_with_defenses_then_audit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "defenses.toml"
    spec.write_text(
        "sign_messages = true\ntaint = true\n"
        "[capabilities.roles.orchestrator]\nmay_spawn = true\nmay_stop = true\n"
        "may_aggregate = true\n"
    )
    out = tmp_path / "run.jsonl"
    args = ["run", "swarm", "--task", "multihop", "-k", "3", "--no-progress", "-o", str(out)]
    assert main([*args, "--defenses", str(spec)]) == 0
    capsys.readouterr()
    assert main(["audit", str(out)]) == 0
    assert capsys.readouterr().out == f"{display(out)}: clean (1 trace, 0 findings)\n"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--defenses", "nope.toml"], "error: --defenses nope.toml: cannot read it"),
        (["--defenses", "all", "--policy", "missing.toml"], "error: missing.toml: cannot read"),
    ],
)
def test_run_bad_defenses(
    tmp_path: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "centralized", "--no-progress", *extra]) == 1
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_run_policy_with_an_unknown_role(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text("[roles.wizard]\n")
    out = tmp_path / "never.jsonl"
    assert main(["run", "centralized", "--policy", str(policy), "-o", str(out)]) == 1
    # only the roles a centralized run has are listed
    assert capsys.readouterr().err == (
        "error: defenses.capabilities: unknown role 'wizard'; roles of this run: "
        "orchestrator, worker\n"
    )
    assert not out.exists()
