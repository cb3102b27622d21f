"""Deterministic replay and counterfactual forks.

Every nondeterministic input of a run (LLM answers, tool outputs) is recorded in the trace under
a key of (agent, hash of the call's inputs, how many times the agent made that exact call): an
``llm_call`` event keeps the answer text, parsed answer, tokens, cost and latency (``dur``); a
``tool_call``/``tool_result`` pair keeps the output. :func:`replay` re-executes the run from the
trace alone and reproduces it exactly (same events, edges, ids) for runs on virtual time.

:func:`fork` re-executes with interventions: drop or replace a message, force a stop, force a
decision (spawn one more worker). Calls whose inputs did not change come from the cache; only
calls downstream of the change reach the backend, and :class:`ForkResult` says how many did.
That backend is the one the trace records (``meta.backend``: name and the options that rebuild
it, never a secret), unless the caller names another (``backend=``; ``--backend`` on the command
line). A trace that does not record enough to rebuild its backend, or whose backend cannot answer
(server down, model missing), is refused with an error naming ``--backend``: the simulator never
stands in silently. The forked trace says who answered each changed call and what it is a fork of.

Neither ever runs a recorded answer as code. A re-executed run whose final answer equals the
recorded one reuses the verdict recorded with it (``meta.result.verdict``). A new answer is
checked by the task's checker when that only compares values; for a task whose check runs
the answer as code (``humaneval-v0``) its verdict is unknown (``passed: None``, the reason says
why) unless ``rerun_checks=True``, which checks it in the task's sandbox.

Example:
    >>> from orchestrace.runtime import run
    >>> original = run("debate", "arith", agents=3, seed=1, task_size=16).trace
    >>> replay(original).trace == original
    True
    >>> msg = next(e for e in original.events if e.type == "message")
    >>> f = fork(original, [DropMessage.of(original, msg.id)])
    >>> 0 < f.backend_calls < f.cache_hits
    True
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from orchestrace._safe import display, redact
from orchestrace.errors import ConfigError, TraceError
from orchestrace.runtime.backends.base import (
    Backend,
    BackendError,
    LLMRequest,
    LLMResponse,
    backend_spec,
)
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.cache import ReplayCache
from orchestrace.runtime.clock import run_virtual
from orchestrace.runtime.config import RunConfig
from orchestrace.runtime.core import ROOT, Runtime
from orchestrace.runtime.recorder import Recorder
from orchestrace.runtime.rounds import recorded_root
from orchestrace.runtime.tasks import Task, Verdict, make_task, unknown_verdict
from orchestrace.runtime.topologies import get_topology
from orchestrace.trace.model import Event, Trace

_ENC = msgspec.json.Encoder(order="deterministic")

__all__ = [
    "DropMessage",
    "ForceDecision",
    "ForceStop",
    "ForkResult",
    "Intervention",
    "RedrawDownstream",
    "ReplaceMessage",
    "ReplayCache",
    "ResampleMessage",
    "Silence",
    "backend_for",
    "cache_from_trace",
    "fork",
    "recorded_decisions",
    "replay",
    "spawn_one_more",
]


class Intervention:
    """A change to a run. Subclasses override the hooks they need."""

    def forces_stop(self, agent: str, step: int) -> bool:
        """Whether ``agent`` must stop on entering ``step``."""
        return False

    def decision(self, agent: str, name: str, value: Any) -> Any:
        """The value of decision ``name`` of ``agent`` (default: unchanged)."""
        return value

    def decision_at(self, agent: str, step: int, name: str, value: Any) -> Any:
        """The value of decision ``name`` that ``agent`` takes in ``step``.

        ``step`` is the agent's current step (-1 before its first event). By default the same
        as :meth:`decision`; override it to target one decision of several.
        """
        return self.decision(agent, name, value)

    def message(
        self, sender: str, step: int, index: int, to: str, content: str, data: Any
    ) -> tuple[str, Any] | None:
        """The message to send (``None`` drops it)."""
        return content, data

    def returned(self, agent: str, value: Any) -> Any:
        """The value ``agent`` returns (default: unchanged)."""
        return value

    def redraws(self) -> frozenset[str]:
        """Keys of recorded LLM calls whose answers are discarded and drawn again (default: none).

        A fork answers these calls from the backend even when their inputs are unchanged.
        """
        return frozenset()

    def describe(self) -> dict[str, Any]:
        """JSON description (recorded in the forked trace's meta)."""
        return {"kind": type(self).__name__, **{k: v for k, v in vars(self).items()}}


def _id_shown(event_id: Any) -> str:
    return repr(display(event_id, 80)) if isinstance(event_id, str) else repr(event_id)[:80]


def _event(trace: Trace, event_id: str, kind: str) -> Event:
    """Event ``event_id`` of ``trace``; an error naming the id and ``kind`` when there is none."""
    try:
        return trace.event(event_id)
    except (KeyError, TypeError):
        raise TraceError(
            f"no event {_id_shown(event_id)} in trace {_shown(trace)}; pick the id of {kind} "
            "from the trace"
        ) from None


def _message_address(trace: Trace, event_id: str) -> tuple[str, int, int]:
    shown = _id_shown(event_id)
    ev = _event(trace, event_id, "a message event")
    if ev.type != "message":
        raise TraceError(
            f"event {shown} of trace {_shown(trace)} is a {ev.type}, not a message; pick a "
            "message event id"
        )
    index = 0
    for e in trace.events:
        if e.id == event_id:
            break
        if e.type == "message" and e.agent == ev.agent and e.step == ev.step:
            index += 1
    return ev.agent, int(ev.step or 0), index


@dataclass
class DropMessage(Intervention):
    """The message never gets sent.

    Attributes:
        sender: Sending agent.
        step: The sender's step.
        index: Which message of that step (0-based).
    """

    sender: str
    step: int
    index: int

    @classmethod
    def of(cls, trace: Trace, event_id: str) -> DropMessage:
        """The intervention that drops message ``event_id`` of ``trace``."""
        return cls(*_message_address(trace, event_id))

    def message(
        self, sender: str, step: int, index: int, to: str, content: str, data: Any
    ) -> tuple[str, Any] | None:
        """Drop the targeted message, pass the others."""
        if (sender, step, index) == (self.sender, self.step, self.index):
            return None
        return content, data


@dataclass
class ReplaceMessage(Intervention):
    """The message is sent with other content (and, optionally, other data)."""

    sender: str
    step: int
    index: int
    content: str
    data: Any = None
    replace_data: bool = False

    @classmethod
    def of(
        cls, trace: Trace, event_id: str, content: str, data: Any = None, replace_data: bool = False
    ) -> ReplaceMessage:
        """The intervention that rewrites message ``event_id`` of ``trace``."""
        return cls(*_message_address(trace, event_id), content, data, replace_data)

    def message(
        self, sender: str, step: int, index: int, to: str, content: str, data: Any
    ) -> tuple[str, Any] | None:
        """Rewrite the targeted message, pass the others."""
        if (sender, step, index) == (self.sender, self.step, self.index):
            return self.content, (self.data if self.replace_data else data)
        return content, data

    @classmethod
    def parsed(cls, trace: Trace, event_id: str, text: str) -> ReplaceMessage:
        """Replace message ``event_id`` with ``text``, and its data with what ``text`` says.

        Consumers read a message's data, so the new text must reach it. The value of ``text``
        is the one after ``ANSWER:`` when there is one, else the whole text (an integer when
        it is one). The recorded data decides where the value goes:

        * an object with ``answer`` (debate, critic and pipeline answers) or ``value`` (a
          swarm worker's result): that field takes the value, the others are kept;
        * an object with ``peers`` (the answers a learning environment's worker hears): the
          worker hears the value alone;
        * a string (a verdict such as ``accept``, a command such as ``finish``): the value;
        * none: none (the consumer reads only the text);
        * anything else: kept, and only the text changes.

        Example:
            >>> from orchestrace.runtime import run
            >>> tr = run("debate", "arith", agents=3, seed=5, rounds=1, task_size=16).trace
            >>> m = next(e for e in tr.events if e.type == "message")
            >>> ReplaceMessage.parsed(tr, m.id, "ANSWER: 7").data
            {'round': 0, 'answer': 7}
        """
        address = _message_address(trace, event_id)
        attrs = trace.event(event_id).attrs or {}
        old = attrs.get("data")
        value = _text_value(text)
        data: Any
        if isinstance(old, dict) and ("answer" in old or "value" in old):
            data = {**old, ("answer" if "answer" in old else "value"): value}
        elif isinstance(old, dict) and "peers" in old:
            data = {**old, "peers": [value]}
        elif isinstance(old, str):
            data = value if isinstance(value, str) else str(value)
        else:
            data = old
        return cls(*address, text, data, True)


def _text_value(text: str) -> Any:
    """The value a message text states: after ``ANSWER:``, else the text (an int if it is one)."""
    from orchestrace.runtime.prompts import parse

    found = parse(text)
    if found is not None:
        return found
    stripped = text.strip()
    try:
        return int(stripped)
    except ValueError:
        return stripped


def _llm_keys(trace: Trace, starts: Sequence[int], include_starts: bool) -> tuple[str, ...]:
    """Replay keys of the LLM calls reachable from event indices ``starts`` along any edge."""
    index = {e.id: i for i, e in enumerate(trace.events)}
    succ: dict[int, list[int]] = {}
    for edge in trace.edges:
        u, v = index.get(edge.src), index.get(edge.dst)
        if u is not None and v is not None:
            succ.setdefault(u, []).append(v)
    seen = set(starts) if include_starts else set()
    stack = list(starts)
    while stack:
        for v in succ.get(stack.pop(), ()):
            if v not in seen:
                seen.add(v)
                stack.append(v)
    keys = []
    for i in sorted(seen):
        e = trace.events[i]
        key = (e.attrs or {}).get("key")
        if e.type == "llm_call" and isinstance(key, str):
            keys.append(key)
    return tuple(keys)


def message_readers(trace: Trace, event_id: str) -> list[int]:
    """Indices of the events that read message ``event_id`` (its message, return or spawn edges).

    The sender's own later events are not readers: they follow the message, they do not read it.
    """
    _message_address(trace, event_id)
    index = {e.id: i for i, e in enumerate(trace.events)}
    return sorted(
        index[edge.dst]
        for edge in trace.edges
        if edge.src == event_id and edge.type != "causal" and edge.dst in index
    )


def sender_call(trace: Trace, event_id: str) -> str:
    """Id of the LLM call of the sender that produced message ``event_id``.

    That is the sender's last LLM call before the message.

    Raises:
        TraceError: The sender made no LLM call before the message.
    """
    sender, _, _ = _message_address(trace, event_id)
    position = next(i for i, e in enumerate(trace.events) if e.id == event_id)
    for e in reversed(trace.events[:position]):
        if e.agent == sender and e.type == "llm_call" and (e.attrs or {}).get("key"):
            return e.id
    raise TraceError(
        f"message {display(event_id, 80)!r} of trace {_shown(trace)} was not produced by an LLM "
        f"call of its sender {display(sender, 60)!r}, so it cannot be resampled; use the drop "
        "or replace intervention (--intervention drop|replace)"
    )


@dataclass
class RedrawDownstream(Intervention):
    """Keep message ``event`` but draw again every LLM call that read it, and all after them.

    The kept arm of a counterfactual estimate: the run resampled from the point the message
    was read, with the message as it was. Calls that did not depend on the message keep their
    recorded answers.

    Attributes:
        event: The message's event id.
        keys: Replay keys of the calls drawn again.
    """

    event: str
    keys: tuple[str, ...] = ()

    @classmethod
    def of(cls, trace: Trace, event_id: str) -> RedrawDownstream:
        """The redraw downstream of message ``event_id`` of ``trace``."""
        return cls(event_id, _llm_keys(trace, message_readers(trace, event_id), True))

    @classmethod
    def after(cls, trace: Trace, event_id: str) -> RedrawDownstream:
        """Draw again every LLM call reachable from event ``event_id`` (itself included).

        The kept arm of a counterfactual on a turn (stop-at, spawn-one-more): the run
        resampled from that point on, unchanged.
        """
        ev = _event(trace, event_id, "an event")
        position = next(i for i, e in enumerate(trace.events) if e.id == ev.id)
        return cls(event_id, _llm_keys(trace, [position], True))

    def redraws(self) -> frozenset[str]:
        """The calls downstream of the message."""
        return frozenset(self.keys)

    def describe(self) -> dict[str, Any]:
        """Kind, message and how many calls are drawn again."""
        return {"kind": type(self).__name__, "event": self.event, "calls": len(self.keys)}


@dataclass
class ResampleMessage(Intervention):
    """Draw again the sender's LLM call that produced message ``event``, in the same context.

    The call's inputs are unchanged; only its answer is drawn again (on the simulator: with the
    fork's seed), and every LLM call downstream of it is drawn again too. A call that produced
    several messages (a broadcast) redraws all of them, and the sender's own later steps see
    the new answer: the intervention is on the call, as a sampled policy would make it. The
    simulator answers a request the same way for the same seed, so a new draw needs a backend
    with another seed (``backend_for(trace, seed_offset=k)``; ``replay --resample-message``
    uses the recorded seed plus 1).

    Attributes:
        event: The message's event id.
        call: The event id of the sender's LLM call.
        keys: Replay keys of the calls drawn again (the sender's call first).
    """

    event: str
    call: str = ""
    keys: tuple[str, ...] = ()

    @classmethod
    def of(cls, trace: Trace, event_id: str) -> ResampleMessage:
        """Resample message ``event_id`` of ``trace`` from its sender."""
        call = sender_call(trace, event_id)
        position = next(i for i, e in enumerate(trace.events) if e.id == call)
        return cls(event_id, call, _llm_keys(trace, [position], True))

    def redraws(self) -> frozenset[str]:
        """The sender's call and the calls downstream of it."""
        return frozenset(self.keys)

    def describe(self) -> dict[str, Any]:
        """Kind, message, the sender's call and how many calls are drawn again."""
        return {
            "kind": type(self).__name__,
            "event": self.event,
            "call": self.call,
            "calls": len(self.keys),
        }

    def downstream(self) -> frozenset[str]:
        """The calls downstream of the sender's call (what the kept arm draws again)."""
        return frozenset(self.keys[1:])


@dataclass
class ForceStop(Intervention):
    """The agent (by default the orchestrator) stops on entering ``step`` (O5 stop-now).

    The orchestrator's forced stop ends the run with its best answer so far (what it last
    aggregated or remembered); another agent returns its best answer to its parent.
    :meth:`of` stops the agent of an event at that event's step (``replay --stop-at EVENT``).

    Attributes:
        step: The step the agent stops on entering.
        agent: The agent.
        event: The event the stop was asked at (``None`` when given by step).
    """

    step: int
    agent: str = ROOT
    event: str | None = None

    @classmethod
    def of(cls, trace: Trace, event_id: str) -> ForceStop:
        """The agent of event ``event_id`` stops on entering that event's step.

        The event and everything its agent does from the start of that step on do not happen.

        Raises:
            TraceError: No such event, or an event no agent acts in (a tool's result).
        """
        ev = _event(trace, event_id, "an event of an agent")
        shown = _id_shown(event_id)
        if ev.type == "tool_result" or ev.step is None:
            raise TraceError(
                f"event {shown} of trace {_shown(trace)} is a {ev.type} of "
                f"{display(ev.agent, 60)!r}, which no agent takes; pick an event of an agent "
                "(its llm_call, message, spawn, tool_call or decision)"
            )
        return cls(int(ev.step), ev.agent, event_id)

    def forces_stop(self, agent: str, step: int) -> bool:
        """True once the agent reaches the step."""
        return agent == self.agent and step >= self.step


@dataclass
class ForceDecision(Intervention):
    """Decision ``name`` of ``agent`` takes ``value`` (e.g. ``n_workers``: spawn one more).

    Attributes:
        name: The decision (``n_workers``: how many workers to use).
        value: Its forced value.
        agent: The deciding agent.
        step: Only the decision taken in this step of the agent (``None``: every one).
    """

    name: str
    value: Any
    agent: str = ROOT
    step: int | None = None

    def decision(self, agent: str, name: str, value: Any) -> Any:
        """The forced value for the targeted decision."""
        return self.value if (agent, name) == (self.agent, self.name) else value

    def decision_at(self, agent: str, step: int, name: str, value: Any) -> Any:
        """The forced value for the targeted decision (in its step, when one is set)."""
        if self.step is not None and step != self.step:
            return value
        return self.decision(agent, name, value)


@dataclass
class Silence(Intervention):
    """The agent's work is lost: its messages are never sent and it returns nothing (``None``).

    Used for coalition values (Shapley) and leave-one-out credit: the team without the agent.
    """

    agent: str

    def message(
        self, sender: str, step: int, index: int, to: str, content: str, data: Any
    ) -> tuple[str, Any] | None:
        """Drop every message of the silenced agent."""
        return None if sender == self.agent else (content, data)

    def returned(self, agent: str, value: Any) -> Any:
        """The silenced agent returns ``None``."""
        return None if agent == self.agent else value


@dataclass
class _DecisionLog(Intervention):
    """Notes every named decision of a run and changes nothing."""

    seen: list[tuple[str, int, str, Any]] = field(default_factory=list)

    def decision_at(self, agent: str, step: int, name: str, value: Any) -> Any:
        """Note the decision; keep its value."""
        self.seen.append((agent, step, name, value))
        return value

    def describe(self) -> dict[str, Any]:
        """Kind only."""
        return {"kind": "DecisionLog"}


def recorded_decisions(trace: Trace) -> list[tuple[str, int, str, Any]]:
    """The named decisions (``ctx.decide``) the recorded run took, in order.

    Each is ``(agent, step, name, value)``; ``step`` is the agent's step when it decided (-1
    before its first event: a topology's team size). Found by an exact replay (no backend).

    Example:
        >>> from orchestrace.runtime import run
        >>> tr = run("centralized", "arith", agents=3, seed=0).trace
        >>> recorded_decisions(tr)[0]
        ('orchestrator', -1, 'n_workers', 3)
    """
    log = _DecisionLog()
    recorded = trace.meta.get("backend") if isinstance(trace.meta, dict) else None
    recorded = dict(recorded) if isinstance(recorded, dict) else {}
    strict = _StrictReplay(str(recorded.get("name", "replay")), recorded=recorded)
    rt, root = _runtime(trace, strict, [log], ReplayCache.from_trace(trace))
    run_virtual(rt.run(root))
    return log.seen


def _first_event(trace: Trace, agent: str, step: int) -> str:
    """Id of the first event of ``agent`` in ``step`` (its first event when ``step`` is -1)."""
    for e in trace.events:
        if e.agent == agent and e.type != "tool_result" and (step < 0 or e.step == step):
            return e.id
    return "?"


def spawn_one_more(trace: Trace, event_id: str | None = None) -> ForceDecision:
    """Force one more worker than the recorded run used.

    Without ``event_id``: the orchestrator's team size (the ``n_workers`` decision a topology
    takes when it starts) is the recorded one plus one. With ``event_id``: the team-size
    decision taken in that event's step (a learning environment's spawn decision, one per
    round) is the recorded one plus one. The recorded values come from an exact replay
    (:func:`recorded_decisions`).

    Raises:
        TraceError: The trace records no usable team size, the event does not exist, or no
            team-size decision is taken where the event is (the message lists the events
            where one is).
    """
    config = trace.meta.get("config") if isinstance(trace.meta, dict) else None
    n = config.get("agents", 1) if isinstance(config, dict) else 1
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise TraceError(
            f"trace {_shown(trace)} records no usable team size (meta.config.agents = "
            f"{display(repr(n), 40)}); spawn-one-more needs the number of workers the run used"
        )
    ev = None if event_id is None else _event(trace, event_id, "a spawn decision")
    sizes = [
        (agent, step, value)
        for agent, step, name, value in recorded_decisions(trace)
        if name == "n_workers" and isinstance(value, int) and not isinstance(value, bool)
    ]
    rounds = [(a, st) for a, st, _ in sizes if st >= 0]
    where = ", ".join(dict.fromkeys(_first_event(trace, a, st) for a, st in rounds)) or "none"
    if ev is None:
        start = [(a, v) for a, st, v in sizes if a == ROOT and st < 0]
        if len(start) == 1 and len(sizes) == 1:
            return ForceDecision("n_workers", start[0][1] + 1)
        raise TraceError(
            f"trace {_shown(trace)} does not decide its team size once when it starts (it "
            f"decides it {len(sizes)} time(s)); name the spawn decision to change: "
            f"--spawn-one-more EVENT (spawn_one_more(trace, event_id)), one of: {where}"
        )
    assert event_id is not None
    for agent, step, value in sizes:
        if agent == ev.agent and step >= 0 and step == ev.step:
            return ForceDecision("n_workers", value + 1, agent, step)
    pick = (
        f"pick a spawn decision (one of: {where})"
        if rounds
        else "this run decides its team size once, when it starts: leave out the id"
    )
    raise TraceError(
        f"event {_id_shown(event_id)} of trace {_shown(trace)} is a {ev.type} of "
        f"{display(ev.agent, 60)!r} at step {ev.step}, where no team-size decision (n_workers) "
        f"is taken; {pick}"
    )


# ---------------------------------------------------------------------- cache and backends
def cache_from_trace(trace: Trace) -> ReplayCache:
    """Every recorded nondeterministic input of ``trace``, by replay key.

    The same as :meth:`ReplayCache.from_trace`.
    """
    return ReplayCache.from_trace(trace)


@dataclass
class _StrictReplay:
    """A backend that refuses every call: a replay must be answered from the cache.

    Its spec is the recorded one, so a replay's header (and trace id) matches the original.
    """

    name: str
    virtual: bool = True
    recorded: dict[str, Any] = field(default_factory=dict)

    def spec(self) -> dict[str, Any]:
        """The backend the replayed trace records."""
        return dict(self.recorded)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        raise BackendError(
            f"replay diverged: agent {request.agent!r} made a {request.kind!r} call that the "
            "trace does not hold; the run is not reproducible from this trace (was it recorded "
            "by another orchestrace version, or edited?)"
        )

    async def aclose(self) -> None:
        return None


@dataclass
class ForkResult:
    """A re-executed run.

    Attributes:
        trace: The new trace.
        backend_calls: Calls that reached the backend (inputs changed by the intervention).
        cache_hits: Calls answered from the original trace.
        interventions: What was changed.
    """

    trace: Trace
    backend_calls: int
    cache_hits: int
    interventions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def success(self) -> bool:
        """Whether the forked run solved the task (``False`` when unknown: see :attr:`verdict`)."""
        return bool(self.trace.metrics.get("task_success"))

    @property
    def verdict(self) -> dict[str, Any] | None:
        """The verdict on the re-executed run's answer (``passed`` is ``None`` when unknown)."""
        result = self.trace.meta.get("result")
        v = result.get("verdict") if isinstance(result, dict) else None
        return v if isinstance(v, dict) else None


def _encoded(value: Any) -> bytes | None:
    try:
        return _ENC.encode(value)
    except (TypeError, ValueError, msgspec.EncodeError):
        return None


def _recorded(trace: Trace) -> tuple[bool, Any, Verdict | None]:
    """Whether the trace records an answer; the answer; its recorded verdict."""
    from orchestrace.rewards.base import recorded_verdict

    result = trace.meta.get("result")
    if not isinstance(result, dict) or "answer" not in result:
        return False, None, None
    return True, result["answer"], recorded_verdict(trace)


def _judge(trace: Trace, task: Task, rerun_checks: bool) -> Any:
    """How a re-executed run's final answer is judged (see the module docstring)."""
    has_answer, answer, recorded = _recorded(trace)
    key = _encoded(answer) if has_answer else None

    def judge(new: Any) -> Verdict:
        same = key is not None and _encoded(new) == key
        if same and recorded is not None and recorded["passed"] is not None:
            if not rerun_checks and task.executes_code:
                return recorded
            now = task.verdict(new)
            return recorded if now["passed"] == recorded["passed"] else now
        if task.executes_code and not rerun_checks and new is not None:
            return unknown_verdict(
                task.name,
                "not checked: "
                + (
                    "the recorded run has no verdict"
                    if same
                    else "the answer differs from the recorded one"
                )
                + f" and {task.name} checks an answer by running it as code; re-run with "
                "--rerun-checks (rerun_checks=True) to check it in the sandbox",
            )
        return task.verdict(new)

    return judge


def _runtime(
    trace: Trace,
    backend: Backend,
    interventions: Sequence[Intervention],
    cache: ReplayCache,
    rerun_checks: bool = False,
    fork_of: dict[str, Any] | None = None,
) -> tuple[Runtime, Any]:
    meta = trace.meta
    try:
        runner = meta["runner"]
        episode = isinstance(runner, dict) and "env" in runner  # a learning environment's
        topo = None if episode else get_topology(runner["topology"])
        spec = meta["task"]
        name, seed, size = spec["name"], spec["seed"], spec["size"]
        if not isinstance(meta["config"], dict):
            raise ConfigError(
                f"meta.config is {type(meta['config']).__name__}, not an object of run settings"
            )
        config = RunConfig.from_dict(dict(meta["config"]))
    except ConfigError as err:
        raise TraceError(
            f"trace {_shown(trace)} holds an unusable run config: {err}; record the run again"
        ) from None
    except KeyError as err:
        raise TraceError(
            f"trace {_shown(trace)} does not say how to re-run it (missing meta {err}); only "
            "traces recorded by `orchestrace run` or a learning environment can be replayed"
        ) from None
    except (TypeError, ValueError, AttributeError) as err:
        raise TraceError(
            f"trace {_shown(trace)} holds an unusable run config ({type(err).__name__}: "
            f"{str(err)[:200]}); record the run again"
        ) from None
    # a bad seed or size: the message names the trace and the meta.task field
    task = make_task(name, seed=seed, size=size, source=f"trace {_shown(trace)}: meta.task")
    extra: dict[str, Any] = {"runner": meta["runner"]}
    if fork_of is not None:
        extra["fork"] = fork_of
    rt = Runtime(
        task=task,
        backend=backend,
        config=config,
        recorder=Recorder(),
        interventions=interventions,
        cache=cache,
        topology=trace.topology,
        meta=extra,
        judge=_judge(trace, task, rerun_checks),
        label_answers=fork_of is not None,
    )
    if topo is None:
        return rt, recorded_root(trace, rt, task)
    return rt, topo.root


def _shown(trace: Trace) -> str:
    return trace.trace_id.encode("unicode_escape", "backslashreplace").decode("ascii")[:80]


def replay(trace: Trace, *, rerun_checks: bool = False) -> ForkResult:
    """Re-execute ``trace`` from its recorded inputs alone (no backend is called).

    The header of the replayed trace records the backend the trace records (none answers).

    Args:
        trace: A trace recorded by the runtime.
        rerun_checks: Check the final answer again even where that runs it as code (in the
            task's sandbox); by default the recorded verdict is reused.

    Raises:
        TraceError: The trace lacks the run description, or the re-execution asks for a call
            the trace does not hold (the message says which).
    """
    recorded = trace.meta.get("backend")
    recorded = dict(recorded) if isinstance(recorded, dict) else {}
    cache = ReplayCache.from_trace(trace)
    strict = _StrictReplay(str(recorded.get("name", "replay")), recorded=recorded)
    rt, root = _runtime(trace, strict, (), cache, rerun_checks)
    new = run_virtual(rt.run(root))
    if rt.backend_calls:
        raise TraceError(
            f"replay of {trace.trace_id} diverged: {rt.backend_calls} call(s) were not in the trace"
        )
    return ForkResult(new, rt.backend_calls, rt.cache_hits)


# ---------------------------------------------------------------------- which backend answers
_FLAGS = "--backend sim to fork it on the simulator, or --backend openai --base-url URL"


def _recorded_spec(trace: Trace) -> dict[str, Any]:
    spec = trace.meta.get("backend") if isinstance(trace.meta, dict) else None
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ConfigError(
            f"trace {_shown(trace)!r} does not record which backend produced it (no "
            f"meta.backend); pass {_FLAGS} (backend= in Python)"
        )
    return spec


def _describe(spec: dict[str, Any]) -> str:
    name = str(spec.get("name"))
    raw = spec.get("options")
    opts: dict[str, Any] = raw if isinstance(raw, dict) else {}
    model = spec.get("model") or opts.get("model")
    url = spec.get("base_url") or opts.get("base_url")
    where = (f"model {model!r}" if model else "") + (f" at {url}" if url else "")
    return f"{name} ({where.strip()})" if where.strip() else name


def backend_for(
    trace: Trace,
    backend: Backend | str | None = None,
    *,
    seed_offset: int = 0,
    check: bool = False,
    **options: Any,
) -> Backend:
    """The backend that answers the changed calls of a fork of ``trace``.

    By default the backend the trace records (``meta.backend``) is rebuilt, secrets coming
    from the environment. A name (``sim``, ``openai``, ``hf``) overrides it: the recorded
    options are kept when the name is the recorded one, else the backend is built from
    ``options`` (the simulator with the run's seed). A backend object is used as it is.

    Args:
        trace: A trace recorded by the runtime.
        backend: ``None`` (the recorded backend), a backend name, or a backend object.
        seed_offset: Added to the simulator's seed (the k-th sample of a counterfactual).
        check: Check now that the backend can answer (an OpenAI-compatible server accepts
            connections, a transformers model loads); :func:`fork` checks at the first call.
        **options: Options that replace the recorded ones (``model``, ``base_url``...;
            ``None`` values are ignored).

    Raises:
        ConfigError: The trace records no backend, or not enough to rebuild it, or the
            rebuilt backend cannot answer; the message names the flag to pass.
    """
    from orchestrace.runtime.backends import backend_from_spec, make_backend

    if backend is not None and not isinstance(backend, str):
        if not callable(getattr(backend, "complete", None)) or not hasattr(backend, "virtual"):
            raise ConfigError(
                f"backend must be None (the recorded backend), a name ('sim', 'openai', 'hf') or "
                f"a backend object with complete() and virtual (got {display(repr(backend), 60)})"
            )
        if seed_offset and isinstance(backend, SimBackend):
            import dataclasses

            return dataclasses.replace(backend, seed=backend.seed + seed_offset, calls=0)
        return backend
    given = {k: v for k, v in options.items() if v is not None}
    spec: dict[str, Any] | None = None
    if backend is None:
        spec = _recorded_spec(trace)
        if not isinstance(spec.get("options"), dict):
            raise ConfigError(
                f"trace {_shown(trace)!r} records backend {_describe(spec)} but not the options "
                f"that rebuild it (recorded by an older version, or by a wrapped backend); "
                f"pass {_FLAGS} (backend= in Python)"
            )
    else:
        recorded = trace.meta.get("backend") if isinstance(trace.meta, dict) else None
        if (
            isinstance(recorded, dict)
            and recorded.get("name") == backend
            and isinstance(recorded.get("options"), dict)
        ):
            spec = recorded
    if spec is not None:
        opts = dict(spec["options"])
        seed = opts.get("seed", 0)
        if spec["name"] == "sim" and seed_offset and isinstance(seed, int):
            opts["seed"] = seed + seed_offset
        try:
            built = backend_from_spec({**spec, "options": opts}, **given)
        except ConfigError as err:
            raise ConfigError(
                f"cannot rebuild backend {_describe(spec)} of trace {_shown(trace)!r}: {err}; "
                f"pass {_FLAGS} (backend= in Python)"
            ) from None
        if "base_url" not in given and _trusted_url(built) is False:
            built.api_key = None  # type: ignore[attr-defined]  # never sent to a traced URL
    else:
        assert backend is not None
        kw = dict(given)
        if backend == "sim" and "seed" not in kw:
            config = trace.meta.get("config") if isinstance(trace.meta, dict) else None
            seed = config.get("seed", 0) if isinstance(config, dict) else 0
            kw["seed"] = (seed if isinstance(seed, int) and not isinstance(seed, bool) else 0) + (
                seed_offset
            )
        if backend == "hf" and "model" not in kw:
            raise ConfigError("the hf backend needs a model: pass --model DIR (model= in Python)")
        built = make_backend(backend, **kw)
    if check:
        _check_can_answer(built, _how(trace, built))
    return built


#: Where a server may be named that the API key can be sent to.
_URL_ENV = ("ORCHESTRACE_OPENAI_BASE_URL", "OPENAI_BASE_URL")
_KEY_ENV = ("ORCHESTRACE_OPENAI_API_KEY", "OPENAI_API_KEY")


def _trusted_url(backend: Any) -> bool | None:
    """Whether an ``openai`` backend's server is the one the environment names.

    ``None`` for other backends. A base URL read from a trace is not trusted with the API
    key: a trace could name any server. The key goes only to a server named by the caller
    (``--base-url``, ``base_url=``) or by ``ORCHESTRACE_OPENAI_BASE_URL``/``OPENAI_BASE_URL``.
    """
    if getattr(backend, "name", "") != "openai":
        return None
    import os

    url = str(getattr(backend, "base_url", "")).rstrip("/")
    return any((os.environ.get(n) or "").rstrip("/") == url for n in _URL_ENV if os.environ.get(n))


def _key_withheld(backend: Any) -> bool:
    import os

    return (
        getattr(backend, "name", "") == "openai"
        and getattr(backend, "api_key", None) is None
        and any(os.environ.get(n) for n in _KEY_ENV)
    )


def _how(trace: Trace, backend: Any) -> str:
    """The subject of an error about ``backend`` answering a fork of ``trace``."""
    spec = backend_spec(backend)
    recorded = trace.meta.get("backend") if isinstance(trace.meta, dict) else None
    was = recorded.get("options") if isinstance(recorded, dict) else None
    now = spec.get("options")
    if (
        isinstance(recorded, dict)
        and recorded.get("name") == spec.get("name")
        and isinstance(was, dict)
        and isinstance(now, dict)
        and all(now.get(k) == v for k, v in was.items() if v is not None)
    ):
        return f"trace {_shown(trace)!r} was recorded with backend {_describe(spec)}, which"
    return f"backend {_describe(spec)}"


def _check_can_answer(backend: Any, how: str) -> None:
    """A cheap check that ``backend`` can answer (server reachable, model loadable)."""
    name = getattr(backend, "name", "")
    if name == "openai" and getattr(backend, "transport", None) is None:
        import socket
        from urllib.parse import urlsplit

        url = urlsplit(str(backend.base_url))
        try:
            port = url.port or (443 if url.scheme == "https" else 80)
            host = url.hostname or ""
            with socket.create_connection((host, port), timeout=min(5.0, backend.timeout_s)):
                pass
        except (OSError, ValueError) as err:
            raise ConfigError(
                f"{how} cannot be reached ({type(err).__name__}: {err}); start that server, pass "
                "--base-url URL to use another, or --backend sim to fork on the simulator "
                "(backend= in Python)"
            ) from None
    elif name == "hf":
        try:
            backend.load()
        except (ImportError, ConfigError) as err:
            raise ConfigError(
                f"{how} cannot be loaded ({err}); pass --model DIR (a local model directory), or "
                "--backend sim to fork on the simulator (backend= in Python)"
            ) from None


def fork(
    trace: Trace,
    interventions: Sequence[Intervention],
    backend: Backend | str | None = None,
    *,
    backend_options: Mapping[str, Any] | None = None,
    rerun_checks: bool = False,
) -> ForkResult:
    """Re-execute ``trace`` with ``interventions``; unchanged calls come from the cache.

    Calls whose inputs changed reach the backend the trace records (``meta.backend``, rebuilt
    with :func:`backend_for`) unless ``backend`` says otherwise; the simulator is never used in
    its place. The forked trace records who answered each changed call
    (``llm_call`` ``attrs.answered_by``), the backend that answered in ``meta.backend``, and
    what it is a fork of in ``meta.fork`` (``of``: the original trace id, ``interventions``,
    ``backend``, ``recorded_backend``).

    Args:
        trace: A trace recorded by the runtime.
        interventions: What to change.
        backend: Answers calls whose inputs changed: ``None`` (the recorded backend), a
            backend name (``sim``, ``openai``, ``hf``), or a backend object.
        backend_options: Options of a backend given by name (or replacing recorded ones),
            e.g. ``{"base_url": ..., "model": ...}``.
        rerun_checks: Check a new final answer even where that runs it as code (in the task's
            sandbox); by default its verdict is then unknown.

    Raises:
        TraceError: The trace cannot be re-executed.
        ConfigError: The recorded backend cannot be rebuilt or cannot answer (the message
            names ``--backend``), or a real backend answered none of the changed calls.
    """
    answering = backend_for(trace, backend, **dict(backend_options or {}))
    cache = ReplayCache.from_trace(trace)
    for iv in interventions:
        cache.redraw(iv.redraws())
    described = [iv.describe() for iv in interventions]
    recorded = trace.meta.get("backend") if isinstance(trace.meta, dict) else None
    fork_of = {
        "of": trace.trace_id,
        "interventions": described,
        "backend": backend_spec(answering),
        "recorded_backend": recorded if isinstance(recorded, dict) else None,
    }
    # a fork runs on virtual time whatever answers it: waits for a dropped message end at
    # once; a real backend answers each changed call while the virtual clock stands still
    runner: Any = (
        answering if answering.virtual else _OnVirtualTime(answering, _how(trace, answering))
    )
    rt, root = _runtime(trace, runner, interventions, cache, rerun_checks, fork_of)

    async def go() -> Trace:
        try:
            return await rt.run(root)
        finally:
            await runner.aclose()

    new = run_virtual(go())
    if isinstance(runner, _OnVirtualTime) and runner.failure is not None:
        raise runner.failure
    if not answering.virtual:
        _check_answered(trace, new, answering)
    return ForkResult(new, rt.backend_calls, rt.cache_hits, described)


class _OnVirtualTime:
    """A real backend for a run on virtual time: one call at a time, on its own event loop.

    Each call blocks the virtual clock until the backend answers, then takes its measured
    time on the virtual clock, so no timer (a patience, a budget) fires while it is in flight.
    The first call checks that the backend can answer (:func:`_check_can_answer`); a backend
    that cannot, or that fails other than with :class:`BackendError`, sets :attr:`failure`
    (raised once the run ends) and every call fails without reaching it.
    """

    def __init__(self, inner: Backend, how: str) -> None:
        self.inner = inner
        self.name = inner.name
        self.virtual = True
        self.how = how
        self.failure: ConfigError | None = None
        self._checked = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def spec(self) -> dict[str, Any]:
        """The wrapped backend's spec."""
        return backend_spec(self.inner)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer on the real backend (blocking this loop), timed on the wall clock."""
        if self.failure is None and not self._checked:
            self._checked = True
            try:
                _check_can_answer(self.inner, self.how)
            except ConfigError as err:
                self.failure = err
        if self.failure is not None:
            raise BackendError(str(self.failure))
        t0 = time.perf_counter()
        try:
            fut = asyncio.run_coroutine_threadsafe(self.inner.complete(request), self._loop)
            resp = fut.result()
        except BackendError:
            raise
        except Exception as err:  # e.g. a model that fails to load on first use
            self.failure = ConfigError(
                f"{self.how} failed ({type(err).__name__}: {redact(str(err))[:300]}); pass "
                "--backend sim to fork on the simulator, or fix the backend (backend= in Python)"
            )
            raise BackendError(str(self.failure)) from None
        return dataclasses.replace(resp, latency=round(time.perf_counter() - t0, 9))

    async def aclose(self) -> None:
        """Close the wrapped backend and stop its loop."""
        try:
            asyncio.run_coroutine_threadsafe(self.inner.aclose(), self._loop).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()


def _check_answered(original: Trace, new: Trace, backend: Any) -> None:
    """Refuse a fork whose real backend answered none of the calls that reached it."""
    changed = [e for e in new.events if e.type == "llm_call" and "answered_by" in (e.attrs or {})]
    if changed and all(e.error is not None for e in changed):
        key = (
            "; the API key is sent only to a server named by --base-url (base_url=) or "
            "ORCHESTRACE_OPENAI_BASE_URL, never to one read from a trace: pass --base-url URL "
            "if this server needs it"
            if _key_withheld(backend)
            else ""
        )
        raise ConfigError(
            f"backend {_describe(backend_spec(backend))} answered none of the {len(changed)} "
            f"changed call(s) of the fork of {_shown(original)!r} ({changed[0].error}){key}; "
            "check the server, pass --base-url URL to use another, or --backend sim to fork on "
            "the simulator (backend= in Python)"
        )
