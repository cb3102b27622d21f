"""Figures of the paper pool (``[learn]`` extra: matplotlib).

* ``timeline.png``: works by submission date, one lane per credit unit (the survey's
  Figure 2), optionally from a given year on. The date is the month encoded in the arXiv id (``2508.04652``: August 2025);
  entries without one are placed mid-year of ``year`` and drawn hollow. Entries without a
  credit unit (``NA``) are left out and counted in the title.
* ``reward_credit.png``: entries per reward type and credit unit, over every value of the
  taxonomy, so empty cells (white spaces) show.
* ``scale.png``: team size against trace length, academia against industry (``category`` of
  ``industry``; the survey's Figure 6), drawn when the pool has the optional ``team_size`` and
  ``trace_length`` columns or a ``bench`` report is given; the report's scale-envelope points
  (agents, events) are overlaid.

Example:
    >>> timeline_points([{"key": "a", "arxiv_id": "2508.04652", "year": "2025",
    ...                   "credit_granularity": "agent"}])
    [('a', 'agent', 2025.625, True)]
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeGuard

from orchestrace._safe import decimal
from orchestrace.errors import Problem
from orchestrace.io._output import mark_report_dir, report_dir, report_file
from orchestrace.papers.check import PaperPoolError, Pool, arxiv_month
from orchestrace.papers.taxonomy import NA, PAPER_COLUMNS

__all__ = ["FIGURES", "load_envelope", "plot_pool", "scale_points", "timeline_points"]

#: The files :func:`plot_pool` may write.
FIGURES = ("timeline.png", "reward_credit.png", "scale.png")
_KIND = "papers"
_HINT = "the figures need matplotlib: pip install 'orchestrace[learn]'"


def timeline_points(rows: Sequence[dict[str, str]]) -> list[tuple[str, str, float, bool]]:
    """``(key, credit unit, date as a fractional year, date from arXiv)`` per tagged entry."""
    out = []
    for r in rows:
        unit = r["credit_granularity"]
        if unit == NA:
            continue
        ym = arxiv_month(r["arxiv_id"])
        if ym is not None:
            out.append((r["key"], unit, ym[0] + (ym[1] - 0.5) / 12, True))
        else:
            out.append((r["key"], unit, int(r["year"]) + 0.5, False))
    return out


def scale_points(rows: Sequence[dict[str, str]]) -> list[tuple[str, int, int, str]]:
    """``(key, team size, trace length, "industry" | "academia")`` where both are given."""
    out = []
    for r in rows:
        size, length = r.get("team_size", ""), r.get("trace_length", "")
        if decimal(size) is not None and decimal(length) is not None:
            sector = "industry" if r["category"] == "industry" else "academia"
            out.append((r["key"], int(size), int(length), sector))
    return out


def _bench_problem(src: str, message: str) -> PaperPoolError:
    fix = "pass the report.json (or its directory) that `orchestrace bench` wrote"
    return PaperPoolError([Problem("bad-bench", message, fix, path="file", source=src)])


def _whole(x: object) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


def load_envelope(path: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """``(agents, events)`` of the scale-envelope points of a ``bench`` report.

    Args:
        path: ``report.json`` or the report directory holding it.

    Raises:
        PaperPoolError: Not a readable benchmark report.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    src = os.fspath(p)
    try:
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):
            raise _bench_problem(src, "not a regular file")
        if st.st_size > 512 << 20:
            raise _bench_problem(src, "the report is larger than 512 MiB")
        data = json.loads(p.read_bytes())
    except FileNotFoundError:
        raise _bench_problem(src, "no such file") from None
    except (OSError, ValueError, RecursionError) as err:
        reason = getattr(err, "strerror", None) or str(err)[:120]
        raise _bench_problem(src, f"not a readable JSON report ({reason})") from None
    env = data.get("envelope") if isinstance(data, dict) else None
    if not isinstance(env, list):
        raise _bench_problem(src, "no 'envelope' list in the report")
    pts = []
    for row in env:
        if not isinstance(row, dict):
            raise _bench_problem(src, "an envelope point is not an object")
        a, e = row.get("agents"), row.get("events")
        if not (_whole(a) and _whole(e)) or a < 1 or e < 1:
            raise _bench_problem(src, "an envelope point lacks whole 'agents' and 'events'")
        pts.append((a, e))
    return pts


def _savefig(fig: Any, path: Path) -> None:
    with report_file(path) as fh:
        fig.savefig(fh, format="png", dpi=110)


def plot_pool(
    pool: Pool,
    out: str | os.PathLike[str],
    *,
    bench: str | os.PathLike[str] | None = None,
    since: int | None = None,
    force: bool = False,
) -> tuple[list[Path], list[str]]:
    """Draw the figures into directory ``out``.

    Args:
        pool: A checked pool (:func:`~orchestrace.papers.load_pool`).
        out: Output directory: new, empty, or written by this function before (then only
            with ``force``).
        bench: A ``bench`` report (``report.json`` or its directory) whose scale-envelope
            points are overlaid on the scale plot.
        since: Timeline from this year on (earlier entries are counted in the title);
            ``None`` shows every entry.
        force: Replace figures written before.

    Returns:
        The files written, and notes on figures left out (and why).

    Raises:
        ImportError: matplotlib is missing (the message says what to install).
        PaperPoolError: The ``bench`` report is unreadable.
        orchestrace.io._output.OutputError: ``out`` may not be written: a directory
            orchestrace did not write, or (without ``force``) one it wrote before.
    """
    rows = pool.papers.rows
    envelope = load_envelope(bench) if bench is not None else []
    scale = scale_points(rows)
    names = ["timeline.png", "reward_credit.png"]
    notes = []
    if scale or envelope:
        names.append("scale.png")
    else:
        notes.append(
            "scale.png left out: the pool has no team_size and trace_length columns "
            "(add them, or pass --bench REPORT for the toolkit's envelope)"
        )
    with report_dir(out, force=force, report=_KIND) as target:
        return _draw(target, rows, envelope, scale, names, notes, since)


def _draw(
    target: Path,
    rows: Any,
    envelope: Any,
    scale: Any,
    names: list[str],
    notes: list[str],
    since: int | None,
) -> tuple[list[Path], list[str]]:
    """Draw the figures into ``target`` (checked, and cleaned up on failure, by the caller)."""
    try:
        import matplotlib  # noqa: PLC0415  optional extra [learn]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415  optional extra [learn]
        import matplotlib.ticker  # noqa: PLC0415  optional extra [learn]
    except ImportError:
        raise ImportError(_HINT) from None
    target.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    units = [v for v in PAPER_COLUMNS["credit_granularity"].values if v != NA]
    every = timeline_points(rows)
    pts = [p for p in every if since is None or p[2] >= since]
    fig, ax = plt.subplots(figsize=(12, 5.5))
    colours = plt.get_cmap("tab10")
    offsets = (-0.3, -0.1, 0.1, 0.3)
    for i, unit in enumerate(units):
        mine = sorted((p for p in pts if p[1] == unit), key=lambda p: p[2])
        for j, (key, _u, x, exact) in enumerate(mine):
            y = i + offsets[j % len(offsets)]
            ax.scatter(
                [x],
                [y],
                s=30,
                edgecolors=[colours(i % 10)],
                facecolors=[colours(i % 10)] if exact else "none",
                zorder=3,
            )
            ax.annotate(key, (x, y), xytext=(4, -2), textcoords="offset points", fontsize=5)
    ax.set_yticks(range(len(units)), [f"{u} ({sum(p[1] == u for p in pts)})" for u in units])
    ax.set_ylim(-0.6, len(units) - 0.4)
    ax.xaxis.set_major_formatter(
        matplotlib.ticker.FuncFormatter(
            lambda v, _pos: f"{int(v // 1)}-{min(12, int((v % 1) * 12) + 1):02d}"
        )
    )
    ax.set_xlabel("submission date (arXiv month; hollow: year only, placed mid-year)")
    title = (
        f"Works by submission date and credit unit ({len(pts)} entries; "
        f"{len(rows) - len(every)} without a credit unit left out"
    )
    if len(every) > len(pts):
        title += f"; {len(every) - len(pts)} before {since} not shown"
    ax.set_title(title + ")", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    _savefig(fig, target / "timeline.png")
    plt.close(fig)
    written.append(target / "timeline.png")

    rewards = list(PAPER_COLUMNS["reward_type"].values)
    credits = list(PAPER_COLUMNS["credit_granularity"].values)
    grid = [[0] * len(credits) for _ in rewards]
    for r in rows:
        grid[rewards.index(r["reward_type"])][credits.index(r["credit_granularity"])] += 1
    fig, ax = plt.subplots(figsize=(8, 6))
    im = ax.imshow(grid, cmap="Blues")
    for i, line in enumerate(grid):
        for j, n in enumerate(line):
            ax.text(
                j,
                i,
                str(n),
                ha="center",
                va="center",
                fontsize=8,
                color="white" if n > max(map(max, grid)) / 2 else "black",
            )
    ax.set_xticks(range(len(credits)), credits, rotation=45, ha="right")
    ax.set_yticks(range(len(rewards)), rewards)
    ax.set_xlabel("credit granularity")
    ax.set_ylabel("reward type")
    ax.set_title(f"Reward type x credit granularity ({len(rows)} entries)", fontsize=10)
    fig.colorbar(im, ax=ax, shrink=0.7, label="entries")
    fig.tight_layout()
    _savefig(fig, target / "reward_credit.png")
    plt.close(fig)
    written.append(target / "reward_credit.png")

    if "scale.png" in names:
        fig, ax = plt.subplots(figsize=(7, 5))
        for sector, marker in (("academia", "o"), ("industry", "s")):
            group = [p for p in scale if p[3] == sector]
            if group:
                ax.scatter(
                    [p[1] for p in group],
                    [p[2] for p in group],
                    marker=marker,
                    label=f"{sector} ({len(group)})",
                    zorder=3,
                )
                for key, x, y, _s in group:
                    ax.annotate(key, (x, y), xytext=(3, 3), textcoords="offset points", fontsize=6)
        if envelope:
            ax.scatter(
                [a for a, _ in envelope],
                [e for _, e in envelope],
                marker="x",
                color="tab:gray",
                label=f"orchestrace envelope ({len(envelope)})",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("team size (agents)")
        ax.set_ylabel("trace length (events)")
        ax.set_title("Scale: academia vs industry", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        if not scale:
            notes.append("scale.png shows the envelope only: the pool gives no team sizes")
        fig.tight_layout()
        _savefig(fig, target / "scale.png")
        plt.close(fig)
        written.append(target / "scale.png")
    mark_report_dir(target, _KIND)
    return written, notes
