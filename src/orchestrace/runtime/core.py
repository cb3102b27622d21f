"""The orchestration runtime: agents act through a :class:`Context`; every call is recorded.

Each call becomes trace events with edges from what it consumed.

An agent is a plain async callable ``async def agent(ctx, **inputs) -> value``. Its context
offers ``generate`` (an LLM call through the harness), ``spawn``, ``delegate``, ``send``,
``receive``, ``wait``, ``call_tool``, ``return_``, ``aggregate`` and ``stop``. The runtime
assigns event ids in recording order, keeps each agent's step (LLM turn) count, chains each
action to the agent's previous one, and adds an edge from everything the action consumed:
received messages, children's returns, tool results. Budgets end a run cleanly with a recorded
stop event; agent exceptions and tool failures become recorded events.

Example:
    >>> from orchestrace.runtime.backends.sim import SimBackend
    >>> from orchestrace.runtime.tasks import make_task
    >>> from orchestrace.runtime.clock import run_virtual
    >>> task = make_task("arith", seed=0, size=8)
    >>> async def worker(ctx, part):
    ...     r = await ctx.generate("solve", ctx.payload(part))
    ...     return r.answer
    >>> async def lead(ctx):
    ...     parts = ctx.task.subtasks(2)
    ...     kids = [await ctx.spawn("worker", worker, part=p) for p in parts]
    ...     results = await ctx.wait(kids)
    ...     return await ctx.aggregate(results, "combine")
    >>> rt = Runtime(task=task, backend=SimBackend(seed=1))
    >>> trace = run_virtual(rt.run(lead))
    >>> [e.type for e in trace.events][:3], trace.metrics["task_success"]
    (['spawn', 'spawn', 'llm_call'], 1.0)
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from orchestrace._safe import scrub_known
from orchestrace.errors import ConfigError, OrchestraceError, RuntimeError_
from orchestrace.runtime.backends.base import (
    Backend,
    BackendError,
    LLMRequest,
    LLMResponse,
    backend_spec,
    redact,
    request_key,
)
from orchestrace.runtime.config import RunConfig
from orchestrace.runtime.prompts import render
from orchestrace.runtime.recorder import Recorder
from orchestrace.runtime.tasks.base import (
    Subtask,
    Task,
    Verdict,
    answer_digest,
    unknown_verdict,
)
from orchestrace.trace.build import default_costs
from orchestrace.trace.model import SCHEMA_VERSION, Decision, Edge, Event, Trace

__all__ = [
    "AgentFn",
    "BudgetExceeded",
    "Context",
    "Handle",
    "Message",
    "Result",
    "Runtime",
    "StopNow",
    "ToolResult",
]

AgentFn = Callable[..., Awaitable[Any]]
_ENC = msgspec.json.Encoder(order="deterministic")
ROOT = "orchestrator"


class BudgetExceeded(RuntimeError_):
    """A run limit was reached; the run ends with a recorded stop event."""

    def __init__(self, budget: str, limit: Any) -> None:
        self.budget = budget
        self.limit = limit
        super().__init__(f"budget exceeded: {budget} ({limit})")


class StopNow(Exception):
    """Raised inside an agent when a counterfactual intervention forces it to stop."""


@dataclass(frozen=True)
class Message:
    """A message received by an agent."""

    event_id: str
    sender: str
    content: str
    data: Any = None


@dataclass(frozen=True)
class Result:
    """What a child agent returned (``ok=False`` when it failed)."""

    agent: str
    value: Any
    ok: bool = True
    error: str | None = None
    event_id: str | None = None


@dataclass(frozen=True)
class ToolResult:
    """The outcome of a tool call."""

    tool: str
    value: Any
    ok: bool = True
    error: str | None = None
    event_id: str | None = None


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
class _Agent:
    name: str
    role: str
    parent: str | None
    depth: int
    spawn_event: str | None
    handle_future: asyncio.Future[Result] | None
    inbox: asyncio.Queue[Message] = field(default_factory=asyncio.Queue)
    step: int = -1
    turn_open: bool = False
    last: str | None = None
    pending: list[tuple[str, str]] = field(default_factory=list)
    returned: bool = False
    stopped: bool = False
    children: dict[str, int] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    sent: dict[int, int] = field(default_factory=dict)
    draws: int = 0
    best: Any = None


class Context:
    """What an agent can do. Every method records events; see the module docstring."""

    def __init__(self, runtime: Runtime, agent: _Agent) -> None:
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
        """The run configuration."""
        return self._rt.config

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
        if decision not in {d.value for d in Decision}:
            raise ConfigError(
                f"unknown decision {decision!r}; use one of: {', '.join(d.value for d in Decision)}"
            )
        rt, a = self._rt, self._a
        rt.check_alive(a)
        rt.open_step(a)
        return rt.record(
            a,
            "orchestrator_decision",
            rt.now(),
            decision=decision,
            content=content,
            attrs=dict(attrs or {}),
        )

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
        rt, a = self._rt, self._a
        rt.check_alive(a)
        rt.open_step(a, llm=True)
        body = dict(payload or {})
        req = LLMRequest(
            a.name,
            a.role,
            kind,
            messages or render(kind, body, a.role),
            body,
            max_tokens=max_tokens,
        )
        fp = hashlib.blake2b(req.fingerprint(), digest_size=8).hexdigest()
        occurrence = a.calls.get(fp, 0)
        a.calls[fp] = occurrence + 1
        key = request_key(req, occurrence)
        t0 = rt.now()
        recorded = rt.cache.get(key) is not None
        resp = await rt.call_llm(req, key)
        attrs: dict[str, Any] = {"kind": kind, "key": key}
        if rt.label_answers and not recorded:  # a fork: say who answered this changed call
            attrs["answered_by"] = {
                "name": str(rt.backend.name),
                "model": str(resp.model or rt.backend.name),
            }
        if resp.answer is not None:
            attrs["answer"] = resp.answer
        if resp.confidence is not None:
            attrs["confidence"] = resp.confidence
        if "truth" in body:  # ground truth of what was asked, for rewards and credit
            attrs["truth"] = body["truth"]
            for k in ("candidate", "candidates"):
                if k in body:
                    attrs[k] = body[k]
        rt.record(
            a,
            "llm_call",
            t0,
            tool=resp.model or rt.backend.name,
            content=resp.text,
            tokens_in=resp.tokens_in,
            tokens_out=resp.tokens_out,
            cost=resp.cost,
            error=None if resp.error is None else redact(resp.error),
            attrs=attrs,
        )
        rt.add_tokens(resp.tokens_in + resp.tokens_out)
        return resp

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
        rt, a = self._rt, self._a
        rt.check_alive(a)
        return rt._spawn(a, role, fn, name, content, inputs)

    async def send(self, to: str, content: Any, *, data: Any = None) -> str | None:
        """Send a message (O3 when the root sends); return its event id.

        Returns ``None`` when an intervention dropped the message.
        """
        return self._rt._send(self._a, to, content, data, decision=None)

    async def broadcast(self, to: Iterable[str], content: Any, *, data: Any = None) -> list[str]:
        """Send the same message to several agents (one event each)."""
        out = []
        for target in to:
            eid = self._rt._send(self._a, target, content, data, decision=None)
            if eid is not None:
                out.append(eid)
        return out

    async def delegate(self, to: Handle | str, subtask: Any, *, data: Any = None) -> str | None:
        """Hand ``subtask`` to an existing agent (an O2 decision); it arrives as a message."""
        target = to.name if isinstance(to, Handle) else to
        return self._rt._send(self._a, target, subtask, data, decision="delegate")

    async def receive(self, timeout: float | None = None) -> Message | None:
        """The next message (``None`` after ``timeout`` seconds without one)."""
        a = self._a
        self._rt.check_alive(a)
        try:
            if timeout is None:
                msg = await a.inbox.get()
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
        out = []
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
        rt, a = self._rt, self._a
        rt.check_alive(a)
        return await rt._call_tool(a, name, dict(args or {}))

    async def return_(self, value: Any) -> str:
        """Return ``value`` to the parent (records a ``return`` event); the agent is done."""
        return self._rt._return(self._a, value)

    async def aggregate(
        self, results: Sequence[Result | Any], method: str = "combine", **kw: Any
    ) -> Any:
        """Combine results (an O4 decision) and record an ``aggregate`` event.

        Methods: ``combine`` (the task's reduce), ``vote`` (majority), ``first`` (first
        success), ``trust`` (vote weighted by ``weights``), ``judge`` (an LLM judge picks).
        """
        return await self._rt._aggregate(self, self._a, list(results), method, kw)

    async def stop(self, reason: str = "done", answer: Any = None) -> str:
        """The stop decision (O5): records it; for the root, ``answer`` is the run's answer."""
        return self._rt._stop_decision(self._a, reason, answer)


class Runtime:
    """Runs one orchestration and records its trace.

    Args:
        task: The task instance.
        backend: The LLM backend.
        config: Budgets, seeds, topology options (default :class:`RunConfig`).
        tools: Extra tools (name -> ``fn(args) -> value``); the task's tools are included.
        recorder: Processors to stream events to (JSONL exporter, progress bar...).
        interventions: Counterfactual interventions (see :mod:`orchestrace.runtime.replay`).
        cache: Replay cache (request key -> response) consulted before the backend.
        topology: Topology name recorded in the trace.
        meta: Extra run information recorded in the trace.
        judge: ``judge(answer) -> Verdict`` for the final answer (default: the task's checker,
            run now: :meth:`Task.verdict`). Replays pass one that reuses recorded verdicts.
        label_answers: Record on every ``llm_call`` that the cache did not answer which
            backend did (``attrs.answered_by``: name and model); forks set it.
    """

    def __init__(
        self,
        *,
        task: Task,
        backend: Backend,
        config: RunConfig | None = None,
        tools: Mapping[str, Callable[[dict[str, Any]], Any]] | None = None,
        recorder: Recorder | None = None,
        interventions: Sequence[Any] = (),
        cache: dict[str, Any] | None = None,
        topology: str | None = None,
        meta: Mapping[str, Any] | None = None,
        judge: Callable[[Any], Verdict] | None = None,
        label_answers: bool = False,
    ) -> None:
        self.task = task
        self.label_answers = label_answers
        self.judge = judge
        self.backend = backend
        self.config = config or RunConfig()
        self.tools: dict[str, Callable[[dict[str, Any]], Any]] = {**task.tools(), **(tools or {})}
        self.recorder = recorder or Recorder()
        self.interventions = list(interventions)
        self.cache = cache if cache is not None else {}
        self.topology = topology
        self.meta = dict(meta or {})
        self.events: list[Event] = []
        self.edges: list[Edge] = []
        self.agents: dict[str, _Agent] = {}
        self.backend_calls = 0
        self.cache_hits = 0
        self.tokens = 0
        self.steps = 0
        self.answer: Any = None
        self.stop_reason: str | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._t0 = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Future[str] | None = None
        self._tool_calls: dict[str, int] = {}

    # ------------------------------------------------------------------ time & budgets
    def now(self) -> float:
        """Seconds since the run started."""
        assert self._loop is not None
        return round(self._loop.time() - self._t0, 9)

    def check_alive(self, a: _Agent) -> None:
        """Refuse actions of agents that already returned, or after the run stopped."""
        if self._stop is not None and self._stop.done():
            raise asyncio.CancelledError
        if a.returned:
            raise RuntimeError_(f"agent {a.name!r} already returned; it cannot act any more")

    def open_step(self, a: _Agent, *, llm: bool = False) -> None:
        """Start a new step for ``a`` when needed (an LLM call, or any action after a wait)."""
        if llm or not a.turn_open:
            a.step += 1
            a.turn_open = True
            self.steps += 1
            if self.steps > self.config.max_steps:
                raise BudgetExceeded("max_steps", self.config.max_steps)
            for iv in self.interventions:
                if iv.forces_stop(a.name, a.step):
                    raise StopNow(f"forced stop at step {a.step} ({iv})")

    def add_tokens(self, n: int) -> None:
        """Count tokens against the budget."""
        self.tokens += n
        if self.tokens > self.config.max_tokens:
            raise BudgetExceeded("max_tokens", self.config.max_tokens)

    def decide(self, a: _Agent, name: str, default: Any) -> Any:
        """A decision value after interventions."""
        value = default
        for iv in self.interventions:
            value = iv.decision(a.name, name, value)
        return value

    def _request_stop(self, reason: str) -> None:
        if self._stop is not None and not self._stop.done():
            self._stop.set_result(reason)

    # ------------------------------------------------------------------ recording
    def record(
        self,
        a: _Agent,
        type_: Any,
        t: float,
        *,
        extra: Iterable[tuple[str, str]] = (),
        **fields: Any,
    ) -> str:
        """Record one event of agent ``a`` that started at ``t`` and ends now."""
        eid = f"e{len(self.events) + 1}"
        dur = max(0.0, round(self.now() - t, 9))
        if a.last is None and a.parent is None and "role" not in fields:
            fields["role"] = a.role  # the root has no spawn event to carry its role
        fields = scrub_known(fields)  # a secret echoed by a server never reaches the trace
        ev = Event(id=eid, t=t, type=type_, agent=a.name, dur=dur, step=max(a.step, 0), **fields)
        edges = []
        if a.last is not None:
            edges.append(Edge(a.last, eid, "causal"))
        elif a.spawn_event is not None:
            edges.append(Edge(a.spawn_event, eid, "spawn"))
        seen = {a.last}
        for src, kind in (*a.pending, *extra):
            if src not in seen:
                seen.add(src)
                edges.append(Edge(src, eid, kind))  # type: ignore[arg-type]
        a.pending.clear()
        a.last = eid
        self.events.append(ev)
        self.edges.extend(edges)
        self.recorder.event(ev, edges)
        return eid

    def _record_tool_result(self, tool: str, call_id: str, t: float, **fields: Any) -> str:
        eid = f"e{len(self.events) + 1}"
        fields = scrub_known(fields)
        ev = Event(id=eid, t=t, type="tool_result", agent=tool, tool=tool, **fields)
        edge = Edge(call_id, eid, "tool_dependency")
        self.events.append(ev)
        self.edges.append(edge)
        self.recorder.event(ev, [edge])
        return eid

    # ------------------------------------------------------------------ calls
    async def call_llm(self, req: LLMRequest, key: str) -> LLMResponse:
        """Answer from the replay cache, else from the backend; wait the call's latency."""
        cached = self.cache.get(key)
        if cached is not None:
            self.cache_hits += 1
            resp = cached
            await asyncio.sleep(resp.latency)
            return resp  # type: ignore[no-any-return]
        self.backend_calls += 1
        if self.backend.virtual:
            try:
                resp = await self.backend.complete(req)
            except BackendError as err:
                resp = LLMResponse("", error=str(err)[:500], model=self.backend.name)
            await asyncio.sleep(resp.latency)
        else:
            t0 = self.now()
            try:
                resp = await self.backend.complete(req)
            except BackendError as err:
                resp = LLMResponse("", error=str(err)[:500], model=self.backend.name)
            resp = _with_latency(resp, self.now() - t0)
        if resp.error is None:
            self.cache[key] = resp
        if resp.error is not None and self.config.on_error == "stop":
            self._request_stop(f"backend failure: {redact(resp.error)}")
        return resp

    async def _call_tool(self, a: _Agent, name: str, args: dict[str, Any]) -> ToolResult:
        fn = self.tools.get(name)
        self.open_step(a)
        fp = hashlib.blake2b(_ENC.encode([name, args]), digest_size=8).hexdigest()
        n = a.calls.get("tool:" + fp, 0)
        a.calls["tool:" + fp] = n + 1
        key = hashlib.blake2b(f"{a.name}:{fp}:{n}".encode(), digest_size=16).hexdigest()
        t0 = self.now()
        value: Any = None
        error: str | None = None
        cached = self.cache.get("tool:" + key)
        if cached is not None:
            self.cache_hits += 1
            value, error, latency = cached
            await asyncio.sleep(latency)
        else:
            if fn is None:
                error = f"unknown tool {name!r}; registered: {sorted(self.tools)}"
                latency = 0.0
            else:
                latency = self.config.tool_latency_s
                rng = random.Random(f"{self.config.seed}:tool:{key}")
                latency *= rng.uniform(0.5, 1.5)
                try:
                    if (
                        self.config.tool_failure_rate
                        and rng.random() < self.config.tool_failure_rate
                    ):
                        raise RuntimeError("injected tool failure")
                    value = fn(args)
                    _ENC.encode(value)
                except Exception as err:
                    error = f"{type(err).__name__}: {str(err)[:300]}"
                    value = None
            if self.backend.virtual:
                await asyncio.sleep(latency)
            else:
                latency = self.now() - t0
            self.cache["tool:" + key] = (value, error, round(latency, 9))
        call_id = self.record(
            a, "tool_call", t0, tool=name, content=_text(args), attrs={"key": key}
        )
        res_id = self._record_tool_result(
            name,
            call_id,
            self.now(),
            content=None if error else _text(value),
            error=error,
            trusted=False,
        )
        a.pending.append((res_id, "causal"))
        a.turn_open = False
        if error is not None and self.config.on_error == "stop":
            self._request_stop(f"tool failure: {error}")
        return ToolResult(name, value, error is None, error, res_id)

    # ------------------------------------------------------------------ agents
    def _new_agent(
        self,
        name: str,
        role: str,
        parent: _Agent | None,
        spawn_event: str | None,
        future: asyncio.Future[Result] | None,
    ) -> _Agent:
        a = _Agent(
            name,
            role,
            parent.name if parent else None,
            parent.depth + 1 if parent else 0,
            spawn_event,
            future,
        )
        self.agents[name] = a
        return a

    def _spawn(
        self,
        a: _Agent,
        role: str,
        fn: AgentFn,
        name: str | None,
        content: str | None,
        inputs: dict[str, Any],
    ) -> Handle:
        cfg = self.config
        if len(self.agents) + 1 > cfg.max_agents:
            raise BudgetExceeded("max_agents", cfg.max_agents)
        if a.depth + 1 > cfg.max_depth:
            raise BudgetExceeded("max_depth", cfg.max_depth)
        self.open_step(a)
        if name is None:
            k = a.children.get(role, 0) + 1
            a.children[role] = k
            name = f"{role}{k}" if a.parent is None else f"{a.name}.{role}{k}"
        if name in self.agents:
            raise ConfigError(f"agent name {name!r} is taken; pass another name=")
        assert self._loop is not None
        parts = [v for v in inputs.values() if isinstance(v, Subtask)]
        attrs = None
        if parts:
            lo, hi = parts[0].span
            attrs = {"part": {"index": parts[0].index, "size": parts[0].size, "lo": lo, "hi": hi}}
        eid = self.record(
            a,
            "spawn",
            self.now(),
            to=name,
            role=role,
            decision="spawn",
            content=content,
            attrs=attrs,
        )
        future: asyncio.Future[Result] = self._loop.create_future()
        child = self._new_agent(name, role, a, eid, future)
        task = self._loop.create_task(self._run_child(child, fn, inputs))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return Handle(name, role, future)

    def _send(
        self, a: _Agent, to: str, content: Any, data: Any, decision: str | None
    ) -> str | None:
        self.check_alive(a)
        self.open_step(a)
        k = a.sent.get(a.step, 0)
        a.sent[a.step] = k + 1
        text = content if isinstance(content, str) else _text(content)
        for iv in self.interventions:
            out = iv.message(a.name, a.step, k, to, text, data)
            if out is None:
                return None
            text, data = out
        if decision is None and a.parent is None:
            decision = "communicate"
        eid = self.record(
            a,
            "message",
            self.now(),
            from_=a.name,
            to=to,
            content=text,
            decision=decision,
            attrs={"data": data} if data is not None else None,
        )
        target = self.agents.get(to)
        if target is not None:
            target.inbox.put_nowait(Message(eid, a.name, text, data))
        return eid

    def _return(self, a: _Agent, value: Any) -> str:
        self.check_alive(a)
        self.open_step(a)
        for iv in self.interventions:
            value = iv.returned(a.name, value)
        eid = self.record(
            a,
            "return",
            self.now(),
            from_=a.name,
            to=a.parent or "user",
            content=_text(value),
            attrs={"value": value},
        )
        a.returned = True
        if a.handle_future is not None and not a.handle_future.done():
            a.handle_future.set_result(Result(a.name, value, True, None, eid))
        return eid

    def _stop_decision(self, a: _Agent, reason: str, answer: Any) -> str:
        self.check_alive(a)
        self.open_step(a)
        eid = self.record(
            a,
            "orchestrator_decision",
            self.now(),
            decision="stop",
            content=reason,
            attrs={"answer": answer},
        )
        a.stopped = True
        if a.parent is None:
            self.answer = answer
            self.stop_reason = reason
        return eid

    async def _aggregate(
        self, ctx: Context, a: _Agent, results: list[Any], method: str, kw: dict[str, Any]
    ) -> Any:
        self.check_alive(a)
        ids = [r.event_id for r in results if isinstance(r, Result) and r.event_id]
        values = [r.value if isinstance(r, Result) else r for r in results]
        oks = [r.ok if isinstance(r, Result) else True for r in results]
        good = [v for v, ok in zip(values, oks, strict=True) if ok]
        if method == "combine":
            value = self.task.combine(values) if all(oks) else None
        elif method in ("vote", "trust"):
            weights = kw.get("weights") or [1.0] * len(values)
            tally: dict[str, float] = {}
            first: dict[str, Any] = {}
            for v, ok, w in zip(values, oks, weights, strict=False):
                if ok:
                    k = _text(v)
                    tally[k] = tally.get(k, 0.0) + float(w)
                    first.setdefault(k, v)
            # most votes; max() keeps the first of equal counts: ties go to the answer seen first
            value = first[max(tally, key=tally.__getitem__)] if tally else None
        elif method == "first":
            value = good[0] if good else None
        elif method == "judge":
            resp = await ctx.generate("judge", {**kw.get("payload", {}), "candidates": values})
            pick = resp.answer
            value = values[pick] if isinstance(pick, int) and 0 <= pick < len(values) else None
        else:
            raise ConfigError(
                f"unknown aggregation method {method!r}; use combine, vote, trust, first or judge"
            )
        consumed = set(ids)
        a.pending = [(s, k) for s, k in a.pending if s not in consumed]
        self.open_step(a)
        self.record(
            a,
            "aggregate",
            self.now(),
            decision="aggregate",
            content=_text(value),
            attrs={"method": method, "value": value},
            extra=[(i, "aggregate") for i in ids],
        )
        a.best = value
        return value

    # ------------------------------------------------------------------ running
    async def _run_child(self, a: _Agent, fn: AgentFn, inputs: dict[str, Any]) -> None:
        ctx = Context(self, a)
        try:
            value = await fn(ctx, **inputs)
            if not a.returned:
                self._return(a, value)
        except asyncio.CancelledError:
            raise
        except BudgetExceeded as err:
            self._request_stop(str(err))
        except StopNow:
            if not a.returned:
                self._return(a, a.best)
        except Exception as err:
            self._fail(a, err)

    def _fail(self, a: _Agent, err: BaseException) -> None:
        msg = f"{type(err).__name__}: {str(err)[:300]}"
        a.turn_open = True  # the failure belongs to the step that raised
        eid = self.record(a, "despawn", self.now(), error=msg, to=a.parent)
        a.returned = True
        if a.handle_future is not None and not a.handle_future.done():
            a.handle_future.set_result(Result(a.name, None, False, msg, eid))
        if self.config.on_error == "stop" or a.parent is None:
            self._request_stop(f"agent {a.name} failed: {msg}")

    async def _run_root(self, a: _Agent, fn: AgentFn, inputs: dict[str, Any]) -> None:
        ctx = Context(self, a)
        try:
            value = await fn(ctx, **inputs)
            if not a.stopped:
                self._stop_decision(a, "done", value)
        except asyncio.CancelledError:
            raise
        except BudgetExceeded as err:
            self._request_stop(str(err))
        except StopNow as err:
            self.stop_reason = str(err)
            self.answer = a.best
            self._request_stop(str(err))
        except Exception as err:
            self._fail(a, err)

    def header(self) -> dict[str, Any]:
        """The trace header (id, task, system, topology, meta)."""
        return {
            "trace_id": self.trace_id(),
            "task_id": self.task_id(),
            "system": "orchestrace",
            "topology": self.topology,
            "meta": self.run_meta(),
        }

    def task_id(self) -> str:
        """``<task name>:s<seed>:n<size>``."""
        return f"{self.task.name}:s{self.task.seed}:n{self.task.size}"

    def run_meta(self) -> dict[str, Any]:
        """Everything needed to re-run: config, task spec, backend, interventions."""
        meta = {
            "config": self.config.to_dict(),
            "task": self.task.spec(),
            "backend": backend_spec(self.backend),
            **self.meta,
        }
        if self.interventions:
            meta["interventions"] = [iv.describe() for iv in self.interventions]
        return meta

    def trace_id(self) -> str:
        """Deterministic id from the run's configuration and interventions."""
        h = hashlib.blake2b(_ENC.encode([self.topology, self.run_meta()]), digest_size=6)
        return f"{self.topology or 'run'}-{self.task.name}-{h.hexdigest()}"

    async def run(self, root: AgentFn, **inputs: Any) -> Trace:
        """Run ``root`` as the orchestrator and return the recorded trace."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._t0 = loop.time()
        self._stop = loop.create_future()
        if hasattr(loop, "set_deadlock_handler"):
            loop.set_deadlock_handler(
                lambda: self._request_stop(
                    "deadlock: every agent is waiting for a message or result that will never come"
                )
            )
        header = self.header()
        self.recorder.start(header)
        root_agent = self._new_agent(ROOT, "orchestrator", None, None, None)
        root_task = loop.create_task(self._run_root(root_agent, root, inputs))
        self._tasks.add(root_task)
        reason: str | None = None
        try:
            waiters: set[asyncio.Future[Any]] = {root_task, self._stop}
            done, _ = await asyncio.wait(
                waiters,
                timeout=self.config.max_wall_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if self._stop.done():
                reason = self._stop.result()
            elif not done:
                reason = str(BudgetExceeded("max_wall_s", self.config.max_wall_s))
            if not self._stop.done():
                self._stop.set_result(reason or "done")
            pending = [t for t in self._tasks if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
            if reason is not None and not root_agent.stopped and reason != "done":
                root_agent.turn_open = False
                self.steps -= 1  # the closing stop never counts against the budget
                self._force_stop_event(root_agent, reason)
            trace = self._finish(header)
        except BaseException:
            # cancelled (or failed) from outside: take the agents down with the run; when the
            # coroutine is only being discarded after its loop closed, there is nothing left to
            # cancel (and no loop to do it on)
            if not loop.is_closed():
                pending = [t for t in self._tasks if not t.done()]
                for t in pending:
                    t.cancel()
                if pending:
                    with contextlib.suppress(BaseException):
                        await asyncio.gather(*pending, return_exceptions=True)
            self.recorder.shutdown()
            raise
        self.recorder.end(trace)
        self.recorder.shutdown()
        return trace

    def _force_stop_event(self, a: _Agent, reason: str) -> None:
        a.step += 1
        budget = (
            reason.split(":", 1)[1].split("(", maxsplit=1)[0].strip()
            if reason.startswith("budget")
            else None
        )
        attrs: dict[str, Any] = {"answer": a.best if self.answer is None else self.answer}
        if budget:
            attrs["budget"] = budget
        self.record(
            a, "orchestrator_decision", self.now(), decision="stop", content=reason, attrs=attrs
        )
        a.stopped = True
        if self.stop_reason is None:
            self.stop_reason = reason
            self.answer = attrs["answer"]

    def verdict(self) -> Verdict:
        """The checker's verdict on the final answer (recorded as ``meta.result.verdict``).

        A checker that refuses to run (e.g. no sandbox is available) gives an unknown verdict
        whose reason says why; the run is still recorded.
        """
        try:
            judge = self.judge if self.judge is not None else self.task.verdict
            v = judge(self.answer)
        except OrchestraceError as err:
            return unknown_verdict(self.task.name, f"not checked: {err}")
        return v if "checker" in v else {**v, "checker": self.task.name}

    def _finish(self, header: Mapping[str, Any]) -> Trace:
        verdict = self.verdict()
        success = verdict["passed"]
        costs = default_costs(self.events)
        metrics = {
            "budget_exceeded": float(
                bool(self.stop_reason and self.stop_reason.startswith("budget"))
            ),
            "agents": float(len(self.agents)),
        }
        if success is not None:  # unknown outcomes have no task_success
            metrics = {"task_success": float(success), **metrics}
        meta = dict(header["meta"])
        meta["result"] = scrub_known(
            {
                "answer": self.answer,
                "stop_reason": self.stop_reason or "done",
                "truth": self.task.answer,
                "success": success,
                "verdict": dict(verdict),
            }
        )
        # the verdict names the answer it judged, so an answer edited later is not scored with it
        meta["result"]["verdict"]["answer_sha256"] = answer_digest(meta["result"]["answer"])
        return Trace(
            trace_id=header["trace_id"],
            task_id=header["task_id"],
            events=tuple(self.events),
            edges=tuple(self.edges),
            rewards={} if success is None else {"team": float(success)},
            costs=costs,
            system="orchestrace",
            topology=self.topology,  # type: ignore[arg-type]
            metrics=metrics,
            schema_version=SCHEMA_VERSION,
            meta=meta,
        )


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return _ENC.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        return repr(value)


def _with_latency(resp: LLMResponse, latency: float) -> LLMResponse:
    from dataclasses import replace

    return replace(resp, latency=round(latency, 9))
