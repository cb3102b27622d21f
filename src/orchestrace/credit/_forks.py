"""Forks of one recorded run as independent jobs on an executor.

A fork job is ``(interventions, k)``: replay the trace with the interventions on the backend of
sample ``k`` and score the forked run. Every job of a credit computation reads the same
:class:`ForkContext` (the trace, the backend spec, the reward), which an executor sends to each
worker once. A worker rebuilds the sample backends from the context the same way this process
does, so a job's result does not depend on where it ran.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.executors import Executor
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
            from orchestrace.credit.counterfactual import _Backends

            return _Backends(self.backend, self.backend_options)
        from orchestrace.credit.shapley import SampleBackends

        return SampleBackends(self.backend, self.backend_options)


#: Sample backends built in this worker, by context (a worker serves one computation at a time).
_FACTORIES: dict[tuple[str, str], Callable[[Trace, int], Any]] = {}


def _key(ctx: ForkContext) -> tuple[str, str]:
    return ctx.trace.trace_id, repr((ctx.sampler, ctx.backend, sorted(ctx.backend_options.items())))


def fork_job(ctx: ForkContext, job: ForkJob) -> tuple[int, float]:
    """Run one fork in a worker: ``(backend calls, reward of the forked run)``."""
    key = _key(ctx)
    factory = _FACTORIES.get(key)
    if factory is None:
        _FACTORIES.clear()
        factory = _FACTORIES[key] = ctx.factory()
    return _fork(ctx, factory, job)


def _fork(
    ctx: ForkContext, factory: Callable[[Trace, int], Any], job: ForkJob
) -> tuple[int, float]:
    from orchestrace.credit.reward import counterfactual_reward
    from orchestrace.runtime.replay import fork

    ivs, k = job
    res = fork(ctx.trace, ivs, backend=factory(ctx.trace, k), rerun_checks=ctx.rerun_checks)
    reward = counterfactual_reward(res.trace, ctx.reward_fn, rerun_checks=ctx.rerun_checks)
    return res.backend_calls, reward


def run_forks(
    ctx: ForkContext,
    jobs: Sequence[ForkJob],
    executor: Executor | None,
    factory: Callable[[Trace, int], Any],
) -> list[tuple[int, float]]:
    """Every job's ``(backend calls, reward)``, in job order.

    On no executor or the local one the forks run here with ``factory`` (the assigner's own
    backends); elsewhere the context goes to the workers, which must be able to unpickle it.

    Raises:
        ConfigError: The reward function or backend cannot be sent to worker processes.
        RuntimeError_: A fork failed (the executor's message names it).
    """
    if executor is None or executor.name == "local":
        return [_fork(ctx, factory, job) for job in jobs]
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
    out = executor.map(fork_job, list(jobs), shared=ctx, chunksize=chunk)
    return [(int(c), float(r)) for c, r in out]
