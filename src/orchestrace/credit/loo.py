"""Leave-one-out credit (difference rewards), estimated from paired draws with an error bar.

``credit(i) = E[R | i plays] - E[R | i removed]`` for an agent (silenced: its messages dropped,
its return lost) or a message (dropped). Draw 0 is the recorded run: the kept side is the
recorded reward and the removed side a fork in which only calls whose inputs changed reach the
backend. Draw ``k >= 1`` draws again, in both arms, every LLM call the unit can influence (its
own calls and every call downstream of it); on the simulator both arms of draw ``k`` use the
recorded seed plus ``k`` (paired draws, common random numbers), so a call with the same inputs
gets the same answer in both. The credit is the mean of the ``K`` paired differences, with a
standard error and a Student-t 95% interval per unit. A backend that answers deterministically
needs one draw; a real backend that samples draws each arm afresh (``stats["paired"]`` false).
Not efficient: credits need not sum to the reward.

Example:
    >>> from orchestrace.runtime import run
    >>> tr = run("centralized", "arith", agents=3, seed=2, task_size=6).trace
    >>> t = LeaveOneOutCredit(samples=3).assign(tr, "agent")
    >>> sorted(t.by_unit("agent")), t.stats["samples"], t.stats["backend_calls"] > 0
    (['worker1', 'worker2', 'worker3'], 3, True)
    >>> all(e["se"] is not None and e["se"] >= 0 for e in t.estimates.values())
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrace.credit._draws import (
    SampleBackends,
    check_samples,
    downstream_llm_keys,
    estimate,
    redraw,
    sample_stats,
    unit_starts,
)
from orchestrace.credit._forks import ForkContext, _ok, missing_note, missing_rows, run_forks
from orchestrace.credit.base import (
    CreditTable,
    check_assign_args,
    root_agents,
    table,
    unit_members,
)
from orchestrace.credit.target import RewardLike, counterfactual_reward, finite_reward
from orchestrace.errors import ConfigError
from orchestrace.executors import Executor
from orchestrace.runtime.replay import DropMessage, Silence, check_replayable
from orchestrace.trace.model import Trace

__all__ = ["LeaveOneOutCredit"]


class LeaveOneOutCredit:
    """Difference rewards: the outcome minus the outcome without the unit (agent or message).

    Args:
        reward_fn: The reward (default: team reward).
        backend: Answers changed calls: ``None`` (the backend the trace records), a backend
            name (``sim``, ``openai``, ``hf``) or a backend object.
        rerun_checks: Check answers the recorded verdict does not cover even where that runs
            them as code (sandboxed); without it such a fork raises ConfigError.
        backend_options: Options of a backend given by name, or replacing recorded ones.
        samples: Paired draws per unit (K, ``--samples``); draw 0 is the recorded run.
        executor: Where the forks run (:mod:`orchestrace.executors`; default: this
            process). The table is the same on every executor.
        assume_deterministic: Take the backend as deterministic (one draw, ``se`` 0), e.g. a
            local engine with greedy decoding and a fixed seed (``--assume-deterministic``). A
            served model is otherwise taken as stochastic, even at temperature 0.
    """

    name = "loo"
    efficient = False

    def __init__(
        self,
        reward_fn: RewardLike | None = None,
        backend: Any = None,
        rerun_checks: bool = False,
        backend_options: Mapping[str, Any] | None = None,
        samples: int = 1,
        executor: Executor | None = None,
        assume_deterministic: bool = False,
    ) -> None:
        self.assume_deterministic = assume_deterministic
        self.reward_fn = reward_fn
        self.executor = executor
        self.backend = backend
        self.backend_options = dict(backend_options or {})
        self.rerun_checks = rerun_checks
        self.samples = check_samples(samples)

    def assign(self, trace: Trace, unit: str = "agent", reward: float | None = None) -> CreditTable:
        """Credit table at ``agent`` or ``message``, with an estimate per row."""
        from orchestrace.credit.counterfactual import CounterfactualTable  # noqa: PLC0415  import cycle: orchestrace.credit.counterfactual imports this module

        unit = check_assign_args(trace, unit)
        check_replayable(trace)
        if unit not in ("agent", "message"):
            raise ConfigError(
                "leave-one-out credit removes agents or messages; for other units "
                "use uniform or discounted credit"
            )
        base = self._reward(trace, forked=False) if reward is None else finite_reward(reward)
        roots = set(root_agents(trace))
        backends = SampleBackends(self.backend, self.backend_options, self.assume_deterministic)
        units = [key for key in unit_members(trace, unit) if key not in roots]
        deterministic = bool(units) and backends.deterministic(trace)
        k_used = 1 if deterministic else self.samples
        values: dict[str, float] = {}
        estimates: dict[str, dict[str, Any]] = {}
        # the forks first (each one a job; kept arms are shared by units with the same
        # downstream calls), then the estimates in order
        jobs: list[tuple[list[Any], int]] = []
        job_of: dict[Any, int] = {}

        def want(key: Any, ivs: list[Any], k: int) -> int:
            if key not in job_of:
                job_of[key] = len(jobs)
                jobs.append((ivs, k))
            return job_of[key]

        plan: dict[str, list[tuple[int | None, int]]] = {}
        for key in units:
            iv = Silence(key) if unit == "agent" else DropMessage.of(trace, key)
            keys = downstream_llm_keys(trace, unit_starts(trace, unit, key))
            plan[key] = []
            for k in range(k_used):
                if k == 0 or not keys:  # the recorded run is the kept side of draw 0
                    plan[key].append((None, want(("removed", key, k), [iv], k)))
                else:
                    again = redraw(keys)
                    kept_at = want(("kept", keys, k), [again], k)
                    plan[key].append((kept_at, want(("removed", key, k), [again, iv], k)))
        ctx = ForkContext(
            trace, self.backend, self.backend_options, self.reward_fn, self.rerun_checks
        )
        done = run_forks(ctx, jobs, self.executor, backends)
        missing = missing_rows(plan, done)
        charged: set[int] = set()
        spent = 0
        for key, draws in plan.items():
            if key in missing:  # a fork it needs failed: no value, listed under missing
                continue
            diffs: list[float] = []
            kept_rs: list[float] = []
            used = 0
            for kept_job, removed_job in draws:
                for j in (kept_job, removed_job):
                    if j is not None and j not in charged:
                        charged.add(j)
                        used += _ok(done[j])[0]
                kept = base if kept_job is None else _ok(done[kept_job])[1]
                diffs.append(kept - _ok(done[removed_job])[1])
                kept_rs.append(kept)
            spent += used
            # a difference of two team rewards (0 or 1) lies in [-1, 1]
            e = estimate(
                diffs, deterministic, 1.0 if self.reward_fn is None and reward is None else None
            )
            values[key] = e.pop("value")
            e["backend_calls"] = used
            e["kept"] = sum(kept_rs) / len(kept_rs)
            e["intervened"] = e["kept"] - values[key]
            estimates[key] = e
        stats = sample_stats(self.samples, k_used, backends, trace) if units else {}
        stats["backend_calls"] = spent
        if missing:
            stats["missing"] = missing
            stats["error"] = missing_note(missing, unit)
        plain = table(unit, values, reward=base, method=self.name, efficient=False, stats=stats)
        return CounterfactualTable(
            plain.rows, base, self.name, False, plain.stats, estimates=estimates
        )

    def _reward(self, trace: Trace, forked: bool = True) -> float:
        return counterfactual_reward(
            trace, self.reward_fn, rerun_checks=self.rerun_checks, forked=forked
        )
