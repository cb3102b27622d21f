"""The spawn-one-more and stop-at interventions, in Python and on the command line."""

import pytest

from orchestrace import TraceError, dump
from orchestrace.cli import main
from orchestrace.runtime import run
from orchestrace.runtime.interventions import Silence
from orchestrace.runtime.replay import (
    ForceDecision,
    ForceStop,
    fork,
    recorded_decisions,
    replay,
    spawn_one_more,
)


@pytest.fixture(scope="module")
def debate():
    # 8 agents asked, 7 debaters used (the topology's cap)
    return run("debate", "arith", agents=8, seed=0, task_size=16).trace


def _cli(argv, capsys):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_recorded_decisions_come_from_an_exact_replay(debate):
    assert recorded_decisions(debate) == [("orchestrator", -1, "n_workers", 7)]
    assert replay(debate).trace == debate  # the replay it uses is exact


def test_spawn_one_more_adds_one_to_what_the_run_used(debate):
    iv = spawn_one_more(debate)
    assert iv == ForceDecision("n_workers", 8)  # not meta.config.agents + 1 (= 9)
    res = fork(debate, [iv])
    debaters = {e.to for e in res.trace.events if e.type == "spawn" and e.role == "debater"}
    assert len(debaters) == 8
    assert res.trace.meta["fork"]["interventions"][0]["value"] == 8


def test_spawn_one_more_at_an_event_needs_a_decision_there(debate):
    spawn = next(e for e in debate.events if e.type == "spawn")
    with pytest.raises(TraceError) as err:
        spawn_one_more(debate, spawn.id)
    assert str(err.value) == (
        f"event '{spawn.id}' of trace {debate.trace_id} is a spawn of 'orchestrator' at step 0, "
        "where no team-size decision (n_workers) is taken; this run decides its team size "
        "once, when it starts: leave out the id"
    )
    with pytest.raises(TraceError, match=r"no event 'e999' in trace .*a spawn decision"):
        spawn_one_more(debate, "e999")


def test_stop_at_an_event_stops_its_agent_at_that_step(debate):
    msg = next(e for e in debate.events if e.type == "message" and e.step == 1)
    iv = ForceStop.of(debate, msg.id)
    assert (iv.agent, iv.step, iv.event) == (msg.agent, 1, msg.id)
    res = fork(debate, [iv])
    before = [e for e in debate.events if e.agent == msg.agent and e.step >= 1]
    after = [e for e in res.trace.events if e.agent == msg.agent and e.step >= 1]
    assert len(before) > 2
    assert [e.type for e in after] == ["return"]  # it returned its best answer, nothing more
    assert res.trace.meta["fork"]["interventions"][0]["event"] == msg.id
    # the orchestrator stopped at its first event: the run ends there, with no answer
    first = debate.events[0]
    stopped = fork(debate, [ForceStop.of(debate, first.id)])
    assert stopped.trace.meta["result"]["stop_reason"].startswith("forced stop at step 0")
    assert stopped.backend_calls == 0 and stopped.trace.meta["result"]["answer"] is None


def test_stop_at_refuses_what_no_agent_does():
    tr = run("centralized", "wide-search-v1", agents=2, seed=0, task_size=20).trace
    result = next(e for e in tr.events if e.type == "tool_result")
    with pytest.raises(TraceError) as err:
        ForceStop.of(tr, result.id)
    assert str(err.value).startswith(
        f"event '{result.id}' of trace {tr.trace_id} is a tool_result of '{result.agent}', "
        "which no agent takes; pick an event of an agent"
    )
    with pytest.raises(TraceError, match=r"no event 'nope' in trace .*an event of an agent"):
        ForceStop.of(tr, "nope")


def test_cli(debate, tmp_path, capsys):
    path = tmp_path / "d.json"
    dump(debate, path)
    msg = next(e for e in debate.events if e.type == "message")
    rc, out, err = _cli(["replay", str(path), "--stop-at", msg.id], capsys)
    assert rc == 0, err
    assert f"fork with ForceStop at {msg.id} ({msg.agent} stops on entering step {msg.step})" in out
    rc, out, err = _cli(["replay", str(path), "--stop-at", "1"], capsys)
    assert rc == 0 and "(orchestrator stops on entering step 1)" in out
    rc, out, err = _cli(["replay", str(path), "--spawn-one-more"], capsys)
    assert rc == 0 and "fork with ForceDecision (n_workers = 8)" in out
    for argv, message in [
        (["--stop-at", "-1"], "error: --stop-at takes a step from 0 to 2^63-1 or an event id"),
        (["--stop-at", str(2**64)], "error: --stop-at takes a step from 0 to 2^63-1 or an "),
        (["--stop-at", "e999"], f"error: no event 'e999' in trace {debate.trace_id}; pick the "),
        (["--spawn-one-more", "e2"], "error: event 'e2' of trace "),
    ]:
        rc, _, err = _cli(["replay", str(path), *argv], capsys)
        assert rc == 1 and err.startswith(message) and err.count("\n") == 1


@pytest.mark.parametrize(
    "named",
    [
        lambda: Silence("workr1"),
        lambda: ForceStop(1, "nobody"),
        lambda: ForceDecision("aggregate", "x", agent="orchestrater"),
    ],
)
def test_an_intervention_naming_an_agent_the_trace_lacks_is_refused(named):
    """A typo would leave the fork the recorded run, and its credit 0, without a word."""
    from orchestrace.errors import ConfigError
    from orchestrace.runtime.replay import backend_for, fork_many

    tr = run("swarm", "arith", agents=3, seed=1, task_size=8).trace
    with pytest.raises(ConfigError, match=r"names agent .*does not hold.*'worker1'"):
        fork(tr, [named()])
    with pytest.raises(ConfigError, match=r"names agent"):
        fork_many(tr, [([], backend_for(tr)), ([named()], backend_for(tr))])
    # an agent only the fork spawns may be named with the team size it forces
    more = fork(tr, [ForceDecision("n_workers", 5), ForceStop(1, "worker5")]).trace
    assert "worker5" in {e.agent for e in more.events}
    assert fork(tr, [Silence("worker1")]).trace != tr


def test_a_message_intervention_matching_no_message_is_refused():
    from orchestrace.errors import ConfigError
    from orchestrace.runtime.replay import DropMessage, ReplaceMessage

    tr = run("swarm", "arith", agents=3, seed=1, task_size=8).trace
    m = next(e for e in tr.events if e.type == "message" and e.agent != "orchestrator")
    for iv in (
        DropMessage("workr1", m.step, 0),
        DropMessage(m.agent, 10**9, 0),
        ReplaceMessage(m.agent, m.step, 99, "x"),
    ):
        with pytest.raises(ConfigError, match=r"(names agent|matches no message)"):
            fork(tr, [iv])
    assert fork(tr, [DropMessage(m.agent, m.step, 0)]).trace != tr  # its own address acts
    with pytest.raises(ConfigError, match=r"ForceStop at step 1000000 of 'orchestrator': its last"):
        fork(tr, [ForceStop(10**6)])  # a step the agent never reaches


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: _drop("a", -1, 0), "step must be an integer >= 0"),
        (lambda: _drop("a", "0", 0), "step must be an integer >= 0"),
        (lambda: _drop("a", 0, 1.5), "index must be an integer >= 0"),
        (lambda: _drop("", 0, 0), "sender must be a non-empty string"),
        (lambda: _replace(123), "content must be a string"),
        (lambda: _replace("x", data={"at": object()}), "data must be JSON data"),
        (lambda: ForceDecision("rounds", {1, object()}), "value must be JSON data"),
    ],
)
def test_a_malformed_intervention_is_refused_when_built(build, says):
    """Not after the whole fork has run, as the trace's writer refused what it recorded."""
    from orchestrace.errors import ConfigError

    with pytest.raises(ConfigError, match=says):
        build()


def test_numpy_numbers_in_an_intervention_are_plain_numbers():
    import numpy as np

    from orchestrace.runtime.replay import DropMessage

    iv = DropMessage("a", np.int64(2), np.int32(0))
    assert (iv.step, iv.index) == (2, 0) and type(iv.step) is int and type(iv.index) is int
    assert ForceDecision("rounds", np.int64(2)).value == 2
    assert type(_replace("x", data={"v": np.float64(0.5)}).data["v"]) is float


def _drop(sender, step, index):
    from orchestrace.runtime.replay import DropMessage

    return DropMessage(sender, step, index)


def _replace(content, data=None):
    from orchestrace.runtime.replay import ReplaceMessage

    return ReplaceMessage("a", 0, 0, content, data, data is not None)


def test_a_lone_forced_decision_the_run_never_takes_is_refused():
    from orchestrace.errors import ConfigError
    from orchestrace.runtime.replay import recorded_decisions

    tr = run("centralized", "arith", agents=3, seed=0).trace
    agent, step, name, value = recorded_decisions(tr)[0]
    with pytest.raises(ConfigError, match=r"ForceDecision 'n_wokers' .* never takes that decision"):
        fork(tr, [ForceDecision("n_wokers", 5, agent)])
    with pytest.raises(ConfigError, match=r"never takes that decision"):
        fork(tr, [ForceDecision(name, value, agent, step + 7)])  # not in that step
    assert fork(tr, [ForceDecision(name, value + 1 if name == "n_workers" else value, agent)])
