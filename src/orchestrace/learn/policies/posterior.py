"""The posterior stopping rule: a reference that knows the simulator's generative model.

In ``stop-v0`` on the simulated backend, each worker answers the whole task; an answer is
right unless an error strikes with probability ``(1 - skill) * (size / unit) ** 2`` (capped at
0.98, skill 0.9 +- 0.03 per worker), a wrong answer is the truth off by a small offset (integer
tasks) or another of the task's choices (multi-hop), and the confidence is Gaussian around 0.75
for a right answer and 0.62 for a wrong one (shifted down on hard tasks). :class:`SimModel`
holds exactly this model (read from :mod:`orchestrace.runtime.backends.sim` and the task class)
and computes the posterior over the truth given the answers and confidences so far.

:class:`PosteriorStop` stops when no look-ahead of ``j <= horizon`` more workers raises the
probability that the majority vote is right by more than those workers cost
(``token_cost * tokens per worker / 1000`` each); it re-plans at every decision. It is **not a
deployable baseline**: it uses the simulator's own parameters, which a system facing a real
model does not have. It never reads the ground truth.

Example:
    >>> from orchestrace.learn.env import make_env
    >>> env = make_env("stop-v0", task="multihop")
    >>> obs, info = env.reset(seed=5)
    >>> rule = PosteriorStop(token_cost=0.1)
    >>> while True:
    ...     obs, r, term, trunc, info = env.step(rule.act(obs, info, env))
    ...     if term or trunc: break
    >>> 1 <= info["answers"] <= 10
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from orchestrace.errors import ConfigError
from orchestrace.learn.env import OrchestrationEnv
from orchestrace.learn.policies.heuristic import Heuristic
from orchestrace.runtime.backends.sim import DEFAULT_SKILLS
from orchestrace.tasks import make_task, task_class

__all__ = ["PosteriorStop", "SimModel"]

#: Offsets of a wrong integer answer (``truth + d * m``, d in +-1..3, m in 1..3), each 1/18.
_OFFSETS: dict[int, float] = {}
for _d in (-3, -2, -1, 1, 2, 3):
    for _m in (1, 2, 3):
        _OFFSETS[_d * _m] = _OFFSETS.get(_d * _m, 0.0) + 1.0 / 18.0
_DELTAS = np.asarray([d * m for d in (-3, -2, -1, 1, 2, 3) for m in (1, 2, 3)], dtype=np.int64)


def _norm_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


class SimModel:
    """The simulator's model of one ``stop-v0`` worker answer, for one task.

    Args:
        task: Task id or alias (``arith``, ``search``, ``multihop``).
        skill: Mean worker skill (the simulator's ``worker`` skill).
        spread: Per-worker skill variation (uniform +- ``spread``).
        conf_sd: Standard deviation of a confidence.

    Example:
        >>> m = SimModel("arith")
        >>> round(m.error_rate(8), 3), round(m.error_rate(24), 3)
        (0.1, 0.866)
        >>> cands, post = m.posterior([100, 100], [0.8, 0.7], size=8)
        >>> cands[int(post.argmax())], bool(post.max() > 0.99)
        (100, True)
    """

    def __init__(
        self,
        task: str,
        *,
        skill: float = DEFAULT_SKILLS["worker"],
        spread: float = 0.03,
        conf_sd: float = 0.12,
    ) -> None:
        cls = task_class(task)
        if cls is None:
            raise ConfigError(f"unknown task {task!r}; use arith, search or multihop")
        self.task = cls.name
        self.unit = float(cls.unit)
        self.kind = cls.wrong_kind
        self.choices: list[Any] = list(make_task(self.task, seed=0, size=1).choices)
        self.skills = np.linspace(skill - spread, skill + spread, 61)
        self.conf_sd = conf_sd

    def hardness(self, size: int) -> float:
        """The simulator's hardness of a task of ``size`` (quadratic in ``size / unit``)."""
        return float((size / self.unit) ** 2)

    def error_rate(self, size: int) -> float:
        """Probability that one worker answers wrongly (averaged over its skill)."""
        h = self.hardness(size)
        return float(np.mean(np.minimum(0.98, (1.0 - self.skills) * h)))

    def _conf_lik(self, c: float | None, right: bool, h: float) -> float:
        if c is None:
            return 1.0
        mu = (0.75 if right else 0.62) - 0.05 * min(h, 3.0) / 3.0
        sd = self.conf_sd
        if c >= 1.0:
            return 1.0 - _norm_cdf((1.0 - mu) / sd)
        if c <= 0.0:
            return _norm_cdf((0.0 - mu) / sd)
        return math.exp(-0.5 * ((c - mu) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))

    def posterior(
        self, values: Sequence[Any], confs: Sequence[float | None], size: int
    ) -> tuple[list[Any], np.ndarray]:
        """Candidate truths and their posterior probabilities (flat prior).

        Integer tasks: every value each answer is consistent with (itself, or itself minus a
        possible offset); choice tasks: every choice.
        """
        e = self.error_rate(size)
        h = self.hardness(size)
        if self.kind == "int":
            cands: list[Any] = sorted(
                set.intersection(*({int(v) - d for d in (0, *_OFFSETS)} for v in values))
            )
        else:
            cands = list(self.choices)
        other = 1.0 / max(len(cands) - 1, 1)

        def wrong_p(a: Any, t: Any) -> float:
            return _OFFSETS.get(int(a) - int(t), 0.0) if self.kind == "int" else other

        logw = np.zeros(len(cands))
        for j, t in enumerate(cands):
            total = 0.0
            for a, c in zip(values, confs, strict=True):
                if a == t:
                    p = (1.0 - e) * self._conf_lik(c, True, h)
                else:
                    p = e * wrong_p(a, t) * self._conf_lik(c, False, h)
                if p <= 0.0:
                    total = -math.inf
                    break
                total += math.log(p)
            logw[j] = total
        logw -= logw.max()
        w = np.exp(logw)
        return cands, w / w.sum()

    def gains(
        self,
        values: Sequence[Any],
        confs: Sequence[float | None],
        size: int,
        horizon: int,
        rng: np.random.Generator,
        samples: int = 400,
    ) -> tuple[float, np.ndarray]:
        """``(P(vote right now), [P(vote right after j more) - P(now) for j = 1..horizon])``.

        Monte Carlo over the posterior and the next ``horizon`` answers, with the same draws
        for every ``j`` (paired). The vote is the majority, ties to the answer seen first.
        """
        cands, post = self.posterior(values, confs, size)
        e = self.error_rate(size)
        if self.kind == "int":
            codes = np.asarray(cands, dtype=np.int64)
            now = np.asarray([int(v) for v in values], dtype=np.int64)
        else:
            index = {c: i for i, c in enumerate(cands)}
            codes = np.arange(len(cands), dtype=np.int64)
            now = np.asarray([index.get(v, -1) for v in values], dtype=np.int64)
        t = codes[rng.choice(len(codes), size=samples, p=post)]
        wrong = rng.random((samples, horizon)) < e
        if self.kind == "int":
            off = _DELTAS[rng.integers(len(_DELTAS), size=(samples, horizon))]
        else:  # another choice, uniformly: shift by 1..n-1 modulo n
            off = rng.integers(1, len(codes), size=(samples, horizon))
        new = t[:, None] + np.where(wrong, off, 0)
        if self.kind != "int":
            new = np.where(wrong, new % len(codes), t[:, None])
        seq = np.concatenate([np.broadcast_to(now, (samples, len(now))), new], axis=1)
        eq = seq[:, :, None] == seq[:, None, :]
        counts = np.cumsum(eq, axis=2)  # counts[m, p, l]: copies of seq[m, p] among the first l+1
        n = len(now)
        right = []
        for length in range(n, n + horizon + 1):
            c = counts[:, :length, length - 1]
            winner = seq[np.arange(samples), c.argmax(axis=1)]  # first of the most common
            right.append(float(np.mean(winner == t)))
        return right[0], np.asarray(right[1:]) - right[0]


@dataclass
class PosteriorStop(Heuristic):
    """Stop when no look-ahead of up to ``horizon`` more workers pays for its tokens.

    An oracle reference (it knows the simulator's parameters), not a baseline; see the module
    docstring. ``token_cost`` is the reward lost per 1,000 tokens (the environment's
    ``token_cost``); the cost of one more worker is estimated from the tokens so far.
    """

    token_cost: float = 0.1
    horizon: int = 9
    samples: int = 400
    name: str = "posterior"
    _models: dict[str, SimModel] = field(default_factory=dict, repr=False)

    def stop(self, info: dict[str, Any], env: OrchestrationEnv) -> bool:
        """Whether to stop now (reads the answers and confidences, never the truth)."""
        st = env.state
        values = [v for v, _ in st["answers"]]
        n = len(values)
        room = min(env.config.max_rounds - st["rounds"], env.config.max_workers - n)
        if n == 0:
            return False
        if room <= 0:
            return True
        model = self._models.get(env.task_name)
        if model is None:
            model = self._models[env.task_name] = SimModel(env.task_name)
        rng = np.random.default_rng([int(env.seed), n, 0xB0])
        _, gain = model.gains(
            values,
            list(st["confidence"]),
            int(st["size"]),
            min(self.horizon, room),
            rng,
            self.samples,
        )
        per_worker = self.token_cost * float(info["tokens"]) / n / 1000.0
        return not bool(np.any(gain - per_worker * np.arange(1, len(gain) + 1) > 0))

    def __str__(self) -> str:
        return f"posterior-{self.token_cost:g}"
