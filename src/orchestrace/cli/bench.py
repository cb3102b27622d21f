"""``orchestrace bench [--suite NAME] [--backend sim|openai|hf]``: run a benchmark suite."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from orchestrace.cli._backend import check_timeout
from orchestrace.cli._json import JsonLines
from orchestrace.errors import ConfigError
from orchestrace.executors import add_executor_flags, executor_from_args, owned
from orchestrace.io._output import report_dir
from orchestrace.masbench.report import write_report
from orchestrace.masbench.security import SECURITY_SUITES, run_security_suite, write_security_report
from orchestrace.masbench.suite import SUITES, run_suite
from orchestrace.runtime.backends import BACKENDS


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "bench",
        help="run a benchmark suite (E1-E4, scale envelope, failure taxonomy)",
        description="Run a versioned suite and write report.md, report.json and PNG plots. "
        "Suites: "
        + "; ".join(
            [f"{k}: {v.description}" for k, v in SUITES.items()]
            + [f"{k}: {v.description}" for k, v in SECURITY_SUITES.items()]
        ),
    )
    p.add_argument("--suite", default="sim-v2", choices=sorted([*SUITES, *SECURITY_SUITES]))
    p.add_argument("--backend", default="sim", choices=BACKENDS)
    p.add_argument("--model", help="openai: model name; hf: model directory")
    p.add_argument("--base-url", help="openai: server URL ending in /v1")
    p.add_argument(
        "--timeout",
        type=float,
        help="openai: total seconds per request attempt, answer included (default 60)",
    )
    p.add_argument("--retries", type=int, help="openai: retries per request (default 3)")
    p.add_argument("--seeds", type=int, help="override the suite's seeds per cell")
    for flag, what in (
        ("--attacks", "attack settings"),
        ("--defenses", "defense settings"),
        ("--topologies", "topologies"),
    ):
        p.add_argument(
            flag,
            metavar="A,B,...",
            type=lambda text: [x.strip() for x in text.split(",") if x.strip()],
            help=f"security suites: run only these {what} of the suite (comma-separated)",
        )
    p.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="worker processes when --executor is not given (1: this process)",
    )
    add_executor_flags(p, "the benchmark runs")
    p.add_argument("--no-envelope", action="store_true", help="skip the scale envelope")
    p.add_argument("-o", "--output", default="runs/bench", help="report directory")
    p.add_argument(
        "--force",
        action="store_true",
        help="write into OUTPUT even though an earlier `orchestrace bench` wrote it "
        "(a directory holding anything else is never written into)",
    )
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true", help="print the per-cell rows as JSON lines")
    p.set_defaults(func=run_cmd)


def run_cmd(args: argparse.Namespace) -> int:
    """Run, write, summarise."""
    if args.jobs < 1:
        raise ConfigError("--jobs must be >= 1")

    flags = (
        ("model", args.model),
        ("base_url", args.base_url),
        ("timeout_s", args.timeout),
        ("retries", args.retries),
    )
    opts = {k: v for k, v in flags if v is not None and v != ""}
    for flag, key in (("--timeout", "timeout_s"), ("--retries", "retries")):
        if key in opts and args.backend not in ("openai", "vllm"):
            raise ConfigError(f"{flag} is an option of --backend openai or vllm; leave it out")
    if args.timeout is not None:
        check_timeout(args.timeout)
    if args.backend in ("openai", "vllm"):  # what is used is recorded, given or not
        opts.setdefault("timeout_s", 60.0)
        opts.setdefault("retries", 3)
    if args.suite in SECURITY_SUITES:
        return _security(args, opts or None)
    for flag in ("attacks", "defenses", "topologies"):
        if getattr(args, flag) is not None:
            raise ConfigError(
                f"--{flag} selects part of a security suite's grid; {args.suite} is not one "
                f"(security suites: {', '.join(SECURITY_SUITES)})"
            )
    given = args.executor or args.workers is not None or args.ray_address
    executor = executor_from_args(args, default="process") if given else None
    with owned(executor), report_dir(args.output, force=args.force, report="bench"):
        report = run_suite(
            args.suite,
            backend=args.backend,
            backend_options=opts or None,
            jobs=args.jobs,
            progress=not args.no_progress,
            seeds=args.seeds,
            envelope=not args.no_envelope,
            executor=executor,
        )
        out = write_report(report, args.output, force=args.force)
    if args.json:
        lines = JsonLines("bench --json")
        for c in report["cells"]:
            print(lines.dumps(c))
        lines.finish()
        if not report["cells"]:
            print(
                f"note: {report['suite']['id']} has no per-cell rows to print (it measures "
                f"the scale envelope); its {len(report['envelope'])} points are in {out / 'report.json'}",
                file=sys.stderr,
            )
    else:
        print(
            f"{report['suite']['id']}: {len(report['runs'])} runs, "
            f"{len(report['envelope'])} envelope points in {report['wall_s']:.0f} s"
        )
        for note in report["notes"]:
            print(f"note: {note}")
        print(f"report: {out / 'report.md'}")
        if report["cells"] and not (out / "e1_e2.png").exists():
            print("plots skipped: matplotlib is missing (pip install 'orchestrace[learn]')")
    lost = report["missing"]["runs"]
    if lost:
        cells = ", ".join(f"{c['topology']}/{c['task']}" for c in report["missing"]["cells"])
        print(
            f"error: {len(lost)} of {len(lost) + len(report['runs'])} runs failed (cells short "
            f"of runs: {cells}); the report keeps the others and lists the failures under "
            f"missing in {out / 'report.json'}",
            file=sys.stderr,
        )
        return 1
    return 0


def _security(args: argparse.Namespace, opts: dict[str, Any] | None) -> int:
    """``--suite security-*``: attacks x defenses x topologies."""
    with report_dir(args.output, force=args.force, report="bench"):
        report = run_security_suite(
            args.suite,
            backend=args.backend,
            backend_options=opts,
            jobs=args.jobs,
            progress=not args.no_progress,
            seeds=args.seeds,
            attacks=args.attacks,
            defenses=args.defenses,
            topologies=args.topologies,
        )
        out = write_security_report(report, args.output, force=args.force)
    if args.json:
        lines = JsonLines("bench --json")
        for d, row in report["summary"].items():
            print(lines.dumps({"defense": d, **row}))
        lines.finish()
    else:
        print(f"{report['suite']['id']}: {len(report['runs'])} runs in {report['wall_s']:.0f} s")
        for d, row in report["summary"].items():
            asr, u = row["asr"]["rate"], row["benign_utility"]["rate"]
            shown = "n/a" if asr is None else f"{asr:.2f}"
            util = "n/a" if u is None else f"{u:.2f}"
            print(f"  {d}: benign utility {util}, targeted ASR {shown}")
        print(f"report: {out / 'report.md'}")
    return 0
