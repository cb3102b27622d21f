"""``orchestrace generate``: write a synthetic hierarchical trace (same seed, same bytes)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from orchestrace.io import check_dump_target, dump
from orchestrace.io._columnar import skip_pandas_probe
from orchestrace.io.parquet import write_generated
from orchestrace.trace.generate import generate_columns


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
    skip_pandas_probe()  # Arrow converts the columns: no pandas import for it
    fmt = check_dump_target(args.output, format=args.format, overwrite=args.force)
    gen = generate_columns(args.agents, args.steps, args.depth, args.seed)
    n_events, n_edges = gen.n_events, len(gen.edge_src)
    depth = min(args.depth, args.agents - 1)  # the deepest tree the team allows
    if depth < args.depth:
        print(
            f"note: {_count(args.agents, 'agent')} "
            f"{'reaches' if args.agents == 1 else 'reach'} spawn depth {depth} at most, so the "
            f"trace has "
            f"depth {depth}, not {args.depth}",
            file=sys.stderr,
        )
    if n_events > args.steps:  # the team's shape needs more events than asked for
        print(
            f"note: {_count(args.agents, 'agent')} at spawn depth {depth} "
            f"{'needs' if args.agents == 1 else 'need'} at least "
            f"{n_events:,} events, so the trace has {n_events:,}, not {args.steps:,}",
            file=sys.stderr,
        )
    if fmt == "parquet":  # the columns as they are: no event objects
        write_generated(gen, args.output, overwrite=args.force)
    else:
        dump(gen.trace(), args.output, format=fmt, overwrite=args.force)
    print(
        f"wrote {args.output}: {_count(n_events, 'event')}, {_count(n_edges, 'edge')}, "
        f"{_count(args.agents, 'agent')}",
        file=sys.stderr,
    )
    return 0


def _count(k: int, noun: str) -> str:
    return f"{k:,} {noun}" + ("" if k == 1 else "s")
