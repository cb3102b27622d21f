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
from orchestrace.errors import ConfigError
from orchestrace.io import check_dump_target, dump, load
from orchestrace.runtime import run
from orchestrace.runtime.config import RunConfig
from orchestrace.tasks import TASKS
from orchestrace.trace.analyze import summarize

_TASK = "wide-search-v0"
_DOCS_PER_AGENT = 5


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
    # the run's agent budget (the orchestrator and the swarm's aggregator included) and the
    # task's size (five documents per worker) bound --agents: refused here by its own name
    budget = RunConfig().max_agents - 2
    most = min(budget, TASKS[_TASK].max_size // _DOCS_PER_AGENT)
    if not 1 <= args.agents <= most:
        raise ConfigError(
            f"--agents must be from 1 to {most:,} (got {args.agents:,}): a run holds at most "
            f"{budget + 2:,} agents, the orchestrator and the aggregator included; e.g. 64"
        )
    out = Path(args.output) if args.output else Path(tempfile.mkdtemp()) / "swarm.jsonl"
    # a JSONL output is streamed while the run goes on; another format is written at its end
    fmt = check_dump_target(out, overwrite=args.force)
    res = run(
        "swarm",
        _TASK,
        agents=args.agents,
        seed=args.seed,
        task_size=_DOCS_PER_AGENT * args.agents,
        output=out if fmt == "jsonl" else None,
        overwrite=args.force,
        stop_on_signals=True,
        gossip=0.2,
    )
    if fmt != "jsonl":
        dump(res.trace, out, format=fmt, overwrite=args.force)
    back = load(out)  # validated on load
    print("\n".join(result_lines(res, str(out))))
    print(_text(back.trace_id, summarize(back), 8))
    if res.interrupted_by:
        return 130 if res.interrupted_by == "SIGINT" else 143
    return 0
