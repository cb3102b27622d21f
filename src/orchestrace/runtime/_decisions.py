"""The named decisions of a recorded run (``ctx.decide``), found by an exact replay.

:func:`recorded_decisions` lists them; :func:`spawn_one_more` forces one more worker than the
run's team-size decision took (``replay --spawn-one-more``). Both are re-exported by
:mod:`orchestrace.runtime.replay`.

Example:
    >>> from orchestrace.runtime import run
    >>> tr = run("centralized", "arith", agents=3, seed=0).trace
    >>> spawn_one_more(tr).value
    4
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrace._safe import display
from orchestrace.errors import TraceError
from orchestrace.runtime._rerun import _runtime, _StrictReplay
from orchestrace.runtime.cache import ReplayCache
from orchestrace.runtime.clock import run_virtual
from orchestrace.runtime.core import ROOT
from orchestrace.runtime.interventions import (
    ForceDecision,
    Intervention,
    find_event,
    shown_id,
    shown_trace,
)
from orchestrace.trace.model import Trace

__all__ = ["recorded_decisions", "spawn_one_more"]


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
    rt, root = _runtime(trace, _StrictReplay.of(trace), [log], ReplayCache.from_trace(trace))
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
            f"trace {shown_trace(trace)} records no usable team size (meta.config.agents = "
            f"{display(repr(n), 40)}); spawn-one-more needs the number of workers the run used"
        )
    ev = None if event_id is None else find_event(trace, event_id, "a spawn decision")
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
            f"trace {shown_trace(trace)} does not decide its team size once when it starts (it "
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
        f"event {shown_id(event_id)} of trace {shown_trace(trace)} is a {ev.type} of "
        f"{display(ev.agent, 60)!r} at step {ev.step}, where no team-size decision (n_workers) "
        f"is taken; {pick}"
    )
