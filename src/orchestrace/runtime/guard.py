"""Where the runtime enforces :class:`~orchestrace.runtime.security.Defenses`.

A :class:`Guard` exists only when some defense is on (a run without defenses records exactly
what it recorded before defenses existed). The runtime consults it at each point a defense
acts:

* **signing**: :meth:`Guard.sign` signs a message with its sender's key (derived from the run
  secret, :attr:`Guard.secret`, and the seed; see
  :class:`~orchestrace.runtime.security.RunSecret`), :meth:`Guard.status` checks it for the
  receiver; a message that fails is not delivered and a ``safety_event``
  (``attrs.kind = "forgery_rejected"``) with a ``safety_flow`` edge from the message records
  why. Every message event carries ``attrs.sig`` (``valid``, ``invalid`` or ``unsigned``) and
  ``attrs.mac``.
* **capabilities**: :meth:`Guard.allow` checks the acting agent's role against the policy; a
  denial is recorded (``attrs.kind = "capability_denied"``) and raises
  :class:`CapabilityDenied` in the agent (tool calls get a failed result instead).
* **taint**: :meth:`Guard.labels` gives each event the union of the labels of what it
  consumed (tool results are labelled ``tool:<name>``, messages of untrusted roles
  ``agent:<name>``); a labelled event is recorded ``trusted=False`` with ``attrs.taint``.
  Before a spawn, delegation, stop, aggregation or side-effecting tool call,
  :meth:`Guard.gate` decides on the labelled inputs by the acting agent's role, never by
  their wording: a role that may endorse (``may_endorse`` in the capability policy; without
  one, ``orchestrator`` and ``verifier``) endorses them, recording an ``endorsement`` safety
  event (``attrs.by``, ``attrs.role``, and ``attrs.mac`` signed with the endorser's key when
  messages are signed); any other role's spawn, delegation, stop or side-effecting call is
  blocked (``taint_blocked``), while its aggregation goes on and its output stays labelled,
  so the data reaches a decision only through an endorsing role. With the injection detector
  on as well (a separate, heuristic filter), inputs whose origins it flagged are blocked
  whoever acts. A blocked input stays blocked: the decision goes on without it, and so does
  every later one. Messages and returns carry values (``content``, ``data``, a return's value) that an
  agent's code reads directly; the guard keeps, for each tainted message or return, the
  values it carried, and a decision whose own values (a stop's answer, an aggregate's inputs,
  a spawn's inputs, a delegation's content and data) are among them is gated on that event
  as well, so tainted data cannot drive a decision by being copied out of a message.
* **detector**: tool results and messages of untrusted agents are screened as they arrive;
  flags are recorded (``injection_detected``) and flagged content is quarantined.

Example:
    >>> from orchestrace.runtime import run
    >>> from orchestrace.runtime.security import Defenses
    >>> res = run("swarm", "arith", agents=3, seed=0, defenses=Defenses(sign_messages=True))
    >>> sorted({e.attrs["sig"] for e in res.trace.events if e.type == "message"})
    ['valid']
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from orchestrace.errors import RuntimeError_
from orchestrace.runtime.aggregate import text_of
from orchestrace.runtime.detector import InjectionDetector, make_detector
from orchestrace.runtime.prompts import SYSTEM
from orchestrace.runtime.security import (
    ENDORSING_ROLES,
    ROOT_ROLE,
    Defenses,
    Keyring,
    RunSecret,
    run_secret_from_env,
)
from orchestrace.trace.model import Edge, Event

if TYPE_CHECKING:
    from orchestrace.runtime.context import AgentState
    from orchestrace.runtime.core import Runtime

__all__ = ["CapabilityDenied", "Guard", "TaintBlocked"]


class CapabilityDenied(RuntimeError_):
    """An agent tried an action its role may not take (recorded as a ``safety_event``)."""


class TaintBlocked(RuntimeError_):
    """Tainted data that could not be endorsed tried to drive a decision."""


class Guard:
    """Enforces the defenses of one run (see the module docstring)."""

    def __init__(self, rt: Runtime, defenses: Defenses, detector: Any = None) -> None:
        self.rt = rt
        self.d = defenses
        self.keys: Keyring | None = None
        #: the run secret the keys derive from (``keys="secret"``); never recorded
        self.secret: RunSecret | None = None
        if defenses.sign_messages:
            if defenses.keys == "random":
                self.keys = Keyring.random()
            elif defenses.keys == "seed":
                self.keys = Keyring.from_seed(rt.config.seed)
            else:
                self.secret = defenses.secret or run_secret_from_env() or RunSecret.new()
                self.keys = self.secret.keyring(rt.config.seed)
        #: replay only: recorded MACs of valid messages (see :meth:`reuse_macs`)
        self.recorded: dict[tuple[str, str, str, int, str], str] = {}
        self.recorded_endorsements: dict[tuple[str, str], str] = {}
        # the guard enforces its own copy: the policy agents can read is not this one
        self.policy = copy.deepcopy(defenses.capabilities)
        if self.policy is not None:
            own = _TOPOLOGY_ROLES.get(str(rt.topology)) if rt.topology else None
            roles = set(SYSTEM if own is None else own) | _option_roles(rt.config.options)
            self.policy.check_names(roles, rt.tools, source="defenses.capabilities")
        self.detector: InjectionDetector | None = (
            detector if detector is not None else make_detector(defenses.detector)
        )
        self.taint: dict[str, frozenset[str]] = {}
        self.origins: dict[str, frozenset[str]] = {}
        self.content: dict[str, str] = {}
        self.endorsed: set[str] = set()
        self.blocked: set[str] = set()
        self.flagged: set[str] = set()
        #: text of a value -> the tainted message/return events that carried it
        self.carried: dict[str, set[str]] = {}

    # ------------------------------------------------------------------ recording
    def safety(
        self,
        agent: str,
        kind: str,
        attrs: Mapping[str, Any],
        sources: Iterable[str] = (),
        a: AgentState | None = None,
        content: str | None = None,
    ) -> str:
        """Record a ``safety_event``: in ``a``'s flow when given, else standalone."""
        rt = self.rt
        full = {"kind": kind, **attrs}
        flows = [(s, "safety_flow") for s in dict.fromkeys(sources)]
        if a is not None:
            pending = list(a.pending)
            a.pending.clear()
            try:
                return rt.record(
                    a, "safety_event", rt.now(), content=content, attrs=full, extra=flows
                )
            finally:
                a.pending.extend(pending)
        eid = f"e{len(rt.events) + 1}"
        ev = Event(
            id=eid, t=rt.now(), type="safety_event", agent=agent, content=content, attrs=full
        )
        edges = [Edge(s, eid, "safety_flow") for s, _ in flows]
        rt.events.append(ev)
        rt.edges.extend(edges)
        rt.recorder.event(ev, edges)
        return eid

    # ------------------------------------------------------------------ signing
    def reuse_macs(self, events: Iterable[Any]) -> None:
        """Replay: accept and re-use the MACs of the recorded run's valid messages.

        Keys drawn from ``os.urandom`` are not recorded, so a replay cannot sign as the
        recorded run did; a message identical to a recorded valid one (sender, recipient,
        content, step and data) carries the recorded MAC instead, and the trace reproduces.
        """
        for e in events:
            a = getattr(e, "attrs", None) or {}
            if (
                getattr(e, "type", None) == "safety_event"
                and a.get("kind") == "endorsement"
                and isinstance(a.get("mac"), str)
                and isinstance(a.get("endorses"), list)
            ):
                self.recorded_endorsements[(str(a.get("by")), endorsement_text(a["endorses"]))] = a[
                    "mac"
                ]
            if getattr(e, "type", None) == "message" and a.get("sig") == "valid":
                key = _mkey(
                    str(e.from_), str(e.to), str(e.content or ""), e.step or 0, a.get("data")
                )
                if isinstance(a.get("mac"), str):
                    self.recorded[key] = a["mac"]

    def sign(self, sender: str, to: str, text: str, step: int, data: Any = None) -> str | None:
        """The sender's MAC of the content and ``data`` (``None`` when signing is off)."""
        if self.keys is None:
            return None
        if self.recorded:
            mac = self.recorded.get(_mkey(sender, to, text, step, data))
            if mac is not None:
                return mac
        return self.keys.sign(sender, to, text, step, data)

    def status(
        self, sender: str, to: str, text: str, step: int, mac: str | None, data: Any = None
    ) -> str:
        """``valid``, ``invalid`` or ``unsigned`` as the receiver's check finds the message."""
        if mac is None:
            return "unsigned"
        assert self.keys is not None
        if self.recorded and self.recorded.get(_mkey(sender, to, text, step, data)) == mac:
            return "valid"
        return "valid" if self.keys.verify(sender, to, text, step, mac, data) else "invalid"

    # ------------------------------------------------------------------ capabilities
    def allow(
        self, a: AgentState, action: str, *, tool: str | None = None, role: str | None = None
    ) -> bool:
        """Whether ``a`` may take ``action``; a denial is recorded (returns ``False``)."""
        if self.policy is None:
            return True
        ok = self.policy.allows(a.role, action, tool)
        what = f"call tool {tool!r}" if action == "tool" else action
        if ok and action == "spawn" and role == ROOT_ROLE:
            ok, what = False, f"spawn an agent of role {ROOT_ROLE!r}"
        if ok:
            return True
        self.safety(
            a.name,
            "capability_denied",
            {
                "action": action,
                "role": a.role,
                **({"tool": tool} if tool else {}),
                **({"child_role": role} if role else {}),
            },
            a=a,
            content=f"role {a.role!r} may not {what}",
        )
        return False

    def require(self, a: AgentState, action: str, **kw: Any) -> None:
        """:meth:`allow`, raising :class:`CapabilityDenied` on a denial."""
        if not self.allow(a, action, **kw):
            what = f"call tool {kw['tool']!r}" if action == "tool" else action
            raise CapabilityDenied(
                f"agent {a.name!r} (role {a.role!r}) may not {what} under the capability policy"
            )

    # ------------------------------------------------------------------ taint
    def labels(
        self, a: AgentState, eid: str, type_: str, sources: Sequence[str], fields: dict[str, Any]
    ) -> dict[str, Any]:
        """Label event ``eid`` from what it consumed; return its (possibly changed) fields."""
        if not self.d.taint:
            return fields
        labels: set[str] = set()
        origins: set[str] = set()
        for s in sources:
            if s in self.taint and s not in self.endorsed and s not in self.blocked:
                labels |= self.taint[s]
                origins |= self.origins[s]
        if (
            type_ in ("message", "return")
            and self.policy is not None
            and not self.policy.role(a.role).trusted
        ):
            labels.add(f"agent:{a.name}")
            origins.add(eid)
            self.content[eid] = str(fields.get("content") or "")
        if not labels:
            return fields
        self.taint[eid] = frozenset(labels)
        self.origins[eid] = frozenset(origins)
        if type_ in ("message", "return"):
            self._carry(eid, fields)
        attrs = dict(fields.get("attrs") or {})
        attrs["taint"] = sorted(labels)
        return {**fields, "trusted": False, "attrs": attrs}

    def _carry(self, eid: str, fields: Mapping[str, Any]) -> None:
        """Remember the values the tainted message or return ``eid`` carries."""
        attrs = fields.get("attrs") or {}
        values: list[Any] = []
        if fields.get("content"):
            values.append(fields["content"])
        for key in ("data", "value"):
            if key in attrs:
                values.extend((attrs[key], *_leaves(attrs[key])))
        for v in values:
            if v is not None and not isinstance(v, bool):
                self.carried.setdefault(text_of(v), set()).add(eid)

    def carriers(self, *values: Any) -> list[str]:
        """Tainted, not endorsed events that carried any of ``values`` (or their parts)."""
        if not self.carried:
            return []
        out: dict[str, None] = {}
        for value in values:
            for v in (value, *_leaves(value)):
                if v is None or isinstance(v, bool):
                    continue
                for s in sorted(self.carried.get(text_of(v), ())):
                    if s not in self.endorsed:
                        out[s] = None
        return list(out)

    def tool_result(self, tool: str, eid: str, content: str | None) -> None:
        """A tool result arrived: label it (taint on)."""
        if self.d.taint:
            self.taint[eid] = frozenset({f"tool:{tool}"})
            self.origins[eid] = frozenset({eid})
            self.content[eid] = content or ""

    def tool_attrs(self, tool: str) -> dict[str, Any] | None:
        """Attributes of a tool result event (its taint label)."""
        return {"taint": [f"tool:{tool}"]} if self.d.taint else None

    def screen(
        self, agent: str, eid: str, text: str, ignore: tuple[str, ...] = ()
    ) -> tuple[str, ...]:
        """Run the detector on arriving content; record and return its labels (quarantine)."""
        if self.detector is None or not text:
            return ()
        found = self.detector.scan(text)
        if not found.flagged or (found.labels and set(found.labels) <= set(ignore)):
            return ()
        self.flagged.add(eid)
        self.safety(
            agent,
            "injection_detected",
            {"detector": self.detector.name, "labels": list(found.labels), "score": found.score},
            [eid],
            content="quarantined: the injection detector flagged this content",
        )
        return found.labels

    def driving(self, a: AgentState, extra: Iterable[str] = ()) -> list[str]:
        """Tainted, not yet endorsed events that would drive ``a``'s next decision."""
        if not self.d.taint:
            return []
        seen = [a.last, *(s for s, _ in a.pending)]
        direct = [s for s in seen if s and s not in self.blocked]  # blocked: left out already
        cands = [*direct, *extra]  # a value copied out of a blocked event is gated again
        return [s for s in dict.fromkeys(cands) if s and s in self.taint and s not in self.endorsed]

    def may_endorse(self, role: str) -> bool:
        """Whether agents of ``role`` may endorse tainted data (policy, else the defaults)."""
        if self.policy is not None:
            return self.policy.role(role).may_endorse
        return role in ENDORSING_ROLES

    def _endorsement(
        self, a: AgentState, action: str, ids: Sequence[str], content: str, method: str
    ) -> str:
        """Record an endorsement of ``ids`` by ``a`` (signed by ``a`` when signing is on)."""
        self.endorsed.update(ids)
        attrs: dict[str, Any] = {
            "action": action,
            "endorses": list(ids),
            "by": a.name,
            "role": a.role,
            "method": method,
            "labels": sorted(set().union(*(self.taint.get(s, frozenset()) for s in ids))),
        }
        if self.keys is not None:
            text = endorsement_text(ids)
            attrs["mac"] = self.recorded_endorsements.get((a.name, text)) or self.keys.sign(
                a.name, ENDORSEMENT, text, 0, None
            )
        return self.safety(a.name, "endorsement", attrs, ids, a=a, content=content)

    def gate(self, a: AgentState, action: str, extra: Iterable[str] = ()) -> list[str]:
        """Endorse or block tainted inputs of a decision; the inputs that stay blocked."""
        tainted = self.driving(a, extra)
        if not tainted:
            return []
        det = self.detector
        flagged = [
            s
            for s in tainted
            if det is not None
            and any(
                o in self.flagged or det.scan(self.content.get(o, "")).flagged
                for o in self.origins[s]
            )
        ]
        rest = [s for s in tainted if s not in flagged]
        blocked = list(flagged)
        if self.may_endorse(a.role):
            if rest:
                self._endorsement(
                    a,
                    action,
                    rest,
                    f"tainted inputs of {action} endorsed by role {a.role!r}",
                    "role",
                )
        elif action != "aggregate":  # an aggregation's output stays labelled instead
            blocked.extend(rest)
        if blocked:
            self.blocked.update(blocked)  # the decision goes on without them, and so do later ones
            self.safety(
                a.name,
                "taint_blocked",
                {
                    "action": action,
                    "blocked": blocked,
                    "role": a.role,
                    "labels": sorted(set().union(*(self.taint[s] for s in blocked))),
                    **({"flagged": flagged} if flagged else {}),
                },
                blocked,
                a=a,
                content=f"tainted inputs may not drive {action}",
            )
        return blocked

    def endorse(self, a: AgentState, ids: Sequence[str], reason: str) -> str:
        """An explicit endorsement by ``a`` (its role must be allowed to endorse)."""
        if not self.may_endorse(a.role):
            self.safety(
                a.name,
                "capability_denied",
                {"action": "endorse", "role": a.role},
                a=a,
                content=f"role {a.role!r} may not endorse",
            )
            raise CapabilityDenied(
                f"agent {a.name!r} (role {a.role!r}) may not endorse tainted data; give the role "
                "may_endorse = true in the capability policy, or endorse from the orchestrator"
            )
        unknown = [i for i in ids if i not in self.taint]
        if unknown:
            raise RuntimeError_(f"cannot endorse {unknown[0]!r}: not a tainted event of this run")
        return self._endorsement(a, "explicit", list(ids), reason, "explicit")

    def screen_message(self, to: str, eid: str, text: str) -> bool:
        """Screen a message for its receiver; ``True`` when it is quarantined (not delivered).

        Messages legitimately carry answers, so the ``answer-override`` label alone does not
        quarantine one.
        """
        if self.detector is None:
            return False
        labels = self.screen(to, eid, text, ignore=("answer-override",))
        return bool(labels)

    def aggregation(
        self, method: str, kw: dict[str, Any], results: Sequence[Any]
    ) -> tuple[str, dict[str, Any]]:
        """The method used under ``defenses.aggregation``: votes become the robust method.

        ``combine`` (the task's reduce over parts) and ``judge`` are kept. Trust weights are
        1 for a result whose return is untainted (or endorsed), 0.5 for a tainted one.
        """
        robust = self.d.aggregation
        if robust == "plain" or method not in ("vote", "trust", "first"):
            return method, kw
        out = dict(kw)
        if robust == "trust_weighted" and "weights" not in out:
            out["weights"] = [
                0.5 if getattr(r, "event_id", None) in self.taint else 1.0 for r in results
            ]
        elif robust == "quorum":
            out.setdefault("quorum", self.d.quorum)
        elif robust == "trimmed":
            out.setdefault("trim", self.d.trim)
        return robust, out


def _leaves(value: Any, depth: int = 0) -> list[Any]:
    """The scalar values inside ``value`` (dict values and list items, a few levels deep)."""
    if depth > 4:
        return []
    if isinstance(value, Mapping):
        return [x for v in value.values() for x in (v, *_leaves(v, depth + 1))]
    if isinstance(value, list | tuple):
        return [x for v in value for x in (v, *_leaves(v, depth + 1))]
    return []


#: The roles each built-in topology spawns (besides the orchestrator and option roles).
_TOPOLOGY_ROLES: dict[str, frozenset[str]] = {
    "centralized": frozenset({"worker"}),
    "critic_loop": frozenset({"critic", "worker"}),
    "debate": frozenset({"debater", "judge"}),
    "hierarchical": frozenset({"manager", "worker"}),
    "pipeline": frozenset({"planner", "executor", "critic"}),
    "swarm": frozenset({"aggregator", "worker"}),
}


#: The recipient an endorsement's MAC is computed for (no agent has this name).
ENDORSEMENT = "#endorsement"


def endorsement_text(ids: Iterable[str]) -> str:
    """What an endorsement's MAC covers: the endorsed event ids, in order.

    Example:
        >>> endorsement_text(["e3", "e7"])
        '["e3","e7"]'
    """
    return json.dumps(list(ids), separators=(",", ":"))


def _mkey(sender: str, to: str, text: str, step: int, data: Any) -> tuple[str, str, str, int, str]:
    enc = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return (sender, to, text, int(step), enc)


def _option_roles(options: Mapping[str, Any]) -> set[str]:
    roles = options.get("roles") or []
    out = {str(r) for r in roles} if isinstance(roles, list | tuple) else set()
    if isinstance(options.get("worker_role"), str):
        out.add(options["worker_role"])
    return out
