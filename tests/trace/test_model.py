from typing import get_args

import msgspec
import pytest

from orchestrace.trace.model import (
    CreditUnit,
    Decision,
    DecisionName,
    Edge,
    EdgeType,
    EdgeTypeName,
    Event,
    EventType,
    EventTypeName,
    Topology,
    TopologyName,
    Trace,
)


def test_literal_names_match_enums():
    assert get_args(EventTypeName) == tuple(EventType)
    assert get_args(EdgeTypeName) == tuple(EdgeType)
    assert get_args(DecisionName) == tuple(Decision)
    assert get_args(TopologyName) == tuple(Topology)


def test_event_types_superset_of_survey_schema():
    survey = {
        "orchestrator_decision",
        "spawn",
        "despawn",
        "message",
        "tool_call",
        "tool_result",
        "return",
        "aggregate",
        "human_intervention",
        "safety_event",
    }
    assert survey <= {t.value for t in EventType}
    assert {t.value for t in EdgeType} == {
        "temporal",
        "causal",
        "spawn",
        "message",
        "tool_dependency",
        "return",
        "aggregate",
        "safety_flow",
    }


def test_decisions_are_o1_to_o5():
    assert [d.code for d in Decision] == ["O1", "O2", "O3", "O4", "O5"]
    assert Decision.from_code("o5") is Decision.STOP
    with pytest.raises(ValueError, match=r"O1\.\.O5"):
        Decision.from_code("O9")


def test_eight_credit_units():
    assert [u.value for u in CreditUnit] == [
        "team",
        "orchestrator",
        "role",
        "agent",
        "turn",
        "message",
        "action",
        "token",
    ]


def test_event_json_names_and_defaults():
    e = Event(id="e1", t=1.0, type="message", agent="a", from_="a", to="b")
    data = msgspec.json.encode(e)
    assert data == b'{"id":"e1","t":1.0,"type":"message","agent":"a","from":"a","to":"b"}'
    back = msgspec.json.decode(data, type=Event)
    assert back == e and back.end == 1.0 and back.tokens == 0


def test_decode_enforces_ranges_and_names():
    bad = [
        b'{"id":"e1","t":-1,"type":"message","agent":"a"}',
        b'{"id":"","t":0,"type":"message","agent":"a"}',
        b'{"id":"e1","t":0,"type":"nope","agent":"a"}',
        b'{"id":"e1","t":0,"type":"message","agent":"a","tokens_in":-3}',
        b'{"id":"e1","t":0,"type":"message","agent":"a","oops":1}',
    ]
    for doc in bad:
        with pytest.raises(msgspec.ValidationError):
            msgspec.json.decode(doc, type=Event)


def test_trace_event_lookup_and_replace(small_trace):
    assert small_trace.event("e2").type == "spawn"
    with pytest.raises(KeyError, match="no event has id 'zz'"):
        small_trace.event("zz")
    t2 = small_trace.replace(rewards={"team": 0.0})
    assert t2.rewards == {"team": 0.0} and small_trace.rewards == {"team": 1.0}
    assert t2.events is small_trace.events


def test_trace_is_frozen(small_trace):
    with pytest.raises(AttributeError):
        small_trace.trace_id = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        small_trace.events[0].t = 3.0  # type: ignore[misc]


def test_edge_positional():
    assert Edge("a", "b", "causal") == Edge(src="a", dst="b", type="causal")


def test_decoded_flag(small_trace):
    from orchestrace import dumps, loads

    assert not small_trace.decoded
    assert loads(dumps(small_trace)).decoded
    assert not loads(dumps(small_trace)).replace(trace_id="x").decoded
    assert isinstance(Trace, type)
