"""Weighted combinations of rewards, annotation of traces, and TOML reward specs.

A spec names each reward (the name it is logged under, ``rewards/<name>``), its factory
(``family``, default: the name) and the factory's parameters; ``weight`` sets its share of the
total. Schedules are written as tables: ``lambda1 = {start = 0.2, end = 0.0, steps = 1000}``.

Example:
    >>> spec = {"team": {"weight": 1.0}, "parl": {"weight": 0.5, "lambda1": 0.2},
    ...         "tools": {"family": "R5", "weight": 0.1, "cost_weight": 0.01}}
    >>> combo = Composite.from_spec(spec)
    >>> sorted(combo.rewards)
    ['parl', 'team', 'tools']
    >>> from orchestrace.runtime import run
    >>> tr = run("swarm", "search", agents=4, seed=3).trace
    >>> out = combo.annotate([tr])[0]
    >>> sorted(k for k in out.rewards if k.startswith("rewards/"))
    ['rewards/parl', 'rewards/team', 'rewards/tools', 'rewards/total']
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.rewards.base import RewardFn, make
from orchestrace.rewards.parl import Anneal
from orchestrace.trace.model import Trace

__all__ = ["Composite", "load_spec"]


class Composite:
    """A weighted sum of named rewards.

    ``None`` values are skipped; a trace where every reward is ``None`` gets ``None``.
    """

    name = "total"

    def __init__(self, rewards: Mapping[str, tuple[RewardFn, float]]) -> None:
        if not rewards:
            raise ConfigError("a composite reward needs at least one reward")
        self.rewards = dict(rewards)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Mapping[str, Any]]) -> Composite:
        """Build from a spec mapping (see the module docstring)."""
        out: dict[str, tuple[RewardFn, float]] = {}
        for name, raw in spec.items():
            if not isinstance(raw, Mapping):
                raise ConfigError(f"reward {name!r}: expected a table of settings, got {raw!r}")
            params = dict(raw)
            family = str(params.pop("family", params.pop("reward", name)))
            weight = params.pop("weight", 1.0)
            if not isinstance(weight, int | float):
                raise ConfigError(f"reward {name!r}: weight must be a number, got {weight!r}")
            for k, v in list(params.items()):
                if isinstance(v, Mapping) and "start" in v:
                    try:
                        params[k] = Anneal(**v)
                    except TypeError as err:
                        raise ConfigError(f"reward {name!r}, {k}: {err}") from None
            fn = make(family, **params)
            out[name] = (fn, float(weight))
        return cls(out)

    def components(self, traces: Sequence[Trace], **kw: Any) -> dict[str, list[float | None]]:
        """Each reward's values, by name."""
        return {name: fn(traces, **kw) for name, (fn, _) in self.rewards.items()}

    def __call__(self, traces: Sequence[Trace], **kw: Any) -> list[float | None]:
        """The weighted totals."""
        return self.total(self.components(traces, **kw))

    def total(self, parts: Mapping[str, list[float | None]]) -> list[float | None]:
        """Weighted sums of precomputed components."""
        n = len(next(iter(parts.values()))) if parts else 0
        out: list[float | None] = []
        for i in range(n):
            vals = [(self.rewards[k][1], x) for k, v in parts.items() if (x := v[i]) is not None]
            out.append(float(sum(w * x for w, x in vals)) if vals else None)
        return out

    def annotate(self, traces: Sequence[Trace], **kw: Any) -> list[Trace]:
        """Copies of the traces with ``rewards/<name>`` and ``rewards/total`` added."""
        parts = self.components(traces, **kw)
        totals = self.total(parts)
        out = []
        for i, tr in enumerate(traces):
            rewards = dict(tr.rewards)
            for name, vals in parts.items():
                if vals[i] is not None:
                    rewards[f"rewards/{name}"] = float(vals[i])  # type: ignore[arg-type]
            if totals[i] is not None:
                rewards["rewards/total"] = float(totals[i])  # type: ignore[arg-type]
            out.append(tr.replace(rewards=rewards))
        return out


def load_spec(path: str | Path) -> Composite:
    """Read a TOML reward spec (``[reward.<name>]`` tables, or top-level tables).

    Raises:
        ConfigError: Missing file, bad TOML, or bad settings (the message names the reward).
    """
    try:
        data = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such reward spec file") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    spec = data.get("reward", data.get("rewards", data))
    if not isinstance(spec, dict) or not spec:
        raise ConfigError(f"{path}: no rewards; add tables like [reward.team] weight = 1.0")
    return Composite.from_spec(spec)
