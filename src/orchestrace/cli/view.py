"""``orchestrace view TRACE [TRACE2]``: the trace viewer in a browser, or one HTML file to share."""

from __future__ import annotations

import argparse
import sys
import webbrowser
from typing import Any

from orchestrace._safe import display
from orchestrace.errors import ConfigError
from orchestrace.io import FORMATS, IMPORT_FORMATS
from orchestrace.io._output import check_output
from orchestrace.viewer.html import write_html
from orchestrace.viewer.server import ViewerState, serve


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "view",
        help="show a trace in the browser: timeline, graph, critical path, credit, fork diff",
        description="Start a local viewer (127.0.0.1, a free port unless --port) for a trace in "
        "any format orchestrace reads; a JSONL recording still being written is shown as it "
        "grows. With TRACE2 (e.g. a fork of TRACE) the page marks the events that changed, "
        "appeared or disappeared. --html writes one self-contained file instead (no server, no "
        "network needed to open it). Needs the [viewer] extra for the server.",
    )
    p.add_argument("trace", metavar="TRACE", help="trace file or Parquet dataset")
    p.add_argument(
        "other", metavar="TRACE2", nargs="?", help="a second trace (e.g. a fork) to diff against"
    )
    p.add_argument("--trace-id", help="a file holding several traces: show this one")
    p.add_argument(
        "--from",
        dest="src",
        choices=["native", *FORMATS, *IMPORT_FORMATS],
        help="input format (default: by name and structure)",
    )
    p.add_argument(
        "--credit",
        metavar="FILE",
        help="credit rows for the colour scale: the output of `orchestrace credit TRACE --json`",
    )
    p.add_argument("--port", type=int, default=0, help="port to listen on (default 0: a free one)")
    p.add_argument("--open", action="store_true", help="open the page in the default browser")
    p.add_argument(
        "--html", metavar="OUT", help="write a self-contained HTML file instead of serving"
    )
    p.add_argument("--force", action="store_true", help="--html: replace an existing file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Serve the viewer, or write the HTML file."""
    if not 0 <= args.port <= 65535:
        raise ConfigError(
            f"--port must be between 1 and 65535, or 0 for a free port (got {args.port}); "
            "e.g. --port 8765"
        )
    inputs = [x for x in (args.trace, args.other, args.credit) if x]
    if args.html is not None:
        if args.port or args.open:
            flag = "--port" if args.port else "--open"
            raise ConfigError(f"{flag} applies to the server, not to --html; leave it out")

        check_output(args.html, force=args.force, inputs=inputs)
    elif args.force:
        raise ConfigError("--force applies to --html OUT; leave it out")

    state = ViewerState(
        args.trace,
        args.other,
        trace_id=args.trace_id,
        credit=args.credit,
        live=args.html is None,
        format="json" if args.src == "native" else args.src,
    )
    for src in state.sources:
        if src.view.note:
            print(f"note: {src.view.note}", file=sys.stderr)
    if args.html is not None:
        size = write_html(state, args.html, force=args.force, inputs=inputs)
        for src in state.sources:  # an invalid trace is shown as recorded, never silently
            found = src.view.summary()
            if found["n_problems"]:
                print(
                    f"warning: {display(src.view.source, 200)}: {found['n_problems']:,} "
                    f"problem(s), first: {display(found['problems'][0], 200)}; the page shows "
                    "the trace as recorded and lists them",
                    file=sys.stderr,
                )
        n = sum(s.view.n for s in state.sources)
        print(
            f"wrote {args.html}: {len(state.sources)} trace(s), {n} events, {size:,} bytes",
            file=sys.stderr,
        )
        return 0

    def ready(url: str) -> None:
        print(f"orchestrace viewer: {url}  (Ctrl-C to stop)", flush=True)
        if args.open:
            webbrowser.open(url)

    serve(state, port=args.port, on_ready=ready)
    return 0
