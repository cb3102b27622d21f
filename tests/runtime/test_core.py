"""The Context API records the right events, edges, steps and times; budgets and failures."""

import asyncio

import pytest

from orchestrace import ConfigError, check_trace, critical_path, summarize
from orchestrace.runtime import RunConfig, Runtime, make_task
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.clock import run_virtual
from orchestrace.testing import MockModel


def go(root, *, task=None, backend=None, **cfg):
    rt = Runtime(
        task=task or make_task("arith", seed=0, size=8),
        backend=backend or SimBackend(seed=1),
        config=RunConfig(**cfg),
        topology="centralized",
    )
    return rt, run_virtual(rt.run(root))


def edges_into(trace, eid):
    return sorted((e.src, e.type) for e in trace.edges if e.dst == eid)


def test_spawn_wait_return_aggregate_edges():
    async def worker(ctx, part):
        r = await ctx.generate("solve", ctx.payload(part))
        return r.answer

    async def root(ctx):
        kids = [await ctx.spawn("worker", worker, part=p) for p in ctx.task.subtasks(2)]
        results = await ctx.wait(kids)
        return await ctx.aggregate(results, "combine")

    _rt, tr = go(root)
    assert check_trace(tr) == []
    by_type = {}
    for e in tr.events:
        by_type.setdefault(e.type, []).append(e)
    s1, s2 = by_type["spawn"]
    assert (s1.agent, s1.to, s1.decision, s1.role) == ("orchestrator", "worker1", "spawn", "worker")
    first_w1 = next(e for e in tr.events if e.agent == "worker1")
    assert edges_into(tr, first_w1.id) == [(s1.id, "spawn")]
    agg = by_type["aggregate"][0]
    rets = [e.id for e in by_type["return"]]
    assert edges_into(tr, agg.id) == sorted([(s2.id, "causal")] + [(r, "aggregate") for r in rets])
    stop = by_type["orchestrator_decision"][0]
    assert stop.decision == "stop" and stop.attrs["answer"] == tr.meta["result"]["answer"]
    # the two spawns share the orchestrator's step; the aggregate waited, so it is a new step
    assert s1.step == s2.step == 0 and agg.step == 1
    # time: the aggregate starts when the slower worker returned
    assert agg.t == pytest.approx(max(e.t for e in by_type["return"]))
    assert critical_path(tr).length == pytest.approx(summarize(tr)["makespan_s"])


def test_messages_receive_and_steps():
    async def listener(ctx):
        msg = await ctx.receive()
        await ctx.generate("solve", {"prompt": msg.content, "truth": 1, "hardness": 0})
        return msg.data

    async def root(ctx):
        h = await ctx.spawn("worker", listener)
        await ctx.send(h.name, "hello", data={"x": 1})
        (r,) = await ctx.wait([h])
        return r.value

    rt, tr = go(root)
    msg = next(e for e in tr.events if e.type == "message")
    assert (msg.agent, msg.from_, msg.to, msg.content, msg.decision) == (
        "orchestrator",
        "orchestrator",
        "worker1",
        "hello",
        "communicate",
    )
    llm = next(e for e in tr.events if e.type == "llm_call")
    assert (msg.id, "message") in edges_into(tr, llm.id)
    assert rt.answer == {"x": 1} and check_trace(tr) == []


def test_tool_calls_and_failures():
    async def root(ctx):
        ok = await ctx.call_tool("calc", {"expression": "2*(3+4)"})
        bad = await ctx.call_tool("calc", {"expression": "import os"})
        missing = await ctx.call_tool("nope", {})
        return [ok.value, bad.ok, missing.error]

    rt, tr = go(root)
    assert rt.answer[0] == 14 and rt.answer[1] is False and "unknown tool 'nope'" in rt.answer[2]
    calls = [e for e in tr.events if e.type == "tool_call"]
    results = [e for e in tr.events if e.type == "tool_result"]
    assert len(calls) == len(results) == 3
    assert results[0].content == "14" and results[0].agent == "calc" and results[0].error is None
    assert results[1].error.startswith("ValueError: cannot evaluate 'import os'")
    assert edges_into(tr, results[0].id) == [(calls[0].id, "tool_dependency")]
    assert (results[0].id, "causal") in edges_into(tr, calls[1].id)
    assert calls[0].dur > 0 and check_trace(tr) == []


def test_injected_tool_failures_and_on_error_stop():
    async def root(ctx):
        r = await ctx.call_tool("calc", {"expression": "1+1"})
        await ctx.call_tool("calc", {"expression": "1+2"})
        return r.ok

    rt, tr = go(root, tool_failure_rate=1.0)
    assert rt.answer is False
    assert all(
        e.error == "RuntimeError: injected tool failure"
        for e in tr.events
        if e.type == "tool_result"
    )
    rt, tr = go(root, tool_failure_rate=1.0, on_error="stop")
    assert tr.meta["result"]["stop_reason"].startswith("tool failure")
    assert sum(e.type == "tool_call" for e in tr.events) == 1
    assert check_trace(tr) == []


def test_agent_exception_is_recorded_and_run_continues():
    async def bad(ctx):
        await ctx.generate("solve", {"truth": 1, "hardness": 0})
        raise ValueError("model output unparsable")

    async def good(ctx):
        return 7

    async def root(ctx):
        hs = [await ctx.spawn("worker", bad), await ctx.spawn("worker", good)]
        results = await ctx.wait(hs)
        return [(r.ok, r.value, r.error) for r in results]

    rt, tr = go(root)
    assert rt.answer == [(False, None, "ValueError: model output unparsable"), (True, 7, None)]
    death = next(e for e in tr.events if e.type == "despawn")
    assert death.agent == "worker1" and death.error == "ValueError: model output unparsable"
    stop = tr.events[-1]
    assert (death.id, "return") in edges_into(tr, stop.id)
    assert check_trace(tr) == []


@pytest.mark.parametrize(
    "budget,value,expect",
    [
        ("max_agents", 3, "budget exceeded: max_agents (3)"),
        ("max_depth", 1, "budget exceeded: max_depth (1)"),
        ("max_steps", 5, "budget exceeded: max_steps (5)"),
        ("max_tokens", 500, "budget exceeded: max_tokens (500)"),
        ("max_wall_s", 2.5, "budget exceeded: max_wall_s (2.5)"),
    ],
)
def test_budgets_end_cleanly_with_a_stop_event(budget, value, expect):
    async def deep(ctx, n):
        if n:
            h = await ctx.spawn("worker", deep, n=n - 1)
            await ctx.wait([h])
        for _ in range(3):
            await ctx.generate("solve", {"truth": 1, "hardness": 0, "prompt": "x" * 400})
        return 1

    async def root(ctx):
        hs = [await ctx.spawn("worker", deep, n=2) for _ in range(3)]
        await ctx.wait(hs)
        return 1

    _rt, tr = go(root, **{budget: value})
    stop = tr.events[-1]
    assert (stop.type, stop.decision, stop.content) == ("orchestrator_decision", "stop", expect)
    assert stop.attrs["budget"] == budget
    assert tr.metrics["budget_exceeded"] == 1.0
    assert check_trace(tr) == []


def test_deadlock_is_recorded_not_hung():
    async def stuck(ctx):
        await ctx.receive()  # nobody ever sends

    async def root(ctx):
        h = await ctx.spawn("worker", stuck)
        await ctx.wait([h])

    _rt, tr = go(root)
    assert tr.meta["result"]["stop_reason"].startswith("deadlock")
    assert tr.events[-1].decision == "stop" and check_trace(tr) == []


def test_actions_after_return_are_refused():
    async def worker(ctx):
        await ctx.return_(1)
        await ctx.send("orchestrator", "late")

    async def root(ctx):
        (r,) = await ctx.wait([await ctx.spawn("worker", worker)])
        return r.value

    rt, tr = go(root)
    assert rt.answer == 1
    late = [e for e in tr.events if e.agent == "worker1"]
    assert [e.type for e in late] == ["return", "despawn"]  # the misuse is recorded, not lost
    assert late[1].error == (
        "RuntimeError_: agent 'worker1' already returned; it cannot act any more"
    )


def test_backend_failures_are_recorded():
    mock = MockModel([RuntimeError("server exploded")])

    async def root(ctx):
        r = await ctx.generate("solve", {"prompt": "q"})
        return r.error

    rt, tr = go(root, backend=mock)
    llm = next(e for e in tr.events if e.type == "llm_call")
    assert llm.error == "server exploded" and rt.answer == "server exploded"


def test_aggregate_methods():
    async def root(ctx):
        votes = await ctx.aggregate([1, 2, 2, 3], "vote")
        first = await ctx.aggregate([None, 5], "first")
        trust = await ctx.aggregate([1, 2, 2], "trust", weights=[5, 1, 1])
        judged = await ctx.aggregate([10, 20], "judge", payload={"truth": 20, "prompt": "q"})
        return [votes, first, trust, judged]

    rt, tr = go(root, backend=SimBackend(seed=0, skills={"orchestrator": 1.0}))
    assert rt.answer == [2, None, 1, 20]

    async def bad(ctx):
        await ctx.aggregate([1], "median")

    rt, tr = go(bad)
    assert tr.events[0].type == "despawn" and "unknown aggregation method 'median'" in (
        tr.events[0].error
    )
    assert tr.meta["result"]["stop_reason"].startswith("agent orchestrator failed: ConfigError")
    assert isinstance(ConfigError("x"), ValueError)


def test_names_are_local_to_parents():
    async def leaf(ctx):
        return ctx.name

    async def mid(ctx):
        (r,) = await ctx.wait([await ctx.spawn("worker", leaf)])
        return r.value

    async def root(ctx):
        rs = await ctx.wait([await ctx.spawn("manager", mid), await ctx.spawn("manager", mid)])
        return [r.value for r in rs]

    rt, _ = go(root)
    assert rt.answer == ["manager1.worker1", "manager2.worker1"]


def test_receive_timeout_is_virtual():
    async def root(ctx):
        msg = await ctx.receive(timeout=120)
        return (msg, ctx.now)

    rt, _ = go(root)
    assert rt.answer == (None, 120.0)


def test_processor_failures_never_break_a_run():
    from orchestrace.runtime.recorder import Processor, Recorder

    class Broken(Processor):
        def on_event(self, event, edges):
            raise OSError("disk full")

    async def root(ctx):
        await ctx.generate("solve", {"truth": 1, "hardness": 0})
        return 1

    rec = Recorder([Broken()])
    rt = Runtime(task=make_task("arith", size=4), backend=SimBackend(), recorder=rec)
    tr = run_virtual(rt.run(root))
    assert rt.answer == 1 and tr.n_events == 2
    assert rec.failures == [
        "processor Broken failed: on_event raised OSError: disk full "
        "(2 calls failed, first at event e1)"
    ]
    assert tr.meta["processor_failures"] == [
        {
            "processor": "Broken",
            "method": "on_event",
            "error": "OSError: disk full",
            "count": 2,
            "event": "e1",
        }
    ]
    assert asyncio.iscoroutinefunction(root)


@pytest.mark.parametrize(
    ("topology", "task", "kw"),
    [
        ("swarm", "wide-search", {"agents": 6, "seed": 2, "task_size": 24, "gossip": 0.7}),
        ("debate", "arith", {"agents": 3, "seed": 1, "rounds": 2, "task_size": 16}),
        ("hierarchical", "arith", {"agents": 7, "seed": 3, "task_size": 24}),
        ("centralized", "multihop", {"agents": 3, "seed": 4}),
    ],
)
def test_costs_kept_while_recording_equal_the_costs_of_the_events(topology, task, kw):
    from orchestrace.runtime import run
    from orchestrace.trace.build import default_costs

    tr = run(topology, task, **kw).trace
    assert tr.costs == default_costs(tr.events)
    assert tr.costs["tokens"] > 0 and tr.costs["wall_clock_s"] > 0
