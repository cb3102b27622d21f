import json

import pytest

from orchestrace.errors import ConfigError
from orchestrace.masbench import SUITES, envelope_point, run_suite, write_report
from orchestrace.masbench.faults import DropMessages, WrongAnswers, corrupt
from orchestrace.masbench.suite import Suite, run_one


def test_smoke_suite_report(tmp_path):
    rep = run_suite("smoke-v1", jobs=1, progress=False)
    assert rep["suite"]["id"] == "smoke-v1" and rep["suite"]["version"] == "v1"
    assert rep["config"]["seeds"] == [0, 1]
    cells = {(c["topology"], c["task"]): c for c in rep["cells"]}
    assert len(cells) == 4
    for c in cells.values():
        assert 0 <= c["E1_success"] <= 1
        assert c["E2_speedup"] > 0 and 0 < c["E2_efficiency"] <= 1.0 + 1e-9
        assert 0 <= c["E3_coordination_share"] <= 1
        assert set(c["shape"]) == {"width", "depth", "length", "steps"}
        assert c["credit_unit"] in ("agent", "turn")
        assert "wrong_answer" in c["E4"]
    assert len(rep["envelope"]) == 3 and rep["envelope_infeasible"] == [
        {"agents": 20, "target_length": 10}
    ]
    out = write_report(rep, tmp_path)
    md = (out / "report.md").read_text()
    assert "E4 error amplification" in md and '"id": "smoke-v1"' in md
    assert json.loads((out / "report.json").read_text())["suite"]["id"] == "smoke-v1"
    for png in ("e1_e2.png", "e4.png", "envelope.png"):
        assert (out / png).stat().st_size > 0


def test_same_seeds_same_results():
    spec = {
        "topology": "debate",
        "task": "arith-mapreduce-v0",
        "agents": 4,
        "seed": 3,
        "fault": "wrong_answer",
        "rate": 0.5,
    }
    a, b = run_one(spec), run_one(spec)
    assert a["trace_id"] == b["trace_id"]
    assert (a["success"], a["tokens"], a["faults_injected"]) == (
        b["success"],
        b["tokens"],
        b["faults_injected"],
    )


def test_wrong_answers_raise_error_rate():
    def err(rate):
        return (
            1
            - sum(
                run_one(
                    {
                        "topology": "centralized",
                        "task": "arith-mapreduce-v0",
                        "agents": 4,
                        "seed": s,
                        "fault": "wrong_answer",
                        "rate": rate,
                    }
                )["success"]
                for s in range(8)
            )
            / 8
        )

    assert err(1.0) == 1.0 and err(0.0) < 1.0


def test_dropped_messages_are_counted():
    r = run_one(
        {
            "topology": "swarm",
            "task": "arith-mapreduce-v0",
            "agents": 6,
            "seed": 0,
            "fault": "dropped_message",
            "rate": 1.0,
        }
    )
    assert r["fault_units"] > 0 and r["faults_injected"] == r["fault_units"]
    assert r["success"] == 0.0  # the aggregator heard nothing


def test_tool_failures_are_counted():
    r = run_one(
        {
            "topology": "centralized",
            "task": "wide-search-v0",
            "agents": 4,
            "seed": 0,
            "fault": "tool_failure",
            "rate": 1.0,
        }
    )
    assert r["fault_units"] > 0 and r["faults_injected"] == r["fault_units"]


def test_envelope_point_hits_its_length():
    row = envelope_point(50, 1000)
    assert row is not None and 0.8 * 1000 <= row["events"] <= 1.6 * 1000
    assert envelope_point(300, 10) is None


@pytest.mark.slow
def test_production_point_300_agents_4000_events():
    row = envelope_point(300, 4000)
    assert row is not None and row["events"] >= 4000 and row["setting"] == "production"
    assert row["cpu_s"] < 60


def test_corrupt_changes_every_kind():
    for v in (3, 2.5, "a", "", [1], {"answer": 1}, True, None):
        assert corrupt(v) != v


def test_bad_suite_and_seeds():
    with pytest.raises(ConfigError, match="unknown suite"):
        run_suite("sim-v0", progress=False)
    with pytest.raises(ConfigError, match="seeds"):
        run_suite("smoke-v1", seeds=0, progress=False)
    assert "sim-v1" in SUITES and isinstance(SUITES["sim-v1"], Suite)
    assert DropMessages(0.1).describe()["kind"] == "DropMessages"
    assert WrongAnswers(None, 0.1).rate == 0.1
