"""Defenses the runtime enforces: signed messages, a capability policy, taint labels.

The runtime sits below :mod:`orchestrace.safety` in the layering, so the parts it enforces live
here and :mod:`orchestrace.safety` re-exports them:

* :class:`Defenses`: which defenses a run uses (``RunConfig.defenses``; recorded in the
  trace's ``meta.config.defenses``, never its keys);
* :class:`CapabilityPolicy` / :class:`RolePolicy`: what each role may do (spawn, delegate,
  stop, aggregate, which tools), read from TOML or a mapping with one-line errors;
* :class:`Keyring`: per-agent HMAC-SHA256 keys that sign ``(sender, recipient, content,
  step, data)`` of every message;
* :class:`RunSecret`: the run secret the keys derive from (with the run seed); it never
  enters a trace, a log or a ``repr``.

The keys and the run secret live in :mod:`orchestrace.runtime._keys` and are re-exported
here; this module holds the policy and the choice of defenses.

Example:
    >>> d = Defenses.all()
    >>> d.sign_messages, d.aggregation, d.capabilities.allows("worker", "spawn")
    (True, 'quorum', False)
    >>> Defenses.none().is_none()
    True
    >>> Defenses(aggregation="median")
    Traceback (most recent call last):
    ...
    orchestrace.errors.ConfigError: defenses.aggregation must be one of plain, trust_weighted, trimmed, quorum (got 'median')
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from orchestrace.errors import ConfigError
from orchestrace.runtime._keys import (
    SECRET_ENV,
    Keyring,
    RunSecret,
    _read_text,
    as_path,
    run_secret_from_env,
)

__all__ = [
    "ACTIONS",
    "AGGREGATIONS",
    "ENDORSING_ROLES",
    "ROOT_ROLE",
    "SECRET_ENV",
    "CapabilityPolicy",
    "Defenses",
    "Keyring",
    "RolePolicy",
    "RunSecret",
    "defenses_from",
    "run_secret_from_env",
]

#: Actions a capability policy rules on (besides tool calls).
ACTIONS: tuple[str, ...] = ("spawn", "delegate", "stop", "aggregate")
#: Robust aggregation choices of :attr:`Defenses.aggregation`.
AGGREGATIONS: tuple[str, ...] = ("plain", "trust_weighted", "trimmed", "quorum")
#: The root agent's role: no other agent may take it.
ROOT_ROLE = "orchestrator"
_ROLE_KEYS = (
    "may_spawn",
    "may_delegate",
    "may_stop",
    "may_aggregate",
    "may_endorse",
    "tools",
    "trusted",
)
#: Roles that may endorse tainted data when no capability policy says otherwise.
ENDORSING_ROLES: tuple[str, ...] = ("orchestrator", "verifier")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class RolePolicy:
    """What agents of one role may do.

    Example:
        >>> RolePolicy(tools=("search",)).may_call("search"), RolePolicy().may_call("x")
        (True, True)
    """

    may_spawn: bool = field(default=False, metadata={"help": "start child agents"})
    may_delegate: bool = field(default=False, metadata={"help": "hand sub-tasks to agents"})
    may_stop: bool = field(default=False, metadata={"help": "take the stop decision"})
    may_aggregate: bool = field(default=False, metadata={"help": "combine results"})
    tools: tuple[str, ...] | None = field(
        default=None, metadata={"help": "tools it may call (None: every tool; (): none)"}
    )
    trusted: bool = field(
        default=True, metadata={"help": "its messages are trusted (else tainted)"}
    )
    may_endorse: bool = field(
        default=False,
        metadata={"help": "endorse tainted data so it may drive its decisions (taint on)"},
    )

    def may_call(self, tool: str) -> bool:
        """Whether this role may call ``tool``."""
        return self.tools is None or tool in self.tools

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``tools`` is ``["*"]`` for every tool)."""
        d = dataclasses.asdict(self)
        d["tools"] = ["*"] if self.tools is None else list(self.tools)
        return d


#: What the root role may do unless a policy lists it.
_ROOT_RULES = RolePolicy(True, True, True, True, may_endorse=True)
#: The structural rights of built-in roles, kept unless a policy lists the role.
_BUILTIN_RIGHTS: dict[str, dict[str, Any]] = {
    "manager": {"may_spawn": True, "may_delegate": True, "may_aggregate": True},
    "aggregator": {"may_aggregate": True},
    "judge": {"may_aggregate": True},
    "verifier": {"may_endorse": True},
}


def _role_from(name: str, data: object, where: str) -> RolePolicy:
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{where}: role {name!r} must be a table of {', '.join(_ROLE_KEYS)} "
            f"(got {_short(data)})"
        )
    unknown = sorted(set(data) - set(_ROLE_KEYS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r} in role {name!r}; use: {', '.join(_ROLE_KEYS)}"
        )
    kw: dict[str, Any] = {}
    for key in ("may_spawn", "may_delegate", "may_stop", "may_aggregate", "may_endorse", "trusted"):
        if key in data:
            if not isinstance(data[key], bool):
                raise ConfigError(
                    f"{where}: roles.{name}.{key} must be true or false (got {_short(data[key])})"
                )
            kw[key] = data[key]
    if "tools" in data:
        tools = data["tools"]
        if not isinstance(tools, list | tuple) or not all(isinstance(t, str) and t for t in tools):
            raise ConfigError(
                f'{where}: roles.{name}.tools must be a list of tool names, or ["*"] for '
                f"every tool (got {_short(tools)})"
            )
        kw["tools"] = None if "*" in tools else tuple(sorted(set(tools)))
    if name in ENDORSING_ROLES:  # the orchestrator and verifier endorse unless told not to
        kw.setdefault("may_endorse", True)
    return RolePolicy(**kw)


@dataclass(frozen=True)
class CapabilityPolicy:
    """Per-role capabilities the runtime enforces; denials are recorded as ``safety_event``.

    Roles not listed get ``default``, except the root role (``orchestrator``) and the built-in
    roles that coordinate (``manager``, ``aggregator``, ``judge``, ``verifier``): unlisted, they
    keep the rights :meth:`default_policy` gives them (with ``default``'s tools and trust), so a
    policy that does not name them does not break the topologies that use them. No agent may
    spawn an agent of the root role.

    Example:
        >>> p = CapabilityPolicy.from_dict({"roles": {"worker": {"tools": ["search"]}}})
        >>> p.allows("worker", "tool", "search"), p.allows("worker", "tool", "shell")
        (True, False)
        >>> CapabilityPolicy.from_dict({"roles": {"worker": {"may_fly": True}}})
        Traceback (most recent call last):
        ...
        orchestrace.errors.ConfigError: policy: unknown key 'may_fly' in role 'worker'; use: may_spawn, may_delegate, may_stop, may_aggregate, may_endorse, tools, trusted
    """

    roles: Mapping[str, RolePolicy] = field(
        default_factory=dict, metadata={"help": "role name -> what it may do"}
    )
    default: RolePolicy = field(
        default_factory=RolePolicy, metadata={"help": "roles not listed (workers by default)"}
    )
    side_effect_tools: tuple[str, ...] = field(
        default=(), metadata={"help": "tools with side effects (tainted data may not drive them)"}
    )

    def role(self, name: str) -> RolePolicy:
        """The rules of role ``name``.

        A policy that does not list the root role (``orchestrator``) gives it the default
        policy's rules (it may spawn, delegate, stop and aggregate): every run starts with it,
        and a root that may not spawn or stop could not run at all.
        """
        r = self.roles.get(name)
        if r is not None:
            return r
        if name == ROOT_ROLE:
            return _ROOT_RULES
        rights = _BUILTIN_RIGHTS.get(name)
        return self.default if rights is None else dataclasses.replace(self.default, **rights)

    def allows(self, role: str, action: str, tool: str | None = None) -> bool:
        """Whether ``role`` may take ``action`` (one of :data:`ACTIONS`, or ``tool``)."""
        r = self.role(role)
        if action == "tool":
            return r.may_call(tool or "")
        if action not in ACTIONS:
            raise ConfigError(f"unknown action {action!r}; use one of: {', '.join(ACTIONS)}, tool")
        return bool(getattr(r, f"may_{action}"))

    @classmethod
    def default_policy(cls) -> CapabilityPolicy:
        """The default policy: the orchestrator may do everything.

        Managers spawn, delegate and aggregate; aggregators and judges aggregate; every other
        role only talks, returns and calls tools.
        """
        return cls(
            roles={
                ROOT_ROLE: _ROOT_RULES,
                **{k: RolePolicy(**v) for k, v in _BUILTIN_RIGHTS.items()},
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "policy") -> CapabilityPolicy:
        """Build from a mapping ``{"roles": {...}, "default": {...}, "side_effect_tools": [...]}``.

        Raises:
            ConfigError: One line naming the key (and ``source``) and the fix.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: a policy must be a table (got {_short(data)})")
        known = ("roles", "default", "side_effect_tools")
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(
                f"{source}: unknown key {unknown[0]!r}; a policy has: {', '.join(known)}"
            )
        if "roles" not in data:
            raise ConfigError(
                f"{source}: missing key 'roles'; add e.g. [roles.orchestrator] may_stop = true"
            )
        roles = data["roles"]
        if not isinstance(roles, Mapping) or not roles:
            raise ConfigError(f"{source}: 'roles' must be a non-empty table of role tables")
        built = {str(k): _role_from(str(k), v, source) for k, v in roles.items()}
        default = _role_from("default", data.get("default", {}), source)
        side = data.get("side_effect_tools", [])
        if not isinstance(side, list | tuple) or not all(isinstance(t, str) and t for t in side):
            raise ConfigError(
                f"{source}: side_effect_tools must be a list of tool names (got {_short(side)})"
            )
        return cls(
            roles=dict(sorted(built.items())), default=default, side_effect_tools=tuple(side)
        )

    @classmethod
    def from_toml(cls, path: str | Path) -> CapabilityPolicy:
        """Read a policy file (TOML).

        Raises:
            ConfigError: Unreadable or malformed file, unknown keys (one line, with the fix).
        """
        p = as_path(path, "CapabilityPolicy.from_toml", "pass a policy TOML file")
        text = _read_text(p, "the policy", "pass a policy TOML file")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"{p}: not valid TOML: {err}; fix the policy file") from None
        return cls.from_dict(data, source=str(p))

    def check_names(
        self, roles: Iterable[str], tools: Iterable[str], *, source: str = "policy"
    ) -> None:
        """Refuse a policy naming a role or tool the run does not have (before it starts).

        Raises:
            ConfigError: Naming the unknown role or tool and the known ones.
        """
        known_roles = set(roles) | {ROOT_ROLE}
        builtin = CapabilityPolicy.default_policy().roles
        for name, rules in self.roles.items():
            # the default policy's own rules for its roles apply to any run that has them
            if name not in known_roles and builtin.get(name) != rules:
                raise ConfigError(
                    f"{source}: unknown role {name!r}; roles of this run: "
                    f"{', '.join(sorted(known_roles))}"
                )
        known_tools = set(tools)
        named = [t for r in (*self.roles.values(), self.default) for t in (r.tools or ())]
        for t in (*named, *self.side_effect_tools):
            if t not in known_tools:
                raise ConfigError(
                    f"{source}: unknown tool {t!r}; tools of this run: "
                    f"{', '.join(sorted(known_tools)) or '(none)'}"
                )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what :meth:`from_dict` reads)."""
        return {
            "roles": {k: v.to_dict() for k, v in self.roles.items()},
            "default": self.default.to_dict(),
            "side_effect_tools": list(self.side_effect_tools),
        }


@dataclass(frozen=True)
class Defenses:
    """Which defenses a run uses. Every one is off in :meth:`none` (the default).

    Example:
        >>> Defenses(taint=True).to_dict()["taint"]
        True
    """

    sign_messages: bool = field(
        default=False, metadata={"help": "sign every message (HMAC-SHA256); reject forgeries"}
    )
    capabilities: CapabilityPolicy | None = field(
        default=None, metadata={"help": "per-role capability policy the runtime enforces"}
    )
    taint: bool = field(
        default=False,
        metadata={"help": "label content of tools and untrusted agents; block tainted decisions"},
    )
    spotlight: bool = field(
        default=False, metadata={"help": "delimit and datamark untrusted content in prompts"}
    )
    aggregation: Literal["plain", "trust_weighted", "trimmed", "quorum"] = field(
        default="plain", metadata={"help": "how votes are combined: plain or a robust method"}
    )
    detector: str | None = field(
        default=None,
        metadata={"help": "prompt-injection detector: 'builtin' or a local model path"},
    )
    keys: Literal["secret", "seed", "random"] | None = field(
        default=None,  # resolved in __post_init__: "secret" with signing on, else "seed"
        metadata={
            "help": "signing keys derived from the run secret and the seed ('secret', the "
            "default with signing on: not derivable from the trace; a replay or fork given "
            "the same secret signs the same way), from os.urandom and never kept ('random'), "
            "or from the seed alone ('seed': reproducible, but agent code that reads the "
            "seed can forge them)"
        },
    )
    secret: RunSecret | None = field(
        default=None,
        repr=False,
        compare=False,
        metadata={
            "help": "the run secret (keys='secret'); a fresh one per run when not given; "
            "never recorded"
        },
    )
    quorum: float = field(
        default=0.5, metadata={"help": "share of votes a quorum needs (more than this)"}
    )
    trim: float = field(default=0.2, metadata={"help": "share trimmed from each end (trimmed)"})

    def __post_init__(self) -> None:
        for name in ("sign_messages", "taint", "spotlight"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(
                    f"defenses.{name} must be true or false (got {_short(getattr(self, name))})"
                )
        if self.aggregation not in AGGREGATIONS:
            raise ConfigError(
                f"defenses.aggregation must be one of {', '.join(AGGREGATIONS)} "
                f"(got {self.aggregation!r})"
            )
        if self.capabilities is not None and not isinstance(self.capabilities, CapabilityPolicy):
            raise ConfigError(
                "defenses.capabilities must be a CapabilityPolicy "
                "(CapabilityPolicy.from_toml(path) or .default_policy())"
            )
        if self.detector is not None and (
            not isinstance(self.detector, str) or not self.detector.strip()
        ):
            raise ConfigError(
                f"defenses.detector must be 'builtin' or a model directory (got "
                f"{_short(self.detector)})"
            )
        if self.secret is not None and not self.sign_messages:
            raise ConfigError(
                "defenses.secret needs sign_messages=True; turn signing on or drop the secret"
            )
        if self.keys is None:
            object.__setattr__(self, "keys", "secret" if self.sign_messages else "seed")
        if self.keys not in ("secret", "seed", "random"):
            raise ConfigError(
                f"defenses.keys must be 'secret', 'seed' or 'random' (got {self.keys!r})"
            )
        if self.keys in ("secret", "random") and not self.sign_messages:
            raise ConfigError(
                f"defenses.keys={self.keys!r} needs sign_messages=True; turn signing on or "
                "drop keys"
            )
        if self.secret is not None:
            if not isinstance(self.secret, RunSecret):
                raise ConfigError(
                    "defenses.secret must be a RunSecret (RunSecret.new() or "
                    "RunSecret.from_file(path))"
                )
            if self.keys != "secret":
                raise ConfigError(
                    f"defenses.secret is used only with keys='secret' (got keys={self.keys!r}); "
                    "drop the secret or the keys option"
                )
        q, tr = self.quorum, self.trim
        if isinstance(q, bool) or not isinstance(q, int | float) or not 0.0 <= q < 1.0:
            raise ConfigError(f"defenses.quorum must be in [0, 1) (got {_short(q)})")
        if isinstance(tr, bool) or not isinstance(tr, int | float) or not 0.0 <= tr < 0.5:
            raise ConfigError(f"defenses.trim must be in [0, 0.5) (got {_short(tr)})")

    @classmethod
    def none(cls) -> Defenses:
        """Every defense off (the runtime behaves, and records, exactly as without defenses)."""
        return cls()

    @classmethod
    def all(cls, detector: str | None = "builtin") -> Defenses:
        """Every defense on, with the default capability policy and quorum aggregation."""
        return cls(
            sign_messages=True,
            capabilities=CapabilityPolicy.default_policy(),
            taint=True,
            spotlight=True,
            aggregation="quorum",
            detector=detector,
        )

    def is_none(self) -> bool:
        """Whether every defense is off."""
        return self == Defenses()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (recorded in ``meta.config.defenses``; no keys)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "secret"}
        d["capabilities"] = None if self.capabilities is None else self.capabilities.to_dict()
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "defenses") -> Defenses:
        """Rebuild from :meth:`to_dict` output (unknown keys are an error).

        Raises:
            ConfigError: Unknown key or bad value, naming it.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source} must be a table (got {_short(data)})")
        known = {f.name for f in dataclasses.fields(cls)} - {"secret"}  # never read from data
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(
                f"{source}: unknown key {unknown[0]!r}; known: {', '.join(sorted(known))}"
            )
        kw = dict(data)
        caps = kw.get("capabilities")
        if caps is not None and not isinstance(caps, CapabilityPolicy):
            kw["capabilities"] = CapabilityPolicy.from_dict(caps, source=f"{source}.capabilities")
        return cls(**kw)


def defenses_from(spec: str | None, policy: str | Path | None = None) -> Defenses:
    """The defenses a command line names: ``none``, ``all`` or a TOML file, plus a policy file.

    A defenses file holds :class:`Defenses` fields at its top level, the capability policy
    as a ``[capabilities]`` table. ``policy`` (a policy TOML file) sets ``capabilities``.

    Example:
        >>> defenses_from("all").sign_messages, defenses_from(None).is_none()
        (True, True)

    Raises:
        ConfigError: An unreadable or malformed file, or an unknown key (one line).
    """
    if spec in (None, "none"):
        d = Defenses.none()
    elif spec == "all":
        d = Defenses.all()
    else:
        p = Path(str(spec))
        try:
            data = tomllib.loads(
                _read_text(p, "it", "pass none, all or a defenses TOML file", f"--defenses {spec}")
            )
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"{p}: not valid TOML: {err}; fix the defenses file") from None
        try:
            d = Defenses.from_dict(data, source=str(p))
        except ConfigError as err:
            msg = str(err)
            raise ConfigError(msg if msg.startswith(str(p)) else f"{p}: {msg}") from None
    if policy is not None:
        d = dataclasses.replace(d, capabilities=CapabilityPolicy.from_toml(policy))
    return d
