"""Forks of one recorded run as independent jobs on an executor.

A fork job is ``(interventions, k)``: replay the trace with the interventions on the backend of
sample ``k`` and score the forked run. Every job of a credit computation reads the same
:class:`ForkContext` (the trace, the backend spec, the reward), which an executor sends to each
worker once. A worker rebuilds the sample backends from the context the same way this process
does, so a job's result does not depend on where it ran.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrace.credit._draws import SampleBackends
from orchestrace.credit.target import counterfactual_reward
from orchestrace.errors import ConfigError, OrchestraceError
from orchestrace.executors import Executor, JobFailure, _one_line
from orchestrace.rewards.base import prepare_outcome
from orchestrace.runtime import replay
from orchestrace.trace.model import Trace

#: A fork job: the interventions and the sample whose backend answers the changed calls.
ForkJob = tuple[list[Any], int]


@dataclass(frozen=True)
class ForkContext:
    """What every fork of one credit computation shares."""

    trace: Trace
    backend: Any
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    reward_fn: Any = None
    rerun_checks: bool = False
    #: ``counterfactual`` (sample ``k`` reseeds the simulator) or ``draws`` (loo, shapley).
    sampler: str = "draws"

    def factory(self) -> Callable[[Trace, int], Any]:
        """The backend of each sample, built as the assigner in this process builds it."""
        if self.sampler == "counterfactual":
            from orchestrace.credit.counterfactual import _Backends  # noqa: PLC0415  import cycle: orchestrace.credit.counterfactual imports this module

            return _Backends(self.backend, self.backend_options)

        return SampleBackends(self.backend, self.backend_options)


#: Sample backends built in this worker, by context (a worker serves one computation at a time).
_FACTORIES: dict[tuple[str, str], Callable[[Trace, int], Any]] = {}
#: The shared set-up of the trace this worker forks (its cache and task, built once).
_SETUPS: dict[tuple[str, str], replay.ForkSetup] = {}


def _key(ctx: ForkContext) -> tuple[str, str]:
    return ctx.trace.trace_id, repr((ctx.sampler, ctx.backend, sorted(ctx.backend_options.items())))


def fork_job(ctx: ForkContext, job: ForkJob) -> tuple[int, float]:
    """Run one fork in a worker: ``(backend calls, reward of the forked run)``."""
    key = _key(ctx)
    factory = _FACTORIES.get(key)
    if factory is None:
        _FACTORIES.clear()
        _SETUPS.clear()
        factory = _FACTORIES[key] = ctx.factory()
    setup = _SETUPS.get(key)
    if setup is None:
        setup = _SETUPS[key] = replay.ForkSetup(ctx.trace)
    return _fork(ctx, factory, job, setup)


@dataclass(frozen=True)
class _Score:
    """What a credit computation keeps of a fork: its backend calls and its reward.

    A module-level class (not a closure), so that a helper interpreter serving snapshot forks
    can receive it pickled.
    """

    reward_fn: Any
    rerun_checks: bool

    @property
    def portable(self) -> bool:
        """Whether a fresh interpreter scores a fork as this process would.

        The default reward reads the trace alone; a caller's reward function may read state
        of this process (a setting, a loaded model), which a helper interpreter lacks.
        """
        return self.reward_fn is None

    def prepare(self, trace: Trace) -> None:
        """Build what scoring forks of ``trace`` needs once, before the process is copied."""
        if self.reward_fn is None:
            prepare_outcome(trace)

    def __call__(self, res: replay.ForkResult) -> tuple[int, float]:
        reward = counterfactual_reward(res.trace, self.reward_fn, rerun_checks=self.rerun_checks)
        return res.backend_calls, reward


def _scorer(ctx: ForkContext) -> Callable[[replay.ForkResult], tuple[int, float]]:
    """What a credit computation keeps of a fork: its backend calls and its reward."""
    return _Score(ctx.reward_fn, ctx.rerun_checks)


def _fork(
    ctx: ForkContext,
    factory: Callable[[Trace, int], Any],
    job: ForkJob,
    setup: replay.ForkSetup,
) -> tuple[int, float]:
    """One fork re-executed in full, with the set-up every fork of the computation shares."""
    ivs, k = job
    answering = replay.backend_for(ctx.trace, factory(ctx.trace, k))
    res = setup.fork(ivs, answering, ctx.rerun_checks)
    return _scorer(ctx)(res)


def _from_snapshots(
    ctx: ForkContext,
    jobs: Sequence[ForkJob],
    factory: Callable[[Trace, int], Any],
    setup: replay.ForkSetup,
) -> dict[int, Callable[[], tuple[int, float]]]:
    """The jobs served from snapshots of one execution (:func:`replay.snapshot_forks`).

    Each gives, when called, the ``(backend calls, reward)`` the fork re-executed in full
    gives. The built-in reward is computed in the snapshot's copy; a reward function of the
    caller's is called here, in this process and in job order, as for a full re-execution
    (whatever it records or raises happens here). The jobs left out (a backend that is not
    the simulator, a fork whose copy failed) are re-executed in full by the caller.
    """
    todo: list[tuple[list[Any], Any]] = []
    where: list[int] = []
    for i, (ivs, k) in enumerate(jobs):
        try:
            backend = factory(ctx.trace, k)
        except Exception:  # raised again (or recorded) by the full re-execution
            continue
        todo.append((ivs, backend))
        where.append(i)
    if len(todo) < 2:  # one fork gains nothing from a shared prefix
        return {}
    if ctx.reward_fn is None:
        got = replay.snapshot_forks(setup, todo, _scorer(ctx), rerun_checks=ctx.rerun_checks)
        return {where[n]: functools.partial(_given, value) for n, value in got.items()}
    score = _scorer(ctx)
    forks = replay.snapshot_forks(setup, todo, _as_is, rerun_checks=ctx.rerun_checks)
    return {where[n]: functools.partial(score, res) for n, res in forks.items()}


def _as_is(res: replay.ForkResult) -> replay.ForkResult:
    """A fork's result, sent back whole (to be scored in this process)."""
    return res


def _given(value: tuple[int, float]) -> tuple[int, float]:
    return value


def run_forks(
    ctx: ForkContext,
    jobs: Sequence[ForkJob],
    executor: Executor | None,
    factory: Callable[[Trace, int], Any],
) -> list[tuple[int, float] | JobFailure]:
    """Every job's ``(backend calls, reward)``, in job order; a failed fork is a JobFailure.

    On no executor or the local one the forks run here with ``factory`` (the assigner's own
    backends); elsewhere the context goes to the workers, which must be able to unpickle it.
    A fork that raises (or whose worker died on every attempt) does not stop the others: its
    place holds a :class:`~orchestrace.executors.JobFailure` and the assigner leaves out the
    rows it was needed for (:func:`missing_rows`). An :class:`~orchestrace.errors.OrchestraceError`
    raised by a fork run here (bad input, the same for every fork) is raised as such.

    Raises:
        ConfigError: The reward function or backend cannot be sent to worker processes.
    """
    if executor is None or executor.name == "local":
        setup = replay.ForkSetup(ctx.trace)
        served = _from_snapshots(ctx, jobs, factory, setup)
        out: list[tuple[int, float] | JobFailure] = []
        for i, job in enumerate(jobs):
            try:
                out.append(served[i]() if i in served else _fork(ctx, factory, job, setup))
            except OrchestraceError:
                raise
            except Exception as err:  # recorded: the other forks still run
                out.append(JobFailure(i, _one_line(err)))
        return out
    if executor.name == "process":
        try:
            pickle.dumps(ctx)
        except Exception as err:
            raise ConfigError(
                f"the forks cannot go to worker processes: {type(err).__name__}: {err}; give a "
                "module-level reward function and a backend by name (--backend), or use "
                "--executor local"
            ) from None
    workers = executor.workers or 2
    chunk = max(1, len(jobs) // (workers * 4))
    done = executor.map(fork_job, list(jobs), shared=ctx, chunksize=chunk, on_error="record")
    return [r if isinstance(r, JobFailure) else (int(r[0]), float(r[1])) for r in done]


def _ok(result: tuple[int, float] | JobFailure) -> tuple[int, float]:
    """A fork's ``(backend calls, reward)`` (the caller has left out failed forks)."""
    assert not isinstance(result, JobFailure), result
    return result


def missing_rows(
    plan: Mapping[str, Sequence[Sequence[int | None] | None]],
    done: Sequence[tuple[int, float] | JobFailure],
) -> dict[str, dict[str, Any]]:
    """The rows a failed fork leaves without a value: ``{row id: {forks, error, attempts}}``.

    ``plan`` maps each row to the fork jobs of its samples (``None`` where a sample needs
    none); a row is missing when any of its forks failed.

    Example:
        >>> missing_rows({"m1": [(None, 0)], "m2": [(None, 1)]},
        ...              [(3, 1.0), JobFailure(1, "ValueError: boom")])
        {'m2': {'forks': [1], 'error': 'ValueError: boom', 'attempts': 1, 'kind': 'raised'}}
    """
    out: dict[str, dict[str, Any]] = {}
    for row, draws in plan.items():
        failed = [
            done[j]
            for entry in draws
            if entry is not None
            for j in entry
            if j is not None and isinstance(done[j], JobFailure)
        ]
        if failed:
            first = failed[0]
            assert isinstance(first, JobFailure)
            out[row] = {
                "forks": sorted({f.index for f in failed if isinstance(f, JobFailure)}),
                "error": first.error,
                "attempts": first.attempts,
                "kind": first.kind,
            }
    return out


def missing_note(missing: Mapping[str, Mapping[str, Any]], unit: str) -> str:
    """One line naming the rows left out and the first error (``""`` when none is missing).

    Example:
        >>> missing_note({"m2": {"forks": [1], "error": "ValueError: boom", "attempts": 1}}, "message")
        '1 message left out (a fork failed): m2 (fork 1: ValueError: boom)'
    """
    if not missing:
        return ""
    ids = list(missing)
    first = missing[ids[0]]
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    tries = f" after {first['attempts']} attempts" if first.get("attempts", 1) > 1 else ""
    return (
        f"{len(ids)} {unit}{'s' if len(ids) != 1 else ''} left out (a fork failed): {shown} "
        f"(fork {first['forks'][0]}: {first['error']}{tries})"
    )
