"""The learned-stopping study (O5): trained policies against tuned rules, on equal data.

The question: when should an orchestrator stop asking workers for answers? The study compares,
per task of ``stop-v0``:

* **rules** of five families, each tuned on its own seeds: fixed-N, k-agree, confidence
  threshold, confidence-or-k-agree, and **size-aware** (the best rule of all those families
  per range of task sizes, which the environment shows);
* **learned** policies (PPO by default), trained on their own seeds, one per training seed;
* two **references that are not baselines**: the posterior rule
  (:class:`~orchestrace.learn.policies.posterior.PosteriorStop`, which knows the simulator's
  generative model) and the hindsight optimum (the best stopping point of each episode,
  chosen after seeing it: no causal policy can reach it).

**Equal data.** In ``stop-v0`` the workers' answers do not depend on when the orchestrator
stops: one episode that never stops records everything any stopping policy would see on that
task instance (observations, answers, confidences, tokens) and what stopping at each point
would score. Each training seed and each tuning replicate gets the records of ``budget`` task
instances of its own (seeds disjoint from each other and from evaluation): a policy trains on
episodes replayed from its records (several passes), a rule family is scored exactly on its
records at every threshold and the best is kept. Evaluation replays the held-out records of
``eval_seeds x episodes`` task instances (the instances ``orchestrace evaluate`` uses), and a
live check re-runs every method in the real environment on the first of them and counts any
disagreement with the replay (it must be 0).

**Pareto curves.** The reward is ``success - w x tokens / 1000``. For each token weight ``w``
of ``weights`` every method is tuned or trained again (rules pick their threshold for ``w``,
the policy trains with ``token_cost = w``, the posterior rule prices a worker with ``w``), so
each method gives a curve of (tokens, success) points.

Outputs (``write_report``): ``results.json`` (everything, per replicate), ``results.md``
(tables), ``pareto.csv`` (one row per method, weight and replicate), ``sweep.csv`` (every rule
threshold on the evaluation records), ``pareto.png``, ``curves.png`` and ``train.csv`` (PPO
learning curves at the reference weight), ``policy-<task>.pt`` (training seed 0 at the
reference weight, loadable with ``orchestrace evaluate``).

Example:
    >>> tiny = StudyConfig(budget=48, train_seeds=2, train_episodes=192, weights=(0.1,),
    ...                    eval_seeds=1, episodes=16, live_episodes=4, samples=50)
    >>> study = run_study(["multihop"], config=tiny, jobs=1)
    >>> res = study["tasks"]["multihop-v0"]
    >>> sorted(res["methods"])[:3]
    ['agree', 'any-rule', 'conf-or-agree']
    >>> res["live_check"]["mismatches"]
    0
"""

from __future__ import annotations

import io
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from orchestrace.errors import ConfigError
from orchestrace.executors import Executor, JobFailure, LocalExecutor, ProcessExecutor
from orchestrace.io._output import report_dir
from orchestrace.learn.algorithms import TrainConfig
from orchestrace.learn.env import SIZE_RANGES
from orchestrace.learn.policies.torch_policy import MLPPolicy, require_torch
from orchestrace.learn.stopping.bank import (
    Bank,
    _bank_trainer,
    _policy_stops,
    _rule_stops,
    posterior_stops,
    record_bank,
    rule_grid,
    tune_rules,
)
from orchestrace.learn.stopping.config import (
    DEFAULT_TASKS,
    DENSE_WEIGHTS,
    ENV_OPTIONS,
    StudyConfig,
    _check_disjoint,
    eval_seeds,
    train_seeds,
    tune_seeds,
)
from orchestrace.learn.stopping.config import (
    FAMILIES as FAMILIES,
)
from orchestrace.learn.stopping.report import (
    comparison_table as comparison_table,
)
from orchestrace.learn.stopping.report import (
    missing_note,
    summary_table,
    write_report,
)
from orchestrace.learn.stopping.report import (
    pareto_table as pareto_table,
)
from orchestrace.learn.stopping.report import (
    weight_table as weight_table,
)
from orchestrace.learn.stopping.results import _frontier_at as _frontier_at
from orchestrace.learn.stopping.results import _live_check, _task_results
from orchestrace.tasks import make_task

__all__ = [
    "Bank",
    "StudyConfig",
    "eval_seeds",
    "missing_note",
    "record_bank",
    "rule_grid",
    "run_study",
    "summary_table",
    "train_seeds",
    "tune_seeds",
    "write_report",
]


# ---------------------------------------------------------------------------- jobs
def _job_bank(task: str, seeds: list[int]) -> Bank:
    return record_bank(task, seeds)


def _job_replicate(task: str, r: int, cfg: StudyConfig, ev: Bank) -> dict[str, Any]:
    """One training seed and one tuning replicate of one task, at every weight."""
    import torch  # noqa: PLC0415  optional extra [learn] or [hf]

    torch.set_num_threads(1)
    t0 = time.process_time()
    out: dict[str, Any] = {"task": task, "replicate": r, "learned": {}, "rules": {}, "logs": {}}
    tune = record_bank(task, tune_seeds(r, cfg.budget))
    tuned = tune_rules(tune, cfg.weights, cfg.size_buckets)
    for fam, by_w in tuned.items():
        out["rules"][fam] = {w: (rule, _rule_stops(rule, ev)) for w, rule in by_w.items()}
    train = record_bank(task, train_seeds(r, cfg.budget))
    out["record_cpu_s"] = time.process_time() - t0
    t1 = time.process_time()
    for w in cfg.weights:
        tc = TrainConfig(
            env="stop-v0",
            task=task,
            episodes=cfg.train_episodes,
            hidden=cfg.hidden,
            seed=r,
            env_options={**ENV_OPTIONS, "token_cost": w},
        )
        trainer = _bank_trainer(cfg.algo, tc, train)
        res = trainer.train()
        stops = _policy_stops(res.policy, ev)
        state = None
        if w == cfg.reference_weight:
            buf = io.BytesIO()
            torch.save(res.policy.net.state_dict(), buf)
            state = buf.getvalue()
            out["logs"][w] = res.log
        out["learned"][w] = {"stops": stops, "state": state, "config": tc}
    out["train_cpu_s"] = time.process_time() - t1
    return out


def _job_posterior(cfg: StudyConfig, ev: Bank) -> dict[float, np.ndarray]:
    weights = sorted({*cfg.weights, *DENSE_WEIGHTS})
    return posterior_stops(ev, weights, cfg.horizon, cfg.samples)


def _pool_map(
    fn: Callable[..., Any], args: list[tuple[Any, ...]], jobs: int, executor: Executor | None = None
) -> list[Any]:
    """Every job's result in job order; a failed job's place holds its JobFailure."""
    specs = [(fn, a) for a in args]
    if executor is not None:  # results in job order: the study is the same on every executor
        return executor.map(_apply, specs, on_error="record")
    if jobs <= 1 or len(args) <= 1:
        return LocalExecutor().map(_apply, specs, on_error="record")
    with ProcessExecutor(min(jobs, len(args))) as pool:
        return pool.map(_apply, specs, on_error="record")


# ---------------------------------------------------------------------------- driver
def run_study(
    tasks: Sequence[str] = DEFAULT_TASKS,
    *,
    config: StudyConfig | None = None,
    quick: bool = False,
    out: str | Path | None = None,
    jobs: int = 2,
    progress: Callable[[str], None] | None = None,
    force: bool = False,
    executor: Executor | None = None,
) -> dict[str, Any]:
    """Run the study (see the module docstring) and, with ``out``, write the report.

    Its jobs (recording the evaluation banks, each training replicate, the posterior rule)
    run on ``executor`` when given (:mod:`orchestrace.executors`), else in ``jobs``
    processes; the results are the same on every executor.

    ``out`` is checked before any work, as ``orchestrace study -o`` checks it: new, empty,
    or written by an earlier study (then only with ``force``).

    Raises:
        ConfigError: No tasks, an unknown task, or a bad budget.
        orchestrace.io._output.OutputError: ``out`` may not be written, or a write failed.
    """
    if not tasks:
        raise ConfigError("give at least one task, e.g. arith,search,multihop")
    if jobs < 1:
        raise ConfigError(f"jobs must be >= 1, got {jobs}")
    cfg = config or (StudyConfig.quick() if quick else StudyConfig())
    names = [make_task(t).name for t in tasks]

    for t, name in zip(tasks, names, strict=True):
        if name not in SIZE_RANGES:
            raise ConfigError(
                f"task {t!r} has no stop-v0 size range; use one of: "
                + ", ".join(sorted(SIZE_RANGES))
            )
    if cfg.algo not in ("ppo", "grpo", "reinforce"):
        raise ConfigError(f"unknown algorithm {cfg.algo!r}; use one of: ppo, grpo, reinforce")
    if out is not None:
        with report_dir(out, force=force, report="study"):
            return _run(names, cfg, out, jobs, progress, executor)
    return _run(names, cfg, None, jobs, progress, executor)


def _run(
    tasks: list[str],
    cfg: StudyConfig,
    out: str | Path | None,
    jobs: int,
    progress: Callable[[str], None] | None,
    executor: Executor | None = None,
) -> dict[str, Any]:
    torch = require_torch()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    seeds = _check_disjoint(cfg)
    say = progress or (lambda _m: None)
    banks = _pool_map(
        _job_bank, [(t, eval_seeds(cfg.eval_seeds, cfg.episodes)) for t in tasks], jobs, executor
    )
    missing: list[dict[str, Any]] = []

    def lost(task: str, job: str, f: JobFailure) -> None:
        missing.append(
            {"task": task, "job": job, **{k: v for k, v in f.to_dict().items() if k != "index"}}
        )
        tries = f" after {f.attempts} attempts" if f.attempts > 1 else ""
        say(f"failed: {task} {job}: {f.error}{tries}")

    evs: dict[str, Bank] = {}
    for t, bank in zip(tasks, banks, strict=True):
        if isinstance(bank, JobFailure):
            lost(t, "evaluation bank", bank)
        else:
            evs[t] = bank
    if evs:
        say(f"recorded {len(evs)} x {len(next(iter(evs.values())))} evaluation episodes")
    replicates = range(cfg.first_seed, cfg.first_seed + cfg.train_seeds)
    calls: list[tuple[Any, tuple[Any, ...]]] = [
        (_job_replicate, (t, r, cfg, ev)) for t, ev in evs.items() for r in replicates
    ]
    calls += [(_job_posterior, (cfg, ev)) for ev in evs.values()]
    done = _pool_map(_call, calls, jobs, executor)
    reps_all, posts = done[: len(done) - len(evs)], done[len(done) - len(evs) :]
    results: dict[str, Any] = {}
    logs: dict[str, list[dict[str, float]]] = {}
    policies: dict[str, Any] = {}
    for i, (task, ev) in enumerate(evs.items()):
        reps = []
        for r, rep in zip(
            replicates, reps_all[i * cfg.train_seeds : (i + 1) * cfg.train_seeds], strict=True
        ):
            if isinstance(rep, JobFailure):
                lost(task, f"replicate {r}", rep)
            else:
                reps.append(rep)
        post = posts[i]
        if isinstance(post, JobFailure):
            lost(task, "posterior rule", post)
        if not reps or isinstance(post, JobFailure):
            say(f"left out: {task} (a job it needs failed)")
            continue
        for rep in reps:
            state = rep["learned"][cfg.reference_weight]["state"]
            pol = MLPPolicy(ev.obs.shape[2], [2], hidden=cfg.hidden, seed=0)
            pol.net.load_state_dict(torch.load(io.BytesIO(state), weights_only=True))
            rep["policy"] = pol
            logs[f"{task}/seed{rep['replicate']}"] = rep["logs"][cfg.reference_weight]
        policies[task] = (reps[0]["policy"], reps[0]["learned"][cfg.reference_weight]["config"])
        res = _task_results(task, cfg, ev, reps, post)
        res["live_check"] = _live_check(task, cfg, ev, reps, post)
        res["replicates"] = [rep["replicate"] for rep in reps]
        results[task] = res
        say(f"done: {task}")
    study = {
        "study": "learned-stopping",
        "version": 2,
        "env": "stop-v0",
        "env_options": ENV_OPTIONS,
        "config": {**vars(cfg), "weights": list(cfg.weights)},
        "seeds": seeds,
        "tasks": results,
        "missing": missing,
        "wall_s": time.perf_counter() - wall0,
        "parent_cpu_s": time.process_time() - cpu0,
        "machine": f"{platform.machine()}, {platform.python_version()}",
    }
    if out is not None:
        write_report(study, Path(out), force=True, logs=logs, policies=policies)
    return study


def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    return fn(*args)


def _apply(job: tuple[Callable[..., Any], tuple[Any, ...]]) -> Any:
    return job[0](*job[1])
