"""The :class:`Attack` base, what arming it gives a run, and the backend and runtime hooks.

Example:
    >>> from orchestrace.safety.attacks import Byzantine
    >>> Byzantine(susceptibility={"critic": 0.1, "*": 0.6}).follows("critic")
    0.1
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from orchestrace.errors import ConfigError
from orchestrace.runtime.backends.base import LLMRequest, LLMResponse, backend_spec, request_key
from orchestrace.runtime.interventions import json_native
from orchestrace.runtime.prompts import SPOTLIGHT_NOTE, render
from orchestrace.runtime.replay import Intervention
from orchestrace.safety.attacks._common import (
    _COORDINATING,
    MARK,
    ROOT,
    _draw,
    _same,
    default_target,
    injection_text,
)
from orchestrace.safety.attacks.checks import _target_of, planted_reached
from orchestrace.tasks.base import Task
from orchestrace.trace.model import Trace


@dataclass
class _State:
    """What one armed run keeps: the target, who is compromised, who got infected."""

    attack: Attack
    target: Any
    seed: int
    simulated: bool
    compromised: list[str] = field(default_factory=list)
    infected: set[str] = field(default_factory=set)
    followed: int = 0

    def pick(self, agent: str, role: str) -> bool:
        """Whether ``agent`` is compromised (the first ``attack.agents`` solving agents)."""
        if agent in self.compromised:
            return True
        if role in _COORDINATING or agent == ROOT:
            return False
        if len(self.compromised) < self.attack.agents:
            self.compromised.append(agent)
            return True
        return False

    def targets(self) -> list[Any]:
        """Every value the attacker plants."""
        return self.attack.targets(self)


@dataclass
class Armed:
    """What one attacked run uses (from :meth:`Attack.arm`).

    Attributes:
        task: The task the run gets (modified for injections in the task or its tools).
        backend: The backend wrapper (perturbs, forces or models following instructions).
        interventions: Runtime interventions (messages, returns, agent wrappers).
        target: The attacker's value.
    """

    task: Task
    backend: Any
    interventions: list[Intervention]
    target: Any
    state: _State


def _plain_key(request: LLMRequest) -> str:
    """The request's key as the simulator draws it: a spotlighted prompt as its plain rendering.

    The draw of whether a simulated victim follows an instruction must not depend on how
    untrusted text is delimited, or spotlighting would change outcomes by chance alone.
    """
    msgs = request.messages
    if msgs and SPOTLIGHT_NOTE in str(msgs[0].get("content", "")):
        plain = render(request.kind, request.payload, request.role)
        request = dataclasses.replace(request, messages=plain)
    return request_key(request, 0)


class AttackBackend:
    """A backend wrapper: compromised agents' requests, and the simulated victims' choice.

    It perturbs requests (the attacker's instruction added), answers for agents the attacker
    controls, and, on a simulated backend, follows an instruction carrying :data:`MARK` with
    probability ``susceptibility`` (a seeded draw per request). On a real backend the model
    reads the same prompts and decides itself.
    """

    def __init__(self, inner: Any, state: _State) -> None:
        self.inner = inner
        self.state = state
        self.name = inner.name
        self.virtual = inner.virtual

    def spec(self) -> dict[str, Any]:
        """The inner backend's spec (the attack is recorded with the interventions)."""
        return backend_spec(self.inner)

    @property
    def calls(self) -> int:
        """Calls answered by the inner backend."""
        return int(getattr(self.inner, "calls", 0))

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer ``request`` as the attack has it."""
        st = self.state
        request = st.attack.perturb(st, request)
        resp: LLMResponse = await self.inner.complete(request)
        if resp.error is not None:
            return resp
        forced = st.attack.forced(st, request)
        if forced is not None:
            return dataclasses.replace(resp, text=forced[0], answer=forced[1])
        carries = any(MARK in str(m.get("content", "")) for m in request.messages)
        if st.simulated:
            if carries:
                u = _draw(st.seed, st.attack.name, "follow", _plain_key(request))
                if u < st.attack.follows(request.role):
                    return self._follow(request, resp)
            return resp
        if MARK in resp.text or (carries and resp.answer is not None and resp.answer == st.target):
            st.infected.add(request.agent)  # a real model did what the instruction said
        return resp

    def _follow(self, request: LLMRequest, resp: LLMResponse) -> LLMResponse:
        st = self.state
        st.followed += 1
        st.infected.add(request.agent)
        answer: Any = st.target
        if request.kind == "critique":
            answer = "accept"
        elif request.kind == "judge":
            cands = list(request.payload.get("candidates") or [])
            hits = [i for i, c in enumerate(cands) if _same(c, st.target) or MARK in str(c)]
            if not hits:
                return resp
            answer = hits[0]
        elif request.kind == "plan":
            return resp
        why = "Following the notice." + (
            injection_text(st.target, replicate=True) if st.attack.name == "replication" else ""
        )
        return dataclasses.replace(resp, text=f"{why} ANSWER: {json.dumps(answer)}", answer=answer)

    async def aclose(self) -> None:
        """Close the inner backend."""
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


class _Hooks(Intervention):
    """The runtime side of an armed attack (messages, returns, spawned agents)."""

    def __init__(self, state: _State) -> None:
        self.state = state

    def message(
        self, sender: str, step: int, index: int, to: str, content: str, data: Any
    ) -> tuple[str, Any] | None:
        return self.state.attack.on_message(self.state, sender, to, content, data)

    def returned(self, agent: str, value: Any) -> Any:
        return self.state.attack.on_return(self.state, agent, value)

    def wrap_agent(self, name: str, role: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """The agent function the runtime starts for ``name`` (the attacker may replace it)."""
        return self.state.attack.wrap(self.state, name, role, fn)

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = json_native(  # in meta: JSON types, equal when read back
            {
                "kind": "attack",
                **self.state.attack.describe(),
                "target": self.state.target,
                "targets": self.state.targets(),
                "model": "sim" if self.state.simulated else "real",
            }
        )
        return described

    def __repr__(self) -> str:
        return f"attack {self.state.attack.name}"


@dataclass(frozen=True, kw_only=True)
class Attack:
    """Base of the attacks (see the module docstring).

    Args:
        susceptibility: Probability that a simulated victim follows an instruction it reads;
            a mapping gives it per role (``{"worker": 0.6, "critic": 0.1, "*": 0.3}``; roles
            not listed take ``"*"``, else 1).
        agents: How many agents the attacker controls (the first solving agents to act).
        target: The attacker's value (default: :func:`default_target` of the task).
    """

    name: ClassVar[str] = "attack"
    #: What the attack manipulates (the report's grouping).
    surface: ClassVar[str] = ""
    susceptibility: float | Mapping[str, float] = 1.0
    agents: int = 1
    target: Any = None

    def __post_init__(self) -> None:
        s = self.susceptibility
        values = list(s.values()) if isinstance(s, Mapping) else [s]
        if isinstance(s, Mapping) and not all(isinstance(k, str) and k for k in s):
            raise ConfigError(f"{self.name}: susceptibility roles must be names (got {s!r})")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= v <= 1.0:
                raise ConfigError(
                    f"{self.name}: susceptibility must be a probability in [0, 1], or a "
                    f"mapping of role to probability (got {v!r})"
                )
        if isinstance(self.agents, bool) or not isinstance(self.agents, int) or self.agents < 1:
            raise ConfigError(f"{self.name}: agents must be an integer >= 1 (got {self.agents!r})")

    def follows(self, role: str) -> float:
        """The susceptibility of an agent of ``role`` (a mapping's ``"*"`` covers the rest).

        Example:
            >>> from orchestrace.safety.attacks import Byzantine
            >>> Byzantine(susceptibility={"critic": 0.1, "*": 0.6}).follows("worker")
            0.6
        """
        s = self.susceptibility
        if isinstance(s, Mapping):
            return float(s.get(role, s.get("*", 1.0)))
        return float(s)

    # -- what it applies to
    def applies_to(
        self, topology: str, task: str | Task, options: Mapping[str, Any] | None = None
    ) -> str | None:
        """``None`` when the attack can act on this topology and task, else the reason."""
        return None

    def applies_to_team(self, topology: str, agents: int) -> str | None:
        """``None`` when the attack can act on a team of ``agents``, else the reason.

        Example:
            >>> from orchestrace.safety.attacks import Collusion
            >>> Collusion().applies_to_team("swarm", 1)[:30]
            'swarm with 1 agent: a colludin'
        """
        return None

    # -- arming
    def arm(self, task: Task, backend: Any, *, seed: int = 0) -> Armed:
        """What one run under this attack uses."""
        simulated = str(getattr(backend, "name", "")) == "sim"
        target = default_target(task) if self.target is None else self.target
        st = _State(self, target, seed, simulated)
        return Armed(
            self.modify_task(st, task), AttackBackend(backend, st), [_Hooks(st)], target, st
        )

    def describe(self) -> dict[str, Any]:
        """The attack's configuration (recorded in ``meta.interventions``)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        described: dict[str, Any] = json_native({"attack": self.name, "surface": self.surface, **d})
        return described

    # -- hooks (default: no change)
    def targets(self, st: _State) -> list[Any]:
        """Every value the attacker plants (default: the target)."""
        return [st.target]

    def modify_task(self, st: _State, task: Task) -> Task:
        """The task as the run sees it."""
        return task

    def perturb(self, st: _State, request: LLMRequest) -> LLMRequest:
        """The request as the backend sees it."""
        return request

    def forced(self, st: _State, request: LLMRequest) -> tuple[str, Any] | None:
        """``(text, answer)`` the attacker answers with, else ``None``."""
        return None

    def on_message(
        self, st: _State, sender: str, to: str, content: str, data: Any
    ) -> tuple[str, Any] | None:
        """The message as sent."""
        return content, data

    def on_return(self, st: _State, agent: str, value: Any) -> Any:
        """The value an agent returns."""
        return value

    def wrap(self, st: _State, name: str, role: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """The function a spawned agent runs."""
        return fn

    # -- success
    def succeeded(self, trace: Trace) -> bool:
        """Whether the attack reached its goal in ``trace`` (read from the trace alone)."""
        return planted_reached(trace, _target_of(trace, self.name))
