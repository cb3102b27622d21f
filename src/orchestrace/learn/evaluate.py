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

    On the ``sim`` backend the episodes run 32 at a time on one event loop (a
    :class:`~orchestrace.learn.vector.VectorEnv`), as the trainers collect them: a greedy
    :class:`~orchestrace.learn.policies.torch_policy.MLPPolicy` decides for all running
    episodes in one forward pass, a policy with ``reset()`` (the heuristics) acts through a
    fresh copy per episode. Each episode gives what it gives when played alone, so the scores
    are those of playing the episodes one after another, which is what happens for any other
    policy (one without ``reset()`` may carry state from one episode to the next, and a
    sampling policy draws from one stream in episode order) and on other backends. For the
    greedy network the batched forward pass rounds the last bits of the logits differently from
    a pass of one, which changes an action only where two choices are within about 1e-7 of
    each other.

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
    options = dict(env_options or {})
    order = [HELD_OUT + s * 1_000_003 + i for s in range(seeds) for i in range(episodes)]
    infos = _batched(policy, env_id, task, options, order)
    if infos is None:
        infos = _one_by_one(policy, env_id, task, options, order)
    per: dict[str, list[float]] = {"reward": [], "success": [], "tokens": [], "workers": []}
    for s in range(seeds):
        mine = infos[s * episodes : (s + 1) * episodes]
        for k, key in enumerate(per):
            per[key].append(float(np.mean([x[k] for x in mine])))
    r, rci = mean_ci(per["reward"])
    sc, sci = mean_ci(per["success"])
    t, tci = mean_ci(per["tokens"])
    return EvalResult(
        name or str(policy), r, rci, sc, sci, t, tci, float(np.mean(per["workers"])), seeds, per
    )


#: Episodes an evaluation on the ``sim`` backend runs at a time, and per collection call.
_BATCH = 32
_CHUNK = 4096
_Scores = tuple[float, float, float, float]


def _scores(info: Mapping[str, Any]) -> _Scores:
    """What an evaluation keeps of an episode's last ``info``."""
    return (
        float(info["r_perf"]),
        float(info["success"]),
        float(info["tokens"]),
        float(info["answers"]),
    )


def _one_by_one(
    policy: Any, env_id: str, task: str, options: dict[str, Any], seeds: list[int]
) -> list[_Scores]:
    """Each episode's scores, played one after another on one environment."""
    env = make_env(env_id, task=task, **options)
    out = []
    try:
        for seed in seeds:
            obs, info = env.reset(seed=seed)
            if hasattr(policy, "reset"):
                policy.reset()
            while True:
                obs, _r, term, trunc, info = env.step(policy.act(obs, info, env))
                if term or trunc:
                    break
            out.append(_scores(info))
    finally:
        env.close()
    return out


def _batched(
    policy: Any, env_id: str, task: str, options: dict[str, Any], seeds: list[int]
) -> list[_Scores] | None:
    """Each episode's scores, ``_BATCH`` at a time (``None``: not batchable)."""
    if options.get("backend", "sim") != "sim" or not hasattr(policy, "reset"):
        return None
    from orchestrace.learn.vector import VectorEnv  # noqa: PLC0415  only for sim batches

    mlp = _mlp_class()
    network = mlp is not None and isinstance(policy, mlp)
    if network and not policy.greedy:
        return None  # a sampling network draws from torch's global stream in episode order
    venv = VectorEnv(min(_BATCH, len(seeds)), env_id, task=task, **options)
    out: list[_Scores] = []
    try:
        for lo in range(0, len(seeds), _CHUNK):
            part = seeds[lo : lo + _CHUNK]
            if network:
                from orchestrace.learn.algorithms.collect import collect_batched  # noqa: PLC0415

                eps = collect_batched(venv, policy, part, range(len(part)), stream=0, greedy=True)
                out += [_scores(e.info) for e in eps]
            else:
                out += [_scores(r["info"]) for r in venv.rollouts(policy, part)]
    finally:
        venv.close()
    return out


def _mlp_class() -> type | None:
    """The network policy class, when its module is already loaded (it needs torch)."""
    import sys  # noqa: PLC0415

    mod = sys.modules.get("orchestrace.learn.policies.torch_policy")
    return getattr(mod, "MLPPolicy", None) if mod is not None else None


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
