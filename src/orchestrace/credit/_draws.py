"""Draws of the credit methods that re-execute a run (Shapley, leave-one-out).

A unit's value on a stochastic backend is estimated from ``samples`` draws: draw 0 is the
recorded run, draw ``k >= 1`` draws again the LLM calls the units can influence
(:func:`downstream_llm_keys` from :func:`unit_starts`, via :func:`redraw`) on the backend
:class:`SampleBackends` gives for ``k`` (reseeded, hence paired, where the backend takes a
seed). :func:`estimate` turns per-draw values into a mean, a standard error and a 95%
interval; :func:`sample_stats` says what the draws were. Re-exported by
:mod:`orchestrace.credit.shapley`.

Example:
    >>> check_samples(4), estimate([1.0, 1.0], deterministic=True)["ci95"]
    (4, [1.0, 1.0])
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.runtime.backends.openai import OpenAIBackend
from orchestrace.runtime.replay import Intervention, backend_for, message_readers
from orchestrace.stats import t95
from orchestrace.trace.model import Trace

__all__ = [
    "MAX_SAMPLES",
    "SampleBackends",
    "check_samples",
    "downstream_llm_keys",
    "estimate",
    "redraw",
    "sample_stats",
    "unit_starts",
]

#: Most draws per coalition or arm (``--samples``) a re-executing credit method accepts.
MAX_SAMPLES = 1_000_000


def check_samples(samples: object, what: str = "samples") -> int:
    """``samples`` as a count of draws, or a ConfigError naming ``--samples``."""
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_SAMPLES:
        raise ConfigError(
            f"{what} must be an integer from 1 to {MAX_SAMPLES:,} (--samples K), got "
            f"{str(samples)[:40]}"
        )
    return samples


def estimate(
    values: Sequence[float], deterministic: bool = False, limit: float | None = None
) -> dict[str, Any]:
    """Mean of per-draw values with its standard error and Student-t 95% interval.

    ``se`` and ``ci95`` are ``None`` with one draw of a stochastic backend, 0 and the point on
    a deterministic one. With ``limit`` (the values are differences of rewards that lie in a
    range of that width, e.g. 1 for the team reward) the interval is clipped to
    ``[-limit, limit]``, the values' possible range.

    Example:
        >>> e = estimate([1.0, 0.0, 1.0, 1.0])
        >>> e["value"], round(e["se"], 4), e["samples"]
        (0.75, 0.25, 4)
    """
    n = len(values)
    mean = float(sum(values) / n) if n else 0.0
    se: float | None
    ci: list[float] | None
    if deterministic:
        se, ci = 0.0, [mean, mean]
    elif n < 2:
        se, ci = None, None
    else:
        var = sum((v - mean) ** 2 for v in values) / (n - 1)
        se = math.sqrt(var / n)
        half = t95(n - 1) * se
        ci = [mean - half, mean + half]
        if limit is not None:
            ci = [max(ci[0], -limit), min(ci[1], limit)]
    return {"value": mean, "se": se, "ci95": ci, "samples": n}


def downstream_llm_keys(trace: Trace, starts: Sequence[int]) -> tuple[str, ...]:
    """Replay keys of the LLM calls at event indices ``starts`` or reachable from them."""
    index = {e.id: i for i, e in enumerate(trace.events)}
    succ: dict[int, list[int]] = {}
    for edge in trace.edges:
        u, v = index.get(edge.src), index.get(edge.dst)
        if u is not None and v is not None:
            succ.setdefault(u, []).append(v)
    seen = set(starts)
    stack = list(starts)
    while stack:
        for v in succ.get(stack.pop(), ()):
            if v not in seen:
                seen.add(v)
                stack.append(v)
    keys = []
    for i in sorted(seen):
        e = trace.events[i]
        key = (e.attrs or {}).get("key")
        if e.type == "llm_call" and isinstance(key, str):
            keys.append(key)
    return tuple(keys)


def unit_starts(trace: Trace, unit: str, key: str) -> list[int]:
    """Where a unit's influence on a run starts: an agent's events, a message's readers."""
    if unit == "agent":
        return [i for i, e in enumerate(trace.events) if e.agent == key]

    return message_readers(trace, key)


@functools.cache
def _redraw_class() -> type:
    @dataclass
    class RedrawCalls(Intervention):
        """Draw again the recorded LLM calls with these replay keys."""

        keys: tuple[str, ...] = ()

        def redraws(self) -> frozenset[str]:
            """The calls drawn again."""
            return frozenset(self.keys)

        def describe(self) -> dict[str, Any]:
            """Kind and how many calls are drawn again."""
            return {"kind": "RedrawCalls", "calls": len(self.keys)}

        def __reduce__(self) -> tuple[Any, tuple[tuple[str, ...]]]:
            return redraw, (self.keys,)  # pickled by its maker: it reaches worker processes

    return RedrawCalls


def redraw(keys: Sequence[str]) -> Any:
    """An intervention that draws the LLM calls with replay ``keys`` again (answers discarded)."""
    return _redraw_class()(tuple(keys))


class SampleBackends:
    """The backend of each draw of a coalition or arm (the recorded one by default).

    Draw 0 uses the backend as recorded. Draw ``k`` reseeds a backend that takes a seed: the
    simulator, and an OpenAI-compatible backend that sends a ``seed`` with every call (servers
    that honour it answer a prompt the same way for the same seed), both with the recorded
    seed plus ``k``: the draws are then paired. Any other backend answers every draw itself
    (a real backend that samples without a seed draws afresh at each call: not paired).

    Args:
        backend: ``None`` (the recorded backend), a backend name, or a backend object.
        options: Options of a backend given by name, or replacing recorded ones.
        assume_deterministic: Take the backend as deterministic (the user says so).
    """

    def __init__(
        self,
        backend: Any,
        options: Mapping[str, Any] | None = None,
        assume_deterministic: bool = False,
    ) -> None:
        self.backend = backend
        self.options = dict(options or {})
        self.assume_deterministic = assume_deterministic
        self._built: dict[int, Any] = {}

    def __call__(self, trace: Trace, k: int = 0) -> Any:
        """The backend of draw ``k``."""
        first: Any = self._built.get(0)
        if first is None:
            first = self._built[0] = backend_for(trace, self.backend, **self.options)
        if k == 0 or not self.paired(trace):
            return first
        if k not in self._built:
            if getattr(first, "name", "") == "sim":
                self._built[k] = backend_for(
                    trace, self.backend, seed_offset=k, check=False, **self.options
                )
            else:
                self._built[k] = dataclasses.replace(
                    first, seed=first.seed + k, _client=None, _sem=None
                )
        return self._built[k]

    def paired(self, trace: Trace) -> bool:
        """Whether draw ``k`` is the same in every coalition or arm (a reseeded backend)."""
        first = self(trace, 0)
        name = getattr(first, "name", "")
        if name == "sim":
            return True

        return (
            isinstance(first, OpenAIBackend)
            and isinstance(first.seed, int)
            and not self.deterministic(trace)
        )

    def deterministic(self, trace: Trace) -> bool:
        """Whether the backend answers a request the same way every time (one draw suffices)."""
        from orchestrace.credit.counterfactual import deterministic_backend  # noqa: PLC0415  import cycle: orchestrace.credit.counterfactual imports this module

        return deterministic_backend(self(trace, 0), assume=self.assume_deterministic)


def sample_stats(
    samples: int, k_used: int, backends: SampleBackends, trace: Trace
) -> dict[str, Any]:
    """What a sampled method reports about its draws."""
    deterministic = backends.deterministic(trace)
    stats: dict[str, Any] = {
        "samples": k_used,
        "deterministic": deterministic,
        "paired": k_used > 1 and backends.paired(trace),
    }
    if deterministic and samples > 1:
        stats["note"] = f"the backend answers deterministically: 1 draw, not {samples}"
    elif k_used == 1 and not deterministic:
        stats["note"] = "one draw (the recorded run): no error bar from draws (--samples K >= 2)"
    return stats
