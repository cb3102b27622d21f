"""Conformance with the public survey schema (uses ../shared/reference when present)."""

import json

import jsonschema
import pytest

from orchestrace import dumps, generate_trace, load, loads
from orchestrace.io import from_upstream, to_upstream


@pytest.fixture
def upstream_schema(reference):
    return json.loads((reference / "trace_schema.json").read_text())


def test_example_imports_without_loss(reference):
    raw = json.loads((reference / "example_trace.json").read_text())
    tr = load(reference / "example_trace.json")
    assert tr.trace_id == raw["trace_id"] and tr.topology == raw["topology"]
    assert [e.id for e in tr.events] == [e["id"] for e in raw["events"]]
    assert [(e.src, e.dst, e.type) for e in tr.edges] == [
        (e["src"], e["dst"], e["type"]) for e in raw["edges"]
    ]
    assert to_upstream(tr) == raw  # every field back, exactly


def test_export_validates(reference, upstream_schema, small_trace):
    traces = [
        small_trace,
        generate_trace(30, 500, 3, seed=1),
        small_trace.replace(topology="critic_loop", meta={"k": [1, None]}),
    ]
    for tr in traces:
        doc = to_upstream(tr)
        jsonschema.Draft202012Validator(upstream_schema).validate(doc)
        back, problems = from_upstream(json.loads(json.dumps(doc)))
        assert problems == [] and back == tr


def test_extras_are_kept_in_attrs_and_restored(upstream_schema):
    doc = {
        "trace_id": "t",
        "task_id": "x",
        "events": [
            {
                "id": "a",
                "t": 0,
                "type": "message",
                "agent": "p",
                "latency_ms": 12,
                "dur": "not-a-number",
                "attrs": {"k": 1},
            }
        ],
        "edges": [],
        "rewards": {},
        "costs": {"tokens": 1, "wall_clock_s": 2, "usd": 0.5},
    }
    tr, problems = from_upstream(doc)
    assert problems == []
    # the event's own `attrs` property is one more extra property: kept under its name
    assert tr.events[0].attrs == {"attrs": {"k": 1}, "latency_ms": 12, "dur": "not-a-number"}
    assert tr.costs["usd"] == 0.5
    out = to_upstream(tr)
    jsonschema.validate(out, upstream_schema)
    assert out == doc


def test_every_valid_upstream_shape_imports(upstream_schema):
    """Random traces valid under the survey schema import and re-export unchanged."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    ident = st.text(min_size=1, max_size=8)
    event = st.fixed_dictionaries(
        {
            "id": ident,
            "t": st.floats(0, 1e6, allow_nan=False),
            "agent": ident,
            "type": st.sampled_from(
                [
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
                ]
            ),
        },
        optional={
            "role": st.text(max_size=5),
            "from": st.text(max_size=5),
            "to": st.text(max_size=5),
            "tool": st.text(max_size=5),
            "content_ref": st.text(max_size=5),
            "trusted": st.booleans(),
            "note": st.one_of(st.integers(), st.text(max_size=3), st.none()),
        },
    )

    @settings(max_examples=150, deadline=None)
    @given(
        st.lists(event, min_size=1, max_size=6, unique_by=lambda e: e["id"]),
        st.sampled_from(["centralized", "debate", "unknown", "harness"]),
    )
    def check(events, topology):
        doc = {
            "trace_id": "t",
            "task_id": "x",
            "topology": topology,
            "events": events,
            "edges": [],
            "rewards": {"team": 1.0},
            "costs": {"tokens": 0, "wall_clock_s": 0},
        }
        jsonschema.validate(doc, upstream_schema)
        tr, problems = from_upstream(doc, semantic=False)
        assert problems == [] and tr is not None
        assert to_upstream(tr) == doc
        assert loads(dumps(tr), check=False) == tr

    check()


def test_invalid_upstream_reports_paths():
    doc = {
        "trace_id": "t",
        "task_id": "x",
        "events": [{"id": "a", "type": "message"}],
        "edges": [{"src": "a", "dst": "b", "type": "causal", "weight": 2}],
        "rewards": {},
        "costs": {"tokens": 1, "wall_clock_s": 1},
    }
    _tr, problems = from_upstream(doc)
    got = [str(p) for p in problems]
    assert got[0].startswith("$.events[0]: missing required field `t`")
    assert got[1] == "$.edges[0]: unknown field `weight`; remove it, or move it under `meta`"


def test_empty_trace_cannot_be_exported(small_trace):
    from orchestrace import TraceError

    with pytest.raises(TraceError, match="requires at least one event"):
        to_upstream(small_trace.replace(events=(), edges=()))
