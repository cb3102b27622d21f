"""replay --stop-at a step the orchestrator never reaches is refused, naming its last step."""

from __future__ import annotations

import pytest

from orchestrace.cli import main
from orchestrace.errors import TraceError
from orchestrace.io import dump
from orchestrace.runtime import run
from orchestrace.runtime.interventions import ForceStop


def test_stop_at_an_unreached_step_names_the_last_one(tmp_path, capsys):
    trace = run("debate", "arith", agents=3, seed=1, task_size=16).trace
    last = max(e.step for e in trace.events if e.agent == "orchestrator")
    assert ForceStop.at_step(trace, last).step == last
    with pytest.raises(TraceError, match=rf"never reaches step 99999.*last step is {last}"):
        ForceStop.at_step(trace, 99999)
    path = tmp_path / "t.jsonl"
    dump(trace, str(path))
    assert main(["replay", str(path), "--stop-at", "99999"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"its last step is {last}" in err
