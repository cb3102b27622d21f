"""The survey artifact's own pool: checks clean and reproduces its published statistics.

The expected numbers are the artifact's published statistics (its STATS.md snapshot and the
output of its statistics script on the same two files), copied here number for number.
"""

from __future__ import annotations

import json

import pytest
from _papers_pool import REFERENCE

from orchestrace.cli import main
from orchestrace.papers import check_pool, coverage, load_pool, pool_stats, stats_markdown

PAPERS = REFERENCE / "papers.csv"
EXCLUDED = REFERENCE / "excluded.csv"

pytestmark = pytest.mark.skipif(
    not (PAPERS.is_file() and EXCLUDED.is_file()),
    reason=f"shared reference pool ({PAPERS}, {EXCLUDED}) not present",
)

COUNTS = {
    "category": {
        "rl_method": 42,
        "benchmark": 18,
        "classical_marl": 10,
        "industry": 6,
        "survey": 5,
        "framework": 3,
    },
    "is_rl": {"yes": 49, "no": 26, "partial": 9},
    "reward_type": {
        "NA": 33,
        "hybrid": 15,
        "shared": 10,
        "orchestration": 7,
        "verifier": 6,
        "debate": 4,
        "individual": 4,
        "role": 3,
        "process": 2,
    },
    "credit_granularity": {
        "NA": 36,
        "agent": 23,
        "role": 10,
        "orchestrator": 8,
        "turn": 5,
        "message": 2,
    },
    "orchestration_form": {
        "NA": 34,
        "centralized": 18,
        "hierarchical": 13,
        "debate": 8,
        "planner_executor_critic": 4,
        "swarm": 4,
        "harness": 3,
    },
    "scenario": {"general": 45, "coding": 10, "math": 9, "tool_use": 8, "research": 6, "web": 6},
    "is_core": {"core": 54, "supporting": 24, "case": 6},
    "verified": {"yes": 76, "partial": 8},
}
CREDIT_COLUMNS = ["NA", "agent", "message", "orchestrator", "role", "turn"]
REWARD_X_CREDIT = {
    "NA": [32, 0, 0, 1, 0, 0],
    "debate": [0, 3, 1, 0, 0, 0],
    "hybrid": [0, 6, 0, 1, 4, 4],
    "individual": [0, 4, 0, 0, 0, 0],
    "orchestration": [0, 0, 0, 6, 1, 0],
    "process": [0, 1, 0, 0, 0, 1],
    "role": [0, 0, 0, 0, 3, 0],
    "shared": [0, 9, 1, 0, 0, 0],
    "verifier": [4, 0, 0, 0, 2, 0],
}
FORM_X_CREDIT = {
    "NA": [31, 3, 0, 0, 0, 0],
    "centralized": [0, 14, 1, 3, 0, 0],
    "debate": [1, 3, 1, 0, 1, 2],
    "harness": [2, 1, 0, 0, 0, 0],
    "hierarchical": [0, 2, 0, 3, 5, 3],
    "planner_executor_critic": [0, 0, 0, 0, 4, 0],
    "swarm": [2, 0, 0, 2, 0, 0],
}
CATEGORY_X_VERIFIED = {
    "benchmark": [0, 18],
    "classical_marl": [0, 10],
    "framework": [1, 2],
    "industry": [0, 6],
    "rl_method": [7, 35],
    "survey": [0, 5],
}
EXCLUDED_COUNTS = {
    "stage": {
        "abstract_screen": 16,
        "full_text_screen": 9,
        "artifact_screen": 6,
        "duplicate_screen": 1,
    },
    "source": {
        "arXiv": 24,
        "company docs": 3,
        "OpenReview": 2,
        "ACL Anthology": 1,
        "GitHub/project page": 1,
        "company blog": 1,
    },
    "query_family": {
        "multi-agent LLM": 8,
        "benchmark": 3,
        "industrial agent system": 3,
        "orchestration": 3,
        "classical MARL": 2,
        "credit assignment": 2,
        "post-training": 2,
        "prompt injection": 2,
        "reinforcement learning": 2,
        "safety": 2,
        "tool use": 2,
        "agent swarm": 1,
    },
}


def test_reference_pool_checks_clean():
    assert check_pool(PAPERS, EXCLUDED) == []


def test_reproduces_published_statistics():
    s = pool_stats(load_pool(PAPERS, EXCLUDED))
    assert (s["retained"], s["excluded"], s["audited"]) == (84, 32, 116)
    for col, expected in COUNTS.items():
        assert list(s["counts"][col].items()) == list(expected.items()), col  # order too
    tabs = {(t["rows"], t["columns"]): t for t in s["crosstabs"]}
    for key, expected, cols in (
        (("reward_type", "credit_granularity"), REWARD_X_CREDIT, CREDIT_COLUMNS),
        (("orchestration_form", "credit_granularity"), FORM_X_CREDIT, CREDIT_COLUMNS),
        (("category", "verified"), CATEGORY_X_VERIFIED, ["partial", "yes"]),
    ):
        t = tabs[key]
        assert t["column_values"] == cols
        assert dict(zip(t["row_values"], t["cells"], strict=True)) == expected
        assert t["row_values"] == list(expected)
    for col, expected in EXCLUDED_COUNTS.items():
        assert list(s["excluded_counts"][col].items()) == list(expected.items()), col


def test_markdown_tables_match_published_snapshot():
    md = stats_markdown(pool_stats(load_pool(PAPERS, EXCLUDED)))
    assert "| `hybrid` | 0 | 6 | 0 | 1 | 4 | 4 |" in md
    assert "| `centralized` | 0 | 14 | 1 | 3 | 0 | 0 |" in md
    assert "| audited | 116 |" in md


def test_cli_stats_json(capsys):
    assert main(["papers", "stats", str(PAPERS), str(EXCLUDED), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["counts"]["credit_granularity"] == COUNTS["credit_granularity"]


def test_coverage_of_the_reference_pool():
    cov = coverage(load_pool(PAPERS))
    by_key = {e["key"]: e for e in cov["entries"]}
    assert len(cov["entries"]) + len(cov["untagged"]) == 84
    # harness has no ready topology: the three harness entries are not fully runnable
    harness = [e for e in cov["entries"] if any(s["value"] == "harness" for s in e["settings"])]
    assert len(harness) == 3 and all(e["not_runnable"] >= 1 for e in harness)
    assert by_key["magrpo"]["together"] == "centralized on arith-mapreduce-v0"
    # C3's message credit on a centralized team: each part runs, but not in one run today
    assert by_key["c3"]["runnable"] == 3 and by_key["c3"]["together"] is None
    values = {v["value"]: v for v in cov["values"]["credit_granularity"]}
    assert values["message"]["entries"] == 2 and values["token"]["entries"] == 0
