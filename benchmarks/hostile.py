"""Hostile-input table: `python benchmarks/hostile.py [--in-process] [--only PATTERN] [--jobs N]`.

Builds the hostile-input corpus (``tests/hostile/corpus.py``: malformed, truncated, binary,
wrong-typed, hostile-sized and planted-code traces, damaged Parquet datasets, odd and special
paths) in a scratch directory, runs every file-reading command on every input as a process
of its own under a time limit (forked from one that has imported the command line;
``ORCHESTRACE_HOSTILE_EXEC=1`` starts the installed ``orchestrace`` each time), and prints the counts (inputs, runs, tracebacks,
exit-3 crashes, hangs, incomplete outputs, code executed from a trace, other problems) and one
line per failed run. Exit status 1 when any run failed.

``--in-process`` runs the ordinary inputs and the output cases that need no process of their
own through ``orchestrace.cli.main`` in this process (much faster; special paths, full disks
and dropped permissions still run as processes).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hostile.corpus import CASES, OUTPUT_CASES, make_seeds
from hostile.runner import (
    COMMANDS,
    Result,
    failure_lines,
    run_case,
    run_output_case,
    summarize,
    table,
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--in-process", action="store_true", help="ordinary inputs in this process")
    ap.add_argument("--only", nargs="*", default=[], help="case name patterns (fnmatch)")
    ap.add_argument("--commands", nargs="*", default=[], help="command name patterns")
    ap.add_argument("--jobs", type=int, default=2, help="child processes at a time")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per run")
    ap.add_argument("--seed", type=int, default=0, help="corpus seed")
    ap.add_argument("--json", metavar="FILE", help="also write every result here")
    args = ap.parse_args()
    cases = [
        c for c in CASES if not args.only or any(fnmatch.fnmatch(c.name, p) for p in args.only)
    ]
    commands = [
        c
        for c in COMMANDS
        if not args.commands or any(fnmatch.fnmatch(c.name, p) for p in args.commands)
    ]
    outputs = [
        c
        for c in OUTPUT_CASES
        if not args.only or any(fnmatch.fnmatch(c.name, p) for p in args.only)
    ]
    t0 = time.perf_counter()
    ordinary = [c for c in cases if not c.special]
    special = [c for c in cases if c.special]
    with tempfile.TemporaryDirectory(prefix="orchestrace-hostile-") as tmp:
        work = Path(tmp)
        seeds = make_seeds(work / "seeds", seed=args.seed)
        results: dict[str, list[Result]] = {}

        def one(case: Any) -> None:
            results[case.name] = run_case(
                case,
                seeds,
                work,
                child=not args.in_process,
                timeout=args.timeout,
                commands=commands,
            )

        def out(case: Any, child: bool = True) -> None:
            results[case.name] = [
                run_output_case(case, seeds, work, timeout=args.timeout, child=child)
            ]

        if args.in_process:
            for c in ordinary:
                one(c)
            for c in outputs:
                if not c.child:
                    out(c, child=False)
        with ThreadPoolExecutor(args.jobs) as ex:
            list(ex.map(one, special if args.in_process else ordinary + special))
            list(ex.map(out, [c for c in outputs if c.child or not args.in_process]))
    groups = [
        ("bad-input corpus (files, streams, datasets, odd paths)", ordinary),
        ("special paths (FIFO, /dev/zero, pipes, unreadable)", special),
        (
            "hostile output paths (existing dirs, '.', full disk, read-only)",
            [c for c in outputs if c.name.startswith("output/")],
        ),
        (
            "hostile option values and reward spec files",
            [c for c in outputs if c.name.startswith("args/")],
        ),
    ]
    flat = [r for _, cs in groups for c in cs for r in results[c.name]]
    rows = [
        summarize([r for c in cs for r in results[c.name]], label, len(cs))
        for label, cs in groups
        if cs
    ]
    print(table(rows))
    slowest = max(flat, key=lambda r: r.seconds, default=None)
    if slowest:
        print(
            f"\n{len(flat):,} runs in {time.perf_counter() - t0:.0f} s; "
            f"slowest {slowest.seconds:.1f} s ({slowest.case} | {slowest.command})"
        )
    bad = failure_lines(flat)
    if bad:
        print(f"\n{len(bad)} failed run(s): case | command | exit code | problems | first line")
        for line in bad:
            print("  " + line)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                [
                    {**r.__dict__, "first_line": r.first_line, "output": r.output[:2000]}
                    for r in flat
                ],
                indent=1,
            )
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
