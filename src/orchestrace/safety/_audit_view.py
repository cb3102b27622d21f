"""What the audit checks share: indexes over one trace and the actions a policy rules on.

Used by :mod:`orchestrace.safety.audit` and :mod:`orchestrace.safety._taint`; not public.

Example:
    >>> from orchestrace.trace.build import TraceBuilder
    >>> b = TraceBuilder(task_id="demo")
    >>> _ = b.add("spawn", "orchestrator", to="w1", role="worker")
    >>> v = _View(b.build())
    >>> sorted(v.orchestrators), v.roles["w1"], _actions(v.trace.events[0])
    (['orchestrator'], 'worker', [('spawn', None)])
"""

from __future__ import annotations

from collections import defaultdict
from functools import cached_property
from typing import Any

from orchestrace.errors import ConfigError, Problem
from orchestrace.runtime.security import (
    ENDORSING_ROLES,
    ROOT_ROLE,
    CapabilityPolicy,
    Defenses,
    Keyring,
    RunSecret,
)
from orchestrace.tasks import make_task
from orchestrace.trace.model import Event, Trace

_DECISIONS = ("spawn", "delegate", "stop", "aggregate")


class _View:
    """What the checks share: indexes over one trace."""

    def __init__(
        self,
        trace: Trace,
        secret: RunSecret | None = None,
        policy: CapabilityPolicy | None = None,
        source: str | None = None,
    ) -> None:
        self.trace = trace
        self.secret = secret
        #: a policy given to the audit (``--policy``): it replaces the recorded one
        self.given_policy = policy
        #: where the trace came from (named in errors)
        self.source = source
        self.index = {e.id: i for i, e in enumerate(trace.events)}
        self.by_id = {e.id: e for e in trace.events}
        self.preds: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.succs: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for ed in trace.edges:
            self.preds[ed.dst].append((ed.src, str(ed.type)))
            self.succs[ed.src].append((ed.dst, str(ed.type)))

    @cached_property
    def config(self) -> dict[str, Any]:
        meta = self.trace.meta if isinstance(self.trace.meta, dict) else {}
        cfg = meta.get("config")
        return cfg if isinstance(cfg, dict) else {}

    @cached_property
    def recorded(self) -> Defenses | None:
        """The defenses the trace records (``None``: no ``meta.config.defenses``)."""
        raw = self.config.get("defenses")
        if raw is None:
            return None
        try:
            return Defenses.from_dict(raw, source="meta.config.defenses")
        except (ConfigError, TypeError) as err:
            where = f"{self.source}: " if self.source else ""
            raise ConfigError(
                f"{where}cannot audit: {err}; fix or remove meta.config.defenses in the trace"
            ) from None

    @cached_property
    def defenses(self) -> Defenses:
        return self.recorded or Defenses.none()

    @cached_property
    def signing_seen(self) -> bool:
        """Whether any message or endorsement carries a signature (whatever meta says)."""
        for e in self.trace.events:
            a = e.attrs if isinstance(e.attrs, dict) else {}
            if e.type == "message" and ("sig" in a or "mac" in a):
                return True
            if e.type == "safety_event" and a.get("kind") == "endorsement" and "mac" in a:
                return True
        return False

    @cached_property
    def signing(self) -> bool:
        """Signing on: recorded so, or inferred from the signatures the events carry."""
        return self.defenses.sign_messages or self.signing_seen

    @cached_property
    def taint_seen(self) -> bool:
        """Whether any event carries a taint label (whatever meta says)."""
        return any(
            isinstance(e.attrs, dict) and e.attrs.get("taint") and e.type != "safety_event"
            for e in self.trace.events
        )

    @cached_property
    def tainting(self) -> bool:
        """Taint tracking on: recorded so, or inferred from the labels the events carry."""
        return self.defenses.taint or self.taint_seen

    @cached_property
    def keys(self) -> Keyring | None:
        """The keys MACs re-verify with: the seed's (keys='seed'), else the given secret's."""
        seed = self.config.get("seed")
        if not isinstance(seed, int) or isinstance(seed, bool):
            return None
        rec = self.recorded
        if rec is not None and rec.sign_messages and rec.keys == "seed":
            return Keyring.from_seed(seed)
        if self.secret is not None:
            return self.secret.keyring(seed)
        return None

    @cached_property
    def policy(self) -> CapabilityPolicy:
        return self.given_policy or self.defenses.capabilities or CapabilityPolicy.default_policy()

    def may_endorse(self, agent: str) -> bool:
        """Whether ``agent``'s role may endorse tainted data (the policy, else the defaults)."""
        # the root agent has the root role whatever its events say (no other agent may)
        role = ROOT_ROLE if agent in self.orchestrators else self.roles.get(agent, "")
        if self.given_policy is not None or self.defenses.capabilities is not None:
            return bool(self.policy.role(role).may_endorse)
        return role in ENDORSING_ROLES

    @cached_property
    def spawned_by(self) -> dict[str, Event]:
        """Agent -> the spawn event that created it."""
        return {e.to: e for e in self.trace.events if e.type == "spawn" and e.to}

    @cached_property
    def tools(self) -> set[str]:
        return {e.agent for e in self.trace.events if e.type == "tool_result"}

    @cached_property
    def roots(self) -> list[str]:
        seen: dict[str, None] = {}
        for e in self.trace.events:
            if e.agent not in self.spawned_by and e.agent not in self.tools:
                seen.setdefault(e.agent)
        return list(seen)

    @cached_property
    def roles(self) -> dict[str, str]:
        out = {name: str(ev.role or "") for name, ev in self.spawned_by.items()}
        for e in self.trace.events:
            if e.agent not in out and e.role and e.type != "tool_result":
                out[e.agent] = e.role
        for r in self.roots:
            out.setdefault(r, ROOT_ROLE if r == "orchestrator" else "")
        return out

    @cached_property
    def orchestrators(self) -> set[str]:
        roots = [r for r in self.roots if r not in self.spawned_by]
        named = [r for r in roots if r == "orchestrator" or self.roles.get(r) == ROOT_ROLE]
        return set(named or roots[:1])

    @cached_property
    def task(self) -> Any:
        """The task rebuilt from ``meta.task`` (``None`` when it cannot be, or runs code)."""
        return _task(self)

    def safety(self, kind: str) -> list[Event]:
        return [
            e
            for e in self.trace.events
            if e.type == "safety_event"
            and isinstance(e.attrs, dict)
            and e.attrs.get("kind") == kind
        ]

    def problem(
        self, e: Event, code: str, message: str, fix: str, severity: str = "error"
    ) -> Problem:
        return Problem(
            code,
            message,
            fix,
            f"$.events[{self.index[e.id]}]",
            e.id,
            severity=severity,  # type: ignore[arg-type]
        )


def _view(trace: Trace | _View) -> _View:
    return trace if isinstance(trace, _View) else _View(trace)


def _attrs(e: Event) -> dict[str, Any]:
    return e.attrs if isinstance(e.attrs, dict) else {}


def _actions(e: Event) -> list[tuple[str, str | None]]:
    """The capability-ruled actions an event enacts: (action, tool)."""
    if e.type == "spawn":
        return [("spawn", None)]
    if e.type == "aggregate":
        return [("aggregate", None)]
    if e.type == "tool_call":
        return [("tool", e.tool or "")]
    if e.type == "message" and e.decision == "delegate":
        return [("delegate", None)]
    if e.type == "orchestrator_decision" and e.decision in _DECISIONS:
        return [(str(e.decision), None)]
    return []


def _task(v: _View) -> Any:
    meta = v.trace.meta if isinstance(v.trace.meta, dict) else {}
    spec = meta.get("task")
    if not isinstance(spec, dict) or set(spec) - {"name", "seed", "size"}:
        return None

    try:
        task = make_task(str(spec.get("name")), seed=int(spec["seed"]), size=spec.get("size"))
    except Exception:
        return None
    return None if getattr(task, "executes_code", False) else task
