"""PARL, the parallel-agent RL orchestration reward: ``r = r_perf + λ1·r_parallel + λ2·r_finish``.

* ``r_perf``: the task outcome (R1), optionally minus ``latency_weight`` times the Critical Steps
  over ``steps_budget`` (latency is counted along the critical path, not in total steps).
* ``r_parallel`` = ``1 - CriticalSteps / TotalSteps``: the share of all agent steps taken off the
  critical path (0 for a serial run; near 1 for a wide, shallow one). It rewards spawning
  parallel sub-agents, against serial collapse.
* ``r_finish``: the share of spawned sub-agents that finished their work (returned without
  failing, before any budget stop), against spurious spawning.
* ``λ1``, ``λ2``: numbers or :class:`Anneal` schedules; PARL anneals them to 0 so training ends
  on the task reward alone. Pass ``step=`` when calling the reward.

Example:
    >>> from orchestrace.runtime import run
    >>> tr = run("centralized", "arith", agents=8, seed=1).trace
    >>> c = parl_components(tr)
    >>> sorted(c), 0 < c["r_parallel"] < 1, c["r_finish"]
    (['critical_steps', 'r_finish', 'r_parallel', 'r_perf', 'total_steps'], True, 1.0)
    >>> lam = Anneal(0.2, 0.0, steps=100)
    >>> lam(0), lam(50), lam(100), lam(1000)
    (0.2, 0.1, 0.0, 0.0)
    >>> r = parl_reward(lambda1=lam, lambda2=0.0)
    >>> r([tr], step=100) == [c["r_perf"]]
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.rewards.base import RewardFn, _Fn, register, team_reward
from orchestrace.trace.model import Trace

__all__ = ["Anneal", "parl_components", "parl_reward"]


@dataclass(frozen=True)
class Anneal:
    """A schedule from ``start`` to ``end`` over ``steps`` training steps.

    Args:
        start: Value at step 0.
        end: Value from step ``steps`` on.
        steps: Length of the schedule.
        kind: ``linear``, ``cosine`` or ``exp`` (geometric, ``end`` must be > 0 for exp... or
            decays to 0 as ``start * 0.01 ** (step / steps)`` when ``end`` is 0).
    """

    start: float
    end: float = 0.0
    steps: int = 1000
    kind: str = "linear"

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ConfigError(f"Anneal steps must be >= 1, got {self.steps}")
        if self.kind not in ("linear", "cosine", "exp"):
            raise ConfigError(f"Anneal kind must be linear, cosine or exp, got {self.kind!r}")

    def __call__(self, step: int) -> float:
        """The value at training ``step``."""
        x = min(max(step, 0) / self.steps, 1.0)
        if x >= 1.0:
            return self.end
        if self.kind == "linear":
            return self.start + (self.end - self.start) * x
        if self.kind == "cosine":
            return self.end + (self.start - self.end) * 0.5 * (1 + math.cos(math.pi * x))
        floor = self.end if self.end > 0 else self.start * 0.01
        return self.start * (floor / self.start) ** x if self.start > 0 else self.end


def _value(lam: float | Anneal, step: int) -> float:
    return lam(step) if isinstance(lam, Anneal) else float(lam)


def parl_components(
    trace: Trace,
    *,
    latency_weight: float = 0.0,
    steps_budget: int | None = None,
    rerun_checks: bool = False,
) -> dict[str, float]:
    """``r_perf``, ``r_parallel``, ``r_finish`` and the step counts behind them.

    ``r_perf`` counts an unknown outcome (see :func:`orchestrace.rewards.base.outcome`) as 0;
    :func:`parl_reward` gives ``None`` for such a run instead.
    """
    return _components(
        trace, latency_weight=latency_weight, steps_budget=steps_budget, rerun_checks=rerun_checks
    )[0]


def _components(
    trace: Trace, *, latency_weight: float, steps_budget: int | None, rerun_checks: bool
) -> tuple[dict[str, float], bool]:
    g = trace.graph
    structure = g.step_structure()
    total = structure.total_steps
    cs = structure.critical_steps()
    team = team_reward()([trace], rerun_checks=rerun_checks)[0]
    perf = team or 0.0
    if latency_weight and steps_budget:
        perf -= latency_weight * min(1.0, cs / steps_budget)
    r_parallel = 1.0 - cs / total if total else 0.0
    spawned = [e.to for e in trace.events if e.type == "spawn" and e.to]
    returned = {e.agent for e in trace.events if e.type == "return"}
    failed = {e.agent for e in trace.events if e.type == "despawn" and e.error}
    finished = sum(1 for a in spawned if a in returned and a not in failed)
    r_finish = finished / len(spawned) if spawned else 0.0
    return {
        "r_perf": perf,
        "r_parallel": r_parallel,
        "r_finish": r_finish,
        "critical_steps": float(cs),
        "total_steps": float(total),
    }, team is not None


@register("parl", "PARL")
def parl_reward(
    lambda1: float | Anneal = 0.1,
    lambda2: float | Anneal = 0.1,
    latency_weight: float = 0.0,
    steps_budget: int | None = None,
) -> RewardFn:
    """The PARL reward ``r_perf + λ1·r_parallel + λ2·r_finish`` (call with ``step=``).

    ``None`` for a run whose outcome is unknown (see :func:`orchestrace.rewards.base.outcome`).
    """
    if latency_weight < 0:
        raise ConfigError("latency_weight must be >= 0")

    def score(tr: Trace, step: int = 0, rerun_checks: bool = False, **_: Any) -> float | None:
        c, known = _components(
            tr, latency_weight=latency_weight, steps_budget=steps_budget, rerun_checks=rerun_checks
        )
        if not known:
            return None
        return (
            c["r_perf"]
            + _value(lambda1, step) * c["r_parallel"]
            + _value(lambda2, step) * c["r_finish"]
        )

    return _Fn(
        "parl",
        score,
        {
            "lambda1": lambda1,
            "lambda2": lambda2,
            "latency_weight": latency_weight,
            "steps_budget": steps_budget,
        },
    )
