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

from orchestrace.credit.base import CreditTable, check_unit, root_agents, table, unit_members
from orchestrace.credit.reward import RewardLike, counterfactual_reward, finite_reward
from orchestrace.credit.shapley import (
    SampleBackends,
    check_samples,
    downstream_llm_keys,
    estimate,
    redraw,
    sample_stats,
    unit_starts,
)
from orchestrace.errors import ConfigError
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
    ) -> None:
        self.reward_fn = reward_fn
        self.backend = backend
        self.backend_options = dict(backend_options or {})
        self.rerun_checks = rerun_checks
        self.samples = check_samples(samples)

    def assign(self, trace: Trace, unit: str = "agent", reward: float | None = None) -> CreditTable:
        """Credit table at ``agent`` or ``message``, with an estimate per row."""
        from orchestrace.credit.counterfactual import CounterfactualTable
        from orchestrace.runtime.replay import DropMessage, Silence, fork

        unit = check_unit(unit)
        if unit not in ("agent", "message"):
            raise ConfigError(
                "leave-one-out credit removes agents or messages; for other units "
                "use uniform or discounted credit"
            )
        base = self._reward(trace, forked=False) if reward is None else finite_reward(reward)
        roots = set(root_agents(trace))
        backends = SampleBackends(self.backend, self.backend_options)
        units = [key for key in unit_members(trace, unit) if key not in roots]
        deterministic = bool(units) and backends.deterministic(trace)
        k_used = 1 if deterministic else self.samples
        values: dict[str, float] = {}
        estimates: dict[str, dict[str, Any]] = {}
        kept_of: dict[tuple[tuple[str, ...], int], float] = {}  # kept arms shared by units
        spent = {"all": 0, "unit": 0}  # backend calls in all, and for the current unit

        def run_fork(ivs: list[Any], k: int) -> float:
            res = fork(trace, ivs, backend=backends(trace, k), rerun_checks=self.rerun_checks)
            spent["all"] += res.backend_calls
            spent["unit"] += res.backend_calls
            return self._reward(res.trace)

        for key in units:
            iv = Silence(key) if unit == "agent" else DropMessage.of(trace, key)
            keys = downstream_llm_keys(trace, unit_starts(trace, unit, key))
            diffs: list[float] = []
            kept_rs: list[float] = []
            spent["unit"] = 0
            for k in range(k_used):
                if k == 0 or not keys:  # the recorded run is the kept side of draw 0
                    kept = base
                    removed = run_fork([iv], k)
                else:
                    again = redraw(keys)
                    if (keys, k) not in kept_of:
                        kept_of[(keys, k)] = run_fork([again], k)
                    kept = kept_of[(keys, k)]
                    removed = run_fork([again, iv], k)
                diffs.append(kept - removed)
                kept_rs.append(kept)
            e = estimate(diffs, deterministic)
            values[key] = e.pop("value")
            e["backend_calls"] = spent["unit"]
            e["kept"] = sum(kept_rs) / len(kept_rs)
            e["intervened"] = e["kept"] - values[key]
            estimates[key] = e
        stats = sample_stats(self.samples, k_used, backends, trace) if units else {}
        stats["backend_calls"] = spent["all"]
        plain = table(unit, values, reward=base, method=self.name, efficient=False, stats=stats)
        return CounterfactualTable(
            plain.rows, base, self.name, False, plain.stats, estimates=estimates
        )

    def _reward(self, trace: Trace, forked: bool = True) -> float:
        return counterfactual_reward(
            trace, self.reward_fn, rerun_checks=self.rerun_checks, forked=forked
        )
