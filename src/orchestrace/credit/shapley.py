"""Shapley credit: exact for small teams, Monte-Carlo permutation sampling for large ones.

Generic over a value function ``v(coalition) -> float`` (a frozenset of players).
:class:`TraceGame` evaluates coalitions on a recorded run by counterfactual forks: agents outside
the coalition are silenced (their messages dropped, their returns lost), messages outside it are
dropped. Coalition values are cached, and forks only call the backend for changed calls.

On a stochastic backend a coalition's value is an expectation, estimated from ``samples`` (K)
draws. Draw 0 is the recorded run: calls whose inputs a coalition leaves unchanged keep their
recorded answers. Draw ``k >= 1`` draws again every LLM call the players can influence (their
own calls and every call downstream of them) in every coalition, on the simulator with the
recorded seed plus ``k``: the same draw ``k`` serves all coalitions (paired draws, common random
numbers), so a call with the same inputs gets the same answer in all of them. Shapley values are
linear in ``v``, so the estimate is the mean of the K per-draw Shapley values, which gives each
player a standard error and a Student-t 95% interval, and the credits of every draw, hence their
mean, sum exactly to ``v(N) - v(empty)`` of the estimated values.

Exact Shapley needs ``2^n`` coalition values (use ``n <= 12``). Permutation sampling with ``m``
permutations gives unbiased estimates whose credits still sum exactly to ``v(N) - v(empty)``;
with values in ``[a, b]`` a marginal contribution lies in ``[a - b, b - a]``, so each estimate
is within ``2 (b - a) sqrt(ln(2 / delta) / (2m))`` of the true value with probability
``1 - delta`` (Hoeffding), and the report also gives each estimate's standard error.

The draws (shared with leave-one-out) live in :mod:`orchestrace.credit._draws`; this module
re-exports what it uses of them.

Example:
    >>> glove = glove_game(left={"a"}, right={"b", "c"})
    >>> values = shapley_exact(["a", "b", "c"], glove)
    >>> {k: round(v, 4) for k, v in values.items()}
    {'a': 0.6667, 'b': 0.1667, 'c': 0.1667}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from itertools import combinations
from math import factorial
from typing import Any

import numpy as np

from orchestrace._numbers import is_finite, is_int
from orchestrace.credit._draws import (
    MAX_SAMPLES,
    SampleBackends,
    check_samples,
    downstream_llm_keys,
    estimate,
    redraw,
    sample_stats,
    unit_starts,
)
from orchestrace.credit._forks import ForkContext, _ok, run_forks
from orchestrace.credit.base import (
    CreditTable,
    check_assign_args,
    root_agents,
    table,
    unit_members,
)
from orchestrace.credit.counterfactual import CounterfactualTable
from orchestrace.credit.target import RewardLike, counterfactual_reward, finite_reward
from orchestrace.errors import ConfigError, RuntimeError_
from orchestrace.executors import Executor, JobFailure
from orchestrace.runtime import replay
from orchestrace.runtime.replay import (
    DropMessage,
    Silence,
    check_replayable,
)
from orchestrace.stats import t95
from orchestrace.trace.model import Trace

#: Most value-function calls :func:`shapley_mc` may need (``samples x (players + 1)``).
MAX_EVALUATIONS = 100_000_000

__all__ = [
    "MAX_EVALUATIONS",
    "MAX_SAMPLES",
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

    Raises:
        ConfigError: ``samples`` is not an integer from 1 to :data:`MAX_SAMPLES`, or the
            permutations would evaluate ``v`` more than :data:`MAX_EVALUATIONS` times.
    """
    if not is_int(samples) or not 1 <= samples <= MAX_SAMPLES:
        raise ConfigError(f"samples must be an integer from 1 to {MAX_SAMPLES:,}, got {samples!r}")
    if samples * (len(players) + 1) > MAX_EVALUATIONS:
        raise ConfigError(
            f"{samples:,} permutations of {len(players):,} players would evaluate the value "
            f"function up to {samples * (len(players) + 1):,} times (at most "
            f"{MAX_EVALUATIONS:,}); sample fewer permutations or group the players"
        )
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

    Calling the game gives a coalition's estimated value, the mean of its ``samples`` draws
    (:meth:`draws`; see the module docstring for how draws are paired).

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
        samples: Draws per coalition (K); one on a backend that answers deterministically.
        assume_deterministic: Take the backend as deterministic (one draw, ``se`` 0), e.g. a
            local engine with greedy decoding and a fixed seed (``--assume-deterministic``). A
            served model is otherwise taken as stochastic, even at temperature 0.

    Example:
        >>> from orchestrace.runtime import run
        >>> tr = run("centralized", "arith", agents=2, seed=2, task_size=6).trace
        >>> game = TraceGame(tr, "agent", samples=3)
        >>> len(game.draws(frozenset())), game(frozenset(game.players)) == sum(
        ...     game.draws(frozenset(game.players))) / 3
        (3, True)
    """

    def __init__(
        self,
        trace: Trace,
        unit: str = "agent",
        reward_fn: RewardLike | None = None,
        backend: Any = None,
        rerun_checks: bool = False,
        backend_options: Mapping[str, Any] | None = None,
        samples: int = 1,
        assume_deterministic: bool = False,
    ) -> None:
        unit = check_assign_args(trace, unit)
        if unit not in ("agent", "message"):
            raise ConfigError(
                "trace games are played by agents or messages; for other units "
                "use uniform or discounted credit"
            )

        check_replayable(trace)
        self.trace = trace
        self.unit = unit
        self.reward_fn = reward_fn
        self.backend = backend
        self.backend_options = dict(backend_options or {})
        self.requested = check_samples(samples)
        self.rerun_checks = rerun_checks
        roots = set(root_agents(trace))
        self.players = [k for k in unit_members(trace, unit) if k not in roots]
        self.backends = SampleBackends(backend, self.backend_options, assume_deterministic)
        self.backend_calls = 0
        self.forks = 0
        self._samples: int | None = None
        self._keys: tuple[str, ...] | None = None
        self._cache: dict[frozenset[Any], list[float]] = {}

    @property
    def samples(self) -> int:
        """Draws per coalition actually made (1 on a deterministic backend)."""
        if self._samples is None:
            det = self.requested > 1 and self.backends.deterministic(self.trace)
            self._samples = 1 if det else self.requested
        return self._samples

    def _redrawn(self) -> tuple[str, ...]:
        """The calls every draw ``k >= 1`` draws again: the players' and all downstream."""
        if self._keys is None:
            starts = sorted(
                {i for p in self.players for i in unit_starts(self.trace, self.unit, p)}
            )
            self._keys = downstream_llm_keys(self.trace, starts)
        return self._keys

    def _interventions(self, coalition: frozenset[Any], k: int) -> list[Any]:
        """What draw ``k`` of ``coalition`` changes (nothing: the recorded run)."""
        out = [p for p in self.players if p not in coalition]
        ivs: list[Any] = (
            [Silence(p) for p in out]
            if self.unit == "agent"
            else [DropMessage.of(self.trace, p) for p in out]
        )
        if k > 0 and self._redrawn():
            ivs.insert(0, redraw(self._redrawn()))
        return ivs

    def prefetch(self, coalitions: Iterable[frozenset[Any]], executor: Executor | None) -> None:
        """Draw many coalitions at once: their forks are independent jobs on ``executor``."""
        todo = [c for c in dict.fromkeys(map(frozenset, coalitions)) if c not in self._cache]
        where: list[tuple[frozenset[Any], int]] = []
        jobs: list[tuple[list[Any], int]] = []
        for c in todo:
            for k in range(self.samples):
                ivs = self._interventions(c, k)
                if ivs:
                    where.append((c, k))
                    jobs.append((ivs, k))
        ctx = ForkContext(
            self.trace, self.backend, self.backend_options, self.reward_fn, self.rerun_checks
        )
        got: dict[tuple[frozenset[Any], int], float] = {}
        done = run_forks(ctx, jobs, executor, self.backends)
        lost = [f for f in done if isinstance(f, JobFailure)]
        if lost:
            first = lost[0]
            out = sorted(set(self.players) - where[first.index][0], key=str)
            raise RuntimeError_(
                f"shapley: {len(lost)} of {len(jobs)} forks failed (first: the coalition "
                f"without {', '.join(map(str, out[:5])) or 'nobody'}, sample "
                f"{where[first.index][1]}: {first.error}); every coalition's value enters "
                "every player's credit, so no table is given: fix the failing fork and run "
                "again, or use --method counterfactual or loo, which leave out only the rows "
                "whose forks failed"
            )
        for at, res in zip(where, done, strict=True):
            calls, r = _ok(res)
            self.backend_calls += calls
            self.forks += 1
            got[at] = r
        for c in todo:
            self._cache[c] = [
                got[(c, k)] if (c, k) in got else self._value(c, k) for k in range(self.samples)
            ]

    def _value(self, coalition: frozenset[Any], k: int) -> float:
        ivs = self._interventions(coalition, k)
        if not ivs:  # draw 0 of the grand coalition: the recorded run
            return counterfactual_reward(
                self.trace, self.reward_fn, rerun_checks=self.rerun_checks, forked=False
            )
        res = replay.fork(
            self.trace, ivs, backend=self.backends(self.trace, k), rerun_checks=self.rerun_checks
        )
        self.backend_calls += res.backend_calls
        self.forks += 1
        return counterfactual_reward(res.trace, self.reward_fn, rerun_checks=self.rerun_checks)

    def draws(self, coalition: frozenset[Any]) -> list[float]:
        """The coalition's value in each draw ``0 .. samples - 1``."""
        key = frozenset(coalition)
        if key not in self._cache:
            self._cache[key] = [self._value(key, k) for k in range(self.samples)]
        return self._cache[key]

    def draw(self, k: int) -> ValueFn:
        """The game of draw ``k`` alone."""
        return lambda s: self.draws(s)[k]

    def __call__(self, coalition: frozenset[Any]) -> float:
        """The estimated reward of the run in which only ``coalition`` (and the roots) take part."""
        values = self.draws(coalition)
        return sum(values) / len(values)


class ShapleyCredit:
    """Shapley credit of agents (or messages) on a recorded run, with an error bar per unit.

    Args:
        samples: Draws per coalition (K, ``--samples``; see the module docstring). With
            ``K >= 2`` each row gets a standard error and a 95% interval over the draws.
        permutations: ``None`` for exact Shapley (at most ``exact_limit`` players), else
            Monte-Carlo with this many permutations (per draw).
        exact_limit: Most players for exact computation when ``permutations`` is ``None``.
        reward_fn: The reward (default: team reward).
        seed: Permutation sampling seed (draw ``k`` uses ``seed + k``).
        delta: Confidence for the reported Hoeffding bound of permutation sampling.
        backend: Answers changed calls: ``None`` (the backend the trace records), a backend
            name (``sim``, ``openai``, ``hf``) or a backend object.
        rerun_checks: Check answers of coalitions the recorded verdict does not cover even
            where that runs them as code (sandboxed); without it such a coalition raises
            ConfigError.
        backend_options: Options of a backend given by name, or replacing recorded ones.
        executor: Where the forks run (:mod:`orchestrace.executors`): every coalition's
            forks are then drawn at once, as independent jobs. The table is the same on
            every executor (default: this process, coalition by coalition).
        assume_deterministic: Take the backend as deterministic (one draw, ``se`` 0), e.g. a
            local engine with greedy decoding and a fixed seed (``--assume-deterministic``). A
            served model is otherwise taken as stochastic, even at temperature 0.

    Example:
        >>> from orchestrace.runtime import run
        >>> tr = run("centralized", "arith", agents=2, seed=2, task_size=6).trace
        >>> t = ShapleyCredit(samples=4).assign(tr, "agent")
        >>> abs(t.total("agent") - t.reward) < 1e-9, t.stats["samples"], t.stats["paired"]
        (True, 4, True)
        >>> sorted(t.estimates) == sorted(t.by_unit("agent")), t.estimates["worker1"]["se"] >= 0
        (True, True)
    """

    name = "shapley"
    efficient = True

    def __init__(
        self,
        samples: int | None = 1,
        exact_limit: int = 10,
        reward_fn: RewardLike | None = None,
        seed: int = 0,
        delta: float = 0.05,
        backend: Any = None,
        rerun_checks: bool = False,
        backend_options: Mapping[str, Any] | None = None,
        permutations: int | None = None,
        executor: Executor | None = None,
        assume_deterministic: bool = False,
    ) -> None:
        self.executor = executor
        self.assume_deterministic = assume_deterministic
        self.samples = check_samples(1 if samples is None else samples)
        if permutations is not None and (
            isinstance(permutations, bool)
            or not isinstance(permutations, int)
            or not 1 <= permutations <= MAX_SAMPLES
        ):
            raise ConfigError(
                f"permutations must be an integer from 1 to {MAX_SAMPLES:,} (--permutations M), "
                f"got {str(permutations)[:40]}"
            )
        self.permutations = permutations
        self.backend_options = dict(backend_options or {})
        self.rerun_checks = rerun_checks
        self.exact_limit = exact_limit
        self.reward_fn = reward_fn
        self.seed = seed
        if not is_finite(delta) or not 0 < delta < 1:
            raise ConfigError(
                f"delta must be a probability between 0 and 1 (the bound holds with 1 - delta), "
                f"got {delta!r}"
            )
        self.delta = float(delta)
        self.backend = backend

    def _coalitions(self, players: Sequence[Any], samples: int) -> list[frozenset[Any]]:
        """The coalitions the computation evaluates (permutations are drawn as it draws them)."""
        if self.permutations is None:
            return [frozenset(c) for n in range(len(players) + 1) for c in combinations(players, n)]
        seen: dict[frozenset[Any], None] = {}

        def visit(s: frozenset[Any]) -> float:
            seen[s] = None
            return 0.0

        for k in range(samples):
            shapley_mc(players, visit, self.permutations, self.seed + k)
        return [*seen, frozenset(players), frozenset()]

    def assign(self, trace: Trace, unit: str = "agent", reward: float | None = None) -> CreditTable:
        """Credit table at ``agent`` or ``message``; root agents get ``v(empty)``.

        The rows distribute ``v(all)`` (agents) or ``v(all) - v(empty)`` (messages); with an
        explicit ``reward`` they distribute ``reward`` instead: the game is scaled so that its
        total is ``reward`` (``stats["scale"]``; see :func:`_rescale`), so the table stays
        efficient for the reward it names.
        """
        game = TraceGame(
            trace,
            unit,
            self.reward_fn,
            self.backend,
            self.rerun_checks,
            self.backend_options,
            samples=self.samples,
            assume_deterministic=self.assume_deterministic,
        )
        players = game.players
        stats: dict[str, Any] = {"players": len(players)}
        if self.permutations is None and len(players) > self.exact_limit:
            raise ConfigError(
                f"{len(players)} players is too many for exact Shapley "
                f"(limit {self.exact_limit}); pass --permutations M (permutations= in Python) "
                "for Monte-Carlo"
            )
        per_draw: list[dict[Any, float]] = []
        mc_se: dict[Any, float] = {}
        if self.executor is not None:  # every coalition's forks at once, as independent jobs
            game.prefetch(self._coalitions(players, game.samples), self.executor)
        for k in range(game.samples):
            if self.permutations is None:
                per_draw.append(shapley_exact(players, game.draw(k)))
            else:
                values, mc_se = shapley_mc(players, game.draw(k), self.permutations, self.seed + k)
                per_draw.append(values)
        if self.permutations is None:
            stats["exact"] = True
        else:
            stats.update(
                exact=False,
                permutations=self.permutations,
                hoeffding=hoeffding_bound(self.permutations, 2.0, self.delta),
            )
        stats.update(sample_stats(self.samples, game.samples, game.backends, trace))
        deterministic = bool(stats["deterministic"])
        estimates: dict[str, dict[str, Any]] = {}
        rows: dict[str, float] = {}
        for p in players:
            e = estimate([d[p] for d in per_draw], deterministic and game.samples == 1)
            if game.samples == 1 and self.permutations is not None:
                # one draw: the error left is that of permutation sampling
                se = mc_se.get(p)
                ok = se is not None and math.isfinite(se) and self.permutations > 1
                e["se"] = se if ok else None
                half = t95(self.permutations - 1) * se if ok and se is not None else None
                e["ci95"] = [e["value"] - half, e["value"] + half] if half is not None else None
            rows[str(p)] = e.pop("value")
            estimates[str(p)] = e
        full = game(frozenset(players))
        base = game(frozenset())
        stats.update(
            backend_calls=game.backend_calls,
            forks=game.forks,
            v_empty=base,
            v_all=full,
            max_stderr=max((e["se"] or 0.0 for e in estimates.values()), default=0.0),
        )
        distributed = full - base  # what the players add to what the roots get alone
        if unit == "agent":  # the orchestrator alone earns v(empty)
            roots = root_agents(trace)
            share = max(len(roots), 1)
            for root in roots:
                rows[root] = base / share
                e = estimate(
                    [v / share for v in game.draws(frozenset())],
                    deterministic and game.samples == 1,
                )
                e.pop("value")
                estimates[root] = e
            distributed = full
        if reward is not None:
            distributed = _rescale(rows, estimates, distributed, finite_reward(reward), stats)
        plain = table(
            unit,
            rows,
            reward=distributed,
            method=self.name,
            efficient=True,
            stats=stats,
        )
        return CounterfactualTable(
            plain.rows, plain.reward, self.name, True, plain.stats, estimates=estimates
        )


def _rescale(
    rows: dict[str, float],
    estimates: dict[str, dict[str, Any]],
    distributed: float,
    reward: float,
    stats: dict[str, Any],
) -> float:
    """Make ``rows`` distribute ``reward`` instead of ``distributed`` (in place); return it.

    Shapley values are linear in ``v``: the rows, their standard errors and intervals are those
    of the game scaled by ``reward / distributed`` (recorded as ``stats["scale"]``). A game that
    distributes nothing cannot be scaled: each row then gets an equal share of ``reward`` on top
    (recorded as ``stats["shift"]``), the Shapley values of the game whose ``v(all)`` is raised
    by ``reward``.
    """
    if not rows or reward == distributed:
        return reward
    if abs(distributed) > 1e-12:
        scale = reward / distributed
        stats["scale"] = scale
        for key in rows:
            rows[key] *= scale
            e = estimates.get(key)
            if e is None:
                continue
            if e.get("se") is not None:
                e["se"] = abs(e["se"] * scale)
            if e.get("ci95") is not None:
                e["ci95"] = sorted(v * scale for v in e["ci95"])
        return reward
    shift = (reward - distributed) / len(rows)
    stats["shift"] = shift
    for key in rows:
        rows[key] += shift
        e = estimates.get(key)
        if e is not None and e.get("ci95") is not None:
            e["ci95"] = [v + shift for v in e["ci95"]]
    return reward
