"""``orchestrace study stopping``: the learned-stopping study, reproducible by one command."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "study",
        help="reproduce a study (stopping: learned O5 vs every stopping heuristic)",
        description="Train a stopping policy per task with the default config and compare it "
        "with every stopping heuristic on held-out seeds; write results.md, results.json and "
        "plots to --output.",
    )
    p.add_argument("name", choices=["stopping"])
    p.add_argument("--tasks", default="arith,search,multihop", help="comma-separated tasks")
    p.add_argument("--algo", default="ppo", choices=["ppo", "grpo", "reinforce"])
    p.add_argument("--seeds", type=int, default=10, help="held-out seeds")
    p.add_argument("--episodes", type=int, default=200, help="episodes per seed")
    p.add_argument("--train-episodes", type=int, help="override the default training budget")
    p.add_argument("--train-seed", type=int, default=0, help="seed of the training runs")
    p.add_argument("--jobs", type=int, default=2, help="tasks in parallel")
    p.add_argument("-o", "--output", default="runs/learned-stopping", help="report directory")
    p.add_argument(
        "--force",
        action="store_true",
        help="write into OUTPUT even though an earlier `orchestrace study` wrote it "
        "(a directory holding anything else is never written into)",
    )
    p.set_defaults(func=run_cmd)


def run_cmd(args: argparse.Namespace) -> int:
    """Run the study and print the summary table."""
    from orchestrace.io._output import report_dir
    from orchestrace.learn.stopping import run_study, summary_table

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    with report_dir(args.output, force=args.force, report="study"):
        study = run_study(
            tasks,
            algo=args.algo,
            seeds=args.seeds,
            episodes=args.episodes,
            train_episodes=args.train_episodes,
            train_seed=args.train_seed,
            out=args.output,
            jobs=args.jobs,
            progress=lambda t: print(f"done: {t}", flush=True),
            force=args.force,
        )
    print(summary_table(study))
    print(f"report: {Path(args.output) / 'results.md'}")
    return 0
