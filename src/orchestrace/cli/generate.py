"""``orchestrace generate``: write a synthetic hierarchical trace (same seed, same bytes)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from orchestrace.io import check_dump_target, dump
from orchestrace.io._columnar import skip_pandas_probe
from orchestrace.trace.generate import generate_trace


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "generate",
        help="write a synthetic hierarchical trace",
        description="Write a valid synthetic trace: K agents in a spawn tree of "
        "depth D, L events, all draws seeded.",
    )
    p.add_argument("--agents", "-k", type=int, default=8, help="team size K, root included")
    p.add_argument("--steps", "-l", type=int, default=200, help="trace length L in events")
    p.add_argument("--depth", "-d", type=int, default=1, help="spawn tree depth D")
    p.add_argument("--seed", "-s", type=int, default=0, help="random seed")
    p.add_argument("-o", "--output", required=True, help="output file (.json, .jsonl, .parquet)")
    p.add_argument("--force", action="store_true", help="replace an existing output")
    p.add_argument(
        "--format",
        choices=["json", "upstream", "jsonl", "parquet"],
        help="output format (default: from the file name)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Generate and write the trace."""
    skip_pandas_probe()  # a Parquet output converts Python values: no pandas import for it
    fmt = check_dump_target(args.output, format=args.format, overwrite=args.force)
    trace = generate_trace(args.agents, args.steps, args.depth, args.seed)
    if trace.n_events > args.steps:  # the team's shape needs more events than asked for
        print(
            f"note: {args.agents:,} agents at spawn depth {args.depth} need at least "
            f"{trace.n_events:,} events, so the trace has {trace.n_events:,}, not {args.steps:,}",
            file=sys.stderr,
        )
    dump(trace, args.output, format=fmt, overwrite=args.force)
    print(
        f"wrote {args.output}: {trace.n_events} events, {len(trace.edges)} edges, "
        f"{args.agents} agents",
        file=sys.stderr,
    )
    return 0
