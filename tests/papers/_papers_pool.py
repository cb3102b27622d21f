"""Small hand-made pool files for the paper-pool tests."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from orchestrace.papers.taxonomy import EXCLUDED_COLUMNS, PAPER_COLUMNS

REFERENCE = Path(__file__).resolve().parents[2] / ".." / "shared" / "reference"

GOOD_ROWS = [
    {
        "key": "magrpo",
        "title": "LLM Collaboration With Multi-Agent Reinforcement Learning",
        "first_author": "Liu, Shuo",
        "affiliation": "Northeastern University",
        "year": "2025",
        "arxiv_id": "2508.04652",
        "venue": "arXiv",
        "url": "https://arxiv.org/abs/2508.04652",
        "category": "rl_method",
        "is_rl": "yes",
        "reward_type": "shared",
        "credit_granularity": "agent",
        "orchestration_form": "centralized",
        "scenario": "general",
        "is_core": "core",
        "one_liner": "Cooperative MARL; proposes MAGRPO",
        "verified": "yes",
        "notes": "",
    },
    {
        "key": "c3",
        "title": "Contextual Counterfactual Credit Assignment",
        "first_author": "Chen, Yanjun",
        "affiliation": "unknown",
        "year": "2026",
        "arxiv_id": "2603.06859",
        "venue": "arXiv",
        "url": "https://arxiv.org/abs/2603.06859",
        "category": "rl_method",
        "is_rl": "yes",
        "reward_type": "shared",
        "credit_granularity": "message",
        "orchestration_form": "centralized",
        "scenario": "general",
        "is_core": "core",
        "one_liner": "Counterfactual message credit",
        "verified": "yes",
        "notes": "v1",
    },
    {
        "key": "openai-codex",
        "title": "Introducing Codex",
        "first_author": "OpenAI",
        "affiliation": "OpenAI",
        "year": "2025",
        "arxiv_id": "",
        "venue": "Blog Post",
        "url": "https://openai.com/index/introducing-codex/ ; https://openai.com/x",
        "category": "industry",
        "is_rl": "partial",
        "reward_type": "NA",
        "credit_granularity": "NA",
        "orchestration_form": "harness",
        "scenario": "coding",
        "is_core": "case",
        "one_liner": "Parallel coding agent",
        "verified": "yes",
        "notes": "",
    },
    {
        "key": "swe-bench2024",
        "title": "SWE-bench",
        "first_author": "Jimenez, Carlos E.",
        "affiliation": "Princeton University",
        "year": "2024",
        "arxiv_id": "2310.06770",
        "venue": "ICLR 2024",
        "url": "https://arxiv.org/abs/2310.06770",
        "category": "benchmark",
        "is_rl": "no",
        "reward_type": "NA",
        "credit_granularity": "NA",
        "orchestration_form": "NA",
        "scenario": "coding",
        "is_core": "core",
        "one_liner": "GitHub issues",
        "verified": "yes",
        "notes": "",
    },
]

GOOD_EXCLUDED = [
    {
        "record_id": "E001",
        "source": "arXiv",
        "query_family": "multi-agent LLM",
        "screening_label": "Improving Factuality and Reasoning through Multiagent Debate",
        "identifier": "arXiv:2305.14325",
        "url": "https://arxiv.org/abs/2305.14325",
        "date_screened": "2026-04-26",
        "stage": "abstract_screen",
        "exclusion_reason": "no RL component",
    },
    {
        "record_id": "E002",
        "source": "company docs",
        "query_family": "multi-agent LLM",
        "screening_label": "CrewAI Agents documentation",
        "identifier": "CREWAI-DOCS-AGENTS",
        "url": "https://docs.crewai.com/concepts/agents",
        "date_screened": "2026-04-26",
        "stage": "artifact_screen",
        "exclusion_reason": "documentation only",
    },
]


def csv_text(rows: list[dict[str, str]], header: list[str] | None = None) -> str:
    """Rows as CSV text in the artifact's dialect (``\\n`` line ends, minimal quoting)."""
    out = io.StringIO()
    header = header or list(rows[0])
    w = csv.writer(out, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow([r.get(h, "") for h in header])
    return out.getvalue()


def write_papers(path: Path, rows: list[dict[str, str]] | None = None, **edits: str) -> Path:
    """Write papers.csv from ``rows`` (default: the good rows); ``edits`` change row 1."""
    rows = [dict(r) for r in (rows or GOOD_ROWS)]
    rows[0].update(edits)
    path.write_text(csv_text(rows, list(PAPER_COLUMNS)), encoding="utf-8")
    return path


def write_excluded(path: Path, rows: list[dict[str, str]] | None = None, **edits: str) -> Path:
    """Write excluded.csv from ``rows`` (default: the good rows); ``edits`` change row 1."""
    rows = [dict(r) for r in (rows or GOOD_EXCLUDED)]
    rows[0].update(edits)
    path.write_text(csv_text(rows, list(EXCLUDED_COLUMNS)), encoding="utf-8")
    return path
