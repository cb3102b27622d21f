import itertools
import random

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrace import CycleError, Edge, Event, Trace, TraceBuilder, critical_path, critical_steps
from orchestrace.trace.graph import DEPENDENCY_EDGES, speedup, work


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


def test_spawn_depth_and_agents(medium_trace, small_trace):
    assert small_trace.graph.spawn_depth() == 1
    g = small_trace.graph
    assert sorted(g.names[c] for c in g.agent_codes()) == ["lead", "w0", "w1", "w2"]


def test_checking_a_trace_leaves_the_order_of_its_names_alone():
    # the spawn check reads only the spawns' targets; names it meets first must not take
    # codes before names an earlier event's `to` gives (the order of names, agent codes and
    # the viewer's lanes is the whole `to` column's)
    from orchestrace.trace.check import check_trace

    events = (
        Event(id="e1", t=0.0, type="message", agent="lead", to="y"),
        Event(id="e2", t=1.0, type="spawn", agent="lead", to="x"),
        Event(id="e3", t=2.0, type="spawn", agent="lead", to="y"),
    )
    edges = (Edge("e1", "e2", "causal"), Edge("e2", "e3", "causal"))

    def fresh() -> Trace:
        return Trace(trace_id="t", task_id="k", events=events, edges=edges)

    unchecked = fresh()
    checked = fresh()
    assert not [p for p in check_trace(checked) if p.severity == "error"]
    assert checked.graph.names == unchecked.graph.names == ["lead", "y", "x"]
    assert checked.graph.agent_codes().tolist() == unchecked.graph.agent_codes().tolist()


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("dur", 10**400, "beyond the largest float; record dur as a finite number >= 0"),
        ("t", 10**400, "beyond the largest float; record t as a finite number >= 0"),
        ("tokens_in", 10**5000, "about 5,001 digits, beyond the largest count 2^63-1"),
    ],
    ids=["dur", "t", "tokens_in"],
)
def test_a_number_too_large_for_its_column_says_what_the_column_holds(field, value, says):
    from orchestrace.errors import TraceValidationError

    kw = {"t": 0.0, field: value}
    tr = Trace(
        trace_id="t",
        task_id="k",
        events=(Event(id="e1", type="message", agent="a", **kw),),
    )
    with pytest.raises(TraceValidationError, match=None) as err:
        tr.graph.critical_path() if field == "dur" else getattr(tr.graph, field)
    assert says in str(err.value)
    assert f"$.events[0].{field}" in str(err.value)


@pytest.mark.parametrize(
    ("field", "value", "read", "says"),
    [
        ("agent", [1], "agent_code", "agent is [1], a list; record agent as a string"),
        ("to", [1], "to_code", "to is [1], a list; record to as a string or None"),
        ("t", "soon", "t", "t is 'soon', a str; record t as a number >= 0"),
        ("dur", 1j, "dur", "dur is 1j, a complex; record dur as a number >= 0"),
    ],
)
def test_a_value_of_the_wrong_type_is_named_when_its_column_is_read(field, value, read, says):
    """A trace built in Python holds what it is given: the column read names the value."""
    from orchestrace.errors import TraceValidationError
    from orchestrace.trace.check import check_graph

    kw = {"id": "e1", "t": 0.0, "type": "message", "agent": "a", field: value}
    tr = Trace(trace_id="t", task_id="k", events=(Event(**kw),))
    with pytest.raises(TraceValidationError, match=None) as err:
        getattr(tr.graph, read)
    assert says in str(err.value) and f"$.events[0].{field}" in str(err.value)
    # the checks of a graph raise it as the trace's problem, not as an internal error
    fresh = Trace(trace_id="t", task_id="k", events=(Event(**kw),))
    with pytest.raises(TraceValidationError):
        check_graph(fresh.graph, fresh)


def test_columns_read_by_several_threads_at_once_are_coded_once():
    """Agent and target names are coded on first use, by one thread: never twice."""
    import sys
    import threading

    from orchestrace import generate_trace

    base = generate_trace(agents=400, steps=20_000, depth=3, seed=5)
    want = Trace(trace_id="w", task_id="k", events=base.events, edges=base.edges).graph
    want_names, want_codes = list(want.names), want.agent_code.tolist()
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(4):
            g = Trace(trace_id="w", task_id="k", events=base.events, edges=base.edges).graph
            readers = [
                threading.Thread(target=lambda g=g, k=k: g.names if k % 2 else g.agent_code)
                for k in range(4)
            ]
            for r in readers:
                r.start()
            for r in readers:
                r.join()
            assert g.names == want_names
            assert g.agent_code.tolist() == want_codes
    finally:
        sys.setswitchinterval(old)
