"""PARL Critical Steps: steps, stages and episodes, on hand-built traces."""

import numpy as np

from orchestrace import TraceBuilder
from orchestrace.trace.steps import critical_steps, step_structure


def worker(b, name, after, n_steps, parent="lead"):
    prev = after
    for k in range(n_steps):
        prev = b.llm(name, after=[prev], dur=1.0, step=k)
    return b.ret(name, parent, after=[prev], step=n_steps)


def test_critical_steps_lone_agent():
    b = TraceBuilder()
    for k in range(5):
        b.llm("solo", dur=1.0, step=k)
    assert critical_steps(b.build()) == 5


def test_critical_steps_one_stage_takes_longest_branch():
    b = TraceBuilder()
    plan = b.llm("lead", step=0)
    sp = [b.spawn("lead", f"w{i}", after=[plan], step=1) for i in range(3)]
    rets = [worker(b, f"w{i}", sp[i], k) for i, k in enumerate((2, 5, 3))]
    b.aggregate("lead", rets, step=2)
    # stage 1: plan + spawn turn (2 main steps) + longest worker (5 llm + return = 6)
    # stage 2: aggregate waits for returns: 1 main step
    assert critical_steps(b.build()) == 2 + 6 + 1


def test_critical_steps_sequential_stages_add_up():
    b = TraceBuilder()
    s1 = b.spawn("lead", "w1", step=0)
    r1 = worker(b, "w1", s1, 3)
    s2 = b.spawn("lead", "w2", after=[r1], step=1)  # waits for w1 -> new stage
    r2 = worker(b, "w2", s2, 2)
    b.aggregate("lead", [r2], step=2)
    assert critical_steps(b.build()) == (1 + 4) + (1 + 3) + 1


def test_critical_steps_without_step_numbers_counts_each_action():
    b = TraceBuilder()
    sp = [b.spawn("lead", f"w{i}") for i in range(3)]
    rets = [b.ret(f"w{i}", "lead", after=[s]) for i, s in enumerate(sp)]
    b.aggregate("lead", rets)
    # three separate spawn steps in one stage + one-step workers; then the aggregate
    assert critical_steps(b.build()) == (3 + 1) + 1


def test_critical_steps_nested_hierarchy():
    b = TraceBuilder()
    s = b.spawn("lead", "mgr", step=0)
    subs = [b.spawn("mgr", f"w{i}", after=[s], step=0) for i in range(2)]
    rets = [worker(b, f"w{i}", subs[i], k, parent="mgr") for i, k in enumerate((4, 1))]
    agg = b.aggregate("mgr", rets, step=1)
    r = b.ret("mgr", "lead", after=[agg], step=2)
    b.aggregate("lead", [r], step=1)
    # mgr: stage (1 spawn step + worker 5) + stage (aggregate + return: 2) = 8
    # lead: (1 + 8) + 1
    assert critical_steps(b.build()) == 10


def test_critical_steps_delegations_open_episodes():
    b = TraceBuilder()
    s = b.spawn("lead", "w", step=0)
    a1 = b.llm("w", after=[s], step=0)
    r1 = b.ret("w", "lead", after=[a1], step=1)
    d = b.delegate("lead", "w", "second task", after=[r1], step=1)
    a2 = b.llm("w", after=[d], step=2)
    a3 = b.llm("w", after=[a2], step=3)
    r2 = b.ret("w", "lead", after=[a3], step=4)
    b.aggregate("lead", [r2], step=2)
    # stage 1: spawn + episode 1 (2 steps); stage 2: delegate + episode 2 (3 steps); aggregate
    assert critical_steps(b.build()) == (1 + 2) + (1 + 3) + 1


def test_graph_methods_and_functional_api_agree(medium_trace):
    g = medium_trace.graph
    s = step_structure(g)
    for name in ("stage_main", "stage_episode", "episode_parent_stage", "episode_agent"):
        assert np.array_equal(getattr(g.step_structure(), name), getattr(s, name)), name
    assert critical_steps(medium_trace) == critical_steps(g) == g.critical_steps()
    assert s.critical_steps() == g.critical_steps() <= s.total_steps
