"""Corpus statistics of the paper pool, computed the way the survey artifact computes them.

The artifact's conventions, reproduced exactly:

* ``NA`` is a value like any other: it is counted, and it is a row and a column of the
  cross-tabulations (it is not dropped as missing).
* Counts are listed by decreasing count, ties in code-point order of the value.
* A cross-tabulation has one row per value present in the row column and one column per value
  present in the column column, both in code-point order (so ``NA`` comes first); values no
  entry uses are left out.
* Headline counts: retained entries (rows of ``papers.csv``), excluded decisions (rows of
  ``excluded.csv``) and audited records (their sum).

Example:
    >>> from orchestrace.papers.check import Pool, Table
    >>> rows = [{"reward_type": r, "credit_granularity": c}
    ...         for r, c in [("shared", "agent"), ("NA", "NA"), ("shared", "message")]]
    >>> counts(rows, "reward_type")
    {'shared': 2, 'NA': 1}
    >>> crosstab(rows, "reward_type", "credit_granularity")["cells"]
    [[1, 0, 0], [0, 1, 1]]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from orchestrace.papers.check import Pool

__all__ = [
    "COUNTED",
    "CROSSTABS",
    "EXCLUDED_COUNTED",
    "counts",
    "crosstab",
    "pool_stats",
    "stats_markdown",
]

#: Columns of ``papers.csv`` counted, in the artifact's order.
COUNTED = (
    "category",
    "is_rl",
    "reward_type",
    "credit_granularity",
    "orchestration_form",
    "scenario",
    "is_core",
    "verified",
)
#: Cross-tabulations (rows, columns), in the artifact's order.
CROSSTABS = (
    ("reward_type", "credit_granularity"),
    ("orchestration_form", "credit_granularity"),
    ("category", "verified"),
)
#: Columns of ``excluded.csv`` counted.
EXCLUDED_COUNTED = ("stage", "source", "query_family")


def counts(rows: Sequence[dict[str, str]], column: str) -> dict[str, int]:
    """``{value: entries}`` by decreasing count, ties in code-point order."""
    c = Counter(r[column] for r in rows)
    return dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def crosstab(rows: Sequence[dict[str, str]], left: str, right: str) -> dict[str, Any]:
    """Entries per (``left`` value, ``right`` value), over the values present.

    Returns:
        ``{"rows": left, "columns": right, "row_values": [...], "column_values": [...],
        "cells": [[count per column] per row]}``.
    """
    lv = sorted({r[left] for r in rows})
    rv = sorted({r[right] for r in rows})
    c = Counter((r[left], r[right]) for r in rows)
    return {
        "rows": left,
        "columns": right,
        "row_values": lv,
        "column_values": rv,
        "cells": [[c[(a, b)] for b in rv] for a in lv],
    }


def pool_stats(pool: Pool) -> dict[str, Any]:
    """Headline counts, counts per tag column and the cross-tabulations.

    Returns:
        ``retained``, ``excluded`` and ``audited`` (``None`` without an exclusion log),
        ``counts`` (column -> value -> entries), ``crosstabs`` (see :func:`crosstab`) and
        ``excluded_counts`` (stage, source and query family of the exclusions).
    """
    rows = pool.papers.rows
    ex = pool.excluded.rows if pool.excluded is not None else None
    return {
        "retained": len(rows),
        "excluded": None if ex is None else len(ex),
        "audited": None if ex is None else len(rows) + len(ex),
        "counts": {c: counts(rows, c) for c in COUNTED},
        "crosstabs": [crosstab(rows, a, b) for a, b in CROSSTABS],
        "excluded_counts": {} if ex is None else {c: counts(ex, c) for c in EXCLUDED_COUNTED},
    }


def _cell(text: str) -> str:
    text = text.replace("|", "\\|")
    return text if "`" in text else f"`{text}`"


def stats_markdown(stats: dict[str, Any]) -> str:
    """The statistics as Markdown: headline counts, one table per column, the cross-tabs.

    Example:
        >>> md = stats_markdown({"retained": 2, "excluded": None, "audited": None,
        ...     "counts": {"category": {"survey": 2}}, "crosstabs": [], "excluded_counts": {}})
        >>> print(md)  # doctest: +NORMALIZE_WHITESPACE
        # Paper-pool statistics
        <BLANKLINE>
        ## Headline counts
        <BLANKLINE>
        | | entries |
        |---|---:|
        | retained | 2 |
        <BLANKLINE>
        ## category
        <BLANKLINE>
        | category | entries |
        |---|---:|
        | `survey` | 2 |
    """
    out = ["# Paper-pool statistics", "", "## Headline counts", "", "| | entries |", "|---|---:|"]
    out.append(f"| retained | {stats['retained']} |")
    if stats.get("excluded") is not None:
        out.append(f"| excluded | {stats['excluded']} |")
        out.append(f"| audited | {stats['audited']} |")
    sections = [(c, v) for c, v in stats["counts"].items()]
    sections += [(f"excluded {c}", v) for c, v in stats.get("excluded_counts", {}).items()]
    for title, values in sections:
        label = title.split()[-1]
        out += ["", f"## {title}", "", f"| {label} | entries |", "|---|---:|"]
        out += [f"| {_cell(k)} | {n} |" for k, n in values.items()]
    for t in stats["crosstabs"]:
        cols = t["column_values"]
        out += ["", f"## {t['rows']} x {t['columns']}", ""]
        out.append(f"| {t['rows']} | " + " | ".join(_cell(c) for c in cols) + " |")
        out.append("|---|" + "---:|" * len(cols))
        for name, cells in zip(t["row_values"], t["cells"], strict=True):
            out.append(f"| {_cell(name)} | " + " | ".join(str(n) for n in cells) + " |")
    return "\n".join(out) + "\n"
