"""``orchestrace schema``: print the native JSON Schema (Draft 2020-12)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from orchestrace.io.json import check_indent
from orchestrace.trace.schema import native_schema


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "schema",
        help="print the native trace JSON Schema (Draft 2020-12)",
        description="Print the JSON Schema of the native trace format.",
    )
    p.add_argument("--indent", type=int, default=2, help="indentation (default 2; 0 = compact)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the schema."""
    check_indent(args.indent)
    indent = args.indent if args.indent > 0 else None
    sys.stdout.write(json.dumps(native_schema(), indent=indent) + "\n")
    return 0
