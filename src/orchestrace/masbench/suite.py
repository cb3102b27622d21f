"""Benchmark suites: run them, aggregate E1-E4, sweep the scale envelope, write the report.

A suite is versioned (``sim-v2``; bump the version when results could change) and fixes the
topologies, tasks, team size, seeds, fault rates, envelope grid and simulator options.
``sim-v2`` runs the tool-reading task versions (``wide-search-v1``, ``multihop-v1``) on a
simulator whose judges, critics and revisers do not read the ground truth; ``sim-v1`` keeps
the earlier behaviour (``-v0`` tasks, ``oracle_verifiers=True``) so its report reproduces. Every run records the four
benchmark dimensions: trace shape (width, depth, length), the credit unit exercised, its point
in the scale envelope, and the failure taxonomy.

* **E1** task success: the share of seeds solved, with a 95% Wilson score interval (it has
  width even when every run, or none, succeeded).
* **E2** parallel efficiency: speedup = work / critical path, and its ratio to the ideal for the
  team size (number of sub-agents), with a 95% t-interval over seeds.
* **E3** protocol overhead: messages, tokens and cost per solved task (``None`` when no run
  solved it); the share of LLM tokens spent on coordination (plan, critique, judge, revise,
  aggregate calls) instead of solving.
* **E4** error amplification: with faults injected at a rate (a sub-agent answering wrongly, a
  message dropped, a tool failing), the final error rate, its ratio to the injected rate
  (above 1: the system amplifies faults; below 1: it absorbs them), and the excess over the
  clean error rate per unit of injected rate.

Example:
    >>> report = run_suite("smoke-v1", jobs=1, progress=False)
    >>> report["suite"]["id"], len(report["cells"]) > 0, len(report["envelope"]) > 0
    ('smoke-v1', True, True)
"""

from __future__ import annotations

import dataclasses
import platform
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from orchestrace._numbers import is_int
from orchestrace._safe import redact, redact_url
from orchestrace._version import __version__
from orchestrace.errors import ConfigError, RuntimeError_
from orchestrace.executors import Executor, JobFailure, failures, make_executor
from orchestrace.masbench.envelope import ENVELOPE_POINTS, envelope_point, measure_point
from orchestrace.masbench.faults import FAULTS, DropMessages, WrongAnswers, check_rate
from orchestrace.masbench.metrics import run_metrics
from orchestrace.runtime import TOPOLOGIES, run
from orchestrace.runtime.backends import BackendError, LLMRequest, make_backend
from orchestrace.runtime.topologies import get_topology
from orchestrace.stats import mean_ci, wilson_interval
from orchestrace.tasks import make_task

__all__ = ["SUITES", "Suite", "run_one", "run_suite"]

#: How E1's interval is computed (recorded in every cell and in the report).
E1_INTERVAL = "wilson-95"

#: What each interval in a report is.
INTERVALS = {
    "E1_success_low/high": "95% Wilson score interval of the share of seeds solved",
    "E2_efficiency_ci": "95% Student-t half-width over seeds",
    "E4 error_low/high": "95% Wilson score interval of the error rate with faults",
}

#: The credit unit each topology's cell exercises.
CREDIT_UNITS = {
    "centralized": "agent",
    "pipeline": "role",
    "debate": "message",
    "swarm": "agent",
    "hierarchical": "orchestrator",
    "critic_loop": "turn",
}
ALL_TOPOLOGIES = ("centralized", "pipeline", "debate", "swarm", "hierarchical", "critic_loop")
ALL_TASKS = ("arith-mapreduce-v0", "wide-search-v1", "multihop-v1", "math-v0", "humaneval-v0")
#: The tasks of ``sim-v1`` (tool results not shown to the model).
V1_TASKS = ("arith-mapreduce-v0", "wide-search-v0", "multihop-v0", "math-v0", "humaneval-v0")


def _is_topology(name: Any) -> bool:
    """Whether ``run`` takes ``name`` as a topology (its aliases too)."""
    try:
        get_topology(name)
    except ConfigError:
        return False
    return True


@dataclass(frozen=True)
class Suite:
    """What a suite runs (see the module docstring)."""

    id: str
    topologies: tuple[str, ...] = ALL_TOPOLOGIES
    tasks: tuple[str, ...] = ALL_TASKS
    agents: int = 8
    seeds: int = 100
    fault_rate: float = 0.2
    faults: tuple[str, ...] = ("wrong_answer", "dropped_message", "tool_failure")
    envelope_agents: tuple[int, ...] = (2, 5, 10, 20, 50, 100, 200, 300)
    envelope_lengths: tuple[int, ...] = (10, 100, 1000, 4000)
    description: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    #: Options of the sim backend (recorded in every trace's backend spec; other backends
    #: ignore them); options given to :func:`run_suite` override them.
    sim_options: dict[str, Any] = field(default_factory=dict)
    #: Envelope points beyond the grid: (agents, target events).
    envelope_points: tuple[tuple[int, int], ...] = ()
    #: Also record the industry configuration (:data:`orchestrace.masbench.envelope.INDUSTRY`).
    envelope_industry: bool = False
    #: Run each envelope point in a fresh process and record its peak memory.
    envelope_isolate: bool = False

    def __post_init__(self) -> None:
        unknown = [t for t in self.topologies if not _is_topology(t)]
        if unknown:
            raise ConfigError(
                f"suite {self.id!r}: unknown topologies {unknown}; use any of: "
                + ", ".join(sorted(TOPOLOGIES))
            )
        unknown = [f for f in self.faults if f not in FAULTS]
        if unknown:
            raise ConfigError(
                f"suite {self.id!r}: unknown faults {unknown}; use any of: {', '.join(FAULTS)}"
            )
        for name in ("agents", "seeds"):
            value = getattr(self, name)
            if not is_int(value) or value < 1:
                raise ConfigError(
                    f"suite {self.id!r}: {name} must be an integer >= 1, got {value!r}"
                )
        check_rate(self.fault_rate, f"suite {self.id!r}: fault")


#: Registered suites by versioned id.
SUITES: dict[str, Suite] = {
    "sim-v2": Suite(
        "sim-v2",
        description="every topology x task on the sim backend (tool results in the prompt, "
        "verifiers without the ground truth), 100 seeds, three fault kinds at rate 0.2, "
        "envelope 2-300 agents x 10-4000 events",
    ),
    "sim-v1": Suite(
        "sim-v1",
        tasks=V1_TASKS,
        description="as sim-v2 with the earlier simulator: -v0 tasks (tool results not "
        "shown) and oracle verifiers (judge, critic and reviser read the ground truth)",
        sim_options={"oracle_verifiers": True},
    ),
    "envelope-v1": Suite(
        "envelope-v1",
        topologies=(),
        tasks=(),
        seeds=1,
        envelope_agents=(2, 5, 10, 100, 300),
        envelope_lengths=(10, 100, 1000, 10_000),
        envelope_points=ENVELOPE_POINTS,
        envelope_industry=True,
        envelope_isolate=True,
        description="the scale envelope alone, each point in its own process (CPU time and "
        "peak memory): 2-300 agents x 10-10,000 events, 300 x 4,000, 1,000 x 40,000, "
        "10,000 x 400,000, and the industry configuration (staged three-level hierarchy, "
        "360 sub-agents, 4,200 tool calls)",
    ),
    "smoke-v2": Suite(
        "smoke-v2",
        topologies=("swarm", "critic_loop"),
        tasks=("arith-mapreduce-v0", "wide-search-v1"),
        agents=4,
        seeds=2,
        faults=("wrong_answer", "tool_failure"),
        envelope_agents=(2, 20),
        envelope_lengths=(10, 200),
        description="a seconds-long check of the whole pipeline",
    ),
    "smoke-v1": Suite(
        "smoke-v1",
        topologies=("swarm", "critic_loop"),
        tasks=("arith-mapreduce-v0", "math-v0"),
        agents=4,
        seeds=2,
        faults=("wrong_answer",),
        envelope_agents=(2, 20),
        envelope_lengths=(10, 200),
        description="the earlier seconds-long check (oracle verifiers)",
        sim_options={"oracle_verifiers": True},
    ),
}


def get_suite(name: str) -> Suite:
    """A suite by id.

    Raises:
        ConfigError: Unknown suite.
    """
    if name not in SUITES:
        raise ConfigError(f"unknown suite {name!r}; use one of: {', '.join(SUITES)}")
    return SUITES[name]


def public_options(options: dict[str, Any] | None) -> dict[str, Any] | None:
    """Backend options as a report may show them: no API key, no credentials in URLs."""
    if options is None:
        return None
    return {k: redact(v) if isinstance(v, str) else v for k, v in options.items() if k != "api_key"}


# ---------------------------------------------------------------------------- single runs
def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """One benchmark run: ``{topology, task, agents, seed, fault, rate, backend}``."""
    fault, rate = spec.get("fault"), float(spec.get("rate", 0.0))
    interventions: list[Any] = []
    kw: dict[str, Any] = {}
    name = spec.get("backend", "sim")
    backend: Any = make_backend(
        name,
        **({"seed": spec["seed"]} if name == "sim" else {}),
        **dict(spec.get("backend_options") or {}),
    )
    injector: Any = None
    if fault == "wrong_answer":
        backend = injector = WrongAnswers(backend, rate, seed=spec["seed"])
    elif fault == "dropped_message":
        interventions.append(DropMessages(rate, seed=spec["seed"]))
    elif fault == "tool_failure":
        kw["tool_failure_rate"] = rate
    t0 = time.process_time()
    res = run(
        spec["topology"],
        spec["task"],
        agents=spec["agents"],
        seed=spec["seed"],
        backend=backend,
        interventions=interventions,
        **kw,
    )
    cpu = time.process_time() - t0
    failed = [e for e in res.trace.events if e.type == "llm_call" and e.error]
    if failed:  # a run on a failing backend measures the backend, not the system
        raise RuntimeError_(
            f"backend failed on {len(failed)} of "
            f"{sum(1 for e in res.trace.events if e.type == 'llm_call')} LLM calls "
            f"(first: {' '.join(str(failed[0].error).split())[:300]})"
        )
    m = run_metrics(res.trace, credit_unit=CREDIT_UNITS.get(spec["topology"], "agent"))
    if fault == "wrong_answer":
        m["fault_units"], m["faults_injected"] = injector.seen, injector.injected
    elif fault == "dropped_message":
        iv = interventions[0]
        m["fault_units"], m["faults_injected"] = iv.seen, iv.injected
    elif fault == "tool_failure":
        results = [e for e in res.trace.events if e.type == "tool_result"]
        m["fault_units"] = len(results)
        m["faults_injected"] = sum(1 for e in results if e.error)
    public = {**spec, "backend_options": public_options(spec.get("backend_options"))}
    return {**public, **m, "cpu_s": cpu, "trace_id": res.trace.trace_id}


# ---------------------------------------------------------------------------- aggregation
def _per_solved(runs: list[dict[str, Any]], key: str) -> float | None:
    """Total ``key`` over the runs per solved run; ``None`` when none was solved."""
    solved = sum(r["success"] for r in runs)
    return sum(r[key] for r in runs) / solved if solved > 0 else None


def aggregate(runs: list[dict[str, Any]], suite: Suite) -> list[dict[str, Any]]:
    """One row per (topology, task) with E1-E4 and the four dimensions."""
    groups: dict[tuple[str, str, str | None], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["topology"], r["task"], r.get("fault") or None), []).append(r)
    cells = []
    for topo in suite.topologies:
        for task in suite.tasks:
            clean = groups.get((topo, task, None), [])
            if not clean:
                continue
            solved = sum(r["success"] for r in clean)
            sr = solved / len(clean)
            low, high = wilson_interval(solved, len(clean))
            eff, eff_ci = mean_ci(r["efficiency"] for r in clean)
            row: dict[str, Any] = {
                "topology": topo,
                "task": task,
                "runs": len(clean),
                "E1_success": sr,
                "E1_interval": E1_INTERVAL,
                "E1_success_low": low,
                "E1_success_high": high,
                "E2_speedup": float(np.mean([r["speedup"] for r in clean])),
                "E2_ideal": float(np.mean([r["ideal_speedup"] for r in clean])),
                "E2_efficiency": eff,
                "E2_efficiency_ci": None if np.isnan(eff_ci) else eff_ci,  # one seed: none
                "E3_solved": solved,
                "E3_messages_per_solved": _per_solved(clean, "messages"),
                "E3_tokens_per_solved": _per_solved(clean, "tokens"),
                "E3_cost_per_solved": _per_solved(clean, "cost"),
                "E3_coordination_share": float(np.mean([r["coordination_share"] for r in clean])),
                "shape": {
                    k: float(np.mean([r["shape"][k] for r in clean]))
                    for k in ("width", "depth", "length", "steps")
                },
                "credit_unit": clean[0]["credit"]["unit"],
                "credit_units": float(np.mean([r["credit"]["units"] for r in clean])),
                "failures": {
                    m: int(sum(r["failures"][m] for r in clean)) for m in clean[0]["failures"]
                },
                "failure_rate": {
                    m: float(np.mean([r["failures"][m] > 0 for r in clean]))
                    for m in clean[0]["failures"]
                },
                "cpu_s": float(sum(r["cpu_s"] for r in clean)),
                "E4": {},
            }
            err_clean = 1.0 - sr
            for fault in suite.faults:
                fr = groups.get((topo, task, fault), [])
                if not fr:
                    continue
                units = sum(r.get("fault_units", 0) for r in fr)
                injected = sum(r.get("faults_injected", 0) for r in fr)
                rate = injected / units if units else 0.0
                ok = sum(r["success"] for r in fr)
                err = 1.0 - ok / len(fr)
                err_low, err_high = wilson_interval(len(fr) - ok, len(fr))
                row["E4"][fault] = {
                    "nominal_rate": suite.fault_rate,
                    "injected_rate": rate,
                    "units": units,
                    "error_rate": err,
                    "error_low": err_low,
                    "error_high": err_high,
                    "amplification": err / rate if rate else None,
                    "excess_per_injected": (err - err_clean) / rate if rate else None,
                }
            cells.append(row)
    return cells


# ---------------------------------------------------------------------------- the run
def _specs(
    suite: Suite, backend: str, backend_options: dict[str, Any] | None
) -> list[dict[str, Any]]:
    out = []
    for topo in suite.topologies:
        for task in suite.tasks:
            for seed in range(suite.seeds):
                base = {
                    "topology": topo,
                    "task": task,
                    "agents": suite.agents,
                    "seed": seed,
                    "backend": backend,
                    "backend_options": backend_options,
                }
                out.append({**base, "fault": None, "rate": 0.0})
                out += [{**base, "fault": f, "rate": suite.fault_rate} for f in suite.faults]
    return out


def _missing_cells(
    suite: Suite, cells: list[dict[str, Any]], missing: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Cells with no clean run at all, or aggregated over fewer runs than the suite has."""
    have = {(c["topology"], c["task"]) for c in cells}
    short: dict[tuple[str, str], int] = {}
    for m in missing:
        key = (m["topology"], m["task"])
        short[key] = short.get(key, 0) + 1
    out = []
    for topo in suite.topologies:
        for task in suite.tasks:
            n = short.get((topo, task), 0)
            if (topo, task) not in have or n:
                out.append(
                    {
                        "topology": topo,
                        "task": task,
                        "missing_runs": n,
                        "aggregated": (topo, task) in have,
                    }
                )
    return out


def _available_tasks(suite: Suite) -> tuple[Suite, list[str]]:
    keep, notes = [], []
    for task in suite.tasks:
        try:
            make_task(task, seed=0)
            keep.append(task)
        except ImportError as err:
            notes.append(f"{task} skipped: {err}")
    return dataclasses.replace(suite, tasks=tuple(keep)), notes


def _check_backend(name: str, options: dict[str, Any] | None) -> None:
    """One LLM call before the grid: a backend that cannot answer stops the suite at once.

    Raises:
        ConfigError: The backend's first call failed (server down, wrong URL or model).
    """
    import asyncio  # noqa: PLC0415  only real backends are checked

    opts = dict(options or {})
    backend: Any = make_backend(name, **opts)
    request = LLMRequest(
        agent="check",
        role="solver",
        kind="solve",
        messages=[{"role": "user", "content": "Reply with the word OK."}],
        max_tokens=8,
    )

    async def ask() -> str | None:
        try:
            resp = await backend.complete(request)
        except BackendError as err:
            return str(err)
        finally:
            await backend.aclose()
        return None if resp.error is None else str(resp.error)

    error = asyncio.run(ask())
    if error is not None:
        where = (
            f"--base-url {redact_url(str(opts['base_url']))}"
            if opts.get("base_url")
            else f"the {name} backend"
        )
        raise ConfigError(
            f"{where}: the backend failed its first call, so no run can succeed "
            f"({' '.join(error.split())[:300]}); start the server or fix --base-url/--model"
        )


def run_suite(
    name: str | Suite = "sim-v2",
    *,
    backend: str = "sim",
    backend_options: dict[str, Any] | None = None,
    jobs: int = 2,
    progress: bool = True,
    seeds: int | None = None,
    envelope: bool = True,
    executor: Executor | str | None = None,
) -> dict[str, Any]:
    """Run a suite; return the report (JSON-ready; :func:`write_report` writes the files).

    The runs are independent jobs on ``executor``; the report is the same on every executor
    (apart from timings). A run that fails (it raised, or its worker died on every attempt) is
    recorded: the report keeps the other runs, lists the failed ones under ``missing`` (and in
    ``notes``) and aggregates each cell over the runs it has. A run whose LLM calls failed
    (backend errors in its trace) is a failed run. Every start of a run after its worker
    died is listed under ``retries`` (run, attempt, reason).

    Args:
        name: Suite id or object.
        backend: ``sim`` (default), ``openai`` or ``hf``: the LLM behind every agent.
        backend_options: Options for the backend (model, base URL...); on the sim backend
            they override the suite's ``sim_options``.
        jobs: Worker processes when ``executor`` is not given (1: this process).
        executor: An :class:`~orchestrace.executors.Executor` or its name (``local``,
            ``process`` with ``jobs`` workers, ``ray``).
        progress: Show a progress bar.
        seeds: Override the suite's seed count.
        envelope: Also sweep the scale envelope (sim backend only).
    """
    suite = name if isinstance(name, Suite) else get_suite(name)
    if seeds is not None:
        if not is_int(seeds) or seeds < 1:
            raise ConfigError(f"seeds must be an integer >= 1, got {seeds!r}")
        suite = dataclasses.replace(suite, seeds=seeds)
    if backend not in ("sim", "openai", "hf"):
        raise ConfigError(f"unknown backend {str(backend)[:80]!r}; use sim, openai or hf")
    if backend_options is not None and not isinstance(backend_options, dict):
        raise ConfigError(f"backend_options must be a dict, got a {type(backend_options).__name__}")
    if not is_int(jobs) or jobs < 1:
        raise ConfigError(f"jobs must be an integer >= 1, got {jobs!r}")
    if backend == "sim":  # its options are checked here once, not in every run
        make_backend("sim", **{**suite.sim_options, **(backend_options or {})})
    suite, notes = _available_tasks(suite)
    if backend == "openai":  # a server: one call tells whether it answers
        _check_backend(backend, backend_options)
    if backend == "sim" and suite.sim_options:
        backend_options = {**suite.sim_options, **(backend_options or {})}
    specs = _specs(suite, backend, backend_options)
    grid = [(k, n) for k in suite.envelope_agents for n in suite.envelope_lengths]
    points = (
        grid + [p for p in suite.envelope_points if p not in grid]
        if envelope and backend == "sim"
        else []
    )
    industry = envelope and backend == "sim" and suite.envelope_industry
    if executor is None:
        executor = "process" if jobs > 1 else "local"
    ex = (
        make_executor(executor, jobs if executor != "local" else None)
        if isinstance(executor, str)
        else executor
    )
    t0 = time.perf_counter()
    env_rows: list[dict[str, Any]] = []
    skipped: list[dict[str, int]] = []
    try:
        out = ex.map(
            run_one,
            specs,
            chunksize=1 if ex.name == "local" else 8,
            progress=suite.id if progress else None,
            on_error="record",
        )
    finally:
        if ex is not executor:  # made here: its workers are not needed after the runs
            ex.close()
    runs = [r for r in out if not isinstance(r, JobFailure)]
    retried = [
        {**{k: specs[r.index][k] for k in ("topology", "task", "seed", "fault")}, **r.to_dict()}
        for r in ex.retried
    ]
    missing = [
        {**{k: specs[f.index][k] for k in ("topology", "task", "seed", "fault")}, **f.to_dict()}
        for f in failures(out)
    ]
    for m in missing:
        notes.append(
            f"missing run {m['topology']}/{m['task']} seed {m['seed']}"
            f"{' fault ' + m['fault'] if m['fault'] else ''}: {m['error']}"
            f"{' after ' + str(m['attempts']) + ' attempts' if m['attempts'] > 1 else ''}"
        )
    bar: Any = None
    if progress and (points or industry):
        from tqdm import tqdm  # noqa: PLC0415  tqdm is heavy: loaded on first use

        bar = tqdm(total=len(points) + industry, unit="point", desc=f"{suite.id} envelope")
    try:
        for k, n in points:  # not in the executor: CPU per point is a figure of the report
            row = (
                measure_point("swarm", agents=k, length=n)
                if suite.envelope_isolate
                else envelope_point(k, n)
            )
            if row is None:
                skipped.append({"agents": k, "target_length": n})
            else:
                env_rows.append(row)
            if bar is not None:
                bar.update(1)
        if industry:
            row = measure_point("industry", isolate=suite.envelope_isolate)
            if row is not None:
                env_rows.append(row)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - t0
    return {
        "suite": {**dataclasses.asdict(suite), "version": suite.id.rsplit("-", 1)[-1]},
        "config": {
            "backend": backend,
            "backend_options": public_options(backend_options) or {},
            **(described := ex.describe()),
            "jobs": ex.workers or described.get("cluster_cpus") or 1,  # jobs at a time
            "seeds": list(range(suite.seeds)),
        },
        "environment": {
            "orchestrace": __version__,
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "intervals": INTERVALS,
        "notes": notes,
        "wall_s": wall,
        "cells": (cells := aggregate(runs, suite)),
        "missing": {"runs": missing, "cells": _missing_cells(suite, cells, missing)},
        "retries": retried,
        "envelope": env_rows,
        "envelope_infeasible": skipped,
        "runs": runs,
    }
