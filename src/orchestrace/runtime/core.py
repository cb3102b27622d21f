"""The orchestration runtime: runs agents and records every action as trace events.

Agents act through a :class:`~orchestrace.runtime.context.Context` (``runtime/context.py``);
each context method calls the :class:`Runtime` method of the same name, which records the
events, with edges from what the action consumed. LLM answers and tool outputs come from the
run's :class:`~orchestrace.runtime.cache.ReplayCache` when it holds them, else from the backend
(or the tool, :mod:`~orchestrace.runtime.tools`), and are stored there. The runtime assigns
event ids in recording order, keeps each agent's step (LLM turn) count, chains each action to
the agent's previous one, and adds an edge from everything the action consumed: received
messages, children's returns, tool results. Budgets end a run cleanly with a recorded stop
event; agent exceptions and tool failures become recorded events. Interventions
(:mod:`~orchestrace.runtime.interventions`) are consulted where they act: as a message is sent,
as an agent returns or opens a step, and as it takes a named decision (:meth:`Runtime.decide`).

This module keeps the runtime's state, its recording primitives, agents and the run loop; the
LLM calls are in :mod:`~orchestrace.runtime.llm_calls`, messages, returns, decisions and
aggregation in :mod:`~orchestrace.runtime.messaging`, and how a run ends (its stop event,
verdict and trace) in :mod:`~orchestrace.runtime.ending` (functions of the runtime that
:class:`Runtime` takes as its methods).

Example:
    >>> from orchestrace.runtime.backends.sim import SimBackend
    >>> from orchestrace.tasks import make_task
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
import copy
import dataclasses
import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from orchestrace._safe import _SECRETS, scrub_known
from orchestrace.errors import ConfigError, RuntimeError_
from orchestrace.runtime import ending, llm_calls, messaging, tools
from orchestrace.runtime.backends.base import (
    Backend,
    backend_spec,
)
from orchestrace.runtime.cache import ReplayCache
from orchestrace.runtime.clock import VirtualTimeLoop
from orchestrace.runtime.config import RunConfig
from orchestrace.runtime.context import (
    AgentFn,
    AgentState,
    BudgetExceeded,
    Context,
    Handle,
    Message,
    Result,
    StopNow,
    ToolResult,
)
from orchestrace.runtime.guard import Guard, TaintBlocked
from orchestrace.runtime.recorder import Recorder
from orchestrace.tasks.base import (
    Subtask,
    Task,
    Verdict,
)
from orchestrace.trace.model import Edge, Event, Trace

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

_ENC = msgspec.json.Encoder(order="deterministic")
#: Event's fields in order: :meth:`Runtime.record` builds events positionally.
_ORDER = (
    "id", "t", "type", "agent", "dur", "role", "from_", "to", "tool", "decision", "step",
    "content", "content_ref", "trusted", "tokens_in", "tokens_out", "cost", "error", "attrs",
)  # fmt: skip
if Event.__struct_fields__ != _ORDER:  # pragma: no cover - a change of the trace model
    raise TypeError("Event's fields changed: update _ORDER and Runtime.record to match")
# the default objects themselves: a field left out is omitted from the JSON only when it holds
# its default object
_TOKENS_IN, _TOKENS_OUT, _COST = (
    dict(zip(_ORDER[-len(Event.__struct_defaults__) :], Event.__struct_defaults__, strict=True))[k]
    for k in ("tokens_in", "tokens_out", "cost")
)
#: The event fields a caller of :meth:`Runtime.record` may set (the others it sets itself).
_FIELDS = frozenset(_ORDER) - {"id", "t", "type", "agent", "dur", "step"}
#: The name of the root agent (the orchestrator).
ROOT = "orchestrator"


class Runtime:
    """Runs one orchestration and records its trace.

    Args:
        task: The task instance.
        backend: The LLM backend.
        config: Budgets, seeds, topology options (default :class:`RunConfig`).
        tools: Extra tools (name -> ``fn(args) -> value``); the task's tools are included.
        recorder: Processors to stream events to (JSONL exporter, progress bar...).
        interventions: Counterfactual interventions (see :mod:`orchestrace.runtime.interventions`).
        cache: Replay cache consulted before the backend and the tools; what they answer is
            stored in it (:meth:`ReplayCache.from_trace` rebuilds one from a trace).
        topology: Topology name recorded in the trace.
        meta: Extra run information recorded in the trace.
        judge: ``judge(answer) -> Verdict`` for the final answer (default: the task's checker,
            run now: :meth:`Task.verdict`). Replays pass one that reuses recorded verdicts.
        label_answers: Record on every ``llm_call`` that the cache did not answer which
            backend did (``attrs.answered_by``: name and model); forks set it.
        detector: A prompt-injection detector object (``name``, ``scan(text)``) used instead
            of the one ``config.defenses.detector`` names.
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
        cache: ReplayCache | None = None,
        topology: str | None = None,
        meta: Mapping[str, Any] | None = None,
        judge: Callable[[Any], Verdict] | None = None,
        label_answers: bool = False,
        detector: Any = None,
    ) -> None:
        self.task = task
        self.label_answers = label_answers
        self.judge = judge
        self.backend = backend
        self.config = config or RunConfig()
        self.tools: dict[str, Callable[[dict[str, Any]], Any]] = {**task.tools(), **(tools or {})}
        self.recorder = recorder or Recorder()
        # a Recorder without processors does nothing per event: its call is skipped (unless
        # a subclass records events its own way)
        self._custom_recorder = type(self.recorder).event is not Recorder.event
        from orchestrace.runtime.interventions import (  # noqa: PLC0415  (it imports this)
            check_interventions,
        )

        self.interventions = check_interventions(interventions, max_agents=self.config.max_agents)
        if cache is not None and not isinstance(cache, ReplayCache):
            raise ConfigError(
                f"cache must be a ReplayCache (ReplayCache.from_trace(trace)), got "
                f"{type(cache).__name__}"
            )
        self.cache = cache if cache is not None else ReplayCache()
        self.topology = topology
        self.meta = dict(meta or {})
        self.events: list[Event] = []
        self.edges: list[Edge] = []
        # ``default_costs`` of the events, kept as they are stored (the same sums, in the same
        # order): a copy made for a snapshot fork then never reads the run's events back
        self._spent: list[Any] = [0, 0.0, 0, 0, math.inf, 0.0]
        self.agents: dict[str, AgentState] = {}
        self.backend_calls = 0
        self.cache_hits = 0
        self.tool_runs = 0  # tool calls the cache did not answer (run here)
        self.tokens = 0
        self.token_table: dict[str, Any] = {}  # token records of trainable calls by event id
        self.steps = 0
        self.answer: Any = None
        self.stop_reason: str | None = None
        # the agents' tasks, in the order they started (cancelled when the run ends); kept to
        # the end, since a done-callback per task would cost a loop callback per agent
        self._tasks: list[asyncio.Task[Any]] = []
        self._t0 = 0.0
        self._now_raw = float("nan")  # the loop time now() last rounded (nan: none yet)
        self._now = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._vloop: VirtualTimeLoop | None = None  # the loop, when it runs on virtual time
        self._stop: asyncio.Future[str] | None = None
        #: Enforces ``config.defenses`` (``None`` when every defense is off).
        self.guard: Guard | None = None
        if not self.config.defenses.is_none() or detector is not None:
            self.guard = Guard(self, self.config.defenses, detector)
        #: What agents read as ``ctx.config``: the configuration without the run secret (from
        #: which every agent's signing key derives) and with its own copy of the capability
        #: policy, so nothing an agent reaches through its context signs for another agent or
        #: changes what the guard enforces.
        self.agent_config = _agent_view(self.config)

    # ------------------------------------------------------------------ time & budgets
    def now(self) -> float:
        """Seconds since the run started."""
        raw = self._time()
        if raw != self._now_raw:  # the clock moved: round once per distinct time
            self._now_raw = raw
            self._now = round(raw - self._t0, 9)
        return self._now

    def _time(self) -> float:
        # replaced by the running loop's ``time`` when the run starts
        raise RuntimeError_("the runtime has not started: await Runtime.run(root) first")

    def check_alive(self, a: AgentState) -> None:
        """Refuse actions of agents that already returned, or after the run stopped."""
        if self._stop is not None and self._stop.done():
            raise asyncio.CancelledError
        if a.returned:
            raise RuntimeError_(f"agent {a.name!r} already returned; it cannot act any more")

    def open_step(self, a: AgentState, *, llm: bool = False) -> None:
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

    def decide(self, a: AgentState, name: str, default: Any) -> Any:
        """A decision value after interventions."""
        value = default
        for iv in self.interventions:
            at = getattr(iv, "decision_at", None)
            value = at(a.name, a.step, name, value) if at else iv.decision(a.name, name, value)
        return value

    def request_stop(self, reason: str) -> None:
        """End the run (its agents are cancelled); the stop is recorded with ``reason``."""
        if self._stop is not None and not self._stop.done():
            self._stop.set_result(reason)

    _request_stop = request_stop

    # ------------------------------------------------------------------ recording
    def record(
        self,
        a: AgentState,
        type_: Any,
        t: float,
        *,
        extra: Iterable[tuple[str, str]] = (),
        **fields: Any,
    ) -> str:
        """Record one event of agent ``a`` that started at ``t`` and ends now."""
        eid = f"e{len(self.events) + 1}"
        last = a.last
        if last is None and a.parent is None and "role" not in fields:
            fields["role"] = a.role  # the root has no spawn event to carry its role
        fields = scrub_known(fields)  # a secret echoed by a server never reaches the trace
        if self.guard is not None:
            first = last if last is not None else a.spawn_event
            srcs = [s for s in (first, *(s for s, _ in a.pending), *(s for s, _ in extra)) if s]
            fields = self.guard.labels(a, eid, str(type_), srcs, fields)
        if not fields.keys() <= _FIELDS:
            unknown = sorted(set(fields) - _FIELDS)
            raise TypeError(f"record() got unexpected event fields {unknown}")
        now = self.now()
        get = fields.get
        # positional: a Struct built from keyword arguments unpacked from a dict costs several
        # times more (the order is Event's field order)
        ev = Event(
            eid,
            t,
            type_,
            a.name,
            0.0 if now == t else max(0.0, round(now - t, 9)),
            get("role"),
            get("from_"),
            get("to"),
            get("tool"),
            get("decision"),
            max(a.step, 0),
            get("content"),
            get("content_ref"),
            get("trusted"),
            get("tokens_in", _TOKENS_IN),
            get("tokens_out", _TOKENS_OUT),
            get("cost", _COST),
            get("error"),
            get("attrs"),
        )
        return self._store(a, ev, extra)

    def emit(
        self,
        a: AgentState,
        type_: Any,
        t: float,
        *,
        role: str | None = None,
        from_: str | None = None,
        to: str | None = None,
        tool: str | None = None,
        decision: Any = None,
        content: str | None = None,
        tokens_in: int = _TOKENS_IN,
        tokens_out: int = _TOKENS_OUT,
        cost: float = _COST,
        error: str | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> str:
        """:meth:`record` of the runtime's own events, with the fields as arguments.

        Records exactly what :meth:`record` records given the same fields (``role`` only when
        it is not ``None``); the event is built from the arguments as they are, without a
        dictionary of fields, unless defenses are on, a secret is remembered (see
        :func:`orchestrace._safe.remember_secret`) or the root records its first event: those
        take :meth:`record`'s path.
        """
        if self.guard is not None or _SECRETS or (a.last is None and a.parent is None):
            fields: dict[str, Any] = {
                "from_": from_,
                "to": to,
                "tool": tool,
                "decision": decision,
                "content": content,
                "tokens_in": tokens_in,
                "tokens_out": tokens_out,
                "cost": cost,
                "error": error,
                "attrs": attrs,
            }
            if role is not None:
                fields["role"] = role
            return self.record(a, type_, t, **fields)
        now = self.now()
        eid = f"e{len(self.events) + 1}"
        ev = Event(
            eid,
            t,
            type_,
            a.name,
            0.0 if now == t else max(0.0, round(now - t, 9)),
            role,
            from_,
            to,
            tool,
            decision,
            max(a.step, 0),
            content,
            None,
            None,
            tokens_in,
            tokens_out,
            cost,
            error,
            attrs,
        )
        return self._store(a, ev, ())

    def _store(self, a: AgentState, ev: Event, extra: Iterable[tuple[str, str]]) -> str:
        """Store ``ev``, the next event of ``a``, with its edges from what ``a`` consumed."""
        eid = ev.id
        last = a.last
        pending = a.pending
        if last is not None:
            edges = [Edge(last, eid, "causal")]
        elif a.spawn_event is not None:
            edges = [Edge(a.spawn_event, eid, "spawn")]
        else:
            edges = []
        if pending or extra:
            seen = {last}
            for src, kind in (*pending, *extra):
                if src not in seen:
                    seen.add(src)
                    edges.append(Edge(src, eid, kind))  # type: ignore[arg-type]
            pending.clear()
        a.last = eid
        self.events.append(ev)
        spent = self._spent
        spent[0] += ev.tokens_in + ev.tokens_out
        spent[1] += ev.cost
        kind = ev.type
        if kind == "tool_call":
            spent[2] += 1
        elif kind == "message":
            spent[3] += 1
        spent[4] = min(spent[4], ev.t)
        end = ev.t + ev.dur
        spent[5] = max(spent[5], end)
        self.edges += edges
        recorder = self.recorder
        if recorder.processors or self._custom_recorder:
            recorder.event(ev, edges)
        return eid

    # ------------------------------------------------------------------ calls (llm_calls.py)
    generate = llm_calls.generate
    call_llm = llm_calls.call_llm
    call_tool = tools.call_tool  # :meth:`Context.call_tool`

    # ------------------------------------------------------------------ agents
    def _new_agent(
        self,
        name: str,
        role: str,
        parent: AgentState | None,
        spawn_event: str | None,
        future: asyncio.Future[Result] | None,
    ) -> AgentState:
        a = AgentState(
            name,
            role,
            parent.name if parent else None,
            parent.depth + 1 if parent else 0,
            spawn_event,
            future,
        )
        self.agents[name] = a
        return a

    def spawn(
        self,
        a: AgentState,
        role: str,
        fn: AgentFn,
        name: str | None,
        content: str | None,
        inputs: dict[str, Any],
    ) -> Handle:
        """:meth:`Context.spawn`: record the ``spawn`` and start the child."""
        self.check_alive(a)
        if self.guard is not None:
            self.guard.require(a, "spawn", role=role)
            if self.guard.gate(a, "spawn", self.guard.carriers(content, *inputs.values())):
                raise TaintBlocked(f"agent {a.name!r}: tainted inputs may not drive a spawn")
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
        eid = self.emit(
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
        self._tasks.append(task)
        return Handle(name, role, future)

    # ------------------------------------------------------------------ messages (messaging.py)
    send = messaging.send
    guarded_send = messaging.guarded_send
    return_value = messaging.return_value
    record_decision = messaging.record_decision
    stop_decision = messaging.stop_decision
    aggregate = messaging.aggregate

    # ------------------------------------------------------------------ running
    async def _run_child(self, a: AgentState, fn: AgentFn, inputs: dict[str, Any]) -> None:
        ctx = Context(self, a)
        try:
            value = await fn(ctx, **inputs)
            if not a.returned:
                self.return_value(a, value)
        except asyncio.CancelledError:
            raise
        except BudgetExceeded as err:
            self.request_stop(str(err))
        except StopNow:
            if not a.returned:
                self.return_value(a, a.best)
        except Exception as err:
            self._fail(a, err)

    def _fail(self, a: AgentState, err: BaseException) -> None:
        msg = f"{type(err).__name__}: {str(err)[:300]}"
        a.turn_open = True  # the failure belongs to the step that raised
        eid = self.record(a, "despawn", self.now(), error=msg, to=a.parent)
        a.returned = True
        if a.handle_future is not None and not a.handle_future.done():
            a.handle_future.set_result(Result(a.name, None, False, msg, eid))
        if self.config.on_error == "stop" or a.parent is None:
            self.request_stop(f"agent {a.name} failed: {msg}")

    async def _run_root(self, a: AgentState, fn: AgentFn, inputs: dict[str, Any]) -> None:
        ctx = Context(self, a)
        try:
            value = await fn(ctx, **inputs)
            if not a.stopped:
                self.stop_decision(a, "done", value)
        except asyncio.CancelledError:
            raise
        except BudgetExceeded as err:
            self.request_stop(str(err))
        except StopNow as err:
            self.stop_reason = str(err)
            self.answer = a.best
            self.request_stop(str(err))
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
        self._vloop = loop if isinstance(loop, VirtualTimeLoop) else None
        self._time = loop.time  # type: ignore[method-assign]
        self._t0 = loop.time()
        self._stop = loop.create_future()
        if hasattr(loop, "set_deadlock_handler"):
            loop.set_deadlock_handler(
                lambda: self.request_stop(
                    "deadlock: every agent is waiting for a message or result that will never come"
                )
            )
        header = self.header()
        self.recorder.start(header)
        root_agent = self._new_agent(ROOT, "orchestrator", None, None, None)
        root_task = loop.create_task(self._run_root(root_agent, root, inputs))
        self._tasks.append(root_task)
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
        except BaseException as err:
            # cancelled (or failed) from outside: take the agents down with the run; when the
            # coroutine is only being discarded after its loop closed, there is nothing left to
            # cancel (and no loop to do it on); a coroutine being discarded (GeneratorExit, as
            # when its stopped loop is dropped) must not wait: it is never resumed
            if not loop.is_closed():
                pending = [t for t in self._tasks if not t.done()]
                for t in pending:
                    t.cancel()
                if pending and not isinstance(err, GeneratorExit):
                    with contextlib.suppress(BaseException):
                        await asyncio.gather(*pending, return_exceptions=True)
            self.recorder.force_flush()  # what was recorded is written and durable
            self.recorder.shutdown()
            raise
        self.recorder.end(trace)
        self.recorder.force_flush()
        self.recorder.shutdown()
        return trace

    # ------------------------------------------------------------------ ending (ending.py)
    _force_stop_event = ending.force_stop_event
    verdict = ending.verdict
    _finish = ending.finish


def _agent_view(config: RunConfig) -> RunConfig:
    """``config`` as agents see it: no run secret, a private copy of the defenses."""
    d = config.defenses
    if d.secret is None and d.capabilities is None:
        return config
    return dataclasses.replace(
        config, defenses=dataclasses.replace(copy.deepcopy(d, {id(d.secret): None}), secret=None)
    )
