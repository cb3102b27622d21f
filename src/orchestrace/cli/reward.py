"""``orchestrace reward TRACE... --spec rewards.toml``: score traces, one row per trace."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from orchestrace._safe import display
from orchestrace.cli._json import JsonLines
from orchestrace.cli._partial import add_partial_flag, refuse_truncated
from orchestrace.cli._verdicts import add_rerun_checks, verdict_warnings
from orchestrace.io import load_all
from orchestrace.rewards import Composite, load_spec

_DEFAULT = {"team": {"weight": 1.0}, "parl": {"weight": 1.0}, "orchestration": {"weight": 0.0}}


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "reward",
        help="score traces with reward functions (R1-R8, PARL)",
        description="Score traces. The spec is TOML: one [reward.NAME] table per reward with "
        "its weight, its family (default: NAME; R1..R8, team, agent, role, process, tool, "
        "verifier, orchestration, hybrid, parl) and parameters. Without --spec: team, parl, "
        "orchestration.",
    )
    p.add_argument("traces", nargs="+", metavar="TRACE")
    p.add_argument("--spec", help="reward spec (TOML)")
    p.add_argument("--step", type=int, default=0, help="training step (for annealed weights)")
    p.add_argument("--json", action="store_true", help="one JSON object per trace")
    add_rerun_checks(p)
    add_partial_flag(p)
    p.set_defaults(func=run_cmd)


def run_cmd(args: argparse.Namespace) -> int:
    """Score and print."""
    combo = load_spec(args.spec) if args.spec else Composite.from_spec(_DEFAULT)
    traces = []
    for path in args.traces:
        found = load_all(path, check=True, partial=True)
        refuse_truncated(path, found, partial=args.partial)
        traces += found
    with verdict_warnings():
        parts = combo.components(traces, step=args.step, rerun_checks=args.rerun_checks)
    totals = combo.total(parts)
    names = list(parts)
    if args.json:
        lines = JsonLines("reward --json")
        for i, tr in enumerate(traces):
            row = {
                "trace_id": tr.trace_id,
                **{f"rewards/{n}": parts[n][i] for n in names},
                "rewards/total": totals[i],
            }
            sys.stdout.write(lines.dumps(row) + "\n")
        lines.finish()
        return 0
    ids = [display(tr.trace_id) for tr in traces]
    width = max(len("trace"), *(len(i) for i in ids))
    columns = [display(n, 30) for n in [*names, "total"]]
    print(f"{'trace':<{width}}  " + "  ".join(f"{n:>13}" for n in columns))
    for i, shown in enumerate(ids):
        cells = [parts[n][i] for n in names] + [totals[i]]
        print(
            f"{shown:<{width}}  "
            + "  ".join(f"{'-':>13}" if v is None else f"{v:>13.4f}" for v in cells)
        )
    return 0
