"""``orchestrace demo``: the main job on embedded defaults (no network, no GPU, no key).

Generates a sample hierarchical trace, writes it, validates it and prints its analysis.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from orchestrace.cli.analyze import _text
from orchestrace.io import dump, load
from orchestrace.trace.analyze import summarize
from orchestrace.trace.generate import generate_trace


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "demo",
        help="run the main job on embedded defaults and print the analysis",
        description="Generate a sample trace, save it, validate it and analyse it.",
    )
    p.add_argument("-o", "--output", help="where to write the trace (default: a temp dir)")
    p.add_argument("--agents", type=int, default=64)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Generate, save, reload (validated) and analyse a trace."""
    out = Path(args.output) if args.output else Path(tempfile.mkdtemp()) / "demo.jsonl"
    trace = generate_trace(args.agents, args.steps, args.depth, args.seed)
    dump(trace, out)
    back = load(out)
    print(f"wrote and validated {out}")
    print(_text(back.trace_id, summarize(back), 8))
    return 0
