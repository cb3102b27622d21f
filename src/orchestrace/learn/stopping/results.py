"""The study's results: per-method summaries, spreads, paired differences and the live check.

Every method is scored on the same held-out records; the live check re-runs the first of them
in the real environment.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from orchestrace.learn.env import make_env
from orchestrace.learn.policies.posterior import PosteriorStop
from orchestrace.learn.stopping.bank import Bank, _rule_stops, rule_grid
from orchestrace.learn.stopping.config import DENSE_WEIGHTS, ENV_OPTIONS, FAMILIES, StudyConfig
from orchestrace.stats import mean_ci, wilson_interval


# ---------------------------------------------------------------------------- summaries
def _summary(res: dict[str, np.ndarray]) -> dict[str, Any]:
    n = len(res["success"])
    k = float(res["success"].sum())
    lo, hi = wilson_interval(k, n)
    tok, tok_ci = mean_ci(res["tokens"])
    rew, rew_ci = mean_ci(res["reward"])
    return {
        "success": k / n,
        "success_wilson": [lo, hi],
        "tokens": tok,
        "tokens_ci": tok_ci,
        "reward": rew,
        "reward_ci": rew_ci,
        "workers": float(np.mean(res["n"])),
        "episodes": n,
    }


def _replicated(per: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """Mean over replicates, the spread across them, and the Wilson interval of the mean."""
    rows = [_summary(p) for p in per]
    n = rows[0]["episodes"]
    out: dict[str, Any] = {"replicates": rows, "episodes": n, "n_replicates": len(rows)}
    for key in ("success", "tokens", "reward", "workers"):
        m, ci = mean_ci([r[key] for r in rows])
        out[key], out[f"{key}_spread"] = m, ci
    out["success_wilson"] = list(wilson_interval(out["success"] * n, n))
    out["tokens_ci"] = float(np.mean([r["tokens_ci"] for r in rows]))
    out["reward_ci"] = float(np.mean([r["reward_ci"] for r in rows]))
    return out


def _paired(a: list[dict[str, np.ndarray]], b: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """Reward difference ``a - b`` on the same evaluation episodes.

    ``spread``: 95% t-interval across replicates (training seeds against tuning replicates,
    paired by index); ``instances``: 95% interval over evaluation episodes of the
    replicate-averaged per-episode difference.
    """
    per_rep = [float(np.mean(x["reward"] - y["reward"])) for x, y in zip(a, b, strict=False)]
    mean, spread = mean_ci(per_rep)
    diff = np.mean([x["reward"] for x in a], axis=0) - np.mean([y["reward"] for y in b], axis=0)
    _, inst = mean_ci(diff)
    tok = float(np.mean([x["tokens"].mean() for x in a]) - np.mean([y["tokens"].mean() for y in b]))
    ok = float(
        np.mean([x["success"].mean() for x in a]) - np.mean([y["success"].mean() for y in b])
    )
    return {
        "mean": mean,
        "spread": spread,
        "instances": inst,
        "per_replicate": per_rep,
        "success": ok,
        "tokens": tok,
        "significant": bool(abs(mean) > max(spread, inst)),
    }


def _task_results(
    task: str,
    cfg: StudyConfig,
    ev: Bank,
    reps: list[dict[str, Any]],
    post: dict[float, np.ndarray],
) -> dict[str, Any]:
    algo = f"learned ({cfg.algo})"
    methods: dict[str, Any] = {}
    outcomes: dict[str, dict[float, list[dict[str, np.ndarray]]]] = {}
    for fam in FAMILIES:
        outcomes[fam] = {
            w: [ev.outcome(rp["rules"][fam][w][1], w) for rp in reps] for w in cfg.weights
        }
        methods[fam] = {
            "kind": "tuned rule",
            "by_weight": {
                str(w): {
                    **_replicated(outcomes[fam][w]),
                    "rules": [str(rp["rules"][fam][w][0]) for rp in reps],
                }
                for w in cfg.weights
            },
        }
    outcomes[algo] = {
        w: [ev.outcome(rp["learned"][w]["stops"], w) for rp in reps] for w in cfg.weights
    }
    methods[algo] = {
        "kind": "learned",
        "by_weight": {str(w): _replicated(outcomes[algo][w]) for w in cfg.weights},
    }
    for name, stops in (
        ("posterior (oracle reference)", post),
        ("hindsight (not causal)", {w: ev.hindsight(w) for w in cfg.weights}),
    ):
        outcomes[name] = {w: [ev.outcome(stops[w], w)] for w in cfg.weights}
        methods[name] = {
            "kind": "reference",
            "by_weight": {str(w): _replicated(outcomes[name][w]) for w in cfg.weights},
        }
    ref = cfg.reference_weight
    comparisons = {
        f"{algo} - {other}": _paired(outcomes[algo][ref], outcomes[other][ref])
        for other in FAMILIES
    }
    comparisons[f"posterior (oracle reference) - {algo}"] = _paired(
        outcomes["posterior (oracle reference)"][ref] * len(reps), outcomes[algo][ref]
    )
    comparisons["posterior (oracle reference) - size-aware"] = _paired(
        outcomes["posterior (oracle reference)"][ref] * len(reps), outcomes["size-aware"][ref]
    )
    # every rule threshold on the evaluation records (descriptive: picked on nothing)
    sweep = []
    for fam, rules in rule_grid(ev.decisions - 1).items():
        for rule in rules:
            o = ev.outcome(_rule_stops(rule, ev), ref)
            sweep.append(
                {
                    "family": fam,
                    "rule": str(rule),
                    "success": float(o["success"].mean()),
                    "tokens": float(o["tokens"].mean()),
                }
            )
    dense = []
    for w in DENSE_WEIGHTS:
        o = ev.outcome(post[w], w)
        dense.append((float(o["tokens"].mean()), float(o["success"].mean())))
    dominated = _dominance(methods, sweep, cfg.weights, dense)
    return {
        "task": task,
        "methods": methods,
        "comparisons": comparisons,
        "sweep": sweep,
        "posterior_dominance": dominated,
        "cpu_s": {
            "record": float(sum(rp["record_cpu_s"] for rp in reps)),
            "train": float(sum(rp["train_cpu_s"] for rp in reps)),
        },
    }


def _frontier_at(points: list[tuple[float, float]], tokens: float) -> float:
    """Best success among ``points`` with at most ``tokens``, linearly interpolated."""
    pts = sorted(points)
    if not pts or tokens < pts[0][0]:
        return -math.inf
    best = -math.inf
    for (x0, y0), (x1, y1) in itertools.pairwise(pts):
        if x0 <= tokens:
            best = max(best, y0)
        if x0 <= tokens <= x1 and x1 > x0:
            best = max(best, y0 + (y1 - y0) * (tokens - x0) / (x1 - x0))
    if pts[-1][0] <= tokens:
        best = max(best, pts[-1][1])
    return best


def _dominance(
    methods: dict[str, Any],
    sweep: list[dict[str, Any]],
    weights: Sequence[float],
    curve: list[tuple[float, float]],
) -> dict[str, Any]:
    """How far each rule's success exceeds the posterior rule's curve at the rule's tokens.

    ``curve`` is the posterior rule's (tokens, success) at :data:`DENSE_WEIGHTS`, on the
    evaluation records; a rule at ``t`` tokens is compared with the best the curve reaches at
    ``t`` tokens or fewer (linear between its points). ``tuned``: the rules each family tuned
    on its own seeds (every replicate, every weight); ``sweep``: every threshold of the grid,
    on the evaluation records themselves (picked after the fact, so favoured).
    """

    def worst(points: list[tuple[str, float, float]]) -> dict[str, Any]:
        out: dict[str, Any] = {"excess": -math.inf}
        for name, tok, ok in points:
            gap = ok - _frontier_at(curve, tok)
            if gap > out["excess"]:
                out = {"excess": gap, "rule": name, "tokens": tok, "success": ok}
        return out

    tuned = [
        (f"{fam} w={w:g} replicate {i}", rep["tokens"], rep["success"])
        for fam in FAMILIES
        for w in weights
        for i, rep in enumerate(methods[fam]["by_weight"][str(w)]["replicates"])
    ]
    post_hoc = [(r["rule"], r["tokens"], r["success"]) for r in sweep]
    return {"curve": curve, "tuned": worst(tuned), "sweep": worst(post_hoc)}


# ---------------------------------------------------------------------------- live check
def _live_check(
    task: str, cfg: StudyConfig, ev: Bank, reps: list[dict[str, Any]], post: dict[float, Any]
) -> dict[str, Any]:
    """Re-run methods in the real environment on the first evaluation instances."""
    n = min(cfg.live_episodes, len(ev))
    w = cfg.reference_weight
    rep = reps[0]
    policies: dict[str, tuple[Any, np.ndarray]] = {fam: rep["rules"][fam][w] for fam in FAMILIES}
    policies["posterior"] = (
        PosteriorStop(token_cost=w, horizon=cfg.horizon, samples=cfg.samples),
        post[w],
    )
    learned = rep.get("policy")
    if learned is not None:
        policies["learned"] = (learned, rep["learned"][w]["stops"])
    env = make_env("stop-v0", task=task, token_cost=w, **ENV_OPTIONS)
    mismatches, checked = 0, 0
    details: list[str] = []
    try:
        for name, (pol, stops) in policies.items():
            want = ev.outcome(stops, w)
            for e in range(n):
                obs, info = env.reset(seed=int(ev.seeds[e]))
                if hasattr(pol, "reset"):
                    pol.reset()
                while True:
                    obs, reward, term, trunc, info = env.step(pol.act(obs, info, env))
                    if term or trunc:
                        break
                checked += 1
                got = (bool(info["success"]), float(info["tokens"]), round(float(reward), 9))
                exp = (
                    bool(want["success"][e]),
                    float(want["tokens"][e]),
                    round(float(want["reward"][e]), 9),
                )
                if got != exp or info["answers"] != want["n"][e]:
                    mismatches += 1
                    if len(details) < 5:
                        details.append(f"{name} seed {ev.seeds[e]}: live {got}, replay {exp}")
    finally:
        env.close()
    return {"episodes": checked, "mismatches": mismatches, "examples": details}
