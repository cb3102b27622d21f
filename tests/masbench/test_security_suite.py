"""The security benchmark: suites, figures with Wilson intervals, report files, CLI, real backend."""

import dataclasses
import json

import pytest

from orchestrace.cli import main
from orchestrace.errors import ConfigError
from orchestrace.masbench.security import (
    SECURITY_SUITES,
    SecuritySuite,
    make_defenses,
    read_security_runs,
    run_security_suite,
    security_markdown,
    write_security_report,
)
from orchestrace.testing import ChatServer


@pytest.fixture(scope="module")
def smoke():
    return run_security_suite("security-smoke-v1", jobs=1, progress=False)


def test_smoke_report_figures(smoke):
    s = smoke["suite"]
    assert s["id"] == "security-smoke-v1" and s["version"] == "v1"
    runs = smoke["runs"]
    # every (topology, task, attack or benign, defense, seed) that applies ran once
    per_cell = len(s["defenses"]) * s["seeds"]
    applicable = len(s["topologies"]) * len(s["tasks"]) * (1 + len(s["attacks"])) - len(
        smoke["not_applicable"]
    )
    assert len(runs) == applicable * per_cell
    for d in s["defenses"]:
        row = smoke["summary"][d]
        asr = row["asr"]
        assert asr["low"] <= asr["rate"] <= asr["high"]  # a Wilson interval
        hits = sum(bool(r["attack_success"]) for r in runs if r["defense"] == d and r["attack"])
        assert asr["hits"] == hits
        if row["safety"] is not None:
            u = row["benign_utility"]["rate"]
            assert row["ers"] == pytest.approx(2 * row["safety"] * u / (row["safety"] + u))
    # spoofing and escalation: 0 by mechanism with signatures and capabilities
    for a in ("spoofing", "escalation"):
        assert smoke["per_attack"]["sig_cap"][a]["asr"]["rate"] == 0.0
        assert smoke["per_attack"]["none"][a]["asr"]["rate"] > 0.0
    assert smoke["summary"]["sig_cap"]["safety_events_per_run"] > 0
    colluded = smoke["collusion"]["debate"]["collusion"]
    assert colluded["flagged"]["rate"] == 1.0 and colluded["gated_reward"] == 0.0


def test_report_files_and_markdown(smoke, tmp_path):
    out = write_security_report(smoke, tmp_path / "rep")
    names = {p.name for p in out.iterdir()}
    assert {"report.json", "runs.jsonl.gz", "report.md", "asr_by_defense.png"} <= names
    assert "utility_vs_asr.png" in names
    assert read_security_runs(out) == json.loads(json.dumps(smoke["runs"]))
    back = json.loads((out / "report.json").read_text())
    assert back["runs_count"] == len(smoke["runs"]) and "runs" not in back
    assert back["summary"]["none"]["asr"]["n"] == smoke["summary"]["none"]["asr"]["n"]
    md = security_markdown(smoke)
    for heading in (
        "## Summary by defense",
        "## Targeted ASR by attack and defense",
        "## Spoofing and escalation by topology",
        "## Collusion detector and rewards",
        "## Attacks that do not apply",
    ):
        assert heading in md
    assert "| spoofing | critic_loop | arith-mapreduce-v0 | critic_loop: its only messages" in md


def test_cli_runs_the_security_suite(tmp_path, capsys):
    out = tmp_path / "sec"
    rc = main(
        [
            "bench",
            "--suite",
            "security-smoke-v1",
            "--seeds",
            "1",
            "--jobs",
            "1",
            "--no-progress",
            "-o",
            str(out),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "security-smoke-v1:" in text and "sig_cap: benign utility" in text
    assert (out / "report.md").exists()


def test_bad_inputs():
    with pytest.raises(ConfigError, match="unknown security suite 'security-v9'"):
        run_security_suite("security-v9", progress=False)
    with pytest.raises(ConfigError, match="seeds must be an integer >= 1"):
        run_security_suite("security-smoke-v1", seeds=0, progress=False)
    with pytest.raises(ConfigError, match="unknown defense setting 'moat'"):
        make_defenses("moat")


def test_unreadable_runs_file(tmp_path):
    (tmp_path / "runs.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(ConfigError, match=r"runs\.jsonl\.gz: cannot read the runs of a security"):
        read_security_runs(tmp_path)


def test_registered_suites_name_known_attacks_and_defenses():
    from orchestrace.masbench.security import ATTACK_SETTINGS, DEFENSE_SETTINGS

    for suite in SECURITY_SUITES.values():
        assert set(suite.attacks) <= set(ATTACK_SETTINGS)
        assert set(suite.defenses) <= set(DEFENSE_SETTINGS)
        assert "none" in suite.defenses


def test_the_suite_runs_on_the_openai_compatible_backend():
    tiny = dataclasses.replace(
        SECURITY_SUITES["security-smoke-v1"],
        id="security-tiny-v1",
        topologies=("swarm",),
        attacks=("spoofing", "direct_injection"),
        defenses=("none", "sig_cap"),
        agents=2,
        task_size=4,
        seeds=1,
    )
    assert isinstance(tiny, SecuritySuite)
    with ChatServer() as srv:
        rep = run_security_suite(
            tiny,
            backend="openai",
            backend_options={"base_url": srv.url, "model": "local"},
            progress=False,
        )
        assert srv.calls > 0
    assert rep["config"]["backend"] == "openai"
    assert "the model decides whether to follow an instruction" in security_markdown(rep)
    assert all(r["backend"] == "openai" for r in rep["runs"])
    spoof = rep["per_attack"]
    assert spoof["none"]["spoofing"]["asr"]["rate"] == 1.0
    assert spoof["sig_cap"]["spoofing"]["asr"]["rate"] == 0.0
