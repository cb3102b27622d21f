"""Links from tag values to the toolkit: every target exists, and "runnable" means it runs."""

from __future__ import annotations

import pytest
from _papers_pool import GOOD_ROWS, csv_text

from orchestrace import Decision
from orchestrace.credit import UNITS, UniformCredit
from orchestrace.papers import LINKS, coverage, coverage_markdown, load_pool
from orchestrace.papers.links import runnable
from orchestrace.papers.taxonomy import NA, OPTIONAL_COLUMNS, PAPER_COLUMNS
from orchestrace.rewards import REGISTRY, make
from orchestrace.runtime import run
from orchestrace.runtime.topologies import TOPOLOGIES


@pytest.mark.parametrize("column", ["reward_type", "credit_granularity", "orchestration_form"])
def test_every_tag_value_is_linked(column):
    assert set(LINKS[column]) == set(PAPER_COLUMNS[column].values) - {NA}


def test_targets_name_the_toolkits_own_enums():
    assert {link.target for link in LINKS["reward_type"].values()} == {f"R{i}" for i in range(1, 9)}
    assert {link.target for link in LINKS["credit_granularity"].values()} == set(UNITS)
    forms = {v: link.target for v, link in LINKS["orchestration_form"].items()}
    assert forms.pop("harness") is None
    for value, topo in forms.items():
        assert TOPOLOGIES[topo].trace_topology == value
    for code, link in LINKS["subdecisions"].items():
        assert Decision.from_code(link.target).code == code
    assert set(LINKS["subdecisions"]) == {"O1", "O2", "O3", "O4", "O5"}
    assert OPTIONAL_COLUMNS["subdecisions"].kind == "decisions"


@pytest.mark.parametrize("value", sorted(LINKS["reward_type"]))
def test_each_reward_family_scores_a_real_run(value):
    family = LINKS["reward_type"][value].target
    assert family in REGISTRY and runnable("reward_type", value)
    scores = [
        make(family)([run(topo, task, agents=4, seed=0).trace])[0]
        for topo in ("centralized", "debate", "pipeline")
        for task in ("arith", "wide-search-v0")
    ]
    assert any(s is not None for s in scores)


@pytest.mark.parametrize("value", sorted(LINKS["credit_granularity"]))
def test_each_credit_unit_gets_credit_in_a_real_run(value):
    unit = LINKS["credit_granularity"][value].target
    tables = [
        UniformCredit().assign(run(topo, task, agents=4, seed=0).trace, unit, reward=1.0)
        for topo in ("pipeline", "swarm")
        for task in ("arith", "wide-search-v0")
    ]
    assert any(t.rows for t in tables)


def test_harness_is_not_runnable_and_says_why():
    assert not runnable("orchestration_form", "harness")
    assert "no ready topology runs a harness" in LINKS["orchestration_form"]["harness"].how
    assert not runnable("reward_type", NA)


def test_coverage_per_entry(tmp_path):
    rows = [dict(r, subdecisions="NA") for r in GOOD_ROWS]
    rows[0]["subdecisions"] = "O5"
    p = tmp_path / "papers.csv"
    p.write_text(csv_text(rows))
    cov = coverage(load_pool(p))
    by_key = {e["key"]: e for e in cov["entries"]}
    assert cov["untagged"] == ["swe-bench2024"]
    magrpo = by_key["magrpo"]
    assert [(s["value"], s["target"], s["runnable"]) for s in magrpo["settings"]] == [
        ("shared", "R1", True),
        ("agent", "agent", True),
        ("centralized", "centralized", True),
        ("O5", "O5", True),
    ]
    assert magrpo["together"] == "centralized on arith-mapreduce-v0"
    codex = by_key["openai-codex"]
    assert (codex["runnable"], codex["not_runnable"], codex["together"]) == (0, 1, None)
    forms = {v["value"]: v for v in cov["values"]["orchestration_form"]}
    assert forms["harness"] == {
        "value": "harness",
        "entries": 1,
        "target": None,
        "runnable": False,
        "how": LINKS["orchestration_form"]["harness"].how,
    }
    assert forms["swarm"]["entries"] == 0 and forms["swarm"]["runnable"]
    md = coverage_markdown(cov)
    assert "4 entries" not in md and "3 entries tag a setting: 1 run whole" in md
    assert "| `openai-codex` |  |  | harness (no) |  | 0 of 1 | no |" in md
