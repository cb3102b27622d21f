"""Shapley credit: exact for small teams, Monte-Carlo permutation sampling for large ones.

Generic over a value function ``v(coalition) -> float`` (a frozenset of players).
:class:`TraceGame` evaluates coalitions on a recorded run by counterfactual forks: agents outside
the coalition are silenced (their messages dropped, their returns lost), messages outside it are
dropped. Coalition values are cached, and forks only call the backend for changed calls.

Exact Shapley needs ``2^n`` coalition values (use ``n <= 12``). Permutation sampling with ``m``
permutations gives unbiased estimates whose credits still sum exactly to ``v(N) - v(empty)``;
with values in ``[a, b]`` each estimate is within ``(b - a) * sqrt(ln(2 / delta) / (2m))`` of the
true value with probability ``1 - delta`` (Hoeffding), and the report also gives each estimate's
standard error.

Example:
    >>> glove = glove_game(left={"a"}, right={"b", "c"})
    >>> values = shapley_exact(["a", "b", "c"], glove)
    >>> {k: round(v, 4) for k, v in values.items()}
    {'a': 0.6667, 'b': 0.1667, 'c': 0.1667}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from itertools import combinations
from math import factorial
from typing import Any

import numpy as np

from orchestrace.credit.base import CreditTable, check_unit, root_agents, table, unit_members
from orchestrace.credit.reward import RewardLike, counterfactual_reward
from orchestrace.errors import ConfigError
from orchestrace.trace.model import Trace

__all__ = [
    "ShapleyCredit",
    "TraceGame",
    "glove_game",
    "hoeffding_bound",
    "majority_game",
    "shapley_exact",
    "shapley_mc",
]

Player = Hashable
ValueFn = Callable[[frozenset[Any]], float]


def shapley_exact(players: Sequence[Player], v: ValueFn) -> dict[Player, float]:
    """Exact Shapley values (``2^n`` evaluations of ``v``).

    Raises:
        ConfigError: More than 20 players.
    """
    n = len(players)
    if n > 20:
        raise ConfigError(f"exact Shapley needs 2^{n} coalitions; use shapley_mc for n > 20")
    cache: dict[frozenset[Player], float] = {}

    def val(s: frozenset[Player]) -> float:
        if s not in cache:
            cache[s] = float(v(s))
        return cache[s]

    weights = [factorial(k) * factorial(n - k - 1) / factorial(n) for k in range(n)]
    out: dict[Player, float] = {}
    for p in players:
        others = [q for q in players if q != p]
        total = 0.0
        for k in range(n):
            for combo in combinations(others, k):
                s = frozenset(combo)
                total += weights[k] * (val(s | {p}) - val(s))
        out[p] = total
    return out


def shapley_mc(
    players: Sequence[Player], v: ValueFn, samples: int, seed: int = 0
) -> tuple[dict[Player, float], dict[Player, float]]:
    """Monte-Carlo Shapley by permutation sampling.

    Returns:
        ``(estimates, standard errors)``. The estimates sum exactly to ``v(N) - v(empty)``.
    """
    if samples < 1:
        raise ConfigError(f"samples must be >= 1, got {samples}")
    rng = np.random.default_rng(seed)
    idx = {p: i for i, p in enumerate(players)}
    sums = np.zeros(len(players))
    sq = np.zeros(len(players))
    cache: dict[frozenset[Player], float] = {}

    def val(s: frozenset[Player]) -> float:
        if s not in cache:
            cache[s] = float(v(s))
        return cache[s]

    for _ in range(samples):
        order = rng.permutation(len(players))
        coalition: frozenset[Player] = frozenset()
        before = val(coalition)
        for j in order:
            p = players[j]
            coalition = coalition | {p}
            after = val(coalition)
            m = after - before
            sums[idx[p]] += m
            sq[idx[p]] += m * m
            before = after
    mean = sums / samples
    var = np.maximum(sq / samples - mean**2, 0.0)
    se = np.sqrt(var / max(samples - 1, 1)) if samples > 1 else np.full(len(players), np.inf)
    return ({p: float(mean[i]) for p, i in idx.items()}, {p: float(se[i]) for p, i in idx.items()})


def hoeffding_bound(samples: int, value_range: float, delta: float = 0.05) -> float:
    """Half-width that each MC estimate is within with probability ``1 - delta``."""
    return value_range * math.sqrt(math.log(2 / delta) / (2 * samples))


def glove_game(left: set[Player], right: set[Player]) -> ValueFn:
    """The glove game: a coalition is worth the number of left-right pairs it can form."""
    return lambda s: float(min(len(s & left), len(s & right)))


def majority_game(
    players: Sequence[Player], quota: int | None = None, weights: dict[Player, float] | None = None
) -> ValueFn:
    """A (weighted) majority game: 1 when the coalition's weight reaches ``quota``."""
    w = weights or {p: 1.0 for p in players}
    q = quota if quota is not None else len(players) // 2 + 1
    return lambda s: float(sum(w[p] for p in s) >= q)


class TraceGame:
    """Coalition values of a recorded run, by counterfactual forks.

    Args:
        trace: A trace recorded by the runtime.
        unit: ``agent`` (silence agents outside the coalition) or ``message`` (drop messages
            outside it). Root agents always play.
        reward_fn: The reward of a forked run (default: team reward).
        backend: Answers changed calls: ``None`` (the backend the trace records, rebuilt
            at the first fork), a backend name (``sim``, ``openai``, ``hf``) or a backend object.
        rerun_checks: Check answers the recorded verdict does not cover even where that runs
            them as code (sandboxed); without it such a coalition raises ConfigError.
        backend_options: Options of a backend given by name, or replacing recorded ones.
    """

    def __init__(
        self,
        trace: Trace,
        unit: str = "agent",
        reward_fn: RewardLike | None = None,
        backend: Any = None,
        rerun_checks: bool = False,
        backend_options: Mapping[str, Any] | None = None,
    ) -> None:
        unit = check_unit(unit)
        if unit not in ("agent", "message"):
            raise ConfigError(
                "trace games are played by agents or messages; for other units "
                "use uniform or discounted credit"
            )
        self.trace = trace
        self.unit = unit
        self.reward_fn = reward_fn
        self.backend = backend
        self.backend_options = dict(backend_options or {})
        self._answering: Any = None
        self.rerun_checks = rerun_checks
        roots = set(root_agents(trace))
        self.players = [k for k in unit_members(trace, unit) if k not in roots]
        self.backend_calls = 0
        self.forks = 0
        self._cache: dict[frozenset[Any], float] = {}

    def __call__(self, coalition: frozenset[Any]) -> float:
        """The reward of the run in which only ``coalition`` (and the roots) take part."""
        key = frozenset(coalition)
        if key in self._cache:
            return self._cache[key]
        from orchestrace.runtime.replay import DropMessage, Silence, fork

        out = [p for p in self.players if p not in key]
        if not out:
            value = counterfactual_reward(
                self.trace, self.reward_fn, rerun_checks=self.rerun_checks, forked=False
            )
        else:
            ivs: list[Any] = (
                [Silence(p) for p in out]
                if self.unit == "agent"
                else [DropMessage.of(self.trace, p) for p in out]
            )
            if self._answering is None:
                from orchestrace.runtime.replay import backend_for

                self._answering = backend_for(self.trace, self.backend, **self.backend_options)
            res = fork(self.trace, ivs, backend=self._answering, rerun_checks=self.rerun_checks)
            self.backend_calls += res.backend_calls
            self.forks += 1
            value = counterfactual_reward(res.trace, self.reward_fn, rerun_checks=self.rerun_checks)
        self._cache[key] = value
        return value


class ShapleyCredit:
    """Shapley credit of agents (or messages) on a recorded run.

    Args:
        samples: ``None`` for exact (at most ``exact_limit`` players), else permutations.
        exact_limit: Most players for exact computation when ``samples`` is ``None``.
        reward_fn: The reward (default: team reward).
        seed: Permutation sampling seed.
        delta: Confidence for the reported Hoeffding bound.
        backend: Answers changed calls: ``None`` (the backend the trace records), a backend
            name (``sim``, ``openai``, ``hf``) or a backend object.
        rerun_checks: Check answers of coalitions the recorded verdict does not cover even
            where that runs them as code (sandboxed); without it such a coalition raises
            ConfigError.
        backend_options: Options of a backend given by name, or replacing recorded ones.
    """

    name = "shapley"
    efficient = True

    def __init__(
        self,
        samples: int | None = None,
        exact_limit: int = 10,
        reward_fn: RewardLike | None = None,
        seed: int = 0,
        delta: float = 0.05,
        backend: Any = None,
        rerun_checks: bool = False,
        backend_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.samples = samples
        self.backend_options = dict(backend_options or {})
        self.rerun_checks = rerun_checks
        self.exact_limit = exact_limit
        self.reward_fn = reward_fn
        self.seed = seed
        self.delta = delta
        self.backend = backend

    def assign(self, trace: Trace, unit: str = "agent", reward: float | None = None) -> CreditTable:
        """Credit table at ``agent`` or ``message``; root agents get ``v(empty)``."""
        game = TraceGame(
            trace, unit, self.reward_fn, self.backend, self.rerun_checks, self.backend_options
        )
        players = game.players
        stats: dict[str, Any] = {"players": len(players)}
        if self.samples is None and len(players) > self.exact_limit:
            raise ConfigError(
                f"{len(players)} players is too many for exact Shapley "
                f"(limit {self.exact_limit}); pass samples= for Monte-Carlo"
            )
        if self.samples is None:
            values = shapley_exact(players, game)
            stats["exact"] = True
        else:
            values, se = shapley_mc(players, game, self.samples, self.seed)
            stats.update(
                exact=False,
                samples=self.samples,
                max_stderr=max(se.values(), default=0.0),
                hoeffding=hoeffding_bound(self.samples, 1.0, self.delta),
            )
        full = game(frozenset(players))
        base = game(frozenset())
        stats.update(backend_calls=game.backend_calls, forks=game.forks, v_empty=base)
        rows: dict[str, float] = {str(k): v for k, v in values.items()}
        distributed = full - base  # what the players add to what the roots get alone
        if unit == "agent":  # the orchestrator alone earns v(empty)
            roots = root_agents(trace)
            for root in roots:
                rows[root] = base / max(len(roots), 1)
            distributed = full
        return table(
            unit,
            rows,
            reward=distributed if reward is None else reward,
            method=self.name,
            efficient=True,
            stats=stats,
        )
