"""``orchestrace replay TRACE``: re-execute a recorded run, exactly or with an intervention."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from orchestrace._safe import decimal
from orchestrace.cli._backend import add_backend_flags, backend_args, given
from orchestrace.cli._verdicts import add_rerun_checks
from orchestrace.credit.counterfactual import _greedy
from orchestrace.errors import ConfigError
from orchestrace.io import check_dump_target, dump, dumps, load
from orchestrace.rewards.base import executes_code
from orchestrace.runtime.replay import (
    DropMessage,
    ForceDecision,
    ForceStop,
    Intervention,
    ReplaceMessage,
    ResampleMessage,
    backend_for,
    fork,
    replay,
    reproduces,
    spawn_one_more,
)


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "replay",
        help="re-execute a recorded run (exactly, or as a counterfactual fork)",
        description="Without options: re-run from the recorded inputs alone and check the trace "
        "comes out identical. With an intervention: re-run with it; unchanged calls come from "
        "the trace, and the number of calls that reached the backend is reported.",
    )
    p.add_argument("trace", metavar="TRACE")
    p.add_argument("--drop-message", metavar="EVENT_ID", help="the message is never sent")
    p.add_argument(
        "--replace-message",
        nargs=2,
        metavar=("EVENT_ID", "TEXT"),
        help="the message is sent with TEXT instead; consumers read TEXT's value (after "
        "ANSWER:, else TEXT itself) where the message carried an answer or value",
    )
    p.add_argument(
        "--resample-message",
        metavar="EVENT_ID",
        help="the sender's LLM call that produced the message is drawn again in the same "
        "context (on the simulator: with the recorded seed plus 1), and every call after it",
    )
    p.add_argument(
        "--stop-at",
        metavar="STEP|EVENT",
        help="stop-now: an integer STEP makes the orchestrator stop on entering that step; an "
        "EVENT id makes the event's agent stop on entering the event's step (the orchestrator "
        "ends the run with its best answer so far, another agent returns its best answer)",
    )
    p.add_argument(
        "--spawn-one-more",
        nargs="?",
        const="",
        metavar="EVENT",
        help="one more worker than the recorded run used: alone, at the team size the run "
        "starts with; with the EVENT id of a spawn decision (environment traces decide one per "
        "round), at that decision (put TRACE before this option)",
    )
    p.add_argument("-o", "--output", help="write the re-executed trace here")
    add_backend_flags(p, "a fork")
    add_rerun_checks(p)
    p.add_argument("--force", action="store_true", help="replace an existing output")
    p.set_defaults(func=run_cmd)


def _success(trace: Any) -> str:
    """``1``/``0`` from the recorded verdict (or metrics); ``unknown`` without one."""
    result = trace.meta.get("result") if isinstance(trace.meta, dict) else None
    verdict = result.get("verdict") if isinstance(result, dict) else None
    passed = verdict.get("passed") if isinstance(verdict, dict) else None
    if isinstance(passed, bool):
        return str(int(passed))
    if executes_code(trace):  # only a recorded verdict tells
        return "unknown"
    value = trace.metrics.get("task_success")
    return "unknown" if value is None else f"{value:.0f}"


def _answered_by(trace: Any) -> str:
    """``; answered by NAME (MODEL)`` for the calls of a fork that reached a backend."""
    who = sorted(
        {
            f"{a['name']} ({a['model']})" if a.get("model") not in (None, a["name"]) else a["name"]
            for e in trace.events
            if e.type == "llm_call"
            for a in [(e.attrs or {}).get("answered_by")]
            if isinstance(a, dict) and "name" in a
        }
    )
    return f"; answered by {_clip(', '.join(who), 120)}" if who else ""


def _clip(text: Any, limit: int = 300) -> str:
    out = str(text).encode("unicode_escape", "backslashreplace").decode("ascii")
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _stop_at(trace: Any, value: str) -> ForceStop:
    """``--stop-at``: an integer is the orchestrator's step, anything else an event id."""
    text = value.strip()
    sign, digits = (text[0], text[1:]) if text[:1] in ("+", "-") else ("", text)
    if decimal(digits) is not None:
        step = int(sign + digits)
        if not 0 <= step <= 2**63 - 1:
            raise ConfigError(
                f"--stop-at takes a step from 0 to 2^63-1 or an event id, got {_clip(value, 60)}"
            )
        return ForceStop.at_step(trace, step)
    return ForceStop.of(trace, value)


def _describe(iv: Intervention) -> str:
    """How the fork's summary names an intervention."""
    kind = str(iv.describe()["kind"])
    if isinstance(iv, ForceStop):
        at = f" at {_clip(iv.event, 40)}" if iv.event else ""
        return f"{kind}{at} ({_clip(iv.agent, 40)} stops on entering step {iv.step})"
    if isinstance(iv, ForceDecision):
        at = "" if iv.step is None else f" at step {iv.step}"
        return f"{kind} ({_clip(iv.name, 40)} = {_clip(repr(iv.value), 40)}{at})"
    return kind


def run_cmd(args: argparse.Namespace) -> int:
    """Replay or fork."""
    fmt = None
    if args.output:
        fmt = check_dump_target(args.output, overwrite=args.force, inputs=[args.trace])
    named = [
        (flag, mid)
        for flag, mid in (
            ("--drop-message", args.drop_message),
            ("--replace-message", args.replace_message[0] if args.replace_message else None),
            ("--resample-message", args.resample_message),
        )
        if mid
    ]
    for k, (flag, mid) in enumerate(named):
        twice = [f for f, m in named[k + 1 :] if m == mid]
        if twice:  # one would undo or hide the other
            raise ConfigError(
                f"{flag} and {twice[0]} both name message {mid!r}: a message is dropped, "
                "rewritten or drawn again, not two of these; pick one"
            )
    trace = load(args.trace, check=False)
    ivs: list[Intervention] = []
    if args.drop_message:
        ivs.append(DropMessage.of(trace, args.drop_message))
    if args.replace_message:
        ivs.append(ReplaceMessage.parsed(trace, args.replace_message[0], args.replace_message[1]))
    if args.resample_message:
        ivs.append(ResampleMessage.of(trace, args.resample_message))
    if args.stop_at is not None:
        ivs.append(_stop_at(trace, args.stop_at))
    if args.spawn_one_more is not None:
        ivs.append(spawn_one_more(trace, args.spawn_one_more or None))
    if not ivs and given(args):
        raise ConfigError(
            "--backend, --model and --base-url choose who answers a fork's changed calls, and "
            "an exact replay calls no backend; add an intervention (--drop-message ID, "
            "--replace-message ID TEXT, --resample-message ID, --stop-at STEP|EVENT, "
            "--spawn-one-more [EVENT]) or leave them out"
        )
    if not ivs:
        res = replay(trace, rerun_checks=args.rerun_checks)
        same = reproduces(trace, res.trace)
        timing = (
            " (timing aside: recorded on wall-clock time)"
            if same and dumps(res.trace) != dumps(trace)
            else ""
        )
        print(
            f"replayed {trace.n_events} events from {res.cache_hits} recorded inputs, "
            f"0 backend calls: {'identical' if same else 'DIFFERENT'} trace{timing}"
        )
        code = 0 if same else 1
    else:
        chosen = backend_args(args)
        if args.resample_message:  # a new draw: the recorded seed would redraw the same answer
            chosen = {
                "backend": backend_for(
                    trace, chosen["backend"], seed_offset=1, **chosen["backend_options"]
                )
            }
        if args.resample_message:
            warning = _greedy(chosen["backend"])
            if warning:
                print(f"warning: {warning}", file=sys.stderr)
        res = fork(trace, ivs, rerun_checks=args.rerun_checks, **chosen)
        total = sum(1 for e in res.trace.events if e.type == "llm_call")  # the fork's own
        before = _success(trace)
        print(
            f"fork with {', '.join(_describe(iv) for iv in ivs)}: "
            f"{res.backend_calls} backend call(s) ({res.backend_calls / max(total, 1):.1%} of "
            f"the fork's {total} LLM calls), {res.cache_hits} from the trace"
            + _answered_by(res.trace)
        )
        print(
            f"task success {before} -> {_success(res.trace)}; "
            f"events {trace.n_events} -> {res.trace.n_events}"
        )
        code = 0
    verdict = res.verdict
    if verdict is not None and verdict.get("passed") is None:
        print(f"outcome unknown: {_clip(verdict.get('reason'))}")
    if args.output:
        dump(res.trace, args.output, format=fmt, overwrite=args.force)
        print(f"wrote {args.output}", file=sys.stderr)
    return code
