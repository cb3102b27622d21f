"""``orchestrace evaluate``: compare policies (checkpoints and heuristics) in one table."""

from __future__ import annotations

import argparse
from typing import Any

from orchestrace.cli._json import JsonLines
from orchestrace.errors import ConfigError
from orchestrace.learn.env import ENV_IDS
from orchestrace.learn.evaluate import compare, format_table
from orchestrace.learn.policies import heuristics
from orchestrace.learn.policies.torch_policy import load_policy


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "evaluate",
        help="compare policies on held-out task instances",
        description="Evaluate checkpoints (policy.pt from `orchestrace train`) and heuristic "
        "baselines on the same held-out seeds; print a Markdown table with 95%% CIs.",
    )
    p.add_argument("policies", nargs="*", metavar="CHECKPOINT", help="policy.pt files")
    p.add_argument("--env", default="stop-v0", choices=ENV_IDS)
    p.add_argument("--task", default="arith-mapreduce-v0")
    p.add_argument(
        "--heuristics",
        choices=["stopping", "all", "none"],
        default="stopping",
        help="heuristic baselines to include",
    )
    p.add_argument("--seeds", type=int, default=10, help="held-out seeds")
    p.add_argument("--episodes", type=int, default=200, help="episodes per seed")
    p.add_argument("--json", action="store_true", help="print rows as JSON lines")
    p.set_defaults(func=run_cmd)


def run_cmd(args: argparse.Namespace) -> int:
    """Evaluate and print."""
    if args.seeds < 1 or args.episodes < 1:
        raise ConfigError("--seeds and --episodes must be >= 1")
    pols: dict[str, Any] = {}
    if args.policies:
        for path in args.policies:
            pols[path] = load_policy(path)
    if args.heuristics != "none":
        if args.env != "stop-v0" and args.heuristics == "stopping":
            args.heuristics = "all"
        pols.update({str(h): h for h in heuristics(args.heuristics)})
    if not pols:
        raise ConfigError("nothing to evaluate: give checkpoints or --heuristics")
    rows = compare(pols, args.env, task=args.task, seeds=args.seeds, episodes=args.episodes)
    if args.json:
        lines = JsonLines("evaluate --json")
        for r in rows:
            print(lines.dumps(r.row()))
        lines.finish()
    else:
        print(
            format_table(
                rows,
                f"{args.env} on {args.task}: {args.seeds} held-out seeds x "
                f"{args.episodes} episodes",
            )
        )
    return 0
