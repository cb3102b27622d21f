import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrace import ConfigError, Event, TraceBuilder, check_trace
from orchestrace.trace.build import default_costs


def test_builder_infers_edges_and_times(small_trace):
    tr = small_trace
    kinds = {(e.src, e.dst): e.type for e in tr.edges}
    assert kinds[("e1", "e2")] == "causal"  # plan -> first spawn (same agent)
    assert kinds[("e2", "e5")] == "spawn"  # spawn -> child's tool call
    assert kinds[("e5", "e6")] == "tool_dependency"
    assert any(k == "aggregate" for k in kinds.values())
    assert check_trace(tr) == []
    w2_call = next(e for e in tr.events if e.type == "tool_call" and e.agent == "w2")
    assert w2_call.t == 1.0 and w2_call.dur == 3.0
    agg = next(e for e in tr.events if e.type == "aggregate")
    assert agg.t == 4.0  # waits for the slowest worker
    assert tr.costs["tool_calls"] == 3 and tr.costs["tokens"] == 120
    assert tr.costs["wall_clock_s"] == 4.5


def test_builder_default_trace_id_is_content_hash():
    def make(x):
        b = TraceBuilder(task_id="t")
        b.message("a", "b", content=x)
        return b.build().trace_id

    assert make("1") == make("1") != make("2")


def test_builder_rejects_unknown_after_and_duplicate_id():
    b = TraceBuilder()
    b.add("message", "a", id="m")
    with pytest.raises(ConfigError, match="unknown event 'zz'"):
        b.add("message", "a", after=["zz"])
    with pytest.raises(ConfigError, match="already used"):
        b.add("message", "a", id="m")
    with pytest.raises(ValueError):
        b.add("bogus", "a")


def test_builder_explicit_edge_types_and_no_chain():
    b = TraceBuilder(chain=False)
    x = b.add("message", "a")
    y = b.add("message", "a", after=[(x, "temporal")])
    z = b.add("message", "a")
    tr = b.build()
    assert [(e.src, e.dst, e.type) for e in tr.edges] == [(x, y, "temporal")]
    assert tr.event(z).t == 0.0


# ---------------------------------------------------------------------- default_costs
def _costs_by_loop(events):
    """The definition: one pass over the events in order, Python arithmetic throughout."""
    from orchestrace.trace.build import _costs_of_totals

    tokens, tool_calls, messages, money = 0, 0, 0, 0.0
    t0, t1 = float("inf"), 0.0
    for e in events:
        tokens += e.tokens_in + e.tokens_out
        money += e.cost
        if e.type == "tool_call":
            tool_calls += 1
        elif e.type == "message":
            messages += 1
        t0 = min(t0, e.t)
        t1 = max(t1, e.t + e.dur)
    return _costs_of_totals(tokens, money, tool_calls, messages, t0, t1)


_floats = st.sampled_from([0.0, -0.0, 1e-9, 0.1, 0.7, 3.3, 1e16, 1e300, math.inf, math.nan])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.builds(
            lambda i, **kw: Event(id=f"e{i}", agent="a", **kw),
            st.integers(0, 99),
            t=_floats | st.floats(0, 1e6),
            type=st.sampled_from(["tool_call", "message", "spawn", "llm_call"]),
            dur=_floats,
            cost=_floats | st.floats(0, 1),
            tokens_in=st.integers(0, 2**63 - 1),
            tokens_out=st.integers(0, 10),
        ),
        max_size=12,
    )
)
def test_default_costs_gives_the_loops_totals_bit_for_bit(events):
    # the costs are summed one after another (not compensated), NaN and inf as the loop has them
    expected = repr(_costs_by_loop(events))
    assert repr(default_costs(events)) == expected
    assert repr(default_costs(iter(events))) == expected  # any iterable
