"""``orchestrace validate FILE...``: check traces; one line per problem, exit 1 on errors.

With ``--schema upstream`` a JSON (or JSONL, one trace a line) file is judged by the public
survey schema alone: exit 1 exactly when the schema rejects it. orchestrace's own rules (no
cycles, no return without a spawn, a child acting after its spawn...) are then listed as
``semantic`` problems, which never fail the file: a schema-valid trace always imports.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import msgspec

from orchestrace._safe import bounded, display
from orchestrace.errors import Problem, TraceFormatError
from orchestrace.io import detect_format, foreign_format, import_path, iter_jsonl, parse
from orchestrace.io._columnar import skip_pandas_probe
from orchestrace.io._common import BOM, format_error, read_bytes
from orchestrace.io._json_size import check_json_size
from orchestrace.io.json import _check_duplicate_keys
from orchestrace.io.parquet._columns import scan_parquet
from orchestrace.io.upstream import from_upstream, schema_problems

#: Problems an import reports that are survey-schema rules (reported as such by the schema).
_SCHEMA_LEVEL = frozenset({"unknown-field", "missing-field"})


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "validate",
        help="check trace files; one line per problem, exit 1 when any is invalid",
        description="Check trace files (JSON, survey-schema JSON, JSONL, Parquet, and files "
        "of the formats `convert --from` imports). Prints one line per problem naming the "
        "file, the JSON path or event id, and the fix.",
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
        "--schema",
        choices=["native", "upstream"],
        default="native",
        help="native (default): orchestrace's rules; upstream: the public survey schema's "
        "verdict alone (exit 1 only when it rejects the file), with orchestrace's own rules "
        "listed as semantic problems",
    )
    p.add_argument("--upstream", action="store_true", help="same as --schema upstream")
    p.add_argument("-q", "--quiet", action="store_true", help="print problems only")
    p.set_defaults(func=run)


#: Problems printed per file; the rest are counted.
MAX_SHOWN = 100


def _validate_file(path: str, args: argparse.Namespace) -> tuple[list[Problem], str]:
    fmt = detect_format(path)
    if args.schema == "upstream":
        return _validate_upstream(path, fmt)
    if fmt == "jsonl":
        problems: list[Problem] = []
        n_traces = n_events = 0
        skip_pandas_probe()
        items = iter_jsonl(path, keep_going=args.keep_going, partial=args.partial, columnar=True)
        for k, item in enumerate(items):
            if k == 0 and (item.trace is None or _has_errors(item.problems)):
                imported = _foreign(path)  # another tool's JSONL (span per line...)?
                if imported is not None:
                    return imported
            problems.extend(item.problems)
            if item.trace is not None:
                n_traces += 1
                n_events += item.n_events
        return problems, f"{n_traces} trace(s), {n_events} events"
    if fmt == "parquet":
        skip_pandas_probe()
        problems = []
        n_traces = n_events = 0
        for scanned in scan_parquet(path, partial=args.partial):
            problems.extend(p.at(f"{path}[{scanned.label}]") for p in scanned.problems)
            if scanned.graph is not None:
                n_traces += 1
                n_events += scanned.n_events
        return problems, f"{n_traces} trace(s), {n_events} events"
    check_json_size(path)
    try:
        trace, problems = parse(read_bytes(path), source=path, partial=args.partial)
    except TraceFormatError:
        imported = _foreign(path)
        if imported is None:
            raise
        return imported
    if trace is None or _has_errors(problems):
        imported = _foreign(path)
        if imported is not None:
            return imported
    summary = f"{trace.n_events} events, {len(trace.edges)} edges" if trace else "unreadable"
    return problems, summary


def _has_errors(problems: list[Problem]) -> bool:
    return any(p.severity == "error" for p in problems)


def _foreign(path: str) -> tuple[list[Problem], str] | None:
    """Problems and summary of a file another tool wrote, or ``None`` if it is a trace file."""
    fmt = foreign_format(path)
    if fmt is None:
        return None
    result = import_path(path, format=fmt)
    problems = [p if p.source else p.at(path) for p in result.problems]
    n = sum(t.n_events for t in result.traces)
    return problems, f"{fmt}: {len(result.traces)} trace(s), {n} events"


def _validate_upstream(path: str, fmt: str) -> tuple[list[Problem], str]:
    """The survey schema's verdict on each JSON value of the file, then the semantic problems."""
    if fmt == "parquet":
        raise TraceFormatError(
            path,
            "--schema upstream",
            "the survey schema describes JSON documents, and this is a Parquet dataset",
            "validate it without --schema, or convert it with `--to upstream` first",
        )
    if fmt == "json":
        check_json_size(path)
    data = bytes(read_bytes(path))
    if data.startswith(BOM):
        data = data[len(BOM) :]
    if fmt == "json":
        docs = [(path, data)]
    else:
        docs = [
            (f"{path}:{n}", line) for n, line in enumerate(data.split(b"\n"), 1) if line.strip()
        ]
    problems: list[Problem] = []
    n_events = n_edges = 0
    for source, doc in docs:
        _check_duplicate_keys(doc, source)
        try:
            obj = msgspec.json.decode(doc)
        except (msgspec.DecodeError, RecursionError) as err:
            raise format_error(source, doc, err) from None
        schema = schema_problems(obj)
        problems += [p.at(source) for p in schema]
        trace, found = from_upstream(obj)
        for p in found:
            if schema and (p.severity == "error" or p.code in _SCHEMA_LEVEL):
                continue  # the schema's own lines say it
            problems.append(p.at(source))
        if trace is not None:
            n_events += trace.n_events
            n_edges += len(trace.edges)
    summary = f"{n_events} events, {n_edges} edges"
    if fmt == "jsonl":
        summary = f"{len(docs)} trace(s), {summary}"
    return problems, summary


def run(args: argparse.Namespace) -> int:
    """Validate every file; exit 1 if any has an error."""
    if args.upstream:
        args.schema = "upstream"
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
            print(f"{display(Path(path), 300)}: {_state(problems, args.schema)} ({summary})")
    return 1 if bad else 0


def _state(problems: list[Problem], schema: str) -> str:
    counts = {s: sum(p.severity == s for p in problems) for s in ("semantic", "warning")}
    notes = [
        f"{n} {s} problem(s)" if s == "semantic" else f"{n} warning(s)"
        for s, n in counts.items()
        if n
    ]
    state = "valid under the survey schema" if schema == "upstream" else "ok"
    return state + (f" with {', '.join(notes)}" if notes else "")
