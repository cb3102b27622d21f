import pytest

from orchestrace import ConfigError, TraceBuilder, check_trace


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
