"""``orchestrace audit TRACE...``: security audit of recorded traces; one line per finding.

Exit codes as ``validate``: 0 when no finding at the ``--fail-on`` level or above (errors,
by default: taint derived from a run that did not track it is a warning), 1 when any (or a
trace that cannot be read: the others are still audited), 2 on a usage error. Each line
names the file, the event and the fix; the checks are those of
:mod:`orchestrace.safety.audit`. What the audit could not check (MACs of a run signed with
a secret it was not given) or did not use (``--secret-file`` on an unsigned run) is printed
as a ``note:`` line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from orchestrace._safe import bounded, display, redact
from orchestrace.cli._partial import add_partial_flag, refuse_truncated
from orchestrace.errors import OrchestraceError
from orchestrace.io import load_all
from orchestrace.runtime.security import CapabilityPolicy, RunSecret
from orchestrace.safety.audit import audit_notes, audit_trace

_RANK = {"warning": 0, "semantic": 0, "error": 1}

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
    p.add_argument(
        "--policy",
        metavar="FILE",
        help="a capability policy (TOML) to audit against instead of the recorded one (for "
        "imported traces, whose roles the default policy does not know)",
    )
    p.add_argument(
        "--level",
        choices=("warning", "error"),
        default="warning",
        help="lowest severity shown (default: warning)",
    )
    p.add_argument(
        "--fail-on",
        choices=("warning", "error"),
        default="error",
        help="lowest severity that makes the exit code 1 (default: error)",
    )
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="CODE",
        help="leave out findings of this code (repeatable), e.g. tainted-decision",
    )
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="skip damaged lines of a JSONL trace instead of refusing the file",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per finding")
    p.add_argument("-q", "--quiet", action="store_true", help="print findings only")
    add_partial_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Audit every trace; print the findings; 1 when there are any at ``--fail-on``."""
    secret = None if args.secret_file is None else RunSecret.from_file(args.secret_file)
    policy = None if args.policy is None else CapabilityPolicy.from_toml(args.policy)
    failing = 0
    failed_files = 0
    for path in args.traces:
        try:
            traces = load_all(path, check=True, partial=True, keep_going=args.keep_going)
            refuse_truncated(path, traces, partial=args.partial)
            found = [
                p.at(path)
                for tr in traces
                for p in audit_trace(tr, secret=secret, policy=policy, source=path)
            ]
        except OrchestraceError as err:
            failed_files += 1
            print(f"error: {bounded(redact(str(err)))}", file=sys.stderr)
            continue
        for tr in traces:
            for note in audit_notes(tr, secret=secret):
                print(f"{display(path)}: note: {note}", file=sys.stderr)
        found = [
            p
            for p in found
            if p.code not in args.ignore and _RANK.get(p.severity, 1) >= _RANK[args.level]
        ]
        failing += sum(1 for p in found if _RANK.get(p.severity, 1) >= _RANK[args.fail_on])
        for p in found[:MAX_SHOWN]:
            if args.json:
                row = {
                    "file": path,
                    "code": p.code,
                    "severity": p.severity,
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
    return 1 if failing or failed_files else 0
