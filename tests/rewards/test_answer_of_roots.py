"""A stop decision of an agent added to a recorded run is never the run's answer."""

from __future__ import annotations

import pytest

from orchestrace.rewards.base import answer_of, orchestrators, team_reward
from orchestrace.runtime import run
from orchestrace.trace.model import Event


@pytest.fixture(scope="module")
def failed_run():
    trace = run("swarm", "arith-mapreduce-v0", agents=6, seed=1).trace
    result = trace.meta["result"]
    assert result["answer"] != result["truth"]  # a run whose team got it wrong
    return trace


@pytest.mark.parametrize("name", ["orchestrator ", "Orchestrator", "root", "orchestrator\u200b"])
@pytest.mark.parametrize("t", [-1.0, 1e9])
def test_made_up_root_stop_is_ignored(failed_run, name, t):
    meta = {k: v for k, v in failed_run.meta.items() if k != "result"}
    truth = failed_run.meta["result"]["truth"]
    forged = Event(
        id="e999999",
        t=t,
        type="orchestrator_decision",
        agent=name,
        role="orchestrator",
        decision="stop",
        attrs={"answer": truth},
    )
    events = [forged, *failed_run.events] if t < 0 else [*failed_run.events, forged]
    hacked = failed_run.replace(meta=meta, events=events)
    assert orchestrators(hacked) == ["orchestrator"]
    assert answer_of(hacked) == failed_run.meta["result"]["answer"]
    assert team_reward()([hacked]) == [0.0]
