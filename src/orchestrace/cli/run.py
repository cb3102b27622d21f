"""``orchestrace run TOPOLOGY --task NAME``: run a topology, stream the trace, print the analysis."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

from orchestrace._safe import display
from orchestrace.cli._backend import check_timeout
from orchestrace.cli._json import JsonLines
from orchestrace.cli.analyze import _text
from orchestrace.errors import ConfigError
from orchestrace.io import check_dump_target, dump
from orchestrace.runtime import TASKS, TOPOLOGIES, RunConfig, run
from orchestrace.runtime.backends import BACKENDS
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.security import RunSecret, defenses_from
from orchestrace.runtime.topologies import team_note
from orchestrace.safety.attacks import make_attack, run_attacked
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
    p.add_argument(
        "--attack",
        metavar="NAME[:KEY=VALUE,...]",
        help="run under an attack (sim backend: simulated victims), e.g. spoofing, "
        "indirect_injection:surface_kind=document,wording=reworded, collusion:agents=2; "
        "see docs/security.md",
    )
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
    p.add_argument(
        "--secret-file",
        metavar="PATH",
        help="signed runs (--defenses all): the run secret the keys derive from; written "
        "there (mode 0600) when PATH does not exist, read when it does; pass the same file "
        "to `orchestrace audit --secret-file` to re-verify every MAC",
    )


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
        defenses=_with_secret(
            defenses_from(getattr(args, "defenses", None), getattr(args, "policy", None)),
            getattr(args, "secret_file", None),
        ),
    )


def _with_secret(defenses: Any, path: str | None) -> Any:
    """``defenses`` signing with the run secret in ``path`` (written there when missing)."""
    if path is None:
        return defenses
    if not defenses.sign_messages:
        raise ConfigError(
            f"--secret-file ({path}) is for signed runs and this run's messages are not "
            "signed; use --defenses all (or a defenses file with sign_messages = true), or "
            "drop --secret-file"
        )
    if defenses.keys != "secret":
        raise ConfigError(
            f"--secret-file ({path}) is not used by keys={defenses.keys!r}, which take no "
            "secret; drop keys from the defenses file or drop --secret-file"
        )
    p = Path(path)
    if p.exists() or p.is_symlink():
        secret = RunSecret.from_file(p)
    else:
        secret = RunSecret.new()
        secret.save(p)
        print(f"wrote a new run secret to {display(path)} (mode 0600)", file=sys.stderr)
    return dataclasses.replace(defenses, secret=secret)


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
            "timeout_s": check_timeout(args.timeout),
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
    attack = attack_from(args.attack) if getattr(args, "attack", None) else None
    if attack is not None:
        res = run_attacked(
            args.topology,
            args.task,
            attack,
            config=cfg,
            task_size=args.task_size,
            backend=args.backend,
            backend_options=backend_options(args),
        )
        stream = None
    else:
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
    if attack is not None:
        hit = bool(attack.succeeded(res.trace))
        kinds = sorted(
            {
                str(e.attrs.get("kind"))
                for e in res.trace.events
                if e.type == "safety_event" and isinstance(e.attrs, dict)
            }
        )
        print(
            f"attack {attack.name}: {'succeeded' if hit else 'did not succeed'}"
            + (f" (safety events: {', '.join(kinds)})" if kinds else " (no safety event)"),
            file=sys.stderr,
        )
    if args.json:
        out = {
            "success": res.success,
            "answer": res.answer,
            "backend_calls": res.backend_calls,
            "cpu_s": res.cpu_s,
            **summary,
        }
        lines = JsonLines("run --json", default=str)
        sys.stdout.write(lines.dumps(out) + "\n")
        lines.finish()
    else:
        print("\n".join(result_lines(res, args.output)))
        print(_text(res.trace.trace_id, summary, 8))
    if res.interrupted_by:
        print(
            f"interrupted by {res.interrupted_by}: the run was stopped early and its stop recorded",
            file=sys.stderr,
        )
        return 130 if res.interrupted_by == "SIGINT" else 143
    failed = _failed_llm_calls(res.trace)
    if failed is not None:
        n, total, first = failed
        where = f"; the run is recorded in {display(args.output, 200)}" if args.output else ""
        if n == total:  # nothing the run did came from the model
            print(f"error: every LLM call failed ({n:,}); first: {first}{where}", file=sys.stderr)
            return 1
        print(f"warning: {n:,} of {total:,} LLM calls failed; first: {first}", file=sys.stderr)
    denied = _root_denied(res.trace)
    if denied is not None:
        print(
            f"error: the run's orchestrator was stopped by the capability policy ({denied}); "
            "give the orchestrator role may_spawn and may_stop in the policy (--policy/--defenses)",
            file=sys.stderr,
        )
        return 1
    own = None if attack is not None else _structure_denied(res.trace)
    if own is not None:
        print(f"error: {own}", file=sys.stderr)
        return 1
    return 0


def _failed_llm_calls(trace: Any) -> tuple[int, int, str] | None:
    """``(failed, total, first error)`` of the run's LLM calls; ``None`` when none failed."""
    calls = [e for e in trace.events if e.type == "llm_call"]
    failed = [e for e in calls if e.error]
    if not failed:
        return None
    return len(failed), len(calls), display(str(failed[0].error), 300)


def attack_from(spec: str) -> Any:
    """The attack ``--attack NAME[:KEY=VALUE,...]`` names (values read as JSON, else text).

    Raises:
        ConfigError: Unknown attack or option, or a malformed pair.

    Example:
        >>> attack_from("indirect_injection:surface_kind=document,susceptibility=0.5").surface_kind
        'document'
    """
    name, _, rest = spec.partition(":")
    opts: dict[str, Any] = {}
    for pair in filter(None, (x.strip() for x in rest.split(","))):
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"--attack {display(spec, 80)}: options are KEY=VALUE separated by commas "
                f"(got {display(pair, 40)!r}), e.g. --attack collusion:agents=2"
            )
        try:
            opts[key.strip()] = json.loads(raw)
        except ValueError:
            opts[key.strip()] = raw
    try:
        return make_attack(name.strip(), **opts)
    except ConfigError as err:
        raise ConfigError(f"--attack {display(spec, 80)}: {err}") from None


def _structure_denied(trace: Any) -> str | None:
    """A capability denial of the topology's own action (a run with no attack), described."""
    for e in trace.events:
        a = e.attrs if isinstance(e.attrs, dict) else {}
        if e.type == "safety_event" and a.get("kind") == "capability_denied":
            what = a.get("action")
            if what == "tool":
                what = f"call tool {a.get('tool')!r}"
            fix = (
                f"give the role may_{a.get('action')} = true in the policy"
                if a.get("action") != "tool"
                else "add the tool to the role's tools in the policy"
            )
            return (
                f"the capability policy denied role {a.get('role')!r} ({e.agent}) to {what} "
                f"(event {e.id}): the topology needs it, so the run could not do its work; "
                f"{fix} (--policy/--defenses)"
            )
    return None


def _root_denied(trace: Any) -> str | None:
    """The capability denial that ended the root agent, if one did."""
    root = next((e.agent for e in trace.events if e.agent), None)
    for e in reversed(trace.events):
        if e.type == "despawn" and e.agent == root:
            err = str(e.error or "")
            return err if err.startswith("CapabilityDenied") else None
    return None
