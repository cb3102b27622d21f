"""``orchestrace validate FILE...``: check traces; one line per problem, exit 1 on errors."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from orchestrace._safe import bounded, display
from orchestrace.errors import Problem, TraceFormatError
from orchestrace.io import detect_format, iter_jsonl, parse
from orchestrace.io._common import read_bytes
from orchestrace.io.parquet import parse_parquet


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "validate",
        help="check trace files; one line per problem, exit 1 when any is invalid",
        description="Check trace files (JSON, survey-schema JSON, JSONL, Parquet). Prints one "
        "line per problem naming the file, the JSON path or event id, and the fix.",
    )
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument(
        "--partial",
        action="store_true",
        help="accept recordings cut off by a crash (reported as truncated, exit 0)",
    )
    p.add_argument(
        "--keep-going", action="store_true", help="JSONL: report damaged lines and read past them"
    )
    p.add_argument(
        "--upstream", action="store_true", help="read JSON files as the public survey schema"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="print problems only")
    p.set_defaults(func=run)


#: Problems printed per file; the rest are counted.
MAX_SHOWN = 100


def _validate_file(path: str, args: argparse.Namespace) -> tuple[list[Problem], str]:
    fmt = detect_format(path)
    if fmt == "jsonl":
        problems: list[Problem] = []
        n_traces = n_events = 0
        for item in iter_jsonl(path, keep_going=args.keep_going, partial=args.partial):
            problems.extend(item.problems)
            if item.trace is not None:
                n_traces += 1
                n_events += item.trace.n_events
        return problems, f"{n_traces} trace(s), {n_events} events"
    if fmt == "parquet":
        problems = []
        n_traces = n_events = 0
        for label, trace, found in parse_parquet(path, partial=args.partial):
            problems.extend(p.at(f"{path}[{label}]") for p in found)
            if trace is not None:
                n_traces += 1
                n_events += trace.n_events
        return problems, f"{n_traces} trace(s), {n_events} events"
    trace, problems = parse(
        read_bytes(path),
        source=path,
        partial=args.partial,
        upstream=True if args.upstream else None,
    )
    summary = f"{trace.n_events} events, {len(trace.edges)} edges" if trace else "unreadable"
    return problems, summary


def run(args: argparse.Namespace) -> int:
    """Validate every file; exit 1 if any has an error."""
    bad = 0
    for path in args.files:
        try:
            problems, summary = _validate_file(path, args)
        except TraceFormatError as err:
            print(bounded(str(err)), file=sys.stdout)
            bad += 1
            continue
        errors = [p for p in problems if p.severity == "error"]
        for p in problems[:MAX_SHOWN]:
            print(bounded(str(p) if p.source else f"{display(path, 300)}: {p}"))
        if len(problems) > MAX_SHOWN:
            print(
                f"{display(path, 300)}: ... and {len(problems) - MAX_SHOWN:,} more problem(s) "
                f"(the first {MAX_SHOWN} are shown); fix these and validate again"
            )
        if errors:
            bad += 1
        elif not args.quiet:
            state = "ok" if not problems else f"ok with {len(problems)} warning(s)"
            print(f"{display(Path(path), 300)}: {state} ({summary})")
    return 1 if bad else 0
