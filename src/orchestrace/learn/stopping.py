"""The learned-stopping study (O5): trained policies against tuned rules, on equal data.

The question: when should an orchestrator stop asking workers for answers? The study compares,
per task of ``stop-v0``:

* **rules** of five families, each tuned on its own seeds: fixed-N, k-agree, confidence
  threshold, confidence-or-k-agree, and **size-aware** (the best rule of all those families
  per range of task sizes, which the environment shows);
* **learned** policies (PPO by default), trained on their own seeds, one per training seed;
* two **references that are not baselines**: the posterior rule
  (:class:`~orchestrace.learn.policies.posterior.PosteriorStop`, which knows the simulator's
  generative model) and the hindsight optimum (the best stopping point of each episode,
  chosen after seeing it: no causal policy can reach it).

**Equal data.** In ``stop-v0`` the workers' answers do not depend on when the orchestrator
stops: one episode that never stops records everything any stopping policy would see on that
task instance (observations, answers, confidences, tokens) and what stopping at each point
would score. Each training seed and each tuning replicate gets the records of ``budget`` task
instances of its own (seeds disjoint from each other and from evaluation): a policy trains on
episodes replayed from its records (several passes), a rule family is scored exactly on its
records at every threshold and the best is kept. Evaluation replays the held-out records of
``eval_seeds x episodes`` task instances (the instances ``orchestrace evaluate`` uses), and a
live check re-runs every method in the real environment on the first of them and counts any
disagreement with the replay (it must be 0).

**Pareto curves.** The reward is ``success - w x tokens / 1000``. For each token weight ``w``
of ``weights`` every method is tuned or trained again (rules pick their threshold for ``w``,
the policy trains with ``token_cost = w``, the posterior rule prices a worker with ``w``), so
each method gives a curve of (tokens, success) points.

Outputs (``write_report``): ``results.json`` (everything, per replicate), ``results.md``
(tables), ``pareto.csv`` (one row per method, weight and replicate), ``sweep.csv`` (every rule
threshold on the evaluation records), ``pareto.png``, ``curves.png`` and ``train.csv`` (PPO
learning curves at the reference weight), ``policy-<task>.pt`` (training seed 0 at the
reference weight, loadable with ``orchestrace evaluate``).

Example:
    >>> tiny = StudyConfig(budget=48, train_seeds=2, train_episodes=192, weights=(0.1,),
    ...                    eval_seeds=1, episodes=16, live_episodes=4, samples=50)
    >>> study = run_study(["multihop"], config=tiny, jobs=1)
    >>> res = study["tasks"]["multihop-v0"]
    >>> sorted(res["methods"])[:3]
    ['agree', 'any-rule', 'conf-or-agree']
    >>> res["live_check"]["mismatches"]
    0
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import platform
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from orchestrace.errors import ConfigError
from orchestrace.executors import Executor
from orchestrace.learn.evaluate import HELD_OUT
from orchestrace.learn.policies.heuristic import ConfThreshold, FixedN, Heuristic, KAgree, SizeAware
from orchestrace.runtime.tasks import make_task
from orchestrace.stats import mean_ci, wilson_interval

__all__ = [
    "Bank",
    "StudyConfig",
    "eval_seeds",
    "record_bank",
    "rule_grid",
    "run_study",
    "summary_table",
    "train_seeds",
    "tune_seeds",
    "write_report",
]

DEFAULT_TASKS = ("arith", "search", "multihop")
#: First seed of the tuning instances of the rules (training seeds start at 0, evaluation
#: instances at :data:`~orchestrace.learn.evaluate.HELD_OUT`).
TUNE_BASE = 1_500_000_000
#: Stride between the instance seeds of two training seeds (as the trainers use).
STRIDE = 10_000_019
#: Token weights of the posterior rule's dense curve (the dominance check): from "never
#: mind the tokens" to "one worker is already too many".
DENSE_WEIGHTS = (
    0.0,
    0.01,
    0.02,
    0.035,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.6,
    1.0,
    2.0,
    100.0,
)
#: The rule families, in table order.
FAMILIES = ("fixed", "agree", "confidence", "conf-or-agree", "any-rule", "size-aware")
#: Environment settings of the study: the reward is ``r_perf`` alone (no PARL shaping terms)
#: and the simulator's verifiers decide for themselves (stop-v0 calls none of them: it votes).
ENV_OPTIONS: dict[str, Any] = {
    "lambda1": 0.0,
    "lambda2": 0.0,
    "backend_options": {"oracle_verifiers": False},
}


@dataclass
class StudyConfig:
    """Budgets of the study (defaults: the committed run; ``quick()``: the smoke test).

    Attributes:
        budget: Task instances per training seed and per tuning replicate (equal data).
        train_seeds: Training seeds per learned policy (and tuning replicates per rule family).
        train_episodes: Episodes each training run plays (replayed from its ``budget`` records).
        weights: Token weights ``w`` of the reward ``success - w x tokens / 1000``.
        reference_weight: The weight of the headline table (the environment's default).
        eval_seeds: Held-out evaluation seeds (as ``orchestrace evaluate --seeds``).
        episodes: Episodes per evaluation seed.
        live_episodes: Evaluation instances re-run live per method (the replay check).
        algo: Trainer (``ppo``, ``grpo``, ``reinforce``).
        hidden: Policy hidden width.
        horizon: Look-ahead of the posterior rule (workers).
        samples: Monte-Carlo samples of the posterior rule per decision.
        size_buckets: Size ranges of the size-aware rules (fewer when a task has fewer sizes).
        first_seed: First training seed (and tuning replicate): they run from ``first_seed``
            to ``first_seed + train_seeds - 1``.
    """

    budget: int = 1024
    train_seeds: int = 5
    train_episodes: int = 8192
    weights: tuple[float, ...] = (0.05, 0.1, 0.2, 0.4)
    reference_weight: float = 0.1
    eval_seeds: int = 10
    episodes: int = 200
    live_episodes: int = 40
    algo: str = "ppo"
    hidden: int = 64
    horizon: int = 9
    samples: int = 400
    size_buckets: int = 6
    first_seed: int = 0

    def __post_init__(self) -> None:
        for name in (
            "budget",
            "train_seeds",
            "train_episodes",
            "eval_seeds",
            "episodes",
            "hidden",
            "horizon",
            "samples",
            "size_buckets",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if isinstance(self.first_seed, bool) or self.first_seed < 0:
            raise ConfigError(f"first_seed must be an integer >= 0, got {self.first_seed!r}")
        if self.live_episodes < 0:
            raise ConfigError(f"live_episodes must be >= 0, got {self.live_episodes}")
        if not self.weights or any(not math.isfinite(w) or w < 0 for w in self.weights):
            raise ConfigError(f"weights must be finite numbers >= 0, got {self.weights}")
        self.weights = tuple(sorted(set(float(w) for w in self.weights)))
        if self.reference_weight not in self.weights:
            raise ConfigError(
                f"reference_weight {self.reference_weight} must be one of the weights "
                f"{list(self.weights)}"
            )

    @classmethod
    def quick(cls) -> StudyConfig:
        """A smoke-test size (seconds per task): the same pipeline, small budgets."""
        return cls(
            budget=192,
            train_seeds=2,
            train_episodes=3072,
            weights=(0.1, 0.4),
            eval_seeds=2,
            episodes=40,
            live_episodes=15,
            samples=100,
            size_buckets=3,
        )


# ---------------------------------------------------------------------------- seeds
def train_seeds(seed: int, budget: int) -> list[int]:
    """Instance seeds of training seed ``seed`` (as ``Trainer.next_seeds`` draws them)."""
    return [seed * STRIDE + 1 + i for i in range(budget)]


def tune_seeds(replicate: int, budget: int) -> list[int]:
    """Instance seeds of tuning replicate ``replicate`` of the rules."""
    return [TUNE_BASE + replicate * STRIDE + i for i in range(budget)]


def eval_seeds(seeds: int, episodes: int) -> list[int]:
    """Held-out instance seeds: those of :func:`~orchestrace.learn.evaluate.evaluate`."""
    return [HELD_OUT + s * 1_000_003 + i for s in range(seeds) for i in range(episodes)]


def _check_disjoint(cfg: StudyConfig) -> dict[str, Any]:
    """The three seed sets are pairwise disjoint (and each replicate's from the others')."""
    reps = range(cfg.first_seed, cfg.first_seed + cfg.train_seeds)
    tr = [set(train_seeds(s, cfg.budget)) for s in reps]
    tu = [set(tune_seeds(r, cfg.budget)) for r in reps]
    ev = set(eval_seeds(cfg.eval_seeds, cfg.episodes))
    groups = [*tr, *tu, ev]
    total = sum(len(g) for g in groups)
    union = set().union(*groups)
    if len(union) != total:
        raise ConfigError(
            "training, tuning and evaluation seeds overlap; use a smaller --train-seed, "
            "--train-seeds or --budget"
        )
    return {
        "train": [[min(g), max(g)] for g in tr],
        "tune": [[min(g), max(g)] for g in tu],
        "eval": [min(ev), max(ev)],
        "disjoint": True,
    }


# ---------------------------------------------------------------------------- records
@dataclass
class Bank:
    """Never-stopping episodes of ``stop-v0``: what every stopping point sees and scores.

    Row ``e`` is task instance ``seeds[e]``; column ``n`` is the decision after ``n`` answers
    (``0 .. max_rounds``). ``success[e, n]`` and ``tokens[e, n]`` are the outcome of stopping
    there; ``values``/``confs`` are the answers and their confidences in order.
    """

    task: str
    seeds: np.ndarray
    obs: np.ndarray
    top: np.ndarray
    top_conf: np.ndarray
    tokens: np.ndarray
    success: np.ndarray
    size: np.ndarray
    values: list[list[Any]]
    confs: list[list[float | None]]

    def __len__(self) -> int:
        return len(self.seeds)

    @property
    def decisions(self) -> int:
        """Decision points per episode (``max_rounds + 1``)."""
        return int(self.obs.shape[1])

    def outcome(self, stop: np.ndarray, weight: float) -> dict[str, np.ndarray]:
        """Per-episode success, tokens, reward and answers of stopping at ``stop``."""
        rows = np.arange(len(self))
        ok = self.success[rows, stop].astype(np.float64)
        tok = self.tokens[rows, stop]
        return {"success": ok, "tokens": tok, "reward": ok - weight * tok / 1000.0, "n": stop}

    def hindsight(self, weight: float) -> np.ndarray:
        """The best stopping point of each episode, chosen after seeing it (not causal)."""
        reward = self.success - weight * self.tokens / 1000.0
        return np.asarray(reward.argmax(axis=1))


def record_bank(task: str, seeds: Sequence[int], env_options: dict[str, Any] | None = None) -> Bank:
    """Run one never-stopping ``stop-v0`` episode per seed and keep every decision point.

    Example:
        >>> bank = record_bank("multihop", [1, 2])
        >>> bank.obs.shape, bool(bank.success[:, 0].any())
        ((2, 11, 20), False)
    """
    from orchestrace.learn.env import make_env

    env = make_env("stop-v0", task=task, **{**ENV_OPTIONS, **(env_options or {})})
    d = env.config.max_rounds + 1
    e = len(seeds)
    obs = np.zeros((e, d, env.observation_space.shape[0]), dtype=np.float32)
    top = np.zeros((e, d), dtype=np.int16)
    top_conf = np.zeros((e, d))
    tokens = np.zeros((e, d))
    success = np.zeros((e, d), dtype=bool)
    size = np.zeros(e, dtype=np.int64)
    values: list[list[Any]] = []
    confs: list[list[float | None]] = []
    try:
        for row, seed in enumerate(seeds):
            o, info = env.reset(seed=int(seed))
            n = 0
            while True:
                if info["answers"] != n:
                    raise RuntimeError(f"seed {seed}: {info['answers']} answers at decision {n}")
                obs[row, n], top[row, n] = o, info["top"]
                top_conf[row, n], tokens[row, n] = info["top_conf"], info["tokens"]
                o, _r, term, trunc, info = env.step(0)
                n += 1
                if term or trunc:
                    break
            if n != d:
                raise RuntimeError(f"seed {seed}: episode ended after {n} decisions, not {d}")
            answers = [v for v, _ in env.state["answers"]]
            for k in range(d):
                success[row, k] = k > 0 and bool(env.task.check(_majority(answers[:k])))
            size[row] = info["size"]
            values.append(answers)
            confs.append(list(env.state["confidence"]))
    finally:
        env.close()
    return Bank(
        env.task_name,
        np.asarray(seeds, dtype=np.int64),
        obs,
        top,
        top_conf,
        tokens,
        success,
        size,
        values,
        confs,
    )


def _majority(values: Sequence[Any]) -> Any:
    """The environment's vote: the most common answer, ties to the one seen first."""
    if not values:
        return None
    keys = [repr(v) for v in values]
    counts = {k: keys.count(k) for k in keys}
    best = max(counts.values())
    return next(v for v, k in zip(values, keys, strict=True) if counts[k] == best)


# ---------------------------------------------------------------------------- rules
def rule_grid(max_workers: int = 10) -> dict[str, list[Heuristic]]:
    """The uniform rule families, each over its full threshold grid.

    Example:
        >>> {k: len(v) for k, v in rule_grid().items()}
        {'fixed': 10, 'agree': 4, 'confidence': 51, 'conf-or-agree': 153}
    """
    taus = [round(0.5 + 0.01 * i, 2) for i in range(51)]
    return {
        "fixed": [FixedN(n=n) for n in range(1, max_workers + 1)],
        "agree": [KAgree(k=k) for k in (2, 3, 4, 5)],
        "confidence": [ConfThreshold(tau=t) for t in taus],
        "conf-or-agree": [ConfThreshold(tau=t, k=k) for k in (2, 3, 4) for t in taus],
    }


def _stop_mask(rule: Heuristic, bank: Bank) -> np.ndarray:
    """Where ``rule`` says stop, at every decision point of every episode (vectorised)."""
    n = np.arange(bank.decisions)[None, :]
    if isinstance(rule, FixedN):
        mask = np.broadcast_to(n >= rule.n, bank.top.shape)
    elif isinstance(rule, KAgree):
        mask = bank.top >= rule.k
    elif isinstance(rule, ConfThreshold):
        mask = (n >= 1) & (bank.top_conf >= rule.tau)
        if rule.k is not None:
            mask = mask | (bank.top >= rule.k)
    else:
        raise ConfigError(f"no vectorised form of rule {rule}")
    return np.asarray(mask)


def _first_stop(mask: np.ndarray) -> np.ndarray:
    """First decision where ``mask`` holds (the last decision ends the episode anyway)."""
    m = np.array(mask, dtype=bool)
    m[:, -1] = True
    return np.asarray(m.argmax(axis=1))


def _rule_stops(rule: Heuristic, bank: Bank) -> np.ndarray:
    if isinstance(rule, SizeAware):
        stops = np.zeros(len(bank), dtype=np.int64)
        for sub in {id(r): r for r in rule.rules}.values():
            rows = np.asarray([rule.rule_for(int(s)) is sub for s in bank.size])
            if rows.any():
                stops[rows] = _first_stop(_stop_mask(sub, bank))[rows]
        return stops
    return _first_stop(_stop_mask(rule, bank))


def _buckets(lo: int, hi: int, k: int) -> list[tuple[int, int]]:
    sizes = hi - lo + 1
    k = max(1, min(k, sizes))
    edges = [lo + round(i * sizes / k) for i in range(k + 1)]
    return [(edges[i], edges[i + 1] - 1) for i in range(k)]


def tune_rules(bank: Bank, weights: Sequence[float], size_buckets: int) -> dict[str, Any]:
    """For each weight: the best rule of each family on ``bank`` (its tuning records).

    Returns ``{family: {weight: rule}}`` with ``any-rule`` (the best over all uniform rules)
    and ``size-aware`` (the best uniform rule per size range) added.
    """
    from orchestrace.learn.env import SIZE_RANGES

    grid = rule_grid(bank.decisions - 1)
    flat = [(fam, r) for fam, rules in grid.items() for r in rules]
    stops = np.stack([_rule_stops(r, bank) for _, r in flat])  # [rules, episodes]
    rows = np.arange(len(bank))
    ok = bank.success[rows[None, :], stops].astype(np.float64)
    tok = bank.tokens[rows[None, :], stops]
    lo, hi = SIZE_RANGES[bank.task]
    buckets = _buckets(lo, hi, size_buckets)
    out: dict[str, Any] = {fam: {} for fam in FAMILIES}
    for w in weights:
        reward = ok - w * tok / 1000.0
        mean = reward.mean(axis=1)
        for fam in grid:
            idx = [i for i, (f, _) in enumerate(flat) if f == fam]
            out[fam][w] = flat[idx[int(np.argmax(mean[idx]))]][1]
        out["any-rule"][w] = flat[int(np.argmax(mean))][1]
        picks = []
        for b_lo, b_hi in buckets:
            sel = (bank.size >= b_lo) & (bank.size <= b_hi)
            best = (
                int(np.argmax(reward[:, sel].mean(axis=1))) if sel.any() else int(np.argmax(mean))
            )
            picks.append(flat[best][1])
        out["size-aware"][w] = SizeAware(buckets=tuple(buckets), rules=tuple(picks))
    return out


# ---------------------------------------------------------------------------- posterior
def posterior_stops(
    bank: Bank, weights: Sequence[float], horizon: int, samples: int
) -> dict[float, np.ndarray]:
    """Stopping points of :class:`PosteriorStop` on ``bank`` for each weight.

    The same computation as the rule in the live environment (same draws), with the
    look-ahead gains computed once per decision and priced for every weight.
    """
    from orchestrace.learn.policies.posterior import SimModel

    model = SimModel(bank.task)
    last = bank.decisions - 1
    out = {w: np.full(len(bank), last, dtype=np.int64) for w in weights}
    for e in range(len(bank)):
        open_w = list(weights)
        for n in range(1, last):
            room = last - n
            rng = np.random.default_rng([int(bank.seeds[e]), n, 0xB0])
            _, gain = model.gains(
                bank.values[e][:n],
                bank.confs[e][:n],
                int(bank.size[e]),
                min(horizon, room),
                rng,
                samples,
            )
            per_worker = bank.tokens[e, n] / n / 1000.0
            steps = np.arange(1, len(gain) + 1)
            for w in list(open_w):
                if not np.any(gain - w * per_worker * steps > 0):
                    out[w][e] = n
                    open_w.remove(w)
            if not open_w:
                break
    return out


# ---------------------------------------------------------------------------- training
def _bank_trainer(algo: str, cfg: Any, bank: Bank) -> Any:
    """A trainer of ``algo`` whose episodes replay ``bank`` (several passes, reshuffled)."""
    from orchestrace.learn.algorithms import ALGOS
    from orchestrace.learn.algorithms.common import Episode

    base = ALGOS[algo]
    weight = float(cfg.env_options.get("token_cost", 0.1))

    class Replayed(base):  # type: ignore[misc, valid-type]
        """``algo`` on episodes replayed from recorded never-stopping episodes."""

        def __init__(self) -> None:
            super().__init__(cfg)
            self._order: list[int] = []
            self._shuffle = np.random.default_rng([cfg.seed, 0x5EED])

        def _next(self, n: int) -> np.ndarray:
            while len(self._order) < n:
                self._order += [int(i) for i in self._shuffle.permutation(len(bank))]
            take, self._order = self._order[:n], self._order[n:]
            return np.asarray(take)

        def collect(self, group: int = 1) -> list[Any]:
            group = self.cfg.group if algo == "grpo" else 1
            torch = self.policy.torch
            idx = np.repeat(self._next(self.cfg.batch // group), group)
            b, d = len(idx), bank.decisions
            obs: list[list[Any]] = [[] for _ in range(b)]
            acts: list[list[list[int]]] = [[] for _ in range(b)]
            logps: list[list[float]] = [[] for _ in range(b)]
            vals: list[list[float]] = [[] for _ in range(b)]
            stop = np.full(b, d - 1)
            alive = np.ones(b, dtype=bool)
            for t in range(d):
                ids = np.flatnonzero(alive)
                if len(ids) == 0:
                    break
                x = bank.obs[idx[ids], t]
                with torch.no_grad():
                    dists, value = self.policy.distribution(x)
                    a = dists[0].sample()
                    lp = dists[0].log_prob(a)
                a_np, lp_np, v_np = a.numpy(), lp.numpy(), value.numpy()
                for k, i in enumerate(ids):
                    obs[i].append(x[k])
                    acts[i].append([int(a_np[k])])
                    logps[i].append(float(lp_np[k]))
                    vals[i].append(float(v_np[k]))
                ended = (a_np == 1) | (t == d - 1)
                stop[ids[ended]] = t
                alive[ids[ended]] = False
            ok = bank.success[idx, stop].astype(np.float64)
            tok = bank.tokens[idx, stop]
            reward = ok - weight * tok / 1000.0
            self.episodes += b
            return [
                Episode(
                    obs[i],
                    acts[i],
                    logps[i],
                    vals[i],
                    float(reward[i]),
                    {"r_perf": float(reward[i]), "success": float(ok[i]), "tokens": float(tok[i])},
                )
                for i in range(b)
            ]

    return Replayed()


def _policy_stops(policy: Any, bank: Bank) -> np.ndarray:
    """Greedy stopping points of a torch policy on every episode of ``bank``."""
    torch = policy.torch
    e, d, k = bank.obs.shape
    with torch.no_grad():
        dists, _ = policy.distribution(bank.obs.reshape(e * d, k))
        act = dists[0].probs.argmax(-1).numpy().reshape(e, d)
    return _first_stop(act == 1)


# ---------------------------------------------------------------------------- jobs
def _job_bank(task: str, seeds: list[int]) -> Bank:
    return record_bank(task, seeds)


def _job_replicate(task: str, r: int, cfg: StudyConfig, ev: Bank) -> dict[str, Any]:
    """One training seed and one tuning replicate of one task, at every weight."""
    import torch

    from orchestrace.learn.algorithms import TrainConfig

    torch.set_num_threads(1)
    t0 = time.process_time()
    out: dict[str, Any] = {"task": task, "replicate": r, "learned": {}, "rules": {}, "logs": {}}
    tune = record_bank(task, tune_seeds(r, cfg.budget))
    tuned = tune_rules(tune, cfg.weights, cfg.size_buckets)
    for fam, by_w in tuned.items():
        out["rules"][fam] = {w: (rule, _rule_stops(rule, ev)) for w, rule in by_w.items()}
    train = record_bank(task, train_seeds(r, cfg.budget))
    out["record_cpu_s"] = time.process_time() - t0
    t1 = time.process_time()
    for w in cfg.weights:
        tc = TrainConfig(
            env="stop-v0",
            task=task,
            episodes=cfg.train_episodes,
            hidden=cfg.hidden,
            seed=r,
            env_options={**ENV_OPTIONS, "token_cost": w},
        )
        trainer = _bank_trainer(cfg.algo, tc, train)
        res = trainer.train()
        stops = _policy_stops(res.policy, ev)
        state = None
        if w == cfg.reference_weight:
            buf = io.BytesIO()
            torch.save(res.policy.net.state_dict(), buf)
            state = buf.getvalue()
            out["logs"][w] = res.log
        out["learned"][w] = {"stops": stops, "state": state, "config": tc}
    out["train_cpu_s"] = time.process_time() - t1
    return out


def _job_posterior(cfg: StudyConfig, ev: Bank) -> dict[float, np.ndarray]:
    weights = sorted({*cfg.weights, *DENSE_WEIGHTS})
    return posterior_stops(ev, weights, cfg.horizon, cfg.samples)


def _pool_map(
    fn: Callable[..., Any], args: list[tuple[Any, ...]], jobs: int, executor: Executor | None = None
) -> list[Any]:
    if executor is not None:  # results in job order: the study is the same on every executor
        return executor.map(_apply, [(fn, a) for a in args])
    if jobs <= 1 or len(args) <= 1:
        return [fn(*a) for a in args]
    with ProcessPoolExecutor(max_workers=min(jobs, len(args))) as pool:
        futs = [pool.submit(fn, *a) for a in args]
        try:
            return [f.result() for f in futs]
        except BaseException:  # Ctrl-C, SIGTERM or a failed job: stop the others now
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.terminate()  # a running job would otherwise finish first (minutes)
            pool.shutdown(wait=True, cancel_futures=True)
            raise


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
    from orchestrace.learn.env import make_env
    from orchestrace.learn.policies.posterior import PosteriorStop

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


# ---------------------------------------------------------------------------- driver
def run_study(
    tasks: Sequence[str] = DEFAULT_TASKS,
    *,
    config: StudyConfig | None = None,
    quick: bool = False,
    out: str | Path | None = None,
    jobs: int = 2,
    progress: Callable[[str], None] | None = None,
    force: bool = False,
    executor: Executor | None = None,
) -> dict[str, Any]:
    """Run the study (see the module docstring) and, with ``out``, write the report.

    Its jobs (recording the evaluation banks, each training replicate, the posterior rule)
    run on ``executor`` when given (:mod:`orchestrace.executors`), else in ``jobs``
    processes; the results are the same on every executor.

    ``out`` is checked before any work, as ``orchestrace study -o`` checks it: new, empty,
    or written by an earlier study (then only with ``force``).

    Raises:
        ConfigError: No tasks, an unknown task, or a bad budget.
        orchestrace.io._output.OutputError: ``out`` may not be written, or a write failed.
    """
    if not tasks:
        raise ConfigError("give at least one task, e.g. arith,search,multihop")
    if jobs < 1:
        raise ConfigError(f"jobs must be >= 1, got {jobs}")
    cfg = config or (StudyConfig.quick() if quick else StudyConfig())
    names = [make_task(t).name for t in tasks]
    from orchestrace.learn.env import SIZE_RANGES

    for t, name in zip(tasks, names, strict=True):
        if name not in SIZE_RANGES:
            raise ConfigError(
                f"task {t!r} has no stop-v0 size range; use one of: "
                + ", ".join(sorted(SIZE_RANGES))
            )
    if cfg.algo not in ("ppo", "grpo", "reinforce"):
        raise ConfigError(f"unknown algorithm {cfg.algo!r}; use one of: ppo, grpo, reinforce")
    if out is not None:
        from orchestrace.io._output import report_dir

        with report_dir(out, force=force, report="study"):
            return _run(names, cfg, out, jobs, progress, executor)
    return _run(names, cfg, None, jobs, progress, executor)


def _run(
    tasks: list[str],
    cfg: StudyConfig,
    out: str | Path | None,
    jobs: int,
    progress: Callable[[str], None] | None,
    executor: Executor | None = None,
) -> dict[str, Any]:
    from orchestrace.learn.policies.torch_policy import MLPPolicy, require_torch

    torch = require_torch()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    seeds = _check_disjoint(cfg)
    say = progress or (lambda _m: None)
    evs = _pool_map(
        _job_bank, [(t, eval_seeds(cfg.eval_seeds, cfg.episodes)) for t in tasks], jobs, executor
    )
    say(f"recorded {len(tasks)} x {len(evs[0])} evaluation episodes")
    replicates = range(cfg.first_seed, cfg.first_seed + cfg.train_seeds)
    args: list[tuple[Any, ...]] = [
        (t, r, cfg, ev) for t, ev in zip(tasks, evs, strict=True) for r in replicates
    ]
    args += [(cfg, ev) for ev in evs]
    fns = [_job_replicate] * (len(args) - len(evs)) + [_job_posterior] * len(evs)
    done = _pool_map(_call, [(f, a) for f, a in zip(fns, args, strict=True)], jobs, executor)
    reps_all, posts = done[: -len(evs)], done[-len(evs) :]
    results: dict[str, Any] = {}
    logs: dict[str, list[dict[str, float]]] = {}
    policies: dict[str, Any] = {}
    for i, (task, ev) in enumerate(zip(tasks, evs, strict=True)):
        reps = reps_all[i * cfg.train_seeds : (i + 1) * cfg.train_seeds]
        for rep in reps:
            state = rep["learned"][cfg.reference_weight]["state"]
            pol = MLPPolicy(ev.obs.shape[2], [2], hidden=cfg.hidden, seed=0)
            pol.net.load_state_dict(torch.load(io.BytesIO(state), weights_only=True))
            rep["policy"] = pol
            logs[f"{task}/seed{rep['replicate']}"] = rep["logs"][cfg.reference_weight]
        policies[task] = (reps[0]["policy"], reps[0]["learned"][cfg.reference_weight]["config"])
        res = _task_results(task, cfg, ev, reps, posts[i])
        res["live_check"] = _live_check(task, cfg, ev, reps, posts[i])
        results[task] = res
        say(f"done: {task}")
    study = {
        "study": "learned-stopping",
        "version": 2,
        "env": "stop-v0",
        "env_options": ENV_OPTIONS,
        "config": {**vars(cfg), "weights": list(cfg.weights)},
        "seeds": seeds,
        "tasks": results,
        "wall_s": time.perf_counter() - wall0,
        "parent_cpu_s": time.process_time() - cpu0,
        "machine": f"{platform.machine()}, {platform.python_version()}",
    }
    if out is not None:
        write_report(study, Path(out), force=True, logs=logs, policies=policies)
    return study


def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    return fn(*args)


def _apply(job: tuple[Callable[..., Any], tuple[Any, ...]]) -> Any:
    return job[0](*job[1])


# ---------------------------------------------------------------------------- report
def _fmt_success(m: dict[str, Any]) -> str:
    lo, hi = m["success_wilson"]
    return f"{m['success']:.3f} [{lo:.3f}, {hi:.3f}]"


def _fmt_spread(m: dict[str, Any], key: str, digits: int) -> str:
    spread = m.get(f"{key}_spread")
    value = f"{m[key]:,.{digits}f}"
    if spread is None or not math.isfinite(spread):
        return value
    return f"{value} ± {spread:,.{digits}f}"


def summary_table(study: dict[str, Any]) -> str:
    """At the reference weight, per task: every method's reward, success and tokens."""
    w = str(study["config"]["reference_weight"])
    lines = [
        "| task | method | reward (± across replicates) | success [Wilson 95%] | "
        "tokens (± across replicates) | workers | rule picked (replicate 0) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, res in study["tasks"].items():
        for method, m in res["methods"].items():
            row = m["by_weight"][w]
            rule = row.get("rules", [""])[0]
            lines.append(
                f"| {name} | {method} | {_fmt_spread(row, 'reward', 3)} | {_fmt_success(row)} | "
                f"{_fmt_spread(row, 'tokens', 0)} | {row['workers']:.2f} | {rule} |"
            )
    return "\n".join(lines)


def comparison_table(study: dict[str, Any]) -> str:
    """Paired reward differences at the reference weight."""
    lines = [
        "| task | comparison | reward difference | ± across replicates | ± over instances | "
        "success difference | token difference |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, res in study["tasks"].items():
        for label, c in res["comparisons"].items():
            spread = "n/a" if not math.isfinite(c["spread"]) else f"{c['spread']:.4f}"
            lines.append(
                f"| {name} | {label} | {c['mean']:+.4f} | {spread} | {c['instances']:.4f} | "
                f"{c['success']:+.3f} | {c['tokens']:+,.0f} |"
            )
    return "\n".join(lines)


def weight_table(study: dict[str, Any]) -> str:
    """Reward differences at every weight, paired across replicates (per-replicate rewards)."""
    algo = f"learned ({study['config']['algo']})"
    post = "posterior (oracle reference)"
    lines = [
        f"| task | w | {algo} - size-aware | {algo} - any-rule | posterior - {algo} |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, res in study["tasks"].items():
        m = res["methods"]
        for w in study["config"]["weights"]:
            learned = [r["reward"] for r in m[algo]["by_weight"][str(w)]["replicates"]]
            cells = []
            for other in ("size-aware", "any-rule"):
                rules = [r["reward"] for r in m[other]["by_weight"][str(w)]["replicates"]]
                mean, ci = mean_ci([a - b for a, b in zip(learned, rules, strict=True)])
                cells.append(f"{mean:+.4f} ± {ci:.4f}")
            ref = m[post]["by_weight"][str(w)]["replicates"][0]["reward"]
            mean, ci = mean_ci([ref - a for a in learned])
            cells.append(f"{mean:+.4f} ± {ci:.4f}")
            lines.append(f"| {name} | {w:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def pareto_table(study: dict[str, Any]) -> str:
    """Success and tokens of every method at every weight (the Pareto curves as numbers)."""
    weights = study["config"]["weights"]
    head = " | ".join(f"w = {w:g}" for w in weights)
    lines = [f"| task | method | {head} |", "| --- | --- |" + " --- |" * len(weights)]
    for name, res in study["tasks"].items():
        for method, m in res["methods"].items():
            cells = []
            for w in weights:
                row = m["by_weight"][str(w)]
                cells.append(f"{row['success']:.3f} / {row['tokens']:,.0f}")
            lines.append(f"| {name} | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _pareto_rows(study: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for name, res in study["tasks"].items():
        for method, m in res["methods"].items():
            for w, row in m["by_weight"].items():
                for i, rep in enumerate(row["replicates"]):
                    lo, hi = rep["success_wilson"]
                    rows.append(
                        {
                            "task": name,
                            "method": method,
                            "kind": m["kind"],
                            "weight": w,
                            "replicate": i,
                            "rule": (row.get("rules") or [""] * (i + 1))[i],
                            "episodes": rep["episodes"],
                            "success": rep["success"],
                            "success_lo": lo,
                            "success_hi": hi,
                            "tokens": rep["tokens"],
                            "tokens_ci": rep["tokens_ci"],
                            "reward": rep["reward"],
                            "reward_ci": rep["reward_ci"],
                            "workers": rep["workers"],
                        }
                    )
    return rows


def _csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


def write_report(
    study: dict[str, Any],
    out: Path,
    *,
    force: bool = False,
    logs: dict[str, list[dict[str, float]]] | None = None,
    policies: dict[str, Any] | None = None,
) -> None:
    """``results.json``, ``results.md``, ``pareto.csv``, ``sweep.csv`` and plots into ``out``.

    ``out`` is checked as ``orchestrace study -o`` checks it (an earlier study's directory is
    replaced only with ``force``); each file is written atomically.

    Raises:
        orchestrace.io._output.OutputError: ``out`` may not be written, or a write failed.
    """
    from orchestrace.io._output import report_dir, report_file

    with report_dir(out, force=force, report="study") as target:
        with report_file(target / "results.json", "w") as fh:
            fh.write(json.dumps(study, indent=1, default=str))
        with report_file(target / "pareto.csv", "w") as fh:
            fh.write(_csv(_pareto_rows(study)))
        sweep = [
            {"task": name, **row}
            for name, res in study.get("tasks", {}).items()
            for row in res["sweep"]
        ]
        with report_file(target / "sweep.csv", "w") as fh:
            fh.write(_csv(sweep))
        if logs:
            rows = [{"run": run, **row} for run, log in logs.items() for row in log]
            with report_file(target / "train.csv", "w") as fh:
                fh.write(_csv(rows))
        with report_file(target / "results.md", "w") as fh:
            fh.write(_markdown(study))
        for task, (policy, tc) in (policies or {}).items():
            from dataclasses import asdict

            policy.save(
                target / f"policy-{task}.pt",
                extra={"algo": study["config"]["algo"], "config": asdict(tc)},
            )
        if study.get("tasks"):
            _plot(study, target / "pareto.png")
        if logs:
            _plot_curves(logs, target / "curves.png")


def _markdown(study: dict[str, Any]) -> str:
    if not study.get("tasks"):
        return "# Learned stopping: results\n\n(no tasks)\n"
    cfg = study["config"]
    live = ", ".join(
        f"{t}: {r['live_check']['mismatches']} of {r['live_check']['episodes']}"
        for t, r in study["tasks"].items()
    )
    parts = [
        "# Learned stopping: results",
        "",
        f"Reward = success - w x tokens / 1000; reference weight w = {cfg['reference_weight']}. "
        f"Evaluation: {cfg['eval_seeds']} seeds x {cfg['episodes']} held-out episodes, the same "
        f"for every method. Budget per replicate: {cfg['budget']} task instances "
        f"({cfg['train_seeds']} training seeds, {cfg['train_seeds']} tuning replicates; "
        f"{cfg['train_episodes']} training episodes replayed from them). Wall time "
        f"{study['wall_s']:.0f} s.",
        "",
        f"Live check (replayed outcome differs from the real environment): {live}.",
        "",
        "## At the reference weight",
        "",
        summary_table(study),
        "",
        "## Paired differences at the reference weight",
        "",
        comparison_table(study),
        "",
        "## Reward differences at every weight (± across replicates)",
        "",
        weight_table(study),
        "",
        "## Pareto curves: success / tokens per weight",
        "",
        pareto_table(study),
        "",
    ]
    return "\n".join(parts)


_COLORS = {
    "fixed": "tab:gray",
    "agree": "tab:blue",
    "confidence": "tab:orange",
    "conf-or-agree": "tab:green",
    "any-rule": "tab:olive",
    "size-aware": "tab:purple",
}


def _plot(study: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    tasks = list(study["tasks"])
    weights = study["config"]["weights"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.2 * len(tasks), 4.4), squeeze=False)
    for ax, name in zip(axes[0], tasks, strict=True):
        res = study["tasks"][name]
        sw = [r for r in res["sweep"] if r["family"] == "conf-or-agree"]
        ax.scatter(
            [r["tokens"] for r in sw],
            [r["success"] for r in sw],
            s=5,
            color="lightgray",
            label="every conf-or-agree threshold (eval)",
        )
        for method, m in res["methods"].items():
            rows = [m["by_weight"][str(w)] for w in weights]
            x = [r["tokens"] for r in rows]
            y = [r["success"] for r in rows]
            err = np.asarray(
                [
                    [r["success"] - r["success_wilson"][0] for r in rows],
                    [r["success_wilson"][1] - r["success"] for r in rows],
                ]
            )
            if m["kind"] == "learned":
                style = {"color": "tab:red", "marker": "*", "ms": 11, "lw": 2}
            elif method.startswith("posterior"):
                dense = sorted(res["posterior_dominance"]["curve"])
                ax.plot([p[0] for p in dense], [p[1] for p in dense], color="black", ls="--", lw=1)
                style = {"color": "black", "marker": "s", "ms": 5, "ls": "none"}
            elif method.startswith("hindsight"):
                style = {"color": "black", "marker": "", "ls": ":"}
            else:
                style = {"color": _COLORS.get(method, "k"), "marker": "o", "ms": 4, "lw": 1}
            ax.errorbar(x, y, yerr=err, label=method, capsize=2, **style)
        ax.set_title(f"{name} (w = {', '.join(f'{w:g}' for w in weights)})", fontsize=9)
        ax.set_xlabel("tokens per episode")
        ax.set_ylabel("success (Wilson 95%)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    _save(fig, plt, path)


def _plot_curves(logs: dict[str, list[dict[str, float]]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    tasks = sorted({k.split("/")[0] for k in logs})
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.6 * len(tasks), 3.4), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        for run, log in logs.items():
            if run.startswith(task + "/"):
                ax.plot(
                    [r["episodes"] for r in log],
                    [r["r_perf"] for r in log],
                    lw=1,
                    label=run.split("/")[1],
                )
        ax.set_title(task, fontsize=9)
        ax.set_xlabel("training episodes (replayed)")
        ax.set_ylabel("batch reward")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    _save(fig, plt, path)


def _save(fig: Any, plt: Any, path: Path) -> None:
    from orchestrace.io._output import report_file

    try:
        with report_file(path) as fh:
            fig.savefig(fh, format="png", dpi=110)
    finally:
        plt.close(fig)
