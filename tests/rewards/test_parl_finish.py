"""PARL's r_finish credits sub-agents that complete real sub-tasks; idle spawns earn nothing."""

from __future__ import annotations

import itertools

import pytest

from orchestrace.rewards import parl_components, parl_reward
from orchestrace.rewards.parl import subtasks
from orchestrace.runtime import run
from orchestrace.trace.build import TraceBuilder
from orchestrace.trace.check import is_valid
from orchestrace.trace.model import Edge, Event, Trace


def _recorded() -> Trace:
    """A real simulator run: 8 workers, an aggregate, a stop."""
    return run("centralized", "arith", agents=8, seed=1).trace


def _with_extra(
    tr: Trace,
    n: int,
    *,
    value: object = None,
    work: bool = False,
    consumed: bool = True,
    record_value: bool = True,
) -> Trace:
    """``tr`` plus ``n`` sub-agents spawned by the orchestrator alongside the workers.

    Each spawn joins the orchestrator's spawn turn (same step, same time, chained causally
    before the aggregate). The sub-agent optionally makes one LLM call, then returns
    ``value``; with ``consumed`` the return feeds the orchestrator's aggregate.
    """
    events = list(tr.events)
    edges = list(tr.edges)
    spawns = [e for e in events if e.type == "spawn" and e.agent == "orchestrator"]
    agg = next(e for e in events if e.type == "aggregate" and e.agent == "orchestrator")
    last = spawns[-1]
    prev = last.id
    t = last.t
    pos = events.index(last) + 1
    added: list[Event] = []
    for i in range(n):
        name = f"extra{i + 1}"
        sid = f"x{i + 1}_spawn"
        added.append(
            Event(id=sid, t=t, type="spawn", agent="orchestrator", role="worker", to=name, step=0)
        )
        edges.append(Edge(prev, sid, "causal"))
        prev = sid
        src, kind = sid, "spawn"
        if work:
            lid = f"x{i + 1}_llm"
            added.append(
                Event(id=lid, t=t, type="llm_call", agent=name, dur=1.0, step=0, tokens_out=5)
            )
            edges.append(Edge(sid, lid, "spawn"))
            src, kind = lid, "causal"
        rid = f"x{i + 1}_ret"
        attrs = {"value": value} if record_value else None
        added.append(
            Event(
                id=rid,
                t=t + (1.0 if work else 0.0),
                type="return",
                agent=name,
                from_=name,
                to="orchestrator",
                step=0,
                attrs=attrs,
            )
        )
        edges.append(Edge(src, rid, kind))
        if consumed:
            edges.append(Edge(rid, agg.id, "aggregate"))
    edges.append(Edge(prev, agg.id, "causal"))
    out = tr.replace(events=tuple(events[:pos] + added + events[pos:]), edges=tuple(edges))
    assert is_valid(out)
    return out


def test_recorded_run_finishes_every_subtask():
    tr = _recorded()
    tasks = subtasks(tr)
    assert len(tasks) == 8
    assert all(s.finished and s.reason == "finished" for s in tasks)
    assert [s.returned for s in tasks] == [f"e{k}" for k in (25, 23, 15, 21, 11, 17, 19, 13)]
    c = parl_components(tr)
    assert c["r_finish"] == 1.0 and c["subtasks"] == c["finished_subtasks"] == 8


def test_twenty_idle_subagents_do_not_raise_the_parl_reward():
    tr = _recorded()
    hacked = _with_extra(tr, 20)
    before, after = parl_components(tr), parl_components(hacked)
    # idle sub-agents are spawned and counted, but none finishes a sub-task
    assert [s.reason for s in subtasks(hacked)[8:]] == ["empty result"] * 20
    assert after["r_finish"] == pytest.approx(8 / 28)
    # they add steps, but r_parallel only counts the work of finished sub-tasks
    assert after["total_steps"] == before["total_steps"] + 20
    assert after["critical_steps"] == before["critical_steps"]
    assert after["r_parallel"] == pytest.approx(before["r_parallel"])
    for lam1, lam2 in itertools.product((0.0, 0.05, 0.1, 1.0, 10.0), (0.0, 0.05, 0.1, 1.0)):
        reward = parl_reward(lambda1=lam1, lambda2=lam2)
        (orig,), (hack,) = reward([tr]), reward([hacked])
        assert orig is not None and hack is not None
        assert hack <= orig + 1e-12, (lam1, lam2, orig, hack)
    default = parl_reward()
    assert default([hacked])[0] < default([tr])[0]


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"value": None}, "empty result"),
        ({"value": ""}, "empty result"),
        ({"value": 2390}, "no work"),  # a plausible answer, but nothing computed it
        ({"record_value": False}, "no work"),  # a bare return (no value recorded)
        ({"value": 2390, "work": True, "consumed": False}, "does not reach the answer"),
    ],
)
def test_every_kind_of_spurious_subagent_finishes_nothing(options, reason):
    tr = _recorded()
    hacked = _with_extra(tr, 20, **options)
    assert {s.reason for s in subtasks(hacked)[8:]} == {reason}
    base, c = parl_components(tr), parl_components(hacked)
    assert c["r_finish"] == pytest.approx(8 / 28)
    assert c["r_parallel"] <= base["r_parallel"] + 1e-12
    assert (
        parl_reward(lambda1=1.0, lambda2=0.1)([hacked])[0]
        <= parl_reward(lambda1=1.0, lambda2=0.1)([tr])[0]
    )


def test_a_subagent_whose_work_reaches_the_answer_counts():
    tr = _recorded()
    more = _with_extra(tr, 1, value=2390, work=True, consumed=True)
    tasks = subtasks(more)
    assert len(tasks) == 9
    extra = next(s for s in tasks if s.agent == "extra1")
    assert extra.finished and extra.returned == "x1_ret"
    c = parl_components(more)
    assert c["r_finish"] == 1.0 and c["finished_subtasks"] == 9
    # its step is off the critical path: parallelism rises, as it should for real work
    assert c["r_parallel"] > parl_components(tr)["r_parallel"]


def test_handmade_wide_trace_with_trivial_subagents():
    """Three workers of 2, 5 and 3 steps, plus 20 that return at once into the aggregate."""

    def build(trivial: int) -> Trace:
        b = TraceBuilder()
        plan = b.llm("lead", step=0)
        names = [f"w{i}" for i in range(3)] + [f"t{i}" for i in range(trivial)]
        sp = {n: b.spawn("lead", n, after=[plan], step=1) for n in names}
        rets = []
        for n, k in zip(names, (2, 5, 3), strict=False):
            prev = sp[n]
            for s in range(k):
                prev = b.llm(n, after=[prev], dur=1.0, step=s)
            rets.append(b.ret(n, "lead", after=[prev], content="part", step=k))
        rets += [b.ret(n, "lead", after=[sp[n]], step=0) for n in names[3:]]
        agg = b.aggregate("lead", rets, content="sum", step=2)
        b.stop("lead", after=[agg], step=3)
        return b.build()

    real, hacked = parl_components(build(0)), parl_components(build(20))
    assert real["r_finish"] == 1.0
    assert hacked["r_finish"] == pytest.approx(3 / 23)
    assert hacked["total_steps"] == real["total_steps"] + 20
    assert hacked["r_parallel"] == pytest.approx(real["r_parallel"])


def test_swarm_workers_report_through_messages_and_count():
    """Swarm workers deliver by message to an aggregator; the aggregator combines them."""
    tr = run("swarm", "search", agents=4, seed=3).trace
    tasks = subtasks(tr)
    assert {s.agent for s in tasks} >= {"aggregator1", "worker1"}
    assert all(s.finished for s in tasks)


def test_failed_and_unreturned_subagents_finish_nothing():
    tr = run("centralized", "arith", agents=4, seed=1, max_steps=4).trace
    assert {s.reason for s in subtasks(tr)} == {"no result"}
    assert parl_components(tr)["r_finish"] == 0.0
    b = TraceBuilder()
    sp = b.spawn("lead", "w", step=0)
    work = b.llm("w", after=[sp], step=0)
    ret = b.ret("w", "lead", after=[work], content="x", step=0)
    b.add("despawn", "w", after=[ret], error="crashed", to="lead")
    b.aggregate("lead", [ret], step=1)
    (task,) = subtasks(b.build())
    assert (task.finished, task.reason) == (False, "failed")


def test_respawned_agent_is_judged_per_episode():
    """An agent spawned twice: work in the first episode does not finish the second."""
    b = TraceBuilder()
    s1 = b.spawn("lead", "w", step=0)
    work = b.llm("w", after=[s1], dur=1.0, step=0)
    r1 = b.ret("w", "lead", after=[work], content="a", step=0)
    s2 = b.spawn("lead", "w", after=[r1], step=1)
    r2 = b.ret("w", "lead", after=[s2], content="a", step=1)
    agg = b.aggregate("lead", [r1, r2], step=2)
    b.stop("lead", after=[agg], step=3)
    first, second = subtasks(b.build())
    assert (first.finished, second.finished, second.reason) == (True, False, "no work")


def test_busy_work_limit_is_as_documented() -> None:
    """Sub-agents whose one LLM call feeds the aggregate without changing the answer pass the
    structural checks (the documented limit): the figures in the PARL docstring hold."""
    from orchestrace.rewards import parl

    tr = _recorded()
    busy = _with_extra(tr, 20, value=2390, work=True, consumed=True)
    a, b = parl.parl_components(tr), parl.parl_components(busy)
    assert (round(a["r_parallel"], 2), round(b["r_parallel"], 2), b["r_finish"]) == (0.7, 0.9, 1.0)
    r = parl.parl_reward(lambda1=0.1, lambda2=0.1)
    assert (round(r([tr])[0], 2), round(r([busy])[0], 2)) == (1.17, 1.19)
    assert "from 0.70 to 0.90" in (parl.__doc__ or "") and "1.17 to 1.19" in (parl.__doc__ or "")
