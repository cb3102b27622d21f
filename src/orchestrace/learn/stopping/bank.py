"""Banks of never-stopping episodes, rules tuned on them, the posterior rule, replay training.

A bank records everything any stopping policy would see on a task instance; rules are scored
exactly on it and policies train on episodes replayed from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrace.errors import ConfigError
from orchestrace.learn.algorithms import ALGOS
from orchestrace.learn.algorithms.common import Episode
from orchestrace.learn.env import SIZE_RANGES, make_env
from orchestrace.learn.policies.heuristic import ConfThreshold, FixedN, Heuristic, KAgree, SizeAware
from orchestrace.learn.policies.posterior import SimModel
from orchestrace.learn.stopping.config import ENV_OPTIONS, FAMILIES


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
