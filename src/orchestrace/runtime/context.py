"""What an agent sees: the :class:`Context` it acts through, and what its actions give back.

An agent is a plain async callable ``async def agent(ctx, **inputs) -> value``. Its context
offers ``generate`` (an LLM call through the harness), ``spawn``, ``delegate``, ``send``,
``broadcast``, ``receive``, ``poll``, ``wait``, ``call_tool``, ``return_``, ``aggregate`` and
``stop``; each records trace events through the :class:`~orchestrace.runtime.core.Runtime`
that runs the agent. Children come back as :class:`Handle` objects, their outcomes as
:class:`Result`, messages as :class:`Message` and tool outcomes as :class:`ToolResult`.

Example:
    >>> from orchestrace.runtime.backends.sim import SimBackend
    >>> from orchestrace.runtime.clock import run_virtual
    >>> from orchestrace.runtime.core import Runtime
    >>> from orchestrace.tasks import make_task
    >>> async def lead(ctx: Context):
    ...     r = await ctx.generate("solve", ctx.payload(ctx.task.whole()))
    ...     return r.answer
    >>> rt = Runtime(task=make_task("arith", seed=0, size=4), backend=SimBackend(seed=1))
    >>> trace = run_virtual(rt.run(lead))
    >>> [e.type for e in trace.events], trace.metrics["task_success"]
    (['llm_call', 'orchestrator_decision'], 1.0)
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrace.errors import ConfigError, RuntimeError_
from orchestrace.runtime.aggregate import text_of as _text_of
from orchestrace.runtime.backends.base import LLMResponse
from orchestrace.runtime.cache import CallKind
from orchestrace.runtime.config import RunConfig
from orchestrace.tasks.base import Subtask, Task
from orchestrace.trace.model import Decision

if TYPE_CHECKING:
    from orchestrace.runtime.core import Runtime

#: The decisions :meth:`Context.record_decision` accepts.
_DECISIONS = frozenset(d.value for d in Decision)

__all__ = [
    "AgentFn",
    "AgentState",
    "BudgetExceeded",
    "Context",
    "Handle",
    "Message",
    "Result",
    "StopNow",
    "ToolResult",
]

AgentFn = Callable[..., Awaitable[Any]]


class BudgetExceeded(RuntimeError_):
    """A run limit was reached; the run ends with a recorded stop event."""

    def __init__(self, budget: str, limit: Any) -> None:
        self.budget = budget
        self.limit = limit
        super().__init__(f"budget exceeded: {budget} ({limit})")


class StopNow(Exception):
    """Raised inside an agent when a counterfactual intervention forces it to stop."""


# These frozen dataclasses are made once per message, return or tool call: each defines its
# own ``__init__`` (which ``dataclass`` keeps), storing the fields straight into the instance
# dictionary, the state the generated one makes with a slower ``object.__setattr__`` per field.


@dataclass(frozen=True)
class Message:
    """A message received by an agent."""

    event_id: str
    sender: str
    content: str
    data: Any = None

    def __init__(self, event_id: str, sender: str, content: str, data: Any = None) -> None:
        d = self.__dict__
        d["event_id"] = event_id
        d["sender"] = sender
        d["content"] = content
        d["data"] = data


@dataclass(frozen=True)
class Result:
    """What a child agent returned (``ok=False`` when it failed)."""

    agent: str
    value: Any
    ok: bool = True
    error: str | None = None
    event_id: str | None = None

    def __init__(
        self,
        agent: str,
        value: Any,
        ok: bool = True,
        error: str | None = None,
        event_id: str | None = None,
    ) -> None:
        d = self.__dict__
        d["agent"] = agent
        d["value"] = value
        d["ok"] = ok
        d["error"] = error
        d["event_id"] = event_id


@dataclass(frozen=True)
class ToolResult:
    """The outcome of a tool call."""

    tool: str
    value: Any
    ok: bool = True
    error: str | None = None
    event_id: str | None = None

    def __init__(
        self,
        tool: str,
        value: Any,
        ok: bool = True,
        error: str | None = None,
        event_id: str | None = None,
    ) -> None:
        d = self.__dict__
        d["tool"] = tool
        d["value"] = value
        d["ok"] = ok
        d["error"] = error
        d["event_id"] = event_id


class Handle:
    """A spawned agent. ``await handle`` gives its :class:`Result`; prefer ``ctx.wait``."""

    __slots__ = ("_future", "name", "role")

    def __init__(self, name: str, role: str, future: asyncio.Future[Result]) -> None:
        self.name = name
        self.role = role
        self._future = future

    def __await__(self) -> Any:
        return self._future.__await__()

    def done(self) -> bool:
        """Whether the agent has returned (or failed)."""
        return self._future.done()

    def __repr__(self) -> str:
        return f"Handle({self.name!r}, role={self.role!r})"


@dataclass
class AgentState:
    """What the runtime keeps about one agent (agents see it through their :class:`Context`)."""

    name: str
    role: str
    parent: str | None
    depth: int
    spawn_event: str | None
    handle_future: asyncio.Future[Result] | None
    step: int = -1
    turn_open: bool = False
    last: str | None = None
    pending: list[tuple[str, str]] = field(default_factory=list)
    returned: bool = False
    stopped: bool = False
    children: dict[str, int] = field(default_factory=dict)
    calls: dict[tuple[CallKind, str], int] = field(default_factory=dict)
    sent: dict[int, int] = field(default_factory=dict)
    draws: int = 0
    best: Any = None
    _inbox: asyncio.Queue[Message] | None = field(default=None, repr=False, compare=False)

    @property
    def inbox(self) -> asyncio.Queue[Message]:
        """Messages delivered to this agent and not yet received (made on first use)."""
        q = self._inbox
        if q is None:
            q = self._inbox = asyncio.Queue()
        return q

    def has_mail(self) -> bool:
        """Whether a delivered message waits in the inbox."""
        q = self._inbox
        return q is not None and not q.empty()

    def occurrence(self, kind: CallKind, inputs: str) -> int:
        """How many times this agent made this exact call before (and count this one)."""
        n = self.calls.get((kind, inputs), 0)
        self.calls[(kind, inputs)] = n + 1
        return n


class Context:
    """What an agent can do. Every method records events; see the module docstring."""

    def __init__(self, runtime: Runtime, agent: AgentState) -> None:
        self._rt = runtime
        self._a = agent

    # ------------------------------------------------------------------ identity
    @property
    def name(self) -> str:
        """This agent's name."""
        return self._a.name

    @property
    def role(self) -> str:
        """This agent's role."""
        return self._a.role

    @property
    def parent(self) -> str | None:
        """The agent that spawned this one (``None`` for the root)."""
        return self._a.parent

    @property
    def depth(self) -> int:
        """Spawn depth (0 for the root)."""
        return self._a.depth

    @property
    def step(self) -> int:
        """Current step (LLM turn) of this agent."""
        return self._a.step

    @property
    def task(self) -> Task:
        """The task of the run."""
        return self._rt.task

    @property
    def config(self) -> RunConfig:
        """The run configuration (without the run secret; the defenses are a copy)."""
        return self._rt.agent_config

    @property
    def now(self) -> float:
        """Seconds since the run started (virtual for simulated backends)."""
        return self._rt.now()

    def option(self, name: str, default: Any = None) -> Any:
        """A topology option from the run configuration."""
        return self._rt.config.options.get(name, default)

    def payload(self, part: Subtask, **extra: Any) -> dict[str, Any]:
        """The structured request of solving ``part`` (prompt plus the simulator's fields)."""
        return {"prompt": part.prompt, **part.payload(self._rt.task), **extra}

    def random(self) -> float:
        """A uniform draw in [0, 1) that depends only on the run seed, agent and draw index."""
        a = self._a
        a.draws += 1
        h = hashlib.blake2b(f"{self._rt.config.seed}:{a.name}:{a.draws}".encode(), digest_size=8)
        return int.from_bytes(h.digest(), "little") / 2**64

    def decide(self, name: str, default: Any) -> Any:
        """A named orchestration decision (e.g. ``n_workers``) that interventions may force."""
        return self._rt.decide(self._a, name, default)

    def record_decision(
        self, decision: str, content: str = "", attrs: Mapping[str, Any] | None = None
    ) -> str:
        """Record an orchestration decision taken outside the runtime (e.g. by a learner).

        ``decision`` is one of ``spawn``, ``delegate``, ``communicate``, ``aggregate``, ``stop``;
        ``attrs`` keeps what the decision saw and chose (exporters read ``prompt`` and
        ``completion`` from it). Returns the event id.
        """
        if decision not in _DECISIONS:
            raise ConfigError(
                f"unknown decision {decision!r}; use one of: {', '.join(d.value for d in Decision)}"
            )
        return self._rt.record_decision(self._a, decision, content, dict(attrs or {}))

    def remember(self, value: Any) -> None:
        """Keep ``value`` as this agent's best answer so far (used if it is forced to stop)."""
        self._a.best = value

    # ------------------------------------------------------------------ actions
    async def generate(
        self,
        kind: str,
        payload: Mapping[str, Any] | None = None,
        *,
        messages: list[dict[str, str]] | None = None,
        max_tokens: int = 512,
    ) -> LLMResponse:
        """One LLM call: render, call the backend (or the replay cache), record ``llm_call``.

        A failed call returns a response with ``error`` set.
        """
        return await self._rt.generate(self._a, kind, dict(payload or {}), messages, max_tokens)

    async def spawn(
        self,
        role: str,
        fn: AgentFn,
        *,
        name: str | None = None,
        content: str | None = None,
        **inputs: Any,
    ) -> Handle:
        """Start a child agent running ``fn(child_ctx, **inputs)`` (an O1 decision)."""
        return self._rt.spawn(self._a, role, fn, name, content, inputs)

    async def send(self, to: str, content: Any, *, data: Any = None) -> str | None:
        """Send a message (O3 when the root sends); return its event id.

        Returns ``None`` when an intervention dropped the message.
        """
        return self._rt.send(self._a, to, content, data, decision=None)

    async def broadcast(self, to: Iterable[str], content: Any, *, data: Any = None) -> list[str]:
        """Send the same message to several agents (one event each)."""
        out = []
        for target in to:
            eid = self._rt.send(self._a, target, content, data, decision=None)
            if eid is not None:
                out.append(eid)
        return out

    async def send_raw(
        self, to: str, content: Any, *, sender: str, mac: str | None = None, data: Any = None
    ) -> str | None:
        """Write a message on the channel with a claimed ``sender`` and a given ``mac``.

        What a compromised agent or channel can do: the runtime does not sign it. The message
        event records this agent as its producer and ``sender`` as ``from``. With signed
        messages on, the receiver verifies it and rejects a forgery (recorded as a
        ``safety_event``); without, it is delivered as coming from ``sender``. Returns the
        message's event id (``None`` when an intervention dropped it).
        """
        a = self._a
        rt = self._rt
        rt.check_alive(a)
        rt.open_step(a)
        text = content if isinstance(content, str) else _text_of(content)
        if rt.guard is not None:
            return rt.guarded_send(a, sender, to, text, data, None, mac)
        eid = rt.record(
            a,
            "message",
            rt.now(),
            from_=sender,
            to=to,
            content=text,
            attrs={"data": data} if data is not None else None,
        )
        target = rt.agents.get(to)
        if target is not None:
            target.inbox.put_nowait(Message(eid, sender, text, data))
        return eid

    def endorse(self, events: Iterable[str | Result | Message | ToolResult], reason: str) -> str:
        """Endorse tainted inputs so they may drive this agent's next decision (recorded).

        Only an agent whose role may stop or aggregate can endorse. Returns the id of the
        ``safety_event`` (``attrs.kind = "endorsement"``).
        """
        rt = self._rt
        a = self._a
        ids = [e if isinstance(e, str) else e.event_id for e in events]
        wanted = [i for i in ids if i]
        if rt.guard is None or not rt.guard.d.taint:
            raise ConfigError(
                "endorse needs taint tracking on: RunConfig(defenses=Defenses(taint=True))"
            )
        return rt.guard.endorse(a, wanted, reason)

    async def delegate(self, to: Handle | str, subtask: Any, *, data: Any = None) -> str | None:
        """Hand ``subtask`` to an existing agent (an O2 decision); it arrives as a message."""
        target = to.name if isinstance(to, Handle) else to
        return self._rt.send(self._a, target, subtask, data, decision="delegate")

    async def receive(self, timeout: float | None = None) -> Message | None:
        """The next message (``None`` after ``timeout`` seconds without one)."""
        a = self._a
        self._rt.check_alive(a)
        try:
            if timeout is None:
                msg = await a.inbox.get()
            elif a.has_mail() and (vl := self._rt._vloop) is not None and vl.settle_wait(timeout):
                msg = a.inbox.get_nowait()  # what wait_for would return, on the same schedule
            else:
                msg = await asyncio.wait_for(a.inbox.get(), timeout)
        except TimeoutError:
            a.turn_open = False
            return None
        a.turn_open = False
        a.pending.append((msg.event_id, "message"))
        return msg

    def poll(self) -> list[Message]:
        """Every message already delivered, without waiting (they feed the next event)."""
        a = self._a
        out: list[Message] = []
        if not a.has_mail():
            return out
        while not a.inbox.empty():
            msg = a.inbox.get_nowait()
            a.pending.append((msg.event_id, "message"))
            out.append(msg)
        return out

    async def wait(self, handles: Sequence[Handle]) -> list[Result]:
        """Wait for children to return; their return events feed this agent's next event."""
        a = self._a
        self._rt.check_alive(a)
        results = list(await asyncio.gather(*(h._future for h in handles)))
        a.turn_open = False
        for r in results:
            if r.event_id is not None:
                a.pending.append((r.event_id, "return"))
        return results

    async def call_tool(self, name: str, args: Mapping[str, Any] | None = None) -> ToolResult:
        """Call a registered tool: records ``tool_call`` and ``tool_result`` events."""
        return await self._rt.call_tool(self._a, name, dict(args or {}))

    async def return_(self, value: Any) -> str:
        """Return ``value`` to the parent (records a ``return`` event); the agent is done."""
        return self._rt.return_value(self._a, value)

    async def aggregate(
        self, results: Sequence[Result | Any], method: str = "combine", **kw: Any
    ) -> Any:
        """Combine results (an O4 decision) and record an ``aggregate`` event.

        Methods: ``combine`` (the task's reduce), ``vote`` (majority), ``first`` (first
        success), ``trust`` (vote weighted by ``weights``), ``judge`` (an LLM judge picks).
        """
        return await self._rt.aggregate(self, self._a, list(results), method, kw)

    async def stop(self, reason: str = "done", answer: Any = None) -> str:
        """The stop decision (O5): records it; for the root, ``answer`` is the run's answer."""
        return self._rt.stop_decision(self._a, reason, answer)
