"""The survey's paper pool as data: check, statistics, figures, links to the toolkit.

The pool is the survey artifact's ``papers.csv`` (retained entries, tagged by category, reward
type, credit granularity and orchestration form) and ``excluded.csv`` (screening decisions).

| task | function | command |
| --- | --- | --- |
| check every row against the taxonomy | :func:`check_pool` | ``orchestrace papers check`` |
| print the taxonomy | :func:`describe` | ``orchestrace papers taxonomy`` |
| counts and cross-tabulations | :func:`pool_stats`, :func:`stats_markdown` | ``... stats`` |
| figures (timeline, heat map, scale) | :func:`plot_pool` | ``orchestrace papers plot`` |
| what the toolkit can run | :func:`coverage`, :func:`coverage_markdown` | ``... coverage`` |

Example:
    >>> from orchestrace.papers import LINKS
    >>> LINKS["reward_type"]["hybrid"].target, LINKS["credit_granularity"]["tool"].target
    ('R8', 'action')
"""

from orchestrace.papers.check import (
    PaperPoolError,
    Pool,
    Table,
    check_excluded,
    check_papers,
    check_pool,
    load_pool,
    read_pool,
)
from orchestrace.papers.links import LINKS, Link, coverage, coverage_markdown
from orchestrace.papers.plots import plot_pool
from orchestrace.papers.stats import pool_stats, stats_markdown
from orchestrace.papers.taxonomy import (
    EXCLUDED_COLUMNS,
    OPTIONAL_COLUMNS,
    PAPER_COLUMNS,
    Column,
    describe,
)

__all__ = [
    "EXCLUDED_COLUMNS",
    "LINKS",
    "OPTIONAL_COLUMNS",
    "PAPER_COLUMNS",
    "Column",
    "Link",
    "PaperPoolError",
    "Pool",
    "Table",
    "check_excluded",
    "check_papers",
    "check_pool",
    "coverage",
    "coverage_markdown",
    "describe",
    "load_pool",
    "plot_pool",
    "pool_stats",
    "read_pool",
    "stats_markdown",
]
