"""``orchestrace convert IN -o OUT``: between native JSON, JSONL, Parquet and the survey schema."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from orchestrace.io import FORMATS, check_dump_target, dump, load_all

_CHOICES = ["native", *FORMATS]


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
    p.add_argument("--from", dest="src", choices=_CHOICES, help="input format (default: by name)")
    p.add_argument("--to", dest="dst", choices=_CHOICES, help="output format (default: by name)")
    p.add_argument("--indent", type=int, default=None, help="indent JSON output")
    p.add_argument("--keep-going", action="store_true", help="JSONL input: skip damaged lines")
    p.set_defaults(func=run)


def _fmt(value: str | None) -> str | None:
    return "json" if value == "native" else value


def run(args: argparse.Namespace) -> int:
    """Convert and write."""
    fmt = check_dump_target(
        args.output, format=_fmt(args.dst), overwrite=args.force, inputs=[args.input]
    )
    traces = load_all(args.input, format=_fmt(args.src), keep_going=args.keep_going, check=True)
    dump(traces, args.output, format=fmt, indent=args.indent, overwrite=args.force)
    n = sum(t.n_events for t in traces)
    print(f"wrote {args.output}: {len(traces)} trace(s), {n} events", file=sys.stderr)
    return 0
