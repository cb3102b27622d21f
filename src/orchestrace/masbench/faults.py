"""Fault injection for error-amplification measurements (E4).

Faults are runtime interventions, decided per unit by a seeded hash (so a run with faults is
reproducible and independent of scheduling order):

* :class:`WrongAnswers`: a worker's answer (a ``solve`` call) is wrong with probability ``rate``;
* :class:`DropMessages`: a message is lost with probability ``rate``;
* tool failures: ``RunConfig.tool_failure_rate`` (the runtime's own injector).

Each injector counts the units it saw and the faults it injected, so the measured injected
rate is reported next to the nominal one.

Example:
    >>> from orchestrace.runtime import run
    >>> from orchestrace.runtime.backends.sim import SimBackend
    >>> wrong = WrongAnswers(SimBackend(seed=1), rate=1.0)
    >>> res = run("centralized", "arith", agents=3, seed=1, backend=wrong)
    >>> wrong.injected == wrong.seen > 0, res.success
    (True, False)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from orchestrace._numbers import is_finite
from orchestrace.errors import ConfigError
from orchestrace.runtime.replay import Intervention

__all__ = ["FAULTS", "DropMessages", "WrongAnswers", "corrupt"]

#: Fault kinds the benchmark injects.
FAULTS = ("wrong_answer", "dropped_message", "tool_failure")


def _draw(*parts: Any) -> float:
    h = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2**64


def corrupt(value: Any) -> Any:
    """A wrong version of ``value`` (same type where possible)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, float):
        return value * 1.5 + 1.0
    if isinstance(value, str):
        return f"{value}-wrong" if value else "wrong"
    if isinstance(value, list):
        return [corrupt(v) for v in value] if value else ["wrong"]
    if isinstance(value, dict):
        return {k: corrupt(v) if k in ("answer", "value") else v for k, v in value.items()}
    return "wrong"


class WrongAnswers:
    """A backend wrapper that makes ``solve`` answers wrong with probability ``rate``.

    A worker answers wrongly, whatever the topology does with the answer next.

    Args:
        backend: The backend to wrap.
        rate: Probability that a ``solve`` call's answer is wrong.
        seed: Seed of the draws (one per agent and call).
    """

    def __init__(self, backend: Any, rate: float, seed: int = 0) -> None:
        check_rate(rate, "WrongAnswers")
        rate = float(rate)
        self.inner = backend
        self.rate = rate
        self.seed = seed
        self.seen = 0
        self.injected = 0
        self.name = getattr(backend, "name", "backend")
        self.virtual = getattr(backend, "virtual", False)

    async def complete(self, request: Any) -> Any:
        """Answer through the wrapped backend; maybe corrupt a ``solve`` answer."""
        resp = await self.inner.complete(request)
        if request.kind != "solve" or resp.error or resp.answer is None:
            return resp
        self.seen += 1
        if _draw("wrong", self.seed, request.agent, request.fingerprint().hex()) < self.rate:
            self.injected += 1
            wrong = corrupt(resp.answer)
            return dataclasses.replace(resp, answer=wrong, text=f"ANSWER: {json.dumps(wrong)}")
        return resp

    async def aclose(self) -> None:
        """Close the wrapped backend."""
        await self.inner.aclose()


def check_rate(rate: Any, who: str) -> None:
    """Refuse a fault rate that is not a probability.

    Raises:
        ConfigError: ``rate`` is not a number from 0 to 1.
    """
    if not is_finite(rate) or not 0 <= rate <= 1:
        raise ConfigError(f"{who} rate must be a probability from 0 to 1, got {rate!r}")


@dataclass
class DropMessages(Intervention):
    """Messages are lost with probability ``rate``."""

    rate: float
    seed: int = 0
    seen: int = field(default=0, compare=False)
    injected: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        check_rate(self.rate, "DropMessages")
        self.rate = float(self.rate)

    def message(
        self, sender: str, step: int, index: int, to: str, content: str, data: Any
    ) -> tuple[str, Any] | None:
        """Drop this message with probability ``rate``."""
        self.seen += 1
        if _draw("drop", self.seed, sender, step, index, to) < self.rate:
            self.injected += 1
            return None
        return content, data

    def describe(self) -> dict[str, Any]:
        """JSON description."""
        return {"kind": "DropMessages", "rate": self.rate, "seed": self.seed}
