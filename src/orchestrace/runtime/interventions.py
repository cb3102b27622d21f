"""Interventions: what a counterfactual fork changes in a recorded run.

An :class:`Intervention` overrides the hooks it needs; the runtime calls them as the run goes:
``message`` (drop or rewrite a message as it is sent), ``returned`` (what an agent returns),
``forces_stop`` (an agent stops on entering a step), ``decision_at`` (the value of a named
decision such as ``n_workers``) and ``redraws`` (recorded LLM answers to draw again).

On a message: :class:`DropMessage`, :class:`ReplaceMessage`, :class:`ResampleMessage` (the
sender's call drawn again) and :class:`RedrawDownstream` (the message kept, its readers drawn
again). On an agent or a turn: :class:`ForceStop` (stop-at), :class:`ForceDecision`
(spawn-one-more: :func:`~orchestrace.runtime.replay.spawn_one_more`) and :class:`Silence`.
Each ``of(trace, event_id)`` constructor refuses an id the trace does not hold, or an event of
the wrong kind, with an error naming the id. :func:`~orchestrace.runtime.replay.fork` applies
them.

Example:
    >>> from orchestrace.runtime import run
    >>> tr = run("debate", "arith", agents=3, seed=1, rounds=1, task_size=16).trace
    >>> msg = next(e for e in tr.events if e.type == "message")
    >>> DropMessage.of(tr, msg.id) == DropMessage(msg.agent, msg.step, 0)
    True
    >>> ForceStop.of(tr, msg.id).step == msg.step
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrace._numbers import as_int, is_int
from orchestrace._safe import display
from orchestrace.errors import ConfigError, TraceError
from orchestrace.runtime._intervention_args import (
    _check_address,
    _check_encodable,
    _check_name,
    _check_step,
    _plain,
)
from orchestrace.runtime.core import ROOT
from orchestrace.runtime.prompts import parse
from orchestrace.trace.model import Event, Trace

__all__ = [
    "DropMessage",
    "ForceDecision",
    "ForceStop",
    "Intervention",
    "RedrawDownstream",
    "ReplaceMessage",
    "ResampleMessage",
    "Silence",
    "TraceIndex",
    "json_native",
    "message_readers",
    "sender_call",
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
        """JSON description (recorded in the forked trace's meta), in JSON-native types."""
        described: dict[str, Any] = json_native({"kind": type(self).__name__, **vars(self)})
        return described


#: What the runtime calls on an intervention (an object with all of them may stand in for one).
_RUN_HOOKS = ("forces_stop", "decision", "message", "returned", "redraws")


def check_interventions(
    interventions: Any, *, max_agents: int | None = None, duck_typed: bool = True
) -> list[Any]:
    """``interventions`` as a list, after refusing what no intervention is.

    Args:
        interventions: What was given.
        max_agents: Refuse a forced team (``n_workers``) larger than this (a run's cap).
        duck_typed: Also take an object with every hook the runtime calls (a run does; a
            fork also describes its interventions, so it takes :class:`Intervention` only).

    Raises:
        ConfigError: Not a list, an item that is no intervention, or a team over ``max_agents``.
    """
    if isinstance(interventions, str | bytes) or not hasattr(interventions, "__iter__"):
        raise ConfigError(
            f"interventions must be a list of interventions, got a {type(interventions).__name__}"
            " (e.g. [DropMessage(event_id)])"
        )
    items = list(interventions)
    for i, iv in enumerate(items):
        if not isinstance(iv, Intervention) and not (
            duck_typed and all(callable(getattr(iv, h, None)) for h in _RUN_HOOKS)
        ):
            raise ConfigError(
                f"interventions[{i}] is a {type(iv).__name__}: give intervention objects "
                "(DropMessage, ForceDecision, ForceStop... from orchestrace.runtime.interventions)"
            )
        value = getattr(iv, "value", None)
        if (
            max_agents is not None
            and getattr(iv, "name", None) == "n_workers"
            and isinstance(value, int)
            and value > max_agents
        ):
            raise ConfigError(
                f"interventions[{i}] forces a team of {value:,} workers, over the run's "
                f"max_agents ({max_agents:,}); force a smaller team or raise max_agents"
            )
    return items


def json_native(value: Any) -> Any:
    """``value`` as JSON gives it back: tuples as lists, sets as sorted lists, mappings as dicts.

    What a run records in its meta must compare equal to itself read back from a file.

    Example:
        >>> json_native({"actions": ("spawn", "stop"), "to": frozenset({"b", "a"})})
        {'actions': ['spawn', 'stop'], 'to': ['a', 'b']}
    """
    if isinstance(value, Mapping):
        return {k: json_native(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_native(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((json_native(v) for v in value), key=repr)
    return value


def shown_id(event_id: Any) -> str:
    """An event id as error messages show it (quoted, escaped, clipped)."""
    return repr(display(event_id, 80)) if isinstance(event_id, str) else repr(event_id)[:80]


def find_event(trace: Trace, event_id: str, kind: str) -> Event:
    """Event ``event_id`` of ``trace``; an error naming the id and ``kind`` when there is none."""
    try:
        return trace.event(event_id)
    except (KeyError, TypeError):
        raise TraceError(
            f"no event {shown_id(event_id)} in trace {shown_trace(trace)}; pick the id of {kind} "
            "from the trace"
        ) from None


class TraceIndex:
    """Look-ups many interventions of one trace share, each built once, on first use.

    Building the interventions for every message of a trace one by one scans the trace once
    per message; an index scans it once: event positions, edges by source, and the address
    (sender, step, index in the step) of every message.

    Example:
        >>> from orchestrace.runtime import run
        >>> tr = run("debate", "arith", agents=3, seed=1, rounds=1, task_size=16).trace
        >>> ix = TraceIndex(tr)
        >>> m = next(e.id for e in tr.events if e.type == "message")
        >>> ix.readers(m) == message_readers(tr, m), DropMessage.of(tr, m, ix) == DropMessage.of(tr, m)
        (True, True)
    """

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._pos: dict[str, int] | None = None
        self._succ: dict[int, list[int]] | None = None
        self._readers: dict[str, list[int]] | None = None
        self._addresses: dict[str, tuple[str, int, int]] | None = None

    def position(self, event_id: str) -> int:
        """Index of event ``event_id`` in the trace's events (the last one with that id)."""
        if self._pos is None:
            self._pos = {e.id: i for i, e in enumerate(self.trace.events)}
        return self._pos[event_id]

    def address(self, event_id: str) -> tuple[str, int, int]:
        """Sender, step and index in the step of message ``event_id`` (checked)."""
        shown = shown_id(event_id)
        ev = find_event(self.trace, event_id, "a message event")
        if ev.type != "message":
            raise TraceError(
                f"event {shown} of trace {shown_trace(self.trace)} is a {ev.type}, not a "
                "message; pick a message event id"
            )
        return self._address_table()[ev.id]

    def _address_table(self) -> dict[str, tuple[str, int, int]]:
        if self._addresses is None:
            addresses: dict[str, tuple[str, int, int]] = {}
            count: dict[tuple[str, Any], int] = {}
            for e in self.trace.events:
                if e.type == "message":
                    k = count.get((e.agent, e.step), 0)
                    count[(e.agent, e.step)] = k + 1
                    addresses.setdefault(e.id, (e.agent, int(e.step or 0), k))
            self._addresses = addresses
        return self._addresses

    def addresses(self) -> frozenset[tuple[str, int, int]]:
        """The address (sender, step, index in the step) of every message of the trace."""
        return frozenset(self._address_table().values())

    def readers(self, event_id: str) -> list[int]:
        """:func:`message_readers` of ``event_id``."""
        self.address(event_id)
        if self._readers is None:
            self.position(event_id)
            assert self._pos is not None
            pos = self._pos
            readers: dict[str, list[int]] = {}
            for edge in self.trace.edges:
                if edge.type != "causal" and edge.dst in pos:
                    readers.setdefault(edge.src, []).append(pos[edge.dst])
            self._readers = readers
        return sorted(self._readers.get(event_id, ()))

    def llm_keys(self, starts: Sequence[int], include_starts: bool) -> tuple[str, ...]:
        """Replay keys of the LLM calls reachable from event indices ``starts`` along any edge."""
        if self._succ is None:
            if self.trace.events:
                self.position(self.trace.events[0].id)
            pos = self._pos or {}
            succ: dict[int, list[int]] = {}
            for edge in self.trace.edges:
                u, v = pos.get(edge.src), pos.get(edge.dst)
                if u is not None and v is not None:
                    succ.setdefault(u, []).append(v)
            self._succ = succ
        succ = self._succ
        seen = set(starts) if include_starts else set()
        stack = list(starts)
        while stack:
            for v in succ.get(stack.pop(), ()):
                if v not in seen:
                    seen.add(v)
                    stack.append(v)
        keys = []
        events = self.trace.events
        for i in sorted(seen):
            e = events[i]
            key = (e.attrs or {}).get("key")
            if e.type == "llm_call" and isinstance(key, str):
                keys.append(key)
        return tuple(keys)


def _message_address(
    trace: Trace, event_id: str, index: TraceIndex | None = None
) -> tuple[str, int, int]:
    return (index or TraceIndex(trace)).address(event_id)


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

    def __post_init__(self) -> None:
        _check_address(self, "DropMessage")

    @classmethod
    def of(cls, trace: Trace, event_id: str, index: TraceIndex | None = None) -> DropMessage:
        """The intervention that drops message ``event_id`` of ``trace`` (``index``: of it)."""
        return cls(*_message_address(trace, event_id, index))

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

    def __post_init__(self) -> None:
        _check_address(self, "ReplaceMessage")
        if not isinstance(self.content, str):
            raise ConfigError(
                f"ReplaceMessage content must be a string (the message's text), got "
                f"{display(repr(self.content), 60)}"
            )
        if not isinstance(self.replace_data, bool):
            raise ConfigError(
                f"ReplaceMessage replace_data must be True or False, got "
                f"{display(repr(self.replace_data), 60)}"
            )
        self.data = _plain(self.data)
        _check_encodable(self.data, "ReplaceMessage data")

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
    def parsed(
        cls, trace: Trace, event_id: str, text: str, index: TraceIndex | None = None
    ) -> ReplaceMessage:
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
        address = _message_address(trace, event_id, index)
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
    return TraceIndex(trace).llm_keys(starts, include_starts)


def message_readers(trace: Trace, event_id: str) -> list[int]:
    """Indices of the events that read message ``event_id`` (its message, return or spawn edges).

    The sender's own later events are not readers: they follow the message, they do not read it.
    """
    return TraceIndex(trace).readers(event_id)


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
        f"message {display(event_id, 80)!r} of trace {shown_trace(trace)} was not produced by an LLM "
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
    def of(cls, trace: Trace, event_id: str, index: TraceIndex | None = None) -> RedrawDownstream:
        """The redraw downstream of message ``event_id`` of ``trace`` (``index``: of it)."""
        ix = index or TraceIndex(trace)
        return cls(event_id, ix.llm_keys(ix.readers(event_id), True))

    @classmethod
    def after(cls, trace: Trace, event_id: str) -> RedrawDownstream:
        """Draw again every LLM call reachable from event ``event_id`` (itself included).

        The kept arm of a counterfactual on a turn (stop-at, spawn-one-more): the run
        resampled from that point on, unchanged.
        """
        ev = find_event(trace, event_id, "an event")
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

    def __post_init__(self) -> None:
        _check_step(self.step, "ForceStop step", optional=False)
        _check_name(self.agent, "ForceStop agent")
        self.step = as_int(self.step)  # (numpy integers too; recorded in the fork's meta)

    @classmethod
    def of(cls, trace: Trace, event_id: str) -> ForceStop:
        """The agent of event ``event_id`` stops on entering that event's step.

        The event and everything its agent does from the start of that step on do not happen.

        Raises:
            TraceError: No such event, or an event no agent acts in (a tool's result).
        """
        ev = find_event(trace, event_id, "an event of an agent")
        shown = shown_id(event_id)
        if ev.type == "tool_result" or ev.step is None:
            raise TraceError(
                f"event {shown} of trace {shown_trace(trace)} is a {ev.type} of "
                f"{display(ev.agent, 60)!r}, which no agent takes; pick an event of an agent "
                "(its llm_call, message, spawn, tool_call or decision)"
            )
        return cls(int(ev.step), ev.agent, event_id)

    @classmethod
    def at_step(cls, trace: Trace, step: int) -> ForceStop:
        """The orchestrator stops on entering ``step``, a step the recorded run reaches.

        Raises:
            TraceError: The orchestrator's recorded steps end before ``step`` (the stop would
                change nothing); the message names its last step.
        """
        _check_step(step, "--stop-at step", optional=False)
        steps = [e.step for e in trace.events if e.agent == ROOT and e.step is not None]
        last = max(steps, default=-1)
        if step > last:
            reach = (
                f"its last step is {last}; pick a step from 0 to {last}"
                if last >= 0
                else "it records no step of the orchestrator; pick an event id instead"
            )
            raise TraceError(
                f"--stop-at {step}: the orchestrator of trace {shown_trace(trace)} never "
                f"reaches step {step}, so the stop would change nothing; {reach}"
            )
        return cls(step)

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

    def __post_init__(self) -> None:
        _check_name(self.name, "ForceDecision name")
        _check_name(self.agent, "ForceDecision agent")
        _check_step(self.step, "ForceDecision step", optional=True)
        if self.step is not None:
            self.step = as_int(self.step)
        if self.name == "n_workers" and (not is_int(self.value) or self.value < 1):
            raise ConfigError(
                f"ForceDecision n_workers must be an integer >= 1 (a team size), got "
                f"{display(repr(self.value), 60)}"
            )
        if self.name == "n_workers":
            self.value = as_int(self.value)
        self.value = _plain(self.value)
        _check_encodable(self.value, "ForceDecision value")

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


def shown_trace(trace: Trace) -> str:
    """A trace id as error messages show it (escaped, clipped)."""
    return trace.trace_id.encode("unicode_escape", "backslashreplace").decode("ascii")[:80]
