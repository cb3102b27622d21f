"""``orchestrace run`` with --attack, --secret-file and policies; the documented policy runs."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from orchestrace.cli import main
from orchestrace.io import load

DOC = Path(__file__).parents[2] / "docs" / "security.md"


def _doc_policy(tmp_path: Path) -> Path:
    text = DOC.read_text()
    block = re.search(r"```toml\n(# policy\.toml.*?)```", text, re.S)
    assert block, "docs/security.md lost its example policy"
    p = tmp_path / "policy.toml"
    p.write_text(block.group(1))
    return p


@pytest.mark.parametrize("topology", ["swarm", "hierarchical", "centralized"])
def test_the_documented_policy_runs_as_written(
    tmp_path: Path, topology: str, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = _doc_policy(tmp_path)
    out = tmp_path / "run.json"
    args = ["run", topology, "--task", "wide-search-v1", "--defenses", "all", "--no-progress"]
    assert main([*args, "--policy", str(policy), "-k", "3", "-o", str(out)]) == 0
    tr = load(out)
    assert tr.meta["result"]["answer"] is not None
    kinds = {e.attrs.get("kind") for e in tr.events if e.type == "safety_event"}
    assert "capability_denied" not in kinds


def test_a_policy_denying_the_topology_its_structure_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "p.toml"
    p.write_text(
        "[roles.orchestrator]\nmay_spawn = true\nmay_stop = true\nmay_aggregate = true\n"
        "[roles.aggregator]\nmay_aggregate = false\n"
    )
    code = main(["run", "swarm", "--task", "arith", "--policy", str(p), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1
    assert "error: the capability policy denied role 'aggregator'" in err
    assert "give the role may_aggregate = true in the policy" in err


def test_secret_file_is_written_then_read_and_lets_the_audit_re_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key, out = tmp_path / "run.secret", tmp_path / "run.jsonl"
    base = ["run", "swarm", "--task", "arith", "-k", "3", "--defenses", "all", "--no-progress"]
    assert main([*base, "--secret-file", str(key), "-o", str(out)]) == 0
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert "wrote a new run secret" in capsys.readouterr().err
    first = key.read_text()
    again = tmp_path / "again.jsonl"
    assert main([*base, "--secret-file", str(key), "-o", str(again)]) == 0
    assert key.read_text() == first  # read, not replaced
    assert load(out).trace_id == load(again).trace_id  # same seed and secret: same run
    capsys.readouterr()
    assert main(["audit", str(out), "--secret-file", str(key)]) == 0
    assert "note:" not in capsys.readouterr().err
    assert main(["audit", str(out)]) == 0
    assert "note: MACs were not re-checked" in capsys.readouterr().err
    plain = ["run", "swarm", "--task", "arith", "--no-progress", "--secret-file", str(key)]
    assert main(plain) == 1
    assert "is for signed runs and this run's messages are not signed" in capsys.readouterr().err


def test_run_attack_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "a.jsonl"
    args = ["run", "pipeline", "--task", "arith", "--no-progress", "-o", str(out)]
    assert main([*args, "--attack", "spoofing", "--defenses", "all"]) == 0
    err = capsys.readouterr().err
    assert "attack spoofing: did not succeed (safety events: forgery_rejected)" in err
    assert load(out).meta["interventions"][0]["attack"] == "spoofing"
    assert main(["run", "swarm", "-k", "1", "--attack", "spoofing", "--no-progress"]) == 1
    assert "swarm with 1 agent" in capsys.readouterr().err
    assert main(["run", "swarm", "--attack", "collusion:agents=x=1", "--no-progress"]) == 1
    assert capsys.readouterr().err.startswith("error: --attack collusion:agents=x=1")


def test_security_suite_subset_and_reproducible_signed_rows() -> None:
    from orchestrace.errors import ConfigError
    from orchestrace.masbench.security import run_security_suite

    kw = {"attacks": ["spoofing"], "defenses": ["sig_cap", "all"], "topologies": ["swarm"]}
    a = run_security_suite("security-smoke-v1", jobs=1, progress=False, seeds=2, **kw)
    b = run_security_suite("security-smoke-v1", jobs=1, progress=False, seeds=2, **kw)
    assert {(r["attack"], r["defense"], r["topology"]) for r in a["runs"]} == {
        (x, d, "swarm") for x in (None, "spoofing") for d in ("sig_cap", "all")
    }
    # signed rows derive their secret from the seed: trace ids reproduce
    assert [r["trace_id"] for r in a["runs"]] == [r["trace_id"] for r in b["runs"]]
    with pytest.raises(ConfigError, match="--topologies: security-smoke-v1 has no topology"):
        run_security_suite("security-smoke-v1", progress=False, topologies=["ring"])
