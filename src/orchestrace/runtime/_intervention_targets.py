"""What a fork's interventions name must be in the trace: a typo would change nothing.

Example:
    >>> from orchestrace.runtime import run
    >>> from orchestrace.runtime.interventions import Silence
    >>> tr = run("swarm", "arith", agents=2, seed=1, task_size=8).trace
    >>> sorted(trace_agents(tr))[:2]
    ['aggregator1', 'orchestrator']
    >>> check_targets([Silence("workr1")], tr)
    Traceback (most recent call last):
    ...
    orchestrace.errors.ConfigError: Silence names agent 'workr1', ...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrace._safe import display
from orchestrace.errors import ConfigError
from orchestrace.runtime.interventions import (
    DropMessage,
    ForceDecision,
    ForceStop,
    ReplaceMessage,
    Silence,
    TraceIndex,
    shown_trace,
)
from orchestrace.trace.model import Trace

__all__ = ["check_targets", "trace_agents"]


def trace_agents(trace: Trace) -> frozenset[Any]:
    """The agents of ``trace``: every event's agent and every spawn's target."""
    agents = {e.agent for e in trace.events}
    agents.update(e.to for e in trace.events if e.type == "spawn" and e.to is not None)
    return frozenset(agents)


def check_targets(
    interventions: Sequence[Any],
    trace: Trace,
    agents: frozenset[Any] | None = None,
    index: TraceIndex | None = None,
) -> None:
    """Refuse interventions that name what the trace does not hold (a typo changes nothing).

    :class:`ForceStop`, :class:`ForceDecision` and :class:`Silence` act on an agent by name,
    :class:`DropMessage` and :class:`ReplaceMessage` on a message by its sender, step and
    index. One naming an agent the recorded run never had, a fork of a single message
    intervention matching none of its messages, or of a single stop at a step its agent
    never reaches, would leave the fork the run itself, and its credit 0. A fork that also forces the team size (``ForceDecision("n_workers", ...)``) may
    name an agent only it spawns. ``agents`` and ``index``: :func:`trace_agents` and a
    :class:`TraceIndex` of ``trace``, when known.

    Raises:
        ConfigError: Naming the intervention and what the trace holds instead.
    """
    named = [
        iv
        for iv in interventions
        if isinstance(iv, ForceStop | ForceDecision | Silence | DropMessage | ReplaceMessage)
    ]
    if not named or any(isinstance(iv, ForceDecision) and iv.name == "n_workers" for iv in named):
        return
    known = agents if agents is not None else trace_agents(trace)
    for iv in named:
        agent = iv.sender if isinstance(iv, DropMessage | ReplaceMessage) else iv.agent
        if not isinstance(agent, str) or agent not in known:
            names = sorted(a for a in known if isinstance(a, str))
            shown = ", ".join(repr(display(a, 40)) for a in names[:8])
            more = f" and {len(names) - 8:,} more" if len(names) > 8 else ""
            raise ConfigError(
                f"{type(iv).__name__} names agent {display(str(agent), 60)!r}, which trace "
                f"{shown_trace(trace)} does not hold, so the fork would change nothing; name "
                f"one of its agents: {shown}{more}"
            )
    [only] = interventions if len(interventions) == 1 else [None]
    if isinstance(only, ForceStop):
        last = max(
            (e.step for e in trace.events if e.agent == only.agent and isinstance(e.step, int)),
            default=-1,
        )
        if only.step > last:
            raise ConfigError(
                f"ForceStop at step {only.step} of {display(only.agent, 60)!r}: its last "
                f"recorded step in trace {shown_trace(trace)} is {last}, so the fork would "
                f"change nothing; pick a step from 0 to {last} (ForceStop.of(trace, event_id))"
            )
    if isinstance(only, DropMessage | ReplaceMessage):
        at = (only.sender, only.step, only.index)
        if at not in (index or TraceIndex(trace)).addresses():
            raise ConfigError(
                f"{type(only).__name__} of message {only.index} of step {only.step} of "
                f"{display(only.sender, 60)!r} matches no message of trace {shown_trace(trace)}, "
                f"so the fork would change nothing; build it from a message's id "
                f"({type(only).__name__}.of(trace, event_id))"
            )
