"""``orchestrace study stopping``: the learned-stopping study, reproducible by one command."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.executors import add_executor_flags, executor_from_args, owned
from orchestrace.io._output import report_dir
from orchestrace.learn.stopping import StudyConfig, missing_note, run_study, summary_table


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "study",
        help="reproduce a study (stopping: learned O5 vs tuned rules, on equal data)",
        description="Train stopping policies (several seeds, several token weights) and tune "
        "every stopping-rule family (size-aware rules included) on the same number of task "
        "instances, seeds disjoint from each other and from evaluation; evaluate all of them "
        "and the simulator's posterior rule (an oracle reference) on the same held-out "
        "instances; write results.md, results.json, pareto.csv, sweep.csv and plots to "
        "--output.",
    )
    p.add_argument("name", choices=["stopping"])
    p.add_argument("--tasks", default="arith,search,multihop", help="comma-separated tasks")
    p.add_argument("--algo", default="ppo", choices=["ppo", "grpo", "reinforce"])
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke-test budgets (seconds per task); flags given explicitly still apply",
    )
    p.add_argument(
        "--budget", type=int, help="task instances per training seed and per tuning replicate"
    )
    p.add_argument(
        "--train-seeds", type=int, help="training seeds per policy (= tuning replicates per rule)"
    )
    p.add_argument(
        "--train-episodes", type=int, help="episodes per training run (replayed from --budget)"
    )
    p.add_argument(
        "--weights", help="comma-separated token weights w of success - w x tokens / 1000"
    )
    p.add_argument(
        "--train-seed", type=int, help="first training seed and tuning replicate (default 0)"
    )
    p.add_argument("--seeds", type=int, help="held-out evaluation seeds")
    p.add_argument("--episodes", type=int, help="episodes per evaluation seed")
    p.add_argument("--live-episodes", type=int, help="instances re-run live per method")
    p.add_argument(
        "--jobs", type=int, default=2, help="processes when --executor is not given (1: this one)"
    )

    add_executor_flags(p, "the study's jobs (evaluation banks, training replicates)")
    p.add_argument("-o", "--output", default="runs/learned-stopping", help="report directory")
    p.add_argument(
        "--force",
        action="store_true",
        help="write into OUTPUT even though an earlier `orchestrace study` wrote it "
        "(a directory holding anything else is never written into)",
    )
    p.set_defaults(func=run_cmd)


def _config(args: argparse.Namespace) -> Any:
    base = StudyConfig.quick() if args.quick else StudyConfig()
    kw: dict[str, Any] = {k: v for k, v in vars(base).items()}
    for flag, key in (
        ("budget", "budget"),
        ("train_seeds", "train_seeds"),
        ("train_episodes", "train_episodes"),
        ("seeds", "eval_seeds"),
        ("episodes", "episodes"),
        ("live_episodes", "live_episodes"),
        ("train_seed", "first_seed"),
    ):
        value = getattr(args, flag)
        if value is not None:
            bound = 0 if flag in ("live_episodes", "train_seed") else 1
            if value < bound:
                raise ConfigError(f"--{flag.replace('_', '-')} must be >= {bound}, got {value}")
            kw[key] = value
    if args.weights is not None:
        try:
            kw["weights"] = tuple(float(w) for w in args.weights.split(",") if w.strip())
        except ValueError:
            raise ConfigError(
                f"--weights must be comma-separated numbers, e.g. 0.05,0.1,0.2; got "
                f"{args.weights!r}"
            ) from None
        if kw["reference_weight"] not in kw["weights"]:
            kw["reference_weight"] = sorted(kw["weights"])[len(kw["weights"]) // 2]
    kw["algo"] = args.algo
    return StudyConfig(**kw)


def run_cmd(args: argparse.Namespace) -> int:
    """Run the study and print the summary table."""
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if args.jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {args.jobs}")
    cfg = _config(args)

    given = args.executor or args.workers is not None or args.ray_address
    executor = executor_from_args(args, default="process") if given else None
    t0 = time.perf_counter()
    with owned(executor), report_dir(args.output, force=args.force, report="study"):
        study = run_study(
            tasks,
            config=cfg,
            out=args.output,
            jobs=args.jobs,
            progress=lambda m: print(f"{m} ({time.perf_counter() - t0:.0f} s)", flush=True),
            force=args.force,
            executor=executor,
        )
    print(summary_table(study))
    print(f"report: {Path(args.output) / 'results.md'}")
    note = missing_note(study)
    if note:
        print(
            f"error: {note} (listed under Missing in {Path(args.output) / 'results.md'})",
            file=sys.stderr,
        )
        return 1
    return 0
