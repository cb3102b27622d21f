"""Evaluate policies on held-out seeds, with confidence intervals.

Each of ``seeds`` evaluation seeds runs ``episodes`` episodes on task instances no training run
uses (seeds from ``10**9`` up; trainers draw theirs below). A policy's score on a seed is the
mean over its episodes; the table reports the mean over seeds with a 95% t-interval
(:func:`orchestrace.stats.mean_ci`, re-exported here with :func:`~orchestrace.stats.t95`).

Example:
    >>> from orchestrace.learn.policies import FixedN, KAgree
    >>> rows = compare({"fixed-1": FixedN(n=1), "agree-2": KAgree(k=2)}, "stop-v0",
    ...                task="multihop", seeds=2, episodes=10)
    >>> [r.name for r in rows][:1], rows[0].n_seeds
    (['agree-2'], 2)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from orchestrace.errors import ConfigError
from orchestrace.learn.env import make_env
from orchestrace.stats import mean_ci, t95

#: Most held-out episodes per policy one evaluation may ask for (about a day of CPU).
MAX_EPISODES = 100_000_000

__all__ = [
    "HELD_OUT",
    "MAX_EPISODES",
    "EvalResult",
    "compare",
    "evaluate",
    "format_table",
    "mean_ci",
    "t95",
]

#: First seed of held-out evaluation instances.
HELD_OUT = 10**9


@dataclass
class EvalResult:
    """A policy's held-out scores (means over seeds, with 95% half-widths)."""

    name: str
    reward: float
    reward_ci: float
    success: float
    success_ci: float
    tokens: float
    tokens_ci: float
    workers: float
    n_seeds: int
    per_seed: dict[str, list[float]] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {k: v for k, v in vars(self).items() if k != "per_seed"}


def evaluate(
    policy: Any,
    env_id: str = "stop-v0",
    *,
    task: str = "arith-mapreduce-v0",
    seeds: int = 10,
    episodes: int = 200,
    name: str | None = None,
    env_options: Mapping[str, Any] | None = None,
) -> EvalResult:
    """Score one policy (anything with ``act(obs, info, env)``) on held-out instances.

    Raises:
        ConfigError: ``seeds`` or ``episodes`` below 1, or more than :data:`MAX_EPISODES`
            episodes in all.
    """
    if seeds < 1 or episodes < 1:
        raise ConfigError(f"seeds and episodes must be >= 1, got {seeds} and {episodes}")
    if seeds * episodes > MAX_EPISODES:
        raise ConfigError(
            f"{seeds} seeds x {episodes} episodes is more than {MAX_EPISODES:,} episodes per "
            "policy; use fewer seeds or episodes"
        )
    env = make_env(env_id, task=task, **dict(env_options or {}))
    per: dict[str, list[float]] = {"reward": [], "success": [], "tokens": [], "workers": []}
    for s in range(seeds):
        rs, ok, tok, wk = [], [], [], []
        for i in range(episodes):
            obs, info = env.reset(seed=HELD_OUT + s * 1_000_003 + i)
            if hasattr(policy, "reset"):
                policy.reset()
            while True:
                obs, _r, term, trunc, info = env.step(policy.act(obs, info, env))
                if term or trunc:
                    break
            rs.append(info["r_perf"])
            ok.append(float(info["success"]))
            tok.append(float(info["tokens"]))
            wk.append(float(info["answers"]))
        per["reward"].append(float(np.mean(rs)))
        per["success"].append(float(np.mean(ok)))
        per["tokens"].append(float(np.mean(tok)))
        per["workers"].append(float(np.mean(wk)))
    env.close()
    r, rci = mean_ci(per["reward"])
    sc, sci = mean_ci(per["success"])
    t, tci = mean_ci(per["tokens"])
    return EvalResult(
        name or str(policy), r, rci, sc, sci, t, tci, float(np.mean(per["workers"])), seeds, per
    )


def compare(policies: Mapping[str, Any], env_id: str = "stop-v0", **kw: Any) -> list[EvalResult]:
    """Evaluate several policies on the same held-out seeds; best mean reward first."""
    rows = [evaluate(p, env_id, name=n, **kw) for n, p in policies.items()]
    return sorted(rows, key=lambda r: -r.reward)


def format_table(rows: list[EvalResult], title: str = "") -> str:
    """A Markdown table of evaluation results."""
    lines = [f"**{title}**", ""] if title else []
    lines += [
        "| policy | mean reward (95% CI) | success (95% CI) | tokens / episode | workers |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r.name} | {r.reward:.3f} ± {r.reward_ci:.3f} | "
            f"{r.success:.3f} ± {r.success_ci:.3f} | {r.tokens:,.0f} ± {r.tokens_ci:,.0f} | "
            f"{r.workers:.2f} |"
        )
    return "\n".join(lines)
