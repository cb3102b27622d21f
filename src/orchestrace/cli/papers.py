"""``orchestrace papers ACTION``: the survey's paper pool as data.

Actions: ``check`` (one line per problem, exit 1 on any), ``taxonomy``, ``stats``, ``plot``
and ``coverage``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from orchestrace.io._output import atomic_write, check_output
from orchestrace.papers.check import load_pool, read_pool
from orchestrace.papers.links import coverage, coverage_markdown
from orchestrace.papers.plots import plot_pool
from orchestrace.papers.stats import pool_stats, stats_markdown
from orchestrace.papers.taxonomy import EXCLUDED_COLUMNS, OPTIONAL_COLUMNS, PAPER_COLUMNS, describe


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "papers",
        help="the survey's paper pool: check, taxonomy, stats, plot, coverage",
        description="Use the survey artifact's paper pool (papers.csv, excluded.csv): check "
        "the tags, print the taxonomy, compute the corpus statistics, draw the figures and "
        "see which settings the toolkit can run.",
    )
    acts = p.add_subparsers(dest="papers_command", metavar="ACTION", required=True)

    c = acts.add_parser(
        "check",
        help="check the pool; one line per problem naming file, line, column and fix",
        description="Check papers.csv (and excluded.csv) against the taxonomy. Prints one "
        "line per problem and exits 1 when there is any.",
    )
    c.add_argument("papers", metavar="PAPERS.csv")
    c.add_argument("excluded", metavar="EXCLUDED.csv", nargs="?")
    c.add_argument("-q", "--quiet", action="store_true", help="print problems only")
    c.set_defaults(func=_check)

    t = acts.add_parser("taxonomy", help="print the columns and their allowed values")
    t.add_argument("--json", action="store_true", help="as JSON")
    t.set_defaults(func=_taxonomy)

    s = acts.add_parser(
        "stats",
        help="headline counts, counts per tag and cross-tabulations (Markdown or JSON)",
        description="Compute the corpus statistics the way the survey artifact does (NA "
        "counted as a value; counts by decreasing count).",
    )
    s.add_argument("papers", metavar="PAPERS.csv")
    s.add_argument("excluded", metavar="EXCLUDED.csv", nargs="?")
    s.add_argument("--json", action="store_true", help="JSON instead of Markdown")
    _output_args(s, "write to this file instead of printing")
    s.set_defaults(func=_stats)

    g = acts.add_parser(
        "plot",
        help="figures: timeline by credit unit, reward x credit heat map, scale scatter",
        description="Draw timeline.png, reward_credit.png and (with team sizes in the pool "
        "or --bench) scale.png into DIR. Needs matplotlib (the [learn] extra).",
    )
    g.add_argument("papers", metavar="PAPERS.csv")
    g.add_argument("excluded", metavar="EXCLUDED.csv", nargs="?")
    g.add_argument("--bench", metavar="REPORT", help="overlay this bench report's envelope")
    g.add_argument(
        "--since", type=int, metavar="YEAR", help="timeline from this year on (default: all)"
    )
    g.add_argument("-o", "--output", metavar="DIR", required=True, help="figure directory")
    g.add_argument("--force", action="store_true", help="replace figures written before")
    g.set_defaults(func=_plot)

    v = acts.add_parser(
        "coverage",
        help="per entry, which reward/credit/orchestration settings the toolkit runs today",
    )
    v.add_argument("papers", metavar="PAPERS.csv")
    v.add_argument("--json", action="store_true", help="JSON instead of Markdown")
    _output_args(v, "write to this file instead of printing")
    v.set_defaults(func=_coverage)


def _output_args(p: argparse.ArgumentParser, text: str) -> None:
    p.add_argument("-o", "--output", metavar="FILE", help=text)
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")


def _emit(args: argparse.Namespace, text: str, inputs: list[str]) -> None:
    if args.output is None:
        sys.stdout.write(text)
        return
    with atomic_write(args.output, "wb", force=args.force, inputs=inputs) as fh:
        fh.write(text.encode("utf-8"))
    print(f"wrote {args.output}", file=sys.stderr)


def _inputs(args: argparse.Namespace) -> list[str]:
    return [x for x in (args.papers, getattr(args, "excluded", None)) if x]


def _check(args: argparse.Namespace) -> int:
    pool, problems = read_pool(args.papers, args.excluded)
    for p in problems:
        print(str(p))
    if pool is None:
        return 1
    if not args.quiet:
        print(f"{args.papers}: ok ({len(pool.papers.rows)} entries)")
        if pool.excluded is not None:
            print(f"{args.excluded}: ok ({len(pool.excluded.rows)} decisions)")
    return 0


def _taxonomy(args: argparse.Namespace) -> int:
    if args.json:
        doc = {
            name: [asdict(c) for c in cols.values()]
            for name, cols in (
                ("papers", PAPER_COLUMNS),
                ("papers_optional", OPTIONAL_COLUMNS),
                ("excluded", EXCLUDED_COLUMNS),
            )
        }
        print(json.dumps(doc, indent=1))
    else:
        sys.stdout.write(describe())
    return 0


def _stats(args: argparse.Namespace) -> int:
    if args.output is not None:
        check_output(args.output, force=args.force, inputs=_inputs(args))
    stats = pool_stats(load_pool(args.papers, args.excluded))
    text = json.dumps(stats, indent=1) + "\n" if args.json else stats_markdown(stats)
    _emit(args, text, _inputs(args))
    return 0


def _plot(args: argparse.Namespace) -> int:
    pool = load_pool(args.papers, args.excluded)
    written, notes = plot_pool(
        pool, args.output, bench=args.bench, since=args.since, force=args.force
    )
    for n in notes:
        print(f"note: {n}")
    for w in written:
        print(f"wrote {w}")
    return 0


def _coverage(args: argparse.Namespace) -> int:
    if args.output is not None:
        check_output(args.output, force=args.force, inputs=_inputs(args))
    cov = coverage(load_pool(args.papers))
    text = json.dumps(cov, indent=1) + "\n" if args.json else coverage_markdown(cov)
    _emit(args, text, _inputs(args))
    return 0
