"""``orchestrace convert IN -o OUT``: between native JSON, JSONL, Parquet and the survey schema."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from orchestrace.cli._partial import add_partial_flag, warn_truncated
from orchestrace.errors import Problem, TraceError, warning_line
from orchestrace.io import (
    EXPORT_FORMATS,
    FORMATS,
    IMPORT_FORMATS,
    check_dump_target,
    detect_format,
    dump,
    foreign_format,
    import_path,
    iter_jsonl,
    load_all,
)
from orchestrace.io._columnar import skip_pandas_probe
from orchestrace.io.json import check_indent
from orchestrace.io.upstream import IMPORT_WARNINGS
from orchestrace.trace.check import check_trace
from orchestrace.trace.model import Trace

_CHOICES = ["native", *FORMATS]
_FROM = [*_CHOICES, *IMPORT_FORMATS]
_TO = [*_CHOICES, *EXPORT_FORMATS]
#: At most this many skipped records are listed in a trace's ``meta.skipped``.
_SKIPPED_LISTED = 100


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "convert",
        help="convert traces between formats (native, upstream, jsonl, parquet)",
        description="Convert traces. `--from upstream` imports a public survey-schema trace; "
        "`--to upstream` exports one that validates under that schema.",
    )
    p.add_argument("input", metavar="IN")
    p.add_argument("-o", "--output", required=True, metavar="OUT")
    p.add_argument("--force", action="store_true", help="replace an existing output")
    p.add_argument(
        "--from", dest="src", choices=_FROM, help="input format (default: by name and structure)"
    )
    p.add_argument("--to", dest="dst", choices=_TO, help="output format (default: by name)")
    p.add_argument("--indent", type=int, default=None, help="indent JSON output")
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="JSONL input: skip damaged lines; each trace lists what was skipped in "
        "meta.skipped, and the count is printed (a trace that breaks a rule once they are "
        "skipped, e.g. edges to a skipped event, is not written)",
    )
    add_partial_flag(p)
    p.set_defaults(func=run)


def _fmt(value: str | None) -> str | None:
    return "json" if value == "native" else value


def run(args: argparse.Namespace) -> int:
    """Convert and write."""
    skip_pandas_probe()  # a Parquet output converts Python values: no pandas import for it
    check_indent(args.indent)
    fmt = check_dump_target(
        args.output, format=_fmt(args.dst), overwrite=args.force, inputs=[args.input]
    )
    traces = _read(args)
    dump(traces, args.output, format=fmt, indent=args.indent, overwrite=args.force)
    n = sum(t.n_events for t in traces)
    print(f"wrote {args.output}: {len(traces)} trace(s), {n} events", file=sys.stderr)
    return 0


#: At most this many import problems are printed; the rest are counted.
_SHOWN = 20


def _warn(path: str, problems: list[Problem]) -> None:
    """Print the problems an import found, worded as ``validate`` words them."""
    for p in problems[:_SHOWN]:
        print(warning_line(p if p.source else p.at(path)), file=sys.stderr)
    if len(problems) > _SHOWN:
        print(
            f"warning: {path}: ... and {len(problems) - _SHOWN:,} more problem(s) "
            f"(the first {_SHOWN} are shown); `orchestrace validate {path}` lists them",
            file=sys.stderr,
        )


def _import(path: str, fmt: str) -> list[Trace]:
    """Import another tool's file; print its problems and a one-line summary."""
    result = import_path(path, format=fmt)
    _warn(path, list(result.problems))
    print(result.summary(path), file=sys.stderr)
    return result.traces


def _read(args: argparse.Namespace) -> list[Trace]:
    """Read the input; with --keep-going, mark what was skipped and say how much."""
    fmt = _fmt(args.src) or detect_format(args.input)
    traces: list[Trace]
    if fmt in IMPORT_FORMATS:
        return _import(args.input, fmt)
    if not args.keep_going or fmt != "jsonl":
        notes: list[Problem] = []
        try:
            traces = load_all(args.input, format=fmt, check=True, partial=True, problems=notes)
        except TraceError:
            foreign = foreign_format(args.input) if args.src is None else None
            if foreign is None:
                raise
            return _import(args.input, foreign)  # another tool's file, told by its structure
        # what the survey import kept and why, and the trace's own-rule problems
        _warn(
            args.input, [p for p in notes if p.severity == "semantic" or p.code in IMPORT_WARNINGS]
        )
        warn_truncated(args.input, traces, partial=args.partial)
        return traces
    traces = []
    lost: list[Problem] = []
    skipped = 0
    for item in iter_jsonl(args.input, keep_going=True, partial=True, check=True):
        errors = [p for p in item.problems if p.severity == "error"]
        skipped += len(errors)
        if item.trace is None:
            lost += errors
            continue
        tr = item.trace
        # what skipping lines cannot mend (a repeated id, an edge to a skipped event): the
        # trace as read breaks a rule, and a written trace must validate
        if any(p.severity == "error" for p in check_trace(tr, partial=True)):
            lost += errors  # (each named by its line, as validate names it)
            continue
        if errors:
            listed = [str(p) for p in errors[:_SKIPPED_LISTED]]
            if len(errors) > _SKIPPED_LISTED:
                listed.append(f"... and {len(errors) - _SKIPPED_LISTED} more")
            tr = tr.replace(meta={**tr.meta, "skipped": listed})
        traces.append(tr)
    for p in lost[:20]:
        print(warning_line(p), file=sys.stderr)
    if not traces:
        first = f": {lost[0]}" if lost else ""
        raise TraceError(
            f"{args.input}: no readable trace to write ({skipped} problem(s){first}); "
            "fix the damaged lines (see `orchestrace validate --keep-going`)"
        )
    if skipped:
        print(
            f"warning: {args.input}: {skipped} problem(s) skipped over (--keep-going): "
            f"{len(lost)} in traces not written (unreadable, or breaking a rule with the "
            "damaged lines skipped), "
            f"{skipped - len(lost)} listed in meta.skipped of the trace they belong to",
            file=sys.stderr,
        )
    warn_truncated(args.input, traces, partial=args.partial)
    return traces
