"""How a run ends: the stop event it records, the verdict on its answer, its trace.

These are methods of :class:`~orchestrace.runtime.core.Runtime` (``Runtime.verdict``, and the
stop event and trace assembly the run loop uses), kept here as functions of the runtime, as
:mod:`~orchestrace.runtime.llm_calls` and :mod:`~orchestrace.runtime.messaging` keep theirs.

Example:
    >>> from orchestrace.runtime import run
    >>> trace = run("centralized", "arith", agents=2, seed=1, task_size=8, max_steps=3).trace
    >>> trace.events[-1].decision, trace.meta["result"]["stop_reason"]
    ('stop', 'budget exceeded: max_steps (3)')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrace.errors import OrchestraceError
from orchestrace.runtime.recorder import FAILURES_KEY, assemble_trace
from orchestrace.tasks.base import Verdict, unknown_verdict
from orchestrace.trace.build import _costs_of_totals

if TYPE_CHECKING:
    from orchestrace.runtime.context import AgentState
    from orchestrace.runtime.core import Runtime
    from orchestrace.trace.model import Trace

__all__ = ["finish", "force_stop_event", "verdict"]


def force_stop_event(rt: Runtime, a: AgentState, reason: str) -> None:
    """Record the stop that ends the run for ``a`` (a budget, a forced stop), with its answer."""
    a.step += 1
    budget = (
        reason.split(":", 1)[1].split("(", maxsplit=1)[0].strip()
        if reason.startswith("budget")
        else None
    )
    attrs: dict[str, Any] = {"answer": a.best if rt.answer is None else rt.answer}
    if rt.guard is not None and rt.guard.gate(a, "stop", rt.guard.carriers(attrs["answer"])):
        attrs = {"answer": None, "withheld": True}  # tainted and not endorsable
    if budget:
        attrs["budget"] = budget
    rt.record(a, "orchestrator_decision", rt.now(), decision="stop", content=reason, attrs=attrs)
    a.stopped = True
    if rt.stop_reason is None:
        rt.stop_reason = reason
        rt.answer = attrs["answer"]


def verdict(rt: Runtime) -> Verdict:
    """The checker's verdict on the final answer (recorded as ``meta.result.verdict``).

    A checker that refuses to run (e.g. no sandbox is available) gives an unknown verdict
    whose reason says why; the run is still recorded.
    """
    try:
        judge = rt.judge if rt.judge is not None else rt.task.verdict
        v = judge(rt.answer)
    except OrchestraceError as err:
        return unknown_verdict(rt.task.name, f"not checked: {err}")
    return v if "checker" in v else {**v, "checker": rt.task.name}


def finish(rt: Runtime, header: Mapping[str, Any]) -> Trace:
    """The run's trace: its events and edges, the header, the verdict, answer and costs."""
    if rt.token_table:  # the side table of token ids (orchestrace.trace.tokens)
        header = {**header, "meta": {**header.get("meta", {}), "tokens": rt.token_table}}
    failures = rt.recorder.failure_records
    if failures:  # processors that failed while the run was recorded
        header = {
            **header,
            "meta": {**header.get("meta", {}), FAILURES_KEY: [f.as_meta() for f in failures]},
        }
    return assemble_trace(
        header,
        rt.events,
        rt.edges,
        verdict=rt.verdict(),
        answer=rt.answer,
        stop_reason=rt.stop_reason,
        truth=rt.task.answer,
        agents=len(rt.agents),
        topology=rt.topology,
        costs=_costs_of_totals(*rt._spent),
    )
