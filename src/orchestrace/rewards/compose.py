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

import difflib
import inspect
import math
import os
import stat
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrace._numbers import is_finite
from orchestrace.errors import ConfigError
from orchestrace.rewards.base import REGISTRY, RewardFn, make
from orchestrace.rewards.parl import Anneal
from orchestrace.trace.model import Trace

__all__ = ["Composite", "load_spec"]

#: Largest reward spec file read.
MAX_SPEC_BYTES = 1 << 20
_ANNEAL_KEYS = ("start", "end", "steps", "kind")
_NL = b"\n"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Entry:
    """Names one spec entry in messages: ``rewards.toml: [reward.tools]: ...``."""

    def __init__(self, name: str, source: str | None, table: str | None) -> None:
        self.label = f"[{table}.{name}]" if table else f"[{name}]"
        self.prefix = f"{source}: " if source else ""

    def error(self, what: str, fix: str) -> ConfigError:
        return ConfigError(f"{self.prefix}{self.label}: {what}; {fix}")


def _settings(family: str) -> tuple[dict[str, str], bool] | None:
    """A family's settable parameters (name -> annotation text), and whether it takes more."""
    factory = REGISTRY.get(family) or REGISTRY.get(family.lower())
    if factory is None:
        return None
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return None
    params: dict[str, str] = {}
    extra = False
    for p in sig.parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            extra = True
        elif p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            ann = p.annotation
            params[p.name] = ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))
    return params, extra


def _check_number(entry: _Entry, key: str, value: Any, integer: bool = False) -> None:
    kind = "an integer" if integer else "a number"
    if not _is_number(value) or (integer and not isinstance(value, int)):
        raise entry.error(
            f"{key} must be {kind} (got {_shown(value)})",
            f"write e.g. {key} = {'100' if integer else '0.5'}",
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise entry.error(
            f"{key} must be a finite number (got {value!r})", f"write e.g. {key} = 0.5"
        )


def _check_schedule(entry: _Entry, key: str, table: Mapping[str, Any]) -> None:
    unknown = [k for k in table if k not in _ANNEAL_KEYS]
    if unknown or "start" not in table:
        raise entry.error(
            f"{key} schedule has {'unknown key ' + repr(unknown[0]) if unknown else 'no start'}",
            f'write {key} = {{start = 0.2, end = 0.0, steps = 1000, kind = "linear"}}',
        )
    for k in ("start", "end"):
        if k in table:
            _check_number(entry, f"{key}.{k}", table[k])
    if "steps" in table:
        _check_number(entry, f"{key}.steps", table["steps"], integer=True)
    if "kind" in table and not isinstance(table["kind"], str):
        raise entry.error(
            f"{key}.kind must be a string (got {_shown(table['kind'])})",
            'use kind = "linear", "cosine" or "exp"',
        )


def _toml_settable(annotation: str) -> bool:
    ann = annotation.replace(" ", "")
    return ann.startswith("dict[") or bool({"float", "int", "str", "bool"} & set(ann.split("|")))


def _check_setting(entry: _Entry, key: str, value: Any, annotation: str) -> None:
    ann = annotation.replace(" ", "")
    if isinstance(value, Mapping) and "Anneal" in ann:
        _check_schedule(entry, key, value)
        return
    if ann.startswith("dict["):
        if not isinstance(value, Mapping):
            raise entry.error(
                f"{key} must be a table (got {_shown(value)})",
                f"write e.g. {key} = {{expert = 1.0, novice = 0.5}}",
            )
        for k, v in value.items():
            _check_number(entry, f"{key}.{k}", v)
        return
    options = set(ann.split("|"))
    if "float" in options:
        _check_number(entry, key, value)
    elif "int" in options:
        _check_number(entry, key, value, integer=True)
    elif "str" in options:
        if not isinstance(value, str):
            raise entry.error(
                f"{key} must be a string (got {_shown(value)})", f'write e.g. {key} = "name"'
            )
    elif "bool" in options:
        if not isinstance(value, bool):
            raise entry.error(
                f"{key} must be true or false (got {_shown(value)})", f"write {key} = true"
            )
    else:
        raise entry.error(
            f"{key} cannot be set in a spec (it takes a Python object)",
            "remove it, or build the reward in Python with orchestrace.rewards.make",
        )


class Composite:
    """A weighted sum of named rewards.

    ``None`` values are skipped; a trace where every reward is ``None`` gets ``None``.
    """

    name = "total"

    def __init__(self, rewards: Mapping[str, tuple[RewardFn, float]]) -> None:
        if not rewards:
            raise ConfigError("a composite reward needs at least one reward")
        parts: dict[str, tuple[RewardFn, float]] = {}
        for name, part in rewards.items():
            if not (isinstance(part, tuple | list) and len(part) == 2 and callable(part[0])):
                raise ConfigError(
                    f"composite part {name!r}: give (reward function, weight), got "
                    f"{type(part).__name__}"
                )
            weight = part[1]
            if not is_finite(weight):
                raise ConfigError(
                    f"composite part {name!r}: weight must be a finite number, got {weight!r}"
                )
            parts[name] = (part[0], float(weight))
        self.rewards = parts

    @classmethod
    def from_spec(
        cls,
        spec: Mapping[str, Mapping[str, Any]],
        *,
        source: str | None = None,
        table: str | None = "reward",
    ) -> Composite:
        """Build from a spec mapping (see the module docstring).

        Every entry is checked before any reward is built: ``family`` a known reward,
        ``weight`` a finite number, each parameter known to the family and of its type (finite
        numbers, schedule tables). Errors name the entry as it is written in a spec file, e.g.
        ``rewards.toml: [reward.tools]: cost_weight must be a number (got 'x'); ...``.

        Args:
            spec: Reward name -> settings.
            source: File the spec came from (named in errors).
            table: Table the entries sit under in that file (``reward``, ``rewards`` or
                ``None`` for top-level tables).

        Raises:
            ConfigError: A bad entry (the message names the file, the entry and the fix).
        """
        out: dict[str, tuple[RewardFn, float]] = {}
        for name, raw in spec.items():
            entry = _Entry(str(name), source, table)
            if not isinstance(raw, Mapping):
                raise entry.error(
                    f"expected a table of settings, got {_shown(raw)}",
                    f"write it as [{table + '.' if table else ''}{name}] with weight = 1.0",
                )
            params = dict(raw)
            family = params.pop("family", params.pop("reward", name))
            if not isinstance(family, str) or not family:
                raise entry.error(
                    f"family must be a reward name (got {_shown(family)})",
                    f"use one of: {', '.join(sorted(REGISTRY))}",
                )
            weight = params.pop("weight", 1.0)
            if not _is_number(weight):
                raise entry.error(
                    f"weight must be a number, got {_shown(weight)}", "write e.g. weight = 0.5"
                )
            if not math.isfinite(weight):
                raise entry.error(
                    f"weight must be a finite number (got {weight!r})", "write e.g. weight = 0.5"
                )
            known = _settings(family)
            if known is None:
                raise entry.error(
                    f"unknown reward {family!r}", f"use one of: {', '.join(sorted(REGISTRY))}"
                )
            settable, extra = known
            for key, value in params.items():
                if key not in settable:
                    if extra:
                        continue
                    usable = sorted(k for k, a in settable.items() if _toml_settable(a))
                    close = difflib.get_close_matches(key, usable, n=1, cutoff=0.6)
                    raise entry.error(
                        f"unknown setting {_shown(key)} for reward {family!r}"
                        + (f" (did you mean {close[0]!r}?)" if close else ""),
                        f"its settings are: {', '.join(['weight', 'family', *usable])}",
                    )
                _check_setting(entry, key, value, settable[key])
            for k, v in list(params.items()):
                if isinstance(v, Mapping) and "start" in v:
                    try:
                        params[k] = Anneal(**v)
                    except (TypeError, ValueError, ConfigError) as err:
                        raise entry.error(f"{k}: {err}", "fix the schedule table") from None
            try:
                fn = make(family, **params)
            except (ConfigError, TypeError, ValueError, OverflowError) as err:
                raise entry.error(str(err), "fix this entry") from None
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
            vals = [(k, self.rewards[k][1], x) for k, v in parts.items() if (x := v[i]) is not None]
            total = float(sum(w * x for _, w, x in vals)) if vals else None
            if total is not None and not math.isfinite(total):
                raise ConfigError(
                    f"the composite reward of trace {i} is {total} (weight x reward: "
                    + ", ".join(f"{k} {w!r} x {x!r}" for k, w, x in vals)
                    + "); use weights and rewards whose weighted sum is a finite number"
                )
            out.append(total)
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
        ConfigError: Missing, unreadable, oversized or non-UTF-8 file, bad TOML, or bad
            settings (the message names the file, the entry and the fix).
    """
    if not isinstance(path, str | os.PathLike):  # (an int would be taken for an open file)
        raise ConfigError(
            f"load_spec takes a path to a TOML file, not a {type(path).__name__}; "
            "pass a path such as 'rewards.toml'"
        )
    where = str(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such reward spec file") from None
    except OSError as err:
        raise ConfigError(f"{where}: cannot read the reward spec: {err.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{where}: is a directory; pass a TOML file such as rewards.toml")
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{where}: not a regular file; save the reward spec to a TOML file")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"{where}: cannot read the reward spec: {err.strerror}") from None
    if len(raw) > MAX_SPEC_BYTES:
        raise ConfigError(
            f"{where}: over {MAX_SPEC_BYTES} bytes; a reward spec is a small TOML file"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{where}: not UTF-8 text (line {raw[: err.start].count(_NL) + 1}, byte "
            f"{err.start}: {raw[err.start : err.start + 1]!r}); "
            "save the spec as UTF-8"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{where}: not valid TOML: {err}; fix the syntax there") from None
    except RecursionError:
        raise ConfigError(
            f"{where}: arrays or tables nested too deeply to read; a reward spec needs at most "
            "two levels ([reward.<name>] tables of numbers and strings)"
        ) from None
    table: str | None
    if "reward" in data:
        spec, table = data["reward"], "reward"
    elif "rewards" in data:
        spec, table = data["rewards"], "rewards"
    else:
        spec, table = data, None
    if not isinstance(spec, dict) or not spec:
        raise ConfigError(f"{where}: no rewards; add tables like [reward.team] weight = 1.0")
    return Composite.from_spec(spec, source=where, table=table)
