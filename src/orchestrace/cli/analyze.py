"""``orchestrace analyze FILE [--json]``: counts, critical path, speedup, Critical Steps, costs."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from orchestrace._safe import bounded, display
from orchestrace.cli._json import JsonLines
from orchestrace.cli._partial import add_partial_flag, warn_truncated
from orchestrace.errors import Problem, TraceFormatError, TraceValidationError, warning_line
from orchestrace.io import detect_format, foreign_format, import_path, iter_jsonl, load_all
from orchestrace.io._columnar import skip_pandas_probe
from orchestrace.io._common import read_bytes
from orchestrace.io._json_size import check_json_size
from orchestrace.io.json import parse
from orchestrace.io.parquet import trace_ids
from orchestrace.io.parquet._columns import scan_parquet
from orchestrace.trace.analyze import summarize
from orchestrace.trace.check import check_trace
from orchestrace.trace.model import Trace


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "analyze",
        help="print a trace's counts, critical path, speedup and Critical Steps",
        description="Analyse a trace: events and agents by type, team size, length, spawn depth, "
        "work, critical path (and its events), parallel speedup, PARL Critical Steps, tokens, "
        "messages, tool calls and errors. A file holding several traces gives one result per "
        "trace, each named by its trace_id. A Parquet dataset is checked and analysed "
        "column-wise, without loading event objects.",
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object per trace: trace_id, then the summary (stable keys)",
    )
    p.add_argument("--trace-id", help="analyse only this trace (default: every trace in FILE)")
    p.add_argument(
        "--max-path",
        type=int,
        default=12,
        help="text output: show at most this many critical-path events",
    )
    add_partial_flag(p)
    p.set_defaults(func=run)


def _summaries(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    fmt = detect_format(args.file)
    if fmt == "parquet":
        return _parquet(args)
    if fmt == "jsonl":
        return _jsonl(args)
    check_json_size(args.file)
    try:
        trace, problems = parse(read_bytes(args.file), source=args.file, partial=True)
    except TraceFormatError:
        trace, problems = None, []
        if foreign_format(args.file) is None:
            raise
    if trace is None or any(p.severity == "error" for p in problems):
        if foreign_format(args.file) is None:
            raise TraceValidationError(problems, source=args.file)
        traces = [
            tr for tr in load_all(args.file) if not args.trace_id or tr.trace_id == args.trace_id
        ]
        return [(tr.trace_id, summarize(_checked(tr, args.file))) for tr in traces]
    _warn_semantic(problems)
    warn_truncated(args.file, [trace], partial=args.partial)
    if args.trace_id and trace.trace_id != args.trace_id:
        return []
    return [(trace.trace_id, summarize(trace))]


def _jsonl(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    """Each trace of a JSONL file; a record stream's events are kept as columns, not objects."""
    skip_pandas_probe()
    out = []
    first = True
    # (checked as read: each problem names the line of its record, as validate names it)
    for item in iter_jsonl(args.file, partial=True, check=True, columnar=True):
        if item.trace is None or any(p.severity == "error" for p in item.problems):
            foreign = foreign_format(args.file) if first else None
            if foreign is None:
                raise TraceValidationError(item.problems, source=args.file)
            for tr in import_path(args.file, format=foreign).traces:
                if not args.trace_id or tr.trace_id == args.trace_id:
                    warn_truncated(args.file, [tr], partial=args.partial)
                    out.append((tr.trace_id, summarize(_checked(tr, args.file))))
            return out
        first = False
        tr = item.trace
        if args.trace_id and tr.trace_id != args.trace_id:
            continue
        warn_truncated(args.file, [tr], partial=args.partial)
        if item.graph is None:
            out.append((tr.trace_id, summarize(_checked(tr, args.file))))
            continue
        summary = summarize(item.graph)
        summary["errors"] = item.n_errors
        out.append((tr.trace_id, summary))
    return out


def _parquet(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    """Each trace of a dataset, checked and analysed column-wise (no event objects)."""
    skip_pandas_probe()
    ids = trace_ids(args.file)
    if args.trace_id is not None and args.trace_id not in ids:
        return []
    out = []
    for scanned in scan_parquet(args.file, partial=True, all_columns=False, trace_id=args.trace_id):
        problems = scanned.problems
        if scanned.graph is None or any(p.severity == "error" for p in problems):
            raise TraceValidationError(problems, source=f"{args.file}[{scanned.label}]")
        if scanned.header is not None:
            warn_truncated(args.file, [scanned.header], partial=args.partial)
        summary = summarize(scanned.graph)
        summary["errors"] = scanned.n_errors
        out.append((scanned.label, summary))
    return out


def _warn_semantic(problems: list[Problem]) -> None:
    """List an imported trace's semantic problems (analysed anyway) on stderr."""
    shown = [p for p in problems if p.severity == "semantic"]
    for p in shown[:20]:
        print(bounded(warning_line(p)), file=sys.stderr)
    if len(shown) > 20:
        print(f"warning: ... and {len(shown) - 20} more semantic problem(s)", file=sys.stderr)


def _checked(trace: Trace, source: str) -> Trace:
    problems = check_trace(trace, partial=True)
    if any(p.severity == "error" for p in problems):
        raise TraceValidationError(problems, source=source)
    return trace


def _fixed(x: float, spec: str) -> str:
    """``x`` formatted by ``spec``, or in exponent form when that would print over 15 digits."""
    return f"{x:{spec}}" if not math.isfinite(x) or abs(x) < 1e15 else f"{x:.6e}"


#: Most roles listed on the agents line (a hostile trace may have one per agent).
_MAX_ROLES = 12


def _text(trace_id: str, s: dict[str, Any], max_path: int) -> str:
    path = s["critical_path"]
    shown = " -> ".join(display(i, 40) for i in path[:max_path]) + (
        f" -> ... ({len(path)} events)" if len(path) > max_path else ""
    )
    roles = list(s["agents_by_role"].items())
    role_text = ", ".join(f"{display(k, 40)} {v:,}" for k, v in roles[:_MAX_ROLES]) + (
        f", ... ({len(roles)} roles)" if len(roles) > _MAX_ROLES else ""
    )
    lines = [
        f"trace {display(trace_id)}",
        f"  events          {s['events']:>12,}   "
        + ", ".join(f"{display(k, 40)} {v:,}" for k, v in sorted(s["events_by_type"].items())),
        f"  agents          {s['agents']:>12,}   " + role_text,
        f"  steps           {s['steps']:>12,}   spawn depth {s['spawn_depth']}",
        f"  work            {_fixed(s['work_s'], ',.3f'):>12} s",
        f"  critical path   {_fixed(s['critical_path_s'], ',.3f'):>12} s   {shown}",
        f"  speedup         {_fixed(s['speedup'], ',.2f'):>12} x  (work / critical path)",
        f"  critical steps  {s['critical_steps']:>12,}   (PARL)",
        f"  makespan        {_fixed(s['makespan_s'], ',.3f'):>12} s",
        f"  tokens          {s['tokens']:>12,}   in {s['tokens_in']:,}, out {s['tokens_out']:,}",
        f"  messages        {s['messages']:>12,}   tool calls {s['tool_calls']:,}, "
        f"llm calls {s['llm_calls']:,}, errors {s['errors']:,}",
        f"  cost            {_fixed(s['cost'], ',.4f'):>12}",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Analyse and print."""
    results = _summaries(args)
    if not results:
        print(
            f"{display(args.file, 300)}: no trace with id '{display(args.trace_id)}'",
            file=sys.stderr,
        )
        return 1
    lines = JsonLines("analyze --json", compact=True)
    for trace_id, s in results:
        if args.json:
            sys.stdout.write(lines.dumps({"trace_id": trace_id, **s}) + "\n")
        else:
            print(_text(trace_id, s, args.max_path))
    lines.finish()
    return 0
