"""``orchestrace demo``: the main job on embedded defaults (no network, no GPU, no key).

Runs a parallel swarm on the simulated backend, streams its trace to a JSONL file, validates it
and prints its analysis.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from orchestrace.cli.analyze import _text
from orchestrace.cli.run import result_lines
from orchestrace.io import load
from orchestrace.runtime import run
from orchestrace.trace.analyze import summarize


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "demo",
        help="run the main job on embedded defaults and print the analysis",
        description="Run a 64-worker swarm on the wide-search task (5 documents "
        "per worker) with the simulated backend, save and validate its trace, "
        "print the analysis.",
    )
    p.add_argument("-o", "--output", help="where to write the trace (default: a temp dir)")
    p.add_argument("--force", action="store_true", help="replace an existing output")
    p.add_argument("--agents", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run_cmd)


def run_cmd(args: argparse.Namespace) -> int:
    """Run, validate, analyse."""
    out = Path(args.output) if args.output else Path(tempfile.mkdtemp()) / "swarm.jsonl"
    res = run(
        "swarm",
        "wide-search-v0",
        agents=args.agents,
        seed=args.seed,
        task_size=5 * args.agents,
        output=out,
        overwrite=args.force,
        stop_on_signals=True,
        gossip=0.2,
    )
    back = load(out)  # validated on load
    print("\n".join(result_lines(res, str(out))))
    print(_text(back.trace_id, summarize(back), 8))
    if res.interrupted_by:
        return 130 if res.interrupted_by == "SIGINT" else 143
    return 0
