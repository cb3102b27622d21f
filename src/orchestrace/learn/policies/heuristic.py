"""Heuristic baselines for each orchestration decision.

A policy maps ``(observation, info)`` to an action of the environment. Heuristics read the raw
state in ``info`` (answers so far, agreement, rounds) and build a full decision:

* O1/O5 :class:`FixedN`: one worker per round until ``n`` answers, then stop.
* O5 :class:`KAgree`: one worker per round until ``k`` answers agree (or the team is spent).
* O5 :class:`ConfThreshold`: stop once the leading answer's confidence reaches ``tau``
  (optionally: or ``k`` agree).
* O1 :class:`MaxParallel`: ``n`` workers at once in the first round, then stop.
* O2 ``roles="round_robin"``: cycle novice, worker, expert across rounds.
* O4 ``aggregate="vote"``: majority vote.

Example:
    >>> from orchestrace.learn.env import make_env
    >>> env = make_env("stop-v0", task="multihop")
    >>> obs, info = env.reset(seed=0)
    >>> policy = KAgree(2)
    >>> steps = 0
    >>> while True:
    ...     obs, r, term, trunc, info = env.step(policy.act(obs, info, env))
    ...     steps += 1
    ...     if term or trunc: break
    >>> info["top"] >= 2 or info["answers"] == env.config.max_workers
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrace.errors import ConfigError
from orchestrace.learn.env import ROLES, SPAWNS, OrchestrationEnv

__all__ = [
    "ConfThreshold",
    "FixedN",
    "Heuristic",
    "KAgree",
    "MaxParallel",
    "SizeAware",
    "heuristics",
]


@dataclass(kw_only=True)
class Heuristic:
    """A decision rule. Subclasses set ``stop`` (and may change ``spawn``)."""

    role: str = "worker"
    comm: str = "none"
    aggregate: str = "vote"
    name: str = "heuristic"

    def reset(self) -> None:
        """Forget per-episode state."""

    def stop(self, info: dict[str, Any], env: OrchestrationEnv) -> bool:
        """Whether to stop now."""
        raise NotImplementedError

    def spawn(self, info: dict[str, Any], env: OrchestrationEnv) -> int:
        """How many workers this round."""
        return 1

    def pick_role(self, info: dict[str, Any]) -> str:
        """The role of this round's workers."""
        if self.role == "round_robin":
            return ROLES[info["rounds"] % len(ROLES)]
        return self.role

    def act(self, obs: np.ndarray, info: dict[str, Any], env: OrchestrationEnv) -> Any:
        """The action of ``env`` this rule takes."""
        decision = {
            "spawn": self.spawn(info, env),
            "role": self.pick_role(info),
            "comm": self.comm,
            "aggregate": self.aggregate,
            "stop": self.stop(info, env),
        }
        return env.encode(decision)


@dataclass
class FixedN(Heuristic):
    """One worker per round until ``n`` answers, then stop."""

    n: int = 3
    name: str = "fixed"

    def stop(self, info: dict[str, Any], env: OrchestrationEnv) -> bool:
        """Whether to stop now."""
        return bool(info["answers"] >= self.n)

    def __str__(self) -> str:
        return f"fixed-{self.n}"


@dataclass
class KAgree(Heuristic):
    """One worker per round until ``k`` answers agree."""

    k: int = 2
    name: str = "kagree"

    def stop(self, info: dict[str, Any], env: OrchestrationEnv) -> bool:
        """Whether to stop now."""
        return bool(info["top"] >= self.k or info["answers"] >= env.config.max_workers)

    def __str__(self) -> str:
        return f"agree-{self.k}"


@dataclass
class MaxParallel(Heuristic):
    """Always max parallel: ``n`` workers at once, then stop."""

    n: int = 8
    name: str = "parallel"

    def spawn(self, info: dict[str, Any], env: OrchestrationEnv) -> int:
        """How many workers this round."""
        allowed = [s for s in SPAWNS if s <= self.n]
        return max(allowed)

    def stop(self, info: dict[str, Any], env: OrchestrationEnv) -> bool:
        """Whether to stop now."""
        return bool(info["answers"] > 0 or info["rounds"] > 0)

    def __str__(self) -> str:
        return f"parallel-{self.n}"


@dataclass
class ConfThreshold(Heuristic):
    """Stop once the leading answer has a confidence of at least ``tau`` (or ``k`` agree)."""

    tau: float = 0.8
    k: int | None = None
    name: str = "conf"

    def stop(self, info: dict[str, Any], env: OrchestrationEnv) -> bool:
        """Whether to stop now."""
        sure = info["answers"] >= 1 and info["top_conf"] >= self.tau
        agreed = self.k is not None and info["top"] >= self.k
        return bool(sure or agreed or info["answers"] >= env.config.max_workers)

    def __str__(self) -> str:
        return f"conf-{self.tau}" + (f"-or-agree-{self.k}" if self.k else "")


@dataclass
class SizeAware(Heuristic):
    """One stopping rule per range of task sizes (the size the environment shows).

    ``buckets`` are inclusive ``(lo, hi)`` size ranges and ``rules`` the rule of each; a size
    outside every range uses the rule of the nearest one.

    Example:
        >>> rule = SizeAware(buckets=((1, 2), (3, 5)), rules=(KAgree(k=2), FixedN(n=1)))
        >>> str(rule)
        'size-aware(1-2: agree-2; 3-5: fixed-1)'
        >>> str(rule.rule_for(4)), str(rule.rule_for(9))
        ('fixed-1', 'fixed-1')
    """

    buckets: tuple[tuple[int, int], ...] = ()
    rules: tuple[Heuristic, ...] = ()
    name: str = "size-aware"

    def __post_init__(self) -> None:
        if not self.buckets or len(self.buckets) != len(self.rules):
            raise ConfigError("SizeAware needs one rule per size bucket, and at least one bucket")

    def rule_for(self, size: int) -> Heuristic:
        """The rule of the bucket holding ``size`` (else of the nearest bucket)."""
        dist = [
            0 if lo <= size <= hi else min(abs(size - lo), abs(size - hi))
            for lo, hi in self.buckets
        ]
        return self.rules[int(np.argmin(dist))]

    def stop(self, info: dict[str, Any], env: OrchestrationEnv) -> bool:
        """Whether to stop now: the rule of this episode's task size decides."""
        return self.rule_for(int(info["size"])).stop(info, env)

    def __str__(self) -> str:
        parts = [f"{lo}-{hi}: {r}" for (lo, hi), r in zip(self.buckets, self.rules, strict=True)]
        return "size-aware(" + "; ".join(parts) + ")"


def heuristics(kind: str = "stopping") -> list[Heuristic]:
    """The baseline families.

    ``stopping``: fixed-N, k-agree, confidence threshold and k-agree-or-confidence; ``all``: also
    max-parallel, round-robin roles, broadcast.
    """
    out: list[Heuristic] = [FixedN(n=n) for n in range(1, 8)]
    out += [KAgree(k=k) for k in (2, 3, 4)]
    out += [ConfThreshold(tau=t) for t in (0.7, 0.75, 0.8, 0.85, 0.9)]
    out += [ConfThreshold(tau=t, k=k) for k in (2, 3) for t in (0.75, 0.8, 0.85, 0.9)]
    if kind == "all":
        out += [MaxParallel(n=n) for n in (2, 4, 8)]
        out += [KAgree(k=2, role="round_robin"), KAgree(k=2, comm="broadcast")]
    return out
