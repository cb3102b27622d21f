"""``orchestrace credit TRACE --unit U --method M``: assign credit, print the table."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from orchestrace._safe import display
from orchestrace.cli._backend import add_backend_flags, backend_args, given
from orchestrace.cli._json import JsonLines
from orchestrace.cli._partial import add_partial_flag, refuse_truncated
from orchestrace.cli._verdicts import add_rerun_checks, verdict_warnings
from orchestrace.credit import ASSIGNERS, UNITS, check_credit, make_assigner
from orchestrace.errors import ConfigError
from orchestrace.executors import add_executor_flags, executor_from_args, owned
from orchestrace.io import load


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "credit",
        help="assign a trace's reward to units (team ... token)",
        description="Assign credit. Methods: uniform, discounted (along causal paths), shapley "
        "(exact, or Monte-Carlo with --permutations), loo (leave-one-out), counterfactual (messages, "
        "by replaying without each one).",
    )
    p.add_argument("trace", metavar="TRACE")
    p.add_argument("--unit", default="agent", choices=UNITS)
    p.add_argument("--method", default="uniform", choices=sorted(ASSIGNERS))
    p.add_argument(
        "--samples",
        type=int,
        help="counterfactual, loo, shapley: paired draws per message, unit or coalition "
        "(each row then gets a standard error and a 95%% interval)",
    )
    p.add_argument(
        "--permutations", type=int, help="shapley: Monte-Carlo with M permutations per draw"
    )
    p.add_argument(
        "--intervention",
        choices=("drop", "replace", "resample", "spawn-one-more", "stop-at"),
        help="counterfactual: what the intervened arm changes. On each message (--unit "
        "message): drop (default), replace (with --replace-with TEXT) or resample (the sender's "
        "LLM call drawn again in the same context; recommended for traces of a real LLM). On "
        "each turn (--unit turn): stop-at (the agent stops on entering the turn; the credit is "
        "what continuing gained) or spawn-one-more (the turn's team-size decision takes one "
        "more worker; the credit is what the recorded decision gained over that)",
    )
    p.add_argument(
        "--replace-with",
        metavar="TEXT",
        help="counterfactual --intervention replace: the new text (its ANSWER: value, or the "
        "text itself, becomes the data consumers read)",
    )
    p.add_argument(
        "--assume-deterministic",
        action="store_true",
        help="counterfactual, loo, shapley: the backend answers a prompt the same way every time "
        "(e.g. a local engine with greedy decoding and a fixed seed): one draw, no error bar. "
        "Without it a served model is sampled K times, even at temperature 0",
    )
    p.add_argument("--gamma", type=float, help="discounted: discount per hop (default 0.95)")
    p.add_argument("--reward", type=float, help="reward to distribute (default: the team reward)")
    p.add_argument("--top", type=int, default=20, help="text output: rows to show")
    p.add_argument("--json", action="store_true", help="print rows {unit, id, value}, one per line")
    add_backend_flags(p, "the forks of loo, shapley and counterfactual")
    add_executor_flags(p, "the forks of loo, shapley and counterfactual")
    add_rerun_checks(p)
    add_partial_flag(p)
    p.set_defaults(func=run_cmd)


#: Methods that re-execute the run (their changed calls reach a backend).
_FORKING = ("counterfactual", "loo", "shapley")


def run_cmd(args: argparse.Namespace) -> int:
    """Assign and print."""
    if args.reward is not None and not math.isfinite(args.reward):
        raise ConfigError(
            f"--reward must be a finite number (got {args.reward}); pass e.g. --reward 1.0, "
            "or leave it out to use the trace's team reward"
        )
    trace = load(args.trace, partial=True)
    refuse_truncated(args.trace, [trace], partial=args.partial)
    kw: dict[str, Any] = {}
    if args.method == "discounted":
        kw["gamma"] = 0.95 if args.gamma is None else args.gamma
    elif args.gamma is not None:
        raise ConfigError(
            f"--gamma applies to --method discounted, not to {args.method}; leave it out"
        )
    if args.samples is not None and args.method in _FORKING:
        kw["samples"] = args.samples
    elif args.samples is not None:
        raise ConfigError(
            f"--samples applies to the methods that re-execute the run ({', '.join(_FORKING)}), "
            f"not to {args.method}; leave it out"
        )
    if args.permutations is not None:
        if args.method != "shapley":
            raise ConfigError(
                f"--permutations applies to --method shapley, not to {args.method}; leave it out"
            )
        kw["permutations"] = args.permutations
    if args.method == "counterfactual":
        kw["intervention"] = args.intervention
        kw["replace_with"] = args.replace_with
    elif args.intervention is not None or args.replace_with is not None:
        flag = "--intervention" if args.intervention is not None else "--replace-with"
        raise ConfigError(
            f"{flag} applies to --method counterfactual, not to {args.method}; leave it out"
        )
    kw["rerun_checks"] = args.rerun_checks
    if args.method in _FORKING:
        kw.update(backend_args(args))
        kw["assume_deterministic"] = args.assume_deterministic
        if args.executor or args.workers is not None or args.ray_address:
            kw["executor"] = executor_from_args(args, default="process")
    elif args.executor or args.workers is not None or args.ray_address:
        raise ConfigError(
            f"--executor, --workers and --ray-address apply to the methods that re-execute the "
            f"run ({', '.join(_FORKING)}), not to {args.method}; leave them out"
        )
    elif args.assume_deterministic:
        raise ConfigError(
            f"--assume-deterministic applies to the methods that re-execute the run "
            f"({', '.join(_FORKING)}), not to {args.method}; leave it out"
        )
    elif given(args):
        raise ConfigError(
            f"--backend, --model and --base-url apply to the methods that re-execute the run "
            f"({', '.join(_FORKING)}), not to {args.method}; leave them out"
        )
    with verdict_warnings(), owned(kw.get("executor")):
        table = make_assigner(args.method, **kw).assign(trace, args.unit, reward=args.reward)
    retried = getattr(kw.get("executor"), "retried", None)
    if retried:  # forks started again after their worker died (also noted on stderr)
        table.stats["retries"] = "; ".join(str(r) for r in retried)
    warning = table.stats.get("warning")
    if warning:
        print(f"warning: {display(warning, 300)}", file=sys.stderr)
    for p in check_credit(table, trace):
        print(f"{display(args.trace, 300)}: {p}", file=sys.stderr)
    lost = table.stats.get("missing")
    failed = (
        f"error: {display(table.stats.get('error', ''), 600)}; the table keeps the other rows "
        "(fix the failing fork and run again)"
    )
    if args.json:
        lines = JsonLines("credit --json")
        for row in table.to_rows():
            sys.stdout.write(lines.dumps(row) + "\n")
        lines.finish()
        if lost:
            print(failed, file=sys.stderr)
        return 1 if lost else 0
    rows = sorted(table.rows, key=lambda r: -abs(r.value))
    print(
        f"{args.method} credit at unit {args.unit} of {display(trace.trace_id)}: reward "
        f"{'unknown' if table.reward is None else table.reward}, {len(rows)} rows, sum {table.total(args.unit):.4f}"
        + (" (efficient)" if table.efficient else "")
    )
    for k, v in table.stats.items():
        if k in ("warning", "missing", "error"):  # printed on their own lines
            continue
        key = display(k, 40)
        print(f"  {key}: {v:.4g}" if isinstance(v, float) else f"  {key}: {display(v)}")
    errors = getattr(table, "estimates", {})
    for r in rows[: args.top]:
        print(f"  {display(r.id, 60):<32} {r.value:+.4f}{_error_bar(errors.get(r.id))}")
    if len(rows) > args.top:
        print(f"  ... {len(rows) - args.top} more (--top N or --json)")
    if lost:
        print(failed, file=sys.stderr)
        return 1
    return 0


def _error_bar(estimate: Any) -> str:
    """`` ± SE  [low, high]`` of a row that is an estimate (empty otherwise)."""
    if not isinstance(estimate, dict) or "se" not in estimate:
        return ""
    se, ci = estimate["se"], estimate.get("ci95")
    if se is None:
        return "  (one sample: no error bar)"
    out = f" ± {se:.4f}"
    if isinstance(ci, list) and len(ci) == 2:
        out += f"  95% CI [{ci[0]:+.4f}, {ci[1]:+.4f}]"
    if "backend_calls" in estimate:  # a Shapley row has none of its own: see stats
        out += f"  ({estimate['backend_calls']} backend calls)"
    return out
