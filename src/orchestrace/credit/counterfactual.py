"""Counterfactual credit by replay: what the outcome loses without a unit.

* :class:`LeaveOneOutCredit` (difference rewards): ``credit(i) = R(run) - R(run without i)`` for
  agents (silenced) or messages (dropped). Not efficient.
* :class:`CounterfactualMessageCredit`: for each message ``m``,
  ``credit(m) = R(run) - E[R(run with m removed or replaced)]``. Each counterfactual is a fork of
  the recorded run in which only the calls downstream of ``m`` reach the backend; a message that
  nothing consumed therefore earns exactly 0. The expectation averages ``samples`` forks whose
  changed calls are drawn with different backend seeds (the simulator's seed plus ``k``). ``stats`` reports the backend calls
  made, the naive cost (a full re-run per message and sample) and the lower bound (the LLM calls
  downstream of each message, which any exact method must redo).

Changed calls reach the backend that recorded the trace (rebuilt from ``meta.backend``; see
:func:`orchestrace.runtime.replay.backend_for`) unless ``backend=`` names another; a trace whose
backend cannot be rebuilt is refused with an error naming ``--backend``.

Example:
    >>> from orchestrace.runtime import run
    >>> tr = run("debate", "arith", agents=3, seed=5, rounds=1, task_size=16).trace
    >>> t = CounterfactualMessageCredit().assign(tr, "message")
    >>> len(t.rows) == sum(e.type == "message" for e in tr.events), t.stats["backend_calls"] > 0
    (True, True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrace.credit.base import CreditTable, check_unit, root_agents, table, unit_members
from orchestrace.credit.reward import RewardLike, counterfactual_reward, finite_reward
from orchestrace.errors import ConfigError
from orchestrace.trace.model import Trace

__all__ = ["CounterfactualMessageCredit", "LeaveOneOutCredit", "llm_descendants"]


def llm_descendants(trace: Trace) -> dict[str, int]:
    """For each message id: how many LLM calls depend on it (directly or not)."""
    g = trace.graph
    n = g.n
    src, dst = g.dependency_edges()
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip(src.tolist(), dst.tolist(), strict=True):
        succ[u].append(v)
    is_llm = [e.type == "llm_call" for e in trace.events]
    out = {}
    for i, e in enumerate(trace.events):
        if e.type != "message":
            continue
        seen = {i}
        stack = [i]
        count = 0
        while stack:
            u = stack.pop()
            for v in succ[u]:
                if v not in seen:
                    seen.add(v)
                    count += is_llm[v]
                    stack.append(v)
        out[e.id] = count
    return out


class _Backends:
    """The backend of each sample, built once per trace (the recorded one by default)."""

    def __init__(self, backend: Any, options: Mapping[str, Any] | None) -> None:
        self.backend = backend
        self.options = dict(options or {})
        self._built: dict[tuple[str, int], Any] = {}

    def __call__(self, trace: Trace, k: int = 0) -> Any:
        from orchestrace.runtime.replay import backend_for

        first = self._built.get((trace.trace_id, 0))
        if first is None:
            first = backend_for(trace, self.backend, **self.options)
            self._built[(trace.trace_id, 0)] = first
        if k == 0 or getattr(first, "name", "") != "sim":
            return first  # a real backend draws its own samples; only the simulator is reseeded
        key = (trace.trace_id, k)
        if key not in self._built:
            self._built[key] = backend_for(
                trace, self.backend, seed_offset=k, check=False, **self.options
            )
        return self._built[key]


class LeaveOneOutCredit:
    """Difference rewards: the outcome minus the outcome without the unit (agent or message).

    Args:
        reward_fn: The reward (default: team reward).
        backend: Answers changed calls: ``None`` (the backend the trace records), a backend
            name (``sim``, ``openai``, ``hf``) or a backend object.
        backend_options: Options of a backend given by name, or replacing recorded ones.
        rerun_checks: Check answers the recorded verdict does not cover even where that runs
            them as code (sandboxed); without it such a fork raises ConfigError.
    """

    name = "loo"
    efficient = False

    def __init__(
        self,
        reward_fn: RewardLike | None = None,
        backend: Any = None,
        rerun_checks: bool = False,
        backend_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.reward_fn = reward_fn
        self.backend = backend
        self.backend_options = dict(backend_options or {})
        self.rerun_checks = rerun_checks

    def assign(self, trace: Trace, unit: str = "agent", reward: float | None = None) -> CreditTable:
        """Credit table at ``agent`` or ``message``."""
        from orchestrace.runtime.replay import DropMessage, Silence, fork

        unit = check_unit(unit)
        if unit not in ("agent", "message"):
            raise ConfigError(
                "leave-one-out credit removes agents or messages; for other units "
                "use uniform or discounted credit"
            )
        base = self._reward(trace, forked=False) if reward is None else finite_reward(reward)
        roots = set(root_agents(trace))
        values = {}
        calls = 0
        backends = _Backends(self.backend, self.backend_options)
        for key in unit_members(trace, unit):
            if key in roots:
                continue
            iv = Silence(key) if unit == "agent" else DropMessage.of(trace, key)
            res = fork(trace, [iv], backend=backends(trace), rerun_checks=self.rerun_checks)
            calls += res.backend_calls
            values[key] = base - self._reward(res.trace)
        return table(
            unit,
            values,
            reward=base,
            method=self.name,
            efficient=False,
            stats={"backend_calls": calls},
        )

    def _reward(self, trace: Trace, forked: bool = True) -> float:
        return counterfactual_reward(
            trace, self.reward_fn, rerun_checks=self.rerun_checks, forked=forked
        )


class CounterfactualMessageCredit:
    """Explicit counterfactual credit of every message (see the module docstring).

    Args:
        samples: Forks per message (their changed calls use backend seeds ``seed + k``).
        replace_with: ``None`` to remove the message; a string to replace its content (its
            data is replaced by ``None``).
        reward_fn: The reward (default: team reward).
        backend_factory: ``f(trace, k) -> backend`` for the k-th sample (default: ``backend``,
            the simulator reseeded with its seed plus ``k``).
        rerun_checks: Check answers the recorded verdict does not cover even where that runs
            them as code (sandboxed); without it such a fork raises ConfigError.
        backend: Answers changed calls: ``None`` (the backend the trace records), a backend
            name (``sim``, ``openai``, ``hf``) or a backend object.
        backend_options: Options of a backend given by name, or replacing recorded ones.
    """

    name = "counterfactual"
    efficient = False

    def __init__(
        self,
        samples: int = 1,
        replace_with: str | None = None,
        reward_fn: RewardLike | None = None,
        backend_factory: Any = None,
        rerun_checks: bool = False,
        backend: Any = None,
        backend_options: Mapping[str, Any] | None = None,
    ) -> None:
        if samples < 1:
            raise ConfigError(f"samples must be >= 1, got {samples}")
        if backend_factory is not None and (backend is not None or backend_options):
            raise ConfigError("pass either backend_factory or backend (with backend_options)")
        self.samples = samples
        self.replace_with = replace_with
        self.reward_fn = reward_fn
        self.backend = backend
        self.backend_options = dict(backend_options or {})
        self.backend_factory = backend_factory
        self.rerun_checks = rerun_checks

    def _reward(self, trace: Trace, forked: bool = True) -> float:
        return counterfactual_reward(
            trace, self.reward_fn, rerun_checks=self.rerun_checks, forked=forked
        )

    def assign(
        self, trace: Trace, unit: str = "message", reward: float | None = None
    ) -> CreditTable:
        """Credit table at ``message`` (the only unit this method defines)."""
        from orchestrace.runtime.replay import DropMessage, ReplaceMessage, fork

        if check_unit(unit) != "message":
            raise ConfigError(
                "counterfactual credit is defined for messages; use shapley or "
                "loo for agents, discounted or uniform for other units"
            )
        base = self._reward(trace, forked=False) if reward is None else finite_reward(reward)
        llm_calls = sum(e.type == "llm_call" for e in trace.events)
        descendants = llm_descendants(trace)
        values = {}
        calls = 0
        factory = self.backend_factory or _Backends(self.backend, self.backend_options)
        for mid in descendants:
            iv: Any
            if self.replace_with is None:
                iv = DropMessage.of(trace, mid)
            else:
                iv = ReplaceMessage.of(trace, mid, self.replace_with, None, replace_data=True)
            outcomes = []
            for k in range(self.samples):
                res = fork(
                    trace,
                    [iv],
                    backend=factory(trace, k),
                    rerun_checks=self.rerun_checks,
                )
                calls += res.backend_calls
                outcomes.append(self._reward(res.trace))
            values[mid] = base - sum(outcomes) / len(outcomes)
        naive = llm_calls * len(descendants) * self.samples
        lower = sum(descendants.values()) * self.samples
        stats = {
            "backend_calls": calls,
            "naive_calls": naive,
            "descendant_calls": lower,
            "vs_naive": calls / naive if naive else 0.0,
            "vs_descendants": calls / lower if lower else 0.0,
            "samples": self.samples,
        }
        return table("message", values, reward=base, method=self.name, efficient=False, stats=stats)
