"""``orchestrace run TOPOLOGY --task NAME``: run a topology, stream the trace, print the analysis."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from typing import Any

from orchestrace._safe import display
from orchestrace.cli.analyze import _text
from orchestrace.errors import ConfigError
from orchestrace.io import check_dump_target, dump
from orchestrace.runtime import TASKS, TOPOLOGIES, RunConfig, run
from orchestrace.runtime.backends import BACKENDS
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.security import defenses_from
from orchestrace.runtime.topologies import team_note
from orchestrace.trace.analyze import summarize


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "run",
        help="run a topology on a task and record its trace",
        description="Run one orchestration. The trace streams to the output file as it is "
        "recorded (crash-safe JSONL); the analysis is printed at the end. Ctrl-C (SIGINT) or "
        "SIGTERM stops the run cleanly: the stop is recorded, the trace is closed, and the "
        "exit code is 130 or 143. A recording that cannot be written stops the run (exit 1).",
    )
    p.add_argument("topology", help=f"one of: {', '.join(sorted(TOPOLOGIES))}")
    p.add_argument("--task", default="arith-mapreduce-v0", help=f"one of: {', '.join(TASKS)}")
    add_run_options(p)
    p.add_argument("-o", "--output", help="trace file (.jsonl streams as it runs)")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing output (the old one stays until the new one is complete)",
    )
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--strict-agents",
        action="store_true",
        help="refuse to run when the topology cannot use --agents workers (by default it says "
        "on stderr what it uses instead and records that in the trace's meta.team)",
    )
    p.set_defaults(func=run_cmd)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """Options shared by the commands that run orchestrations."""
    p.add_argument("--agents", "-k", type=int, default=8, help="team size (workers)")
    p.add_argument("--seed", type=int, default=0, help="seed of the simulator and policies")
    p.add_argument("--task-seed", type=int, help="seed of the task instance (default: --seed)")
    p.add_argument("--task-size", type=int, help="size of the task instance")
    p.add_argument("--backend", default="sim", choices=BACKENDS, help="LLM backend")
    p.add_argument("--model", help="openai, vllm: model name; hf: model directory or hub id")
    p.add_argument("--base-url", help="openai, vllm: server URL ending in /v1 (or env)")
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="openai: total seconds per request attempt, answer included",
    )
    p.add_argument("--retries", type=int, default=3, help="openai: retries per request")
    p.add_argument(
        "--sim-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="sim: a simulator option (JSON value), e.g. fail_rate=0.1, "
        "oracle_verifiers=true, skills='{\"worker\": 0.8}' (repeatable; recorded in the "
        "trace's meta.backend)",
    )
    p.add_argument("--concurrency", type=int, default=16, help="openai: requests in flight")
    p.add_argument("--max-steps", type=int, default=100_000, help="budget: agent steps")
    p.add_argument("--max-agents", type=int, default=1000, help="budget: agents")
    p.add_argument("--max-depth", type=int, default=8, help="budget: spawn depth")
    p.add_argument("--max-tokens", type=int, default=100_000_000, help="budget: tokens")
    p.add_argument(
        "--max-wall",
        type=float,
        help="budget: seconds (virtual on sim), finite; leave out for no limit",
    )
    p.add_argument("--on-error", choices=["continue", "stop"], default="continue")
    p.add_argument("--tool-failure-rate", type=float, default=0.0, help="inject tool failures")
    p.add_argument(
        "--option",
        "-O",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="topology option, e.g. rounds=3, gossip=0.2, chunks=4 (repeatable)",
    )
    p.add_argument(
        "--defenses",
        metavar="none|all|FILE",
        help="security defenses: none (default), all, or a TOML file of Defenses fields "
        "(see docs/security.md)",
    )
    p.add_argument("--policy", metavar="FILE", help="capability policy per role (TOML)")


def _options(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option takes KEY=VALUE, got {pair!r}")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def config_from(args: argparse.Namespace) -> RunConfig:
    """The run configuration the options describe."""
    return RunConfig(
        agents=args.agents,
        seed=args.seed,
        max_agents=args.max_agents,
        max_depth=args.max_depth,
        max_steps=args.max_steps,
        max_tokens=args.max_tokens,
        max_wall_s=args.max_wall,
        on_error=args.on_error,
        tool_failure_rate=args.tool_failure_rate,
        options=_options(args.option),
        defenses=defenses_from(getattr(args, "defenses", None), getattr(args, "policy", None)),
    )


def sim_option_names() -> list[str]:
    """The simulator options ``--sim-option`` can set (every option that changes results)."""
    fixed = {"name", "virtual", "calls", "seed"}  # seed: --seed
    return sorted(f.name for f in dataclasses.fields(SimBackend) if f.name not in fixed)


def sim_options(pairs: list[str]) -> dict[str, Any]:
    """``--sim-option KEY=VALUE`` pairs as simulator options, each checked against its type.

    Raises:
        ConfigError: A malformed pair, an unknown option (the message lists the valid ones),
            or a value of the wrong type.
    """
    defaults = SimBackend()
    names = sim_option_names()
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(
                f"--sim-option takes KEY=VALUE, got {display(pair, 80)!r}; e.g. "
                "--sim-option fail_rate=0.1"
            )
        if key not in names:
            raise ConfigError(
                f"--sim-option: the simulator has no option {display(key, 60)!r}; its options: "
                f"{', '.join(names)} (the seed is --seed)"
            )
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        out[key] = _checked_sim_value(key, value, getattr(defaults, key))
    try:
        SimBackend(**out)  # the simulator's own range checks
    except ConfigError as err:
        raise ConfigError(f"--sim-option: {err}") from None
    return out


def _checked_sim_value(key: str, value: Any, default: Any) -> Any:
    """``value`` if it has the type of the option's default (numbers finite), else an error."""
    shown = display(json.dumps(value) if not isinstance(value, str) else value, 80)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"--sim-option {key} must be true or false, got {shown}")
        return value
    if isinstance(default, dict):
        if not isinstance(value, dict) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in value.values()
        ):
            raise ConfigError(
                f"--sim-option {key} must be a JSON object of role -> number, e.g. "
                f"{key}='{{\"worker\": 0.9}}', got {shown}"
            )
        return {str(k): float(v) for k, v in value.items()}
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"--sim-option {key} must be a finite number, got {shown}")
    return float(value)


def backend_options(args: argparse.Namespace) -> dict[str, Any]:
    """Backend factory options from the command line."""
    sim = sim_options(getattr(args, "sim_option", None) or [])
    if sim and args.backend != "sim":
        raise ConfigError(
            f"--sim-option sets options of the simulator, not of --backend {args.backend}; "
            "leave it out"
        )
    if args.backend == "sim":
        return sim
    if args.backend in ("openai", "vllm"):
        return {
            "base_url": args.base_url,
            "model": args.model,
            "timeout_s": args.timeout,
            "retries": args.retries,
            "concurrency": args.concurrency,
        }
    if args.backend == "hf":
        if not args.model:
            raise ConfigError("the hf backend needs --model (a local model directory)")
        return {"model": args.model}
    return {}


def result_lines(res: Any, output: str | None) -> list[str]:
    """The run's headline, before the analysis."""
    m = res.trace.meta["result"]
    known = m.get("success", res.success) is not None
    head = ("solved" if res.success else "failed") if known else "unchecked"
    return [
        f"{head}: answer {display(repr(m['answer']))} "
        f"(truth {display(repr(m['truth']))}); stop: {display(m['stop_reason'], 200)}",
        f"backend calls {res.backend_calls}, CPU {res.cpu_s:.2f} s, wall {res.wall_s:.2f} s"
        + (f"; trace in {display(output, 300)}" if output else ""),
    ]


def _print_team_note(args: argparse.Namespace, meta: Any) -> None:
    """Say on stderr when the topology used another team size than ``--agents``."""
    task = meta.get("task") if isinstance(meta, dict) else None
    if not isinstance(task, dict):
        return
    size = task.get("size")
    if not isinstance(size, int) or isinstance(size, bool):
        return
    options = (meta.get("config") or {}).get("options") or {}
    team = meta.get("team")
    note = (
        str(team["note"])
        if isinstance(team, dict) and "note" in team
        else team_note(args.topology, str(task.get("name", args.task)), size, args.agents, options)
    )
    if note:
        print(note, file=sys.stderr)


def run_cmd(args: argparse.Namespace) -> int:
    """Run and report."""
    cfg = config_from(args)
    fmt: str | None = None
    if args.output:  # checked before anything runs
        fmt = check_dump_target(args.output, overwrite=args.force)
    stream = args.output if fmt in ("jsonl", "parquet") else None
    res = run(
        args.topology,
        args.task,
        config=cfg,
        task_seed=args.task_seed,
        task_size=args.task_size,
        backend=args.backend,
        backend_options=backend_options(args),
        output=stream,
        overwrite=args.force,
        stop_on_signals=True,
        progress=not args.no_progress and sys.stderr.isatty(),
        strict_agents=args.strict_agents,
    )
    if args.output and stream is None:
        dump(res.trace, args.output, format=fmt, overwrite=args.force)
    _print_team_note(args, res.trace.meta)
    for line in res.processor_failures:  # kept running, never dropped silently
        print(f"warning: {line}", file=sys.stderr)
    summary = summarize(res.trace)
    if args.json:
        out = {
            "success": res.success,
            "answer": res.answer,
            "backend_calls": res.backend_calls,
            "cpu_s": res.cpu_s,
            **summary,
        }
        sys.stdout.write(json.dumps(out, default=str) + "\n")
    else:
        print("\n".join(result_lines(res, args.output)))
        print(_text(res.trace.trace_id, summary, 8))
    if res.interrupted_by:
        print(
            f"interrupted by {res.interrupted_by}: the run was stopped early and its stop recorded",
            file=sys.stderr,
        )
        return 130 if res.interrupted_by == "SIGINT" else 143
    denied = _root_denied(res.trace)
    if denied is not None:
        print(
            f"error: the run's orchestrator was stopped by the capability policy ({denied}); "
            "give the orchestrator role may_spawn and may_stop in the policy (--policy/--defenses)",
            file=sys.stderr,
        )
        return 1
    return 0


def _root_denied(trace: Any) -> str | None:
    """The capability denial that ended the root agent, if one did."""
    root = next((e.agent for e in trace.events if e.agent), None)
    for e in reversed(trace.events):
        if e.type == "despawn" and e.agent == root:
            err = str(e.error or "")
            return err if err.startswith("CapabilityDenied") else None
    return None
