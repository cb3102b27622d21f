import pytest

from orchestrace import TraceError, dumps, generate_trace
from orchestrace.runtime import TOPOLOGIES, run
from orchestrace.runtime.replay import (
    DropMessage,
    ForceDecision,
    ForceStop,
    ReplaceMessage,
    cache_from_trace,
    fork,
    replay,
    spawn_one_more,
)


@pytest.mark.parametrize("topology", sorted(TOPOLOGIES))
@pytest.mark.parametrize("task", ["arith", "search", "multihop"])
def test_replay_reproduces_exactly(topology, task):
    original = run(topology, task, agents=5, seed=3).trace
    res = replay(original)
    assert res.backend_calls == 0
    assert dumps(res.trace) == dumps(original)


def test_replay_of_failures_and_budget_stops():
    original = run("swarm", "search", agents=6, seed=3, tool_failure_rate=0.3).trace
    assert any(e.error for e in original.events)
    assert dumps(replay(original).trace) == dumps(original)
    stopped = run("debate", "arith", agents=4, seed=1, max_steps=9).trace
    assert stopped.meta["result"]["stop_reason"].startswith("budget exceeded: max_steps")
    assert dumps(replay(stopped).trace) == dumps(stopped)


def test_drop_message_only_reruns_descendants():
    original = run("debate", "arith", agents=5, seed=2, rounds=2).trace
    llm_calls = sum(e.type == "llm_call" for e in original.events)
    msgs = [e for e in original.events if e.type == "message"]
    last_round = msgs[-1]
    res = fork(original, [DropMessage.of(original, last_round.id)])
    # only the receiver's final revision, and the judge after it, can change
    assert 1 <= res.backend_calls <= 2
    assert res.backend_calls + res.cache_hits == sum(e.type == "llm_call" for e in res.trace.events)
    assert res.trace.n_events == original.n_events - 1
    assert llm_calls > 10


def test_message_nothing_consumed_changes_nothing():
    original = run("swarm", "arith", agents=6, seed=2, gossip=1.0).trace
    consumed = {e.src for e in original.edges if e.type == "message"}
    unread = [e for e in original.events if e.type == "message" and e.id not in consumed]
    assert unread
    res = fork(original, [DropMessage.of(original, unread[0].id)])
    assert res.backend_calls == 0
    assert res.trace.meta["result"]["answer"] == original.meta["result"]["answer"]


def test_replace_message_and_forced_decisions():
    original = run("debate", "arith", agents=3, seed=4, rounds=1).trace
    first = next(e for e in original.events if e.type == "message")
    res = fork(
        original,
        [
            ReplaceMessage.of(
                original, first.id, "999", {"round": 0, "answer": 999}, replace_data=True
            )
        ],
    )
    new_msg = next(e for e in res.trace.events if e.type == "message")
    assert new_msg.content == "999" and res.backend_calls >= 1
    stop = fork(original, [ForceStop(step=0)])
    assert stop.trace.meta["result"]["stop_reason"].startswith("forced stop at step 0")
    assert stop.backend_calls == 0
    more = fork(
        run("centralized", "arith", agents=4, seed=4).trace, [ForceDecision("n_workers", 5)]
    )
    assert more.trace.metrics["agents"] == 6


def test_spawn_one_more_uses_recorded_team_size():
    original = run("centralized", "arith", agents=4, seed=0).trace
    iv = spawn_one_more(original)
    assert iv.value == 5
    assert fork(original, [iv]).trace.metrics["agents"] == 6


def test_bad_requests():
    original = run("centralized", "arith", agents=2, seed=0).trace
    with pytest.raises(TraceError, match="is a llm_call, not a message"):
        DropMessage.of(original, "e1")
    with pytest.raises(TraceError, match="no event 'e999'"):
        DropMessage.of(original, "e999")
    with pytest.raises(TraceError, match="does not say how to re-run it"):
        replay(generate_trace(3, 20))
    assert len(cache_from_trace(original)) == sum(e.type == "llm_call" for e in original.events)


def test_edited_trace_does_not_replay():
    import msgspec

    original = run("centralized", "arith", agents=2, seed=0).trace
    events = [
        msgspec.structs.replace(e, attrs={**e.attrs, "key": "tampered"})
        if e.type == "llm_call"
        else e
        for e in original.events
    ]
    with pytest.raises(TraceError, match="diverged"):
        replay(original.replace(events=tuple(events)))


def _edited(trace, how):
    import msgspec

    if how == "task-seed":
        task = {**trace.meta["task"], "seed": trace.meta["task"]["seed"] + 98}
        return msgspec.structs.replace(trace, meta={**trace.meta, "task": task})
    if how == "content":  # no call reads it: the replay answers every call, differently
        ev = list(trace.events)
        k = next(i for i, e in enumerate(ev) if e.type == "message")
        ev[k] = msgspec.structs.replace(ev[k], content="EDITED")
        return trace.replace(events=tuple(ev))
    first = next(i for i, e in enumerate(trace.events) if e.type == how)
    gone = trace.events[first].id
    return trace.replace(
        events=trace.events[:first] + trace.events[first + 1 :],
        edges=tuple(e for e in trace.edges if gone not in (e.src, e.dst)),
    )


@pytest.mark.filterwarnings("ignore:.*recorded verdict:UserWarning")
@pytest.mark.parametrize("how", ["task-seed", "llm_call", "tool_result", "content"])
def test_a_trace_that_does_not_replay_is_refused_by_forks_and_credit(how):
    """Calls the trace lacks would be answered afresh and credited to the interventions."""
    from orchestrace.credit import LeaveOneOutCredit
    from orchestrace.runtime.replay import backend_for, fork_many

    task = "search" if how == "tool_result" else "arith"  # (search agents call tools)
    tr = run("swarm", task, agents=3, seed=1, task_size=8).trace
    assert how in ("task-seed", "content") or any(e.type == how for e in tr.events)
    bad = _edited(tr, how)
    late = [e.id for e in tr.events if e.type == "message"][-1]  # acts after the edit
    says = r"replay of .* diverged: .*(were not in the trace|differs from it)"
    if how != "content":  # (a replay with every call answered is returned, to be compared)
        with pytest.raises(TraceError, match=says):
            replay(bad)
    with pytest.raises(TraceError, match=says):
        fork(bad, [DropMessage.of(bad, late)])
    with pytest.raises(TraceError, match=says):
        fork_many(bad, [([DropMessage.of(bad, late)], backend_for(bad))])
    with pytest.raises(TraceError, match=says):
        LeaveOneOutCredit().assign(bad)
    assert fork(tr, [DropMessage.of(tr, late)]).trace  # the recorded trace itself forks


@pytest.mark.parametrize(
    ("topology", "task", "options"),
    [
        ("swarm", "wide-search-v0", {"max_steps": 5}),
        ("centralized", "arith", {"max_tokens": 300}),
        ("debate", "arith", {"max_wall_s": 3.0}),
        ("centralized", "wide-search-v0", {"on_error": "stop", "tool_failure_rate": 0.5}),
        ("swarm", "wide-search-v1", {"on_error": "stop", "backend_options": {"fail_rate": 0.3}}),
    ],
)
def test_a_run_stopped_with_calls_under_way_replays_and_forks(topology, task, options):
    """Calls cut off by the stop were never answered: the replay stops there too, the same."""
    from orchestrace.runtime.replay import reproduces

    tr = run(topology, task, agents=3, seed=1, task_size=6, **options).trace
    reason = tr.meta["result"]["stop_reason"]
    assert reason.startswith(("budget exceeded", "tool failure", "backend failure"))
    assert reproduces(tr, replay(tr).trace)
    last = max(e.step for e in tr.events if e.agent == "orchestrator" and e.step is not None)
    assert fork(tr, [ForceStop(last)]).trace


def test_a_trace_recorded_under_an_attack_is_not_replayed_nor_forked():
    """A re-execution does not inject the attack again: its forks would be of another run."""
    from orchestrace.cli.run import attack_from
    from orchestrace.runtime.replay import backend_for, fork_many
    from orchestrace.safety.attacks.runner import run_attacked

    tr = run_attacked("centralized", "arith", attack_from("aggregation"), task_size=8).trace
    says = r"records interventions \(aggregation\), which a re-execution does not apply again"
    with pytest.raises(TraceError, match=says):
        replay(tr)
    with pytest.raises(TraceError, match=says):
        fork_many(tr, [([ForceStop(0)], backend_for(tr))])
    forked = fork(run("swarm", "arith", agents=3, seed=1, task_size=8).trace, [ForceStop(1)])
    with pytest.raises(TraceError, match=r"records interventions \(ForceStop\)"):
        replay(forked.trace)  # a fork's own changes are not applied again either
