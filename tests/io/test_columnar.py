"""The columnar compile: Arrow columns give the same graph as the trace's own records."""

import numpy as np
import pyarrow as pa
import pytest

from orchestrace.io._columnar import from_columns


def test_from_columns_matches_from_trace(medium_trace):
    tr = medium_trace
    ev = tr.events

    def col(name, attr=None):
        return pa.array([getattr(e, attr or name) for e in ev])

    g = from_columns(
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
        from_columns(["a"], [0.0], [0.0], ["bogus"], ["x"], [], [], [])
