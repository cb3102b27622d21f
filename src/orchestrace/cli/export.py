"""``orchestrace export TRACES --to trl|verl``: orchestrator turns with advantages."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from orchestrace._safe import display
from orchestrace.cli._partial import add_partial_flag, refuse_truncated
from orchestrace.cli._verdicts import add_rerun_checks, verdict_warnings
from orchestrace.errors import ConfigError
from orchestrace.io import load_all
from orchestrace.io._output import check_output
from orchestrace.learn.export import FORMATS, export


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "export",
        help="export orchestrator turns (prompt, completion, advantage) for TRL or verl",
        description="One row per orchestrator decision, advantages relative within each task "
        "instance. trl: JSONL (prompt, completion, label, advantage) for KTOTrainer, turns with "
        "advantage 0 left out; verl: Parquet with verl's RL dataset columns, the task's ground "
        "truth, scored by orchestrace.learn.verl_reward.compute_score.",
    )
    p.add_argument("traces", nargs="+", metavar="TRACE")
    p.add_argument("--to", choices=FORMATS, default="trl")
    p.add_argument(
        "-o", "--output", required=True, help="output file (trl: .jsonl, verl: .parquet)"
    )
    p.add_argument("--force", action="store_true", help="replace an existing output")
    p.add_argument("--reward", default="team", help="reward name (team, parl, ...)")
    p.add_argument(
        "--advantage",
        choices=["group", "credit"],
        default="group",
        help="group: run-level group-relative; credit: per-turn credit",
    )
    p.add_argument("--method", default="uniform", help="credit mode: assigner")
    add_rerun_checks(p)
    add_partial_flag(p)
    p.set_defaults(func=run_cmd)


def run_cmd(args: argparse.Namespace) -> int:
    """Load, export, report."""
    check_output(args.output, force=args.force, kind="file", inputs=args.traces)
    suffix = Path(args.output).suffix.lower()
    want = ".parquet" if args.to == "verl" else ".jsonl"
    if suffix in (".jsonl", ".ndjson", ".parquet", ".json") and not (
        suffix == want or (want == ".jsonl" and suffix == ".ndjson")
    ):
        raise ConfigError(
            f"-o {args.output}: a {args.to} export is written as {want[1:].upper()} "
            f"(not {suffix[1:].upper()}); name the output *{want}"
        )
    traces = []
    for path in args.traces:  # every trace of each file or dataset (a Parquet dataset holds many)
        held = load_all(path, check=True, partial=True)
        refuse_truncated(path, held, partial=args.partial)
        traces += held
    with verdict_warnings():
        n = _export(traces, args)
    print(f"wrote {n} turns from {len(traces)} traces to {display(args.output, 300)} ({args.to})")
    if args.to == "trl" and n == 0:
        print(
            "note: every turn has advantage 0 (no preference) and the trl file leaves such "
            "turns out; export several runs of the same task instance whose rewards differ",
            file=sys.stderr,
        )
    return 0


def _export(traces: list[Any], args: argparse.Namespace) -> int:
    return export(
        traces,
        args.output,
        to=args.to,
        overwrite=args.force,
        reward=args.reward,
        mode=args.advantage,
        method=args.method,
        rerun_checks=args.rerun_checks,
    )
