"""``orchestrace audit TRACE...``: security audit of recorded traces; one line per finding.

Exit codes as ``validate``: 0 when every trace is clean, 1 when any finding (or a trace that
cannot be read), 2 on a usage error. Each line names the file, the event and the fix; the
checks are those of :mod:`orchestrace.safety.audit`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from orchestrace._safe import display
from orchestrace.cli._partial import add_partial_flag, refuse_truncated
from orchestrace.io import load_all
from orchestrace.runtime.security import RunSecret
from orchestrace.safety.audit import audit_trace

#: Findings printed per file; the rest are counted.
MAX_SHOWN = 100


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "audit",
        help="security audit of traces: spoofing, escalation, taint, forged aggregates; "
        "exit 1 on findings",
        description="Audit traces for attacks: spoofed senders and bad signatures, actions "
        "outside a role's capabilities (the recorded policy, else the default one), tainted "
        "data driving decisions without an endorsement, aggregates their inputs do not give, "
        "returns to the wrong agent, and run answers not taken from the orchestrator. One line "
        "per finding naming the file, the event and the fix.",
    )
    p.add_argument("traces", nargs="+", metavar="TRACE")
    p.add_argument(
        "--secret-file",
        metavar="PATH",
        help="the run secret (RunSecret.save) of runs signed with keys='secret': every MAC "
        "is re-verified",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per finding")
    p.add_argument("-q", "--quiet", action="store_true", help="print findings only")
    add_partial_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Audit every trace; print the findings; 1 when there are any."""
    secret = None if args.secret_file is None else RunSecret.from_file(args.secret_file)
    total = 0
    for path in args.traces:
        traces = load_all(path, check=True, partial=True)
        refuse_truncated(path, traces, partial=args.partial)
        found = [p.at(path) for tr in traces for p in audit_trace(tr, secret=secret)]
        total += len(found)
        for p in found[:MAX_SHOWN]:
            if args.json:
                row = {
                    "file": path,
                    "code": p.code,
                    "event": p.event_id,
                    "path": p.path,
                    "message": p.message,
                    "fix": p.fix,
                }
                sys.stdout.write(json.dumps(row) + "\n")
            else:
                print(display(str(p), 1000))
        if len(found) > MAX_SHOWN:
            print(f"{display(path)}: ... and {len(found) - MAX_SHOWN} more findings")
        if not found and not args.quiet and not args.json:
            n = len(traces)
            print(f"{display(path)}: clean ({n} trace{'s' if n != 1 else ''}, 0 findings)")
    return 1 if total else 0
