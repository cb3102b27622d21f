"""Traces of the learning environments record communication and replay, fork and get credit."""

import msgspec
import pytest

from orchestrace import TraceError, dump
from orchestrace.cli import main
from orchestrace.credit import make_assigner
from orchestrace.learn.env import make_env
from orchestrace.runtime.replay import (
    DropMessage,
    ForceStop,
    ReplaceMessage,
    fork,
    replay,
    spawn_one_more,
)

PLAN = [
    {"spawn": 2, "role": "worker", "comm": "none", "aggregate": "vote", "stop": False},
    {"spawn": 2, "role": "novice", "comm": "broadcast", "aggregate": "vote", "stop": False},
    {"spawn": 1, "role": "expert", "comm": "p2p", "aggregate": "trust", "stop": False},
    {"spawn": 0, "role": "worker", "comm": "none", "aggregate": "trust", "stop": True},
]


def episode(env_id="orchestrate-v0", seed=3, plan=PLAN, **kw):
    env = make_env(env_id, task="arith", **kw)
    env.reset(seed=seed, options={"size": 12})
    info = {}
    for d in plan:
        *_, term, trunc, info = env.step(env.encode(d))
        if term or trunc:
            break
    env.close()
    return info["trace"]


@pytest.fixture(scope="module")
def trace():
    return episode()


def test_communication_is_recorded_as_messages(trace):
    msgs = [e for e in trace.events if e.type == "message"]
    # broadcast: one message to each of the 2 novices; p2p: one to the expert
    assert [(m.from_, m.to) for m in msgs] == [
        ("orchestrator", "novice1"),
        ("orchestrator", "novice2"),
        ("orchestrator", "expert1"),
    ]
    assert [len(m.attrs["data"]["peers"]) for m in msgs] == [2, 2, 1]
    assert all(m.decision == "communicate" for m in msgs)
    by_id = {e.id: e for e in trace.events}
    for m in msgs:  # the revision reads the message
        readers = [by_id[d.dst] for d in trace.edges if d.src == m.id and d.type == "message"]
        assert [(r.agent, r.type, r.attrs["kind"]) for r in readers] == [
            (m.to, "llm_call", "revise")
        ]


def test_meta_says_how_to_rerun(trace):
    runner = trace.meta["runner"]
    assert runner["env"] == "orchestrate-v0" and runner["seed"] == 3
    assert runner["options"] == {"size": 12} and runner["train_step"] == 0
    assert runner["rounds"]["max_workers"] == 12
    assert trace.meta["backend"]["options"]["role_tokens"] == {"expert": 2.0, "novice": 0.6}


@pytest.mark.parametrize(
    ("env_id", "kw"),
    [("orchestrate-v0", {}), ("orchestrate-v0", {"steps_budget": 4}), ("stop-v0", {})],
)
def test_replay_is_exact(env_id, kw):
    tr = episode(env_id, seed=5, **kw)
    res = replay(tr)
    assert res.trace == tr and res.backend_calls == 0
    assert res.cache_hits == sum(e.type == "llm_call" for e in tr.events)


def test_dropping_a_message_leaves_its_worker_alone(trace):
    msg = next(e for e in trace.events if e.type == "message")
    res = fork(trace, [DropMessage.of(trace, msg.id)])
    worker_calls = [
        e.attrs["kind"] for e in res.trace.events if e.agent == msg.to and e.type == "llm_call"
    ]
    assert worker_calls == ["solve"]  # no revision: it heard nothing
    assert res.trace.meta["fork"]["of"] == trace.trace_id
    assert not any(e.to == msg.to for e in res.trace.events if e.type == "message")


def test_replacing_a_message_changes_what_the_worker_hears(trace):
    msg = next(e for e in trace.events if e.type == "message")
    iv = ReplaceMessage.parsed(trace, msg.id, "ANSWER: 7")
    assert iv.data == {"peers": [7]}
    res = fork(trace, [iv])
    revise = next(
        e
        for e in res.trace.events
        if e.agent == msg.to and e.type == "llm_call" and e.attrs["kind"] == "revise"
    )
    assert "answered_by" in revise.attrs and res.backend_calls >= 1


def test_spawn_one_more_and_stop_at_a_decision(trace):
    decisions = [e for e in trace.events if e.type == "orchestrator_decision"]
    iv = spawn_one_more(trace, decisions[1].id)
    assert (iv.value, iv.step) == (3, decisions[1].step)
    res = fork(trace, [iv])
    assert res.trace.metrics["agents"] == trace.metrics["agents"] + 1
    novices = {e.to for e in res.trace.events if e.type == "spawn" and e.role == "novice"}
    assert novices == {"novice1", "novice2", "novice3"}
    with pytest.raises(TraceError, match=r"decides it 3 time\(s\).* one of: e1, "):
        spawn_one_more(trace)
    stopped = fork(trace, [ForceStop.of(trace, decisions[2].id)])
    assert not any(e.role == "expert" for e in stopped.trace.events if e.type == "spawn")
    assert stopped.trace.meta["result"]["stop_reason"].startswith("forced stop at step 2")


def test_counterfactual_credit_on_an_episode(trace):
    table = make_assigner("counterfactual", samples=3).assign(trace, "message")
    msgs = [e.id for e in trace.events if e.type == "message"]
    assert sorted(r.id for r in table.rows) == sorted(msgs)
    assert table.stats["backend_calls"] > 0 and table.stats["paired"] is True
    assert all(table.estimates[m]["samples"] == 3 for m in msgs)


def test_an_episode_without_its_limits_is_refused(trace):
    runner = {k: v for k, v in trace.meta["runner"].items() if k != "rounds"}
    old = msgspec.structs.replace(trace, meta={**trace.meta, "runner": runner})
    with pytest.raises(TraceError, match=r"does not record its limits \(meta.runner.rounds"):
        replay(old)


def test_cli_replays_and_forks_an_episode(trace, tmp_path, capsys):
    path = tmp_path / "episode.json"
    dump(trace, path)
    assert main(["replay", str(path)]) == 0
    assert "identical trace" in capsys.readouterr().out
    msg = next(e for e in trace.events if e.type == "message")
    assert main(["replay", str(path), "--drop-message", msg.id]) == 0
    assert "fork with DropMessage" in capsys.readouterr().out


def test_a_fork_that_outlasts_the_recorded_decisions_stops_there():
    # truncated by its Critical-Steps budget; without the broadcast the worker does not revise,
    # the episode takes fewer steps and asks for one decision more than was recorded
    plan = [
        {"spawn": 2, "role": "worker", "comm": "none", "aggregate": "vote", "stop": False},
        {"spawn": 1, "role": "worker", "comm": "broadcast", "aggregate": "first", "stop": False},
        {"spawn": 1, "role": "worker", "comm": "none", "aggregate": "vote", "stop": False},
        {"spawn": 1, "role": "worker", "comm": "none", "aggregate": "vote", "stop": False},
    ]
    tr = episode(seed=0, plan=plan, steps_budget=6)
    assert tr.meta["runner"]["rounds"]["steps_budget"] == 6
    recorded = [e for e in tr.events if "completion" in (e.attrs or {})]
    msg = next(e for e in tr.events if e.type == "message")
    res = fork(tr, [DropMessage.of(tr, msg.id)])
    decisions = [e for e in res.trace.events if "completion" in (e.attrs or {})]
    assert len(decisions) == len(recorded) + 1
    last = decisions[-1]
    assert last.decision == "stop" and '"aggregate": "vote"' in last.attrs["completion"]
    assert res.trace.meta["result"]["stop_reason"] == "done"
