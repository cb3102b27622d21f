"""Run configuration: budgets, seeds, fault injection and topology options.

Like TRL's configs: a dataclass whose fields carry help text, with cross-field checks in
``__post_init__`` that say how to fix a bad value.

Example:
    >>> cfg = RunConfig(agents=16, max_steps=500)
    >>> cfg.to_dict()["agents"]
    16
    >>> RunConfig(agents=0)
    Traceback (most recent call last):
    ...
    orchestrace.errors.ConfigError: agents must be >= 1 (got 0): the number of workers to use
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrace._numbers import MAX_INT, _shown, check_seed
from orchestrace.errors import ConfigError
from orchestrace.runtime.security import Defenses

__all__ = ["MAX_INT", "RunConfig", "check_seed"]


@dataclass
class RunConfig:
    """How to run one orchestration."""

    agents: int = field(default=8, metadata={"help": "the number of workers to use"})
    seed: int = field(default=0, metadata={"help": "seed of the simulator and of policy draws"})
    max_agents: int = field(default=1000, metadata={"help": "most agents alive in one run"})
    max_depth: int = field(default=8, metadata={"help": "deepest spawn level"})
    max_steps: int = field(default=100_000, metadata={"help": "most agent steps in one run"})
    max_tokens: int = field(default=100_000_000, metadata={"help": "most tokens in one run"})
    max_wall_s: float | None = field(
        default=None, metadata={"help": "longest run (virtual seconds on the simulator)"}
    )
    on_error: Literal["continue", "stop"] = field(
        default="continue", metadata={"help": "after a failed agent, tool or call: go on or stop"}
    )
    tool_latency_s: float = field(default=0.3, metadata={"help": "mean simulated tool latency"})
    tool_failure_rate: float = field(default=0.0, metadata={"help": "injected tool failures"})
    options: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "topology options (rounds, managers, ...)"}
    )
    defenses: Defenses = field(
        default_factory=Defenses, metadata={"help": "security defenses (all off by default)"}
    )

    def __post_init__(self) -> None:
        for name in ("agents", "max_agents", "max_depth", "max_steps", "max_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                help_ = self.__dataclass_fields__[name].metadata["help"]
                raise ConfigError(f"{name} must be >= 1 (got {_shown(value)}): {help_}")
            if value > MAX_INT:
                raise ConfigError(
                    f"{name} must be at most 2**63-1 (got {_shown(value)}); "
                    + (
                        "no task has that many parts; pass a smaller team"
                        if name == "agents"
                        else "a smaller budget stops the run just the same"
                    )
                )
        check_seed(self.seed)
        if self.max_wall_s is not None:
            wall = self.max_wall_s
            if (
                isinstance(wall, bool)
                or not isinstance(wall, int | float)
                or not math.isfinite(wall)
                or not wall > 0
            ):
                raise ConfigError(
                    f"max_wall_s must be a finite number of seconds > 0 (got {_shown(wall)}); "
                    "leave it out (no --max-wall) for no time limit"
                )
        for name in ("tool_failure_rate", "tool_latency_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{name} must be a number (got {_shown(value)})")
            if not math.isfinite(value):
                raise ConfigError(f"{name} must be a finite number (got {_shown(value)})")
        given: Any = self.defenses
        if isinstance(given, dict):  # from a recorded config (trace meta)
            self.defenses = Defenses.from_dict(given)
        if not isinstance(self.defenses, Defenses):
            raise ConfigError(
                f"defenses must be a Defenses (got {_shown(self.defenses)}); "
                "use Defenses.none() or Defenses.all()"
            )
        if not isinstance(self.options, dict):
            raise ConfigError(f"options must be a mapping (got {_shown(self.options)})")
        if self.on_error not in ("continue", "stop"):
            raise ConfigError(f"on_error must be 'continue' or 'stop' (got {self.on_error!r})")
        if not 0.0 <= self.tool_failure_rate <= 1.0:
            raise ConfigError(f"tool_failure_rate must be in [0, 1] (got {self.tool_failure_rate})")
        if self.tool_latency_s < 0:
            raise ConfigError(f"tool_latency_s must be >= 0 (got {self.tool_latency_s})")
        if self.max_agents < 1 + min(self.agents, 1):
            raise ConfigError(
                f"max_agents ({self.max_agents}) leaves no room for workers; raise it above 1"
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy (recorded in trace meta; ``defenses`` only when any is on)."""
        out = {
            f.name: copy.deepcopy(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name != "defenses"
        }
        if not self.defenses.is_none():
            out["defenses"] = self.defenses.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        """Rebuild from :meth:`to_dict` output (unknown and missing keys are an error).

        Every setting but ``defenses`` (written only when one is on) must be there: a missing
        one would take its default, which the recorded run may not have used.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"unknown config keys {sorted(unknown)}; known: {sorted(known)}")
        missing = sorted(known - set(data) - {"defenses"})
        if missing:
            raise ConfigError(
                f"config keys {missing} are missing (a recorded run states every setting; a "
                "default in their place might not be what the run used)"
            )
        return cls(**data)
