import itertools
import random

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrace import CycleError, Edge, Event, Trace, TraceBuilder, critical_path, critical_steps
from orchestrace.trace.graph import DEPENDENCY_EDGES, TraceGraph, speedup, work


def make_dag(n, edges, durs, order):
    """Events named by node; recorded in `order` (a permutation)."""
    events = tuple(
        Event(id=f"n{i}", t=0.0, type="message", agent=f"a{i % 3}", dur=durs[i]) for i in order
    )
    return Trace(
        trace_id="t",
        task_id="x",
        events=events,
        edges=tuple(Edge(f"n{u}", f"n{v}", "causal") for u, v in edges),
    )


def brute_longest(n, edges, durs):
    succ = {i: [] for i in range(n)}
    for u, v in edges:
        succ[u].append(v)
    memo = {}

    def best(u):
        if u not in memo:
            memo[u] = durs[u] + max((best(v) for v in succ[u]), default=0.0)
        return memo[u]

    return max(best(u) for u in range(n))


@st.composite
def dags(draw):
    n = draw(st.integers(1, 14))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    edges = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=30)) if pairs else []
    durs = draw(
        st.lists(
            st.floats(0, 10, allow_nan=False).map(lambda x: round(x, 3)), min_size=n, max_size=n
        )
    )
    order = draw(st.permutations(list(range(n))))
    return n, edges, durs, order


@settings(max_examples=300, deadline=None)
@given(dags())
def test_critical_path_matches_brute_force(case):
    n, edges, durs, order = case
    tr = make_dag(n, edges, durs, order)
    cp = critical_path(tr)
    assert cp.length == pytest.approx(brute_longest(n, edges, durs))
    # the reported path is a real chain whose durations add up to the length
    nodes = [int(x[1:]) for x in cp.ids]
    assert all((u, v) in set(edges) for u, v in itertools.pairwise(nodes))
    assert sum(durs[i] for i in nodes) == pytest.approx(cp.length)
    assert work(tr) == pytest.approx(sum(durs))
    if cp.length > 0:
        assert speedup(tr) == pytest.approx(sum(durs) / cp.length)


def test_critical_path_matches_networkx():
    rng = random.Random(3)
    n = 3000
    edges = sorted(
        {(u, v) for v in range(1, n) for u in rng.sample(range(max(0, v - 40), v), min(2, v))}
    )
    durs = [round(rng.random(), 4) for _ in range(n)]
    tr = make_dag(n, edges, durs, range(n))
    g = nx.DiGraph()
    for u, v in edges:
        g.add_edge(u, v, weight=durs[u])
    for u in range(n):
        g.add_edge(u, "sink", weight=durs[u])
    path = nx.dag_longest_path(g)
    expected = nx.path_weight(g, path, "weight")
    assert critical_path(tr).length == pytest.approx(expected)


def test_only_dependency_edges_count():
    b = TraceBuilder(chain=False)
    a = b.add("message", "x", dur=5.0)
    c = b.add("message", "y", dur=1.0, t=0.0)
    b.edge(a, c, "temporal")
    tr = b.build()
    assert critical_path(tr).length == 5.0
    assert critical_path(tr, edge_types={"temporal"}).length == 6.0
    assert "temporal" not in DEPENDENCY_EDGES and "tool_dependency" in DEPENDENCY_EDGES


def test_cycle_detected_with_events_named():
    tr = make_dag(3, [(0, 1), (1, 2)], [1, 1, 1], [0, 1, 2])
    tr = tr.replace(edges=(*tr.edges, Edge("n2", "n0", "causal")))
    with pytest.raises(CycleError) as err:
        critical_path(tr)
    assert err.value.cycle[0] == err.value.cycle[-1]
    assert "'n0' -> 'n1' -> 'n2' -> 'n0'" in str(err.value)
    assert tr.graph.find_cycle() is not None


def test_self_loop_is_a_cycle():
    tr = make_dag(2, [(0, 1)], [1, 1], [0, 1])
    tr = tr.replace(edges=(Edge("n1", "n1", "causal"),))
    assert tr.graph.find_cycle() == [1, 1]


def test_empty_trace():
    tr = Trace(trace_id="t", task_id="x", events=())
    assert critical_path(tr).length == 0.0 and work(tr) == 0.0 and speedup(tr) == 1.0
    assert critical_steps(tr) == 0


def test_from_columns_matches_from_trace(medium_trace):
    import pyarrow as pa

    tr = medium_trace
    ev = tr.events

    def col(name, attr=None):
        return pa.array([getattr(e, attr or name) for e in ev])

    g = TraceGraph.from_columns(
        col("id"),
        col("t"),
        col("dur"),
        col("type"),
        col("agent"),
        pa.array([e.src for e in tr.edges]),
        pa.array([e.dst for e in tr.edges]),
        pa.array([e.type for e in tr.edges]),
        to=col("to"),
        role=col("role"),
        tool=col("tool"),
        decision=col("decision"),
        step=col("step"),
        tokens_in=col("tokens_in"),
        tokens_out=col("tokens_out"),
        cost=col("cost"),
    )
    a, b = tr.graph, g
    assert a.critical_path().ids == b.critical_path().ids
    assert a.critical_steps() == b.critical_steps()
    assert a.spawn_depth() == b.spawn_depth() == 2
    assert sorted(np.asarray(a.names)[a.agent_codes()]) == sorted(
        np.asarray(b.names)[b.agent_codes()]
    )
    with pytest.raises(ValueError, match="unknown event type"):
        TraceGraph.from_columns(["a"], [0.0], [0.0], ["bogus"], ["x"], [], [], [])


# ---------------------------------------------------------------- critical steps (PARL)
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


def test_spawn_depth_and_agents(medium_trace, small_trace):
    assert small_trace.graph.spawn_depth() == 1
    g = small_trace.graph
    assert sorted(g.names[c] for c in g.agent_codes()) == ["lead", "w0", "w1", "w2"]
