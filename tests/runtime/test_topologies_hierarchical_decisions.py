"""Hierarchical runs record each stage's orchestrator decision, driven by the stage's plan."""

from dataclasses import replace
from typing import Any

from orchestrace.runtime import run
from orchestrace.runtime.backends import LLMRequest, LLMResponse, SimBackend


def _decisions(trace: Any) -> list[Any]:
    return [e for e in trace.events if e.type == "orchestrator_decision" and e.decision == "spawn"]


def test_each_stage_records_its_decision_from_the_plan() -> None:
    trace = run("hierarchical", "wide-search-v1", agents=12, seed=0, stages=3).trace
    got = _decisions(trace)
    assert [e.attrs["stage"] for e in got] == [1, 2, 3]
    assert [e.attrs["next"] for e in got] == ["continue", "continue", "stop"]
    assert all(e.attrs["source"] == "plan" for e in got)
    assert all(e.attrs["managers"] == e.attrs["answer"] for e in got)
    # the stop at the end is still recorded, after the stages
    assert [e.decision for e in trace.events if e.type == "orchestrator_decision"][-1] == "stop"


class _Plans(SimBackend):
    """The simulator, except that the orchestrator's plans answer ``answer``."""

    plan_answer: Any = None

    async def complete(self, request: LLMRequest) -> LLMResponse:
        resp = await super().complete(request)
        if request.kind == "plan" and request.agent == "orchestrator":
            return replace(resp, answer=self.plan_answer)
        return resp


def test_the_plan_answer_sets_the_managers_and_a_bad_one_keeps_the_default() -> None:
    cases = (
        (3, 3, "plan"),
        ("2", 2, "plan"),
        ("lots", 2, "default"),
        ("\u0663", 3, "plan"),  # another script's decimal digit reads as the number
        ("\u00b2", 2, "default"),  # a superscript is a digit to isdigit() but no number to int()
    )
    for answer, managers, source in cases:
        backend = _Plans(seed=0)
        backend.plan_answer = answer
        trace = run("hierarchical", "wide-search-v1", agents=4, seed=0, backend=backend).trace
        (d,) = _decisions(trace)
        assert (d.attrs["managers"], d.attrs["source"]) == (managers, source), answer
        spawned = [e for e in trace.events if e.type == "spawn" and e.agent == "orchestrator"]
        assert len(spawned) == managers
