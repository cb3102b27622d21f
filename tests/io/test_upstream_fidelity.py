"""Survey-schema import is exact: markers never override edits, detection is structural,
attrs never collide, nulls and empty objects survive, unknown top-level fields come back."""

from __future__ import annotations

import copy
import json
from typing import Any
from unittest import mock

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrace.io import from_upstream, parse, to_upstream
from orchestrace.io import json as json_io
from orchestrace.io.upstream import UPSTREAM_EVENT_TYPES, UPSTREAM_TOPOLOGIES, schema_problems
from orchestrace.trace.build import TraceBuilder
from orchestrace.trace.model import Edge, Event, Trace

SURVEY_TYPES = sorted(UPSTREAM_EVENT_TYPES)
_EDIT_CODES = ("stale-marker", "duplicate-key")


def _doc(**top: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "trace_id": "t1",
        "task_id": "task",
        "events": [
            {"id": "e1", "t": 0, "type": "orchestrator_decision", "agent": "lead"},
            {"id": "e2", "t": 1, "type": "message", "agent": "lead", "to": "w"},
        ],
        "edges": [{"src": "e1", "dst": "e2", "type": "causal"}],
        "rewards": {"team": 1.0},
        "costs": {"tokens": 10, "wall_clock_s": 2},
    }
    doc.update(top)
    return doc


def _both(doc: Any) -> list[tuple[Trace | None, list[Any]]]:
    """The import by the field-by-field path and by ``parse`` (typed fast path when it can).

    ``parse`` twice: as a small document, and as a large one is read (its top level decoded
    raw first, then probed from the raw events array).
    """
    slow = from_upstream(copy.deepcopy(doc))
    data = json.dumps(doc).encode()
    fast = parse(data, source="u.json")
    with mock.patch.object(json_io, "DUPLICATE_CHECK_BYTES", -1):
        large = parse(data, source="u.json")
    return [slow, fast, large]


def _llm_trace(topology: str = "critic_loop") -> Trace:
    b = TraceBuilder(task_id="t", topology=topology)
    b.llm("w", tokens_in=5, dur=1.0)
    b.add("message", "w", to="lead")
    return b.build()


# ---------------------------------------------------------------------- stale markers
def test_edited_type_wins_over_the_type_marker():
    doc = to_upstream(_llm_trace())
    assert doc["events"][0]["type"] == "tool_call"
    doc["events"][0]["type"] = "message"
    for trace, problems in _both(doc):
        assert trace is not None and trace.events[0].type == "message"
        stale = [p for p in problems if p.code == "stale-marker"]
        assert len(stale) == 1 and stale[0].severity == "warning"
        assert stale[0].path == "$.events[0].type" and "'llm_call'" in stale[0].message


def test_unedited_type_marker_is_restored():
    tr = _llm_trace()
    for trace, problems in _both(to_upstream(tr)):
        assert trace == tr and problems == []


def test_edited_topology_wins_over_the_trace_marker():
    doc = to_upstream(_llm_trace("critic_loop"))
    assert doc["topology"] == "mixed"
    doc["topology"] = "debate"
    for trace, problems in _both(doc):
        assert trace is not None and trace.topology == "debate"
        assert [p.path for p in problems if p.code == "stale-marker"] == ["$.topology"]


def test_costs_filled_in_on_export_are_dropped_unless_edited():
    tr = _llm_trace("centralized").replace(costs={})
    doc = to_upstream(tr)
    assert set(doc["costs"]) == {"tokens", "wall_clock_s"}  # the schema requires them
    for trace, problems in _both(doc):  # the trace's own warnings: it has no costs
        assert trace == tr and [p.code for p in problems] == ["missing-cost", "missing-cost"]
    doc["costs"]["tokens"] = 999
    for trace, problems in _both(doc):
        assert trace is not None and trace.costs == {"tokens": 999}
        assert [p.path for p in problems if p.code == "stale-marker"] == ["$.costs.tokens"]


# ---------------------------------------------------------------------- structural detection
@pytest.mark.parametrize("where", ["content_ref", "attrs_key", "meta_key", "string"])
def test_survey_trace_mentioning_schema_version_is_still_survey(where):
    tr = _llm_trace().replace(meta={"note": 1})
    if where == "meta_key":
        tr = tr.replace(meta={"schema_version": "9.9", "x": [1]})
    doc = to_upstream(tr)
    if where == "content_ref":
        doc["events"][1]["content_ref"] = "schema_version"
    elif where == "attrs_key":
        doc["events"][1]["schema_version"] = "2"
    elif where == "string":
        doc["events"][1]["content_ref"] = 'x "schema_version": "1.0"'
    for trace, problems in _both(doc):
        assert trace is not None and trace.events[0].type == "llm_call"  # markers applied
        assert (
            trace.topology == "critic_loop"
            and [p for p in problems if p.severity != "warning"] == []
        )
        assert to_upstream(trace) == doc


def test_native_trace_is_native_wherever_schema_version_sits():
    tr = _llm_trace().replace(meta={"cfg": {"schema_version": "x"}})
    native = msgspec.to_builtins(tr)
    first = {"schema_version": native.pop("schema_version"), **native}  # key order differs
    for doc in (native | {"schema_version": tr.schema_version}, first):
        data = json.dumps(doc).encode()
        trace, problems = parse(data)
        assert trace == tr and problems == []


def test_meta_at_the_top_marks_a_native_trace():
    doc = msgspec.to_builtins(_llm_trace())
    del doc["schema_version"]
    trace, _problems = parse(json.dumps(doc).encode())
    assert trace is not None and trace.events[0].type == "llm_call" and trace.meta == doc["meta"]


# ---------------------------------------------------------------------- attrs, nulls, empties
def test_attrs_property_never_collides_with_other_properties():
    doc = _doc()
    doc["events"][0].update({"foo": 1, "attrs": {"foo": 2, "role": "r"}, "role": "lead"})
    for trace, problems in _both(doc):
        assert problems == []
        assert trace is not None and trace.events[0].role == "lead"
        assert trace.events[0].attrs == {"foo": 1, "attrs": {"foo": 2, "role": "r"}}
        assert to_upstream(trace) == doc


def test_native_attrs_named_like_fields_or_markers_round_trip():
    tricky = {
        "plain": None,
        "role": "shadow",
        "dur": 3.5,
        "cost": 0,
        "step": None,
        "attrs": {"x_orchestrace_type": "llm_call"},
        "x_orchestrace_type": "llm_call",
        "x_orchestrace_trace": {"meta": {}},
        "after": 1,
    }
    tr = _llm_trace()
    events = list(tr.events)
    events[1] = msgspec.structs.replace(events[1], role="worker", attrs=tricky)
    tr = tr.replace(events=tuple(events))
    doc = to_upstream(tr)
    assert doc["events"][1]["plain"] is None  # flattened where it reads back the same
    assert "after" not in doc["events"][1]  # after an escaped one: escaped, to keep the order
    for trace, problems in _both(doc):
        assert trace == tr and problems == []
        assert list(trace.events[1].attrs or {}) == list(tricky)


def test_explicit_nulls_defaults_and_empty_objects_survive():
    doc = _doc(metrics={})
    doc["events"][0].update(
        {"step": None, "cost": 0, "dur": 0.0, "tokens_in": 0, "note": None, "attrs": {}}
    )
    doc["events"][1].update({"decision": None, "content": None, "extra": {}})
    assert schema_problems(doc) == []
    for trace, problems in _both(doc):
        assert trace is not None and problems == []
        assert trace.events[0].attrs == {
            "step": None, "cost": 0, "dur": 0.0, "tokens_in": 0, "note": None, "attrs": {},
        }  # fmt: skip
        assert to_upstream(trace) == doc


def test_unknown_top_level_fields_are_kept_and_restored():
    doc = _doc(notes={"by": "me"}, version=None, system=None)
    for trace, problems in _both(doc):
        assert trace is not None
        assert trace.meta == {
            "upstream": {"fields": {"notes": {"by": "me"}, "version": None, "system": None}}
        }
        unknown = [p for p in problems if p.code == "unknown-field"]
        assert len(unknown) == 2 and all(p.severity == "warning" for p in unknown)
        assert to_upstream(trace) == doc


def test_native_meta_named_upstream_is_not_mistaken_for_import_data():
    for meta in ({"upstream": {"fields": {"trace_id": "x"}}}, {"upstream": 3}, {"upstream": {}}):
        tr = _llm_trace("centralized").replace(meta=meta)
        for trace, problems in _both(to_upstream(tr)):
            assert trace == tr and problems == []


# ---------------------------------------------------------------------- semantic level
def test_schema_valid_trace_with_semantic_problems_imports():
    doc = _doc()
    doc["events"].append({"id": "e2", "t": 2, "type": "return", "agent": "ghost"})
    doc["edges"] += [
        {"src": "e2", "dst": "e1", "type": "causal"},
        {"src": "e1", "dst": "nowhere", "type": "causal"},
    ]
    assert schema_problems(doc) == []
    for trace, problems in _both(doc):
        assert trace is not None
        assert not [p for p in problems if p.severity == "error"]
        codes = {p.code for p in problems if p.severity == "semantic"}
        assert {"duplicate-id", "dangling-edge", "return-without-spawn"} <= codes
        assert "semantic: " in str(next(p for p in problems if p.severity == "semantic"))


def test_native_trace_keeps_semantic_rules_fatal():
    tr = _llm_trace("centralized")
    bad = tr.replace(edges=(*tr.edges, Edge("e1", "e9", "causal")))
    _trace, problems = parse(msgspec.json.encode(bad))
    assert [p.code for p in problems if p.severity == "error"] == ["dangling-edge"]


# ---------------------------------------------------------------------- round trips
_text = st.text(max_size=6)
_ident = st.text(min_size=1, max_size=6)
_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    _text,
)
_json = st.recursive(
    _scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3)),
    max_leaves=6,
)
_extra_value = st.one_of(
    _json,
    st.sampled_from([0, 0.0, -0.0, 1, 2.5, None, "spawn", "stop", "x", True, [], {}]),
)
_extra_key = st.one_of(
    st.sampled_from(
        [
            "dur",
            "decision",
            "step",
            "content",
            "tokens_in",
            "tokens_out",
            "cost",
            "error",
            "attrs",
            "note",
            "latency_ms",
        ]
    ),
    _text.filter(lambda k: not k.startswith("x_orchestrace_")),
)
_survey_event = st.builds(
    lambda base, opt, extra: {**base, **opt, **extra},
    st.fixed_dictionaries(
        {
            "id": _ident,
            "t": st.one_of(st.integers(0, 2**53), st.floats(0, 1e9, allow_nan=False)),
            "type": st.sampled_from(SURVEY_TYPES),
            "agent": _ident,
        }
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "role": _text,
            "from": _text,
            "to": _text,
            "tool": _text,
            "content_ref": _text,
            "trusted": st.booleans(),
        },
    ),
    st.dictionaries(_extra_key, _extra_value, max_size=4).map(
        lambda d: {
            k: v
            for k, v in d.items()
            if k not in ("id", "t", "type", "agent", "role", "from", "to", "tool")
            and k not in ("content_ref", "trusted")
        }
    ),
)
_numbers = st.dictionaries(_text, st.floats(-1e6, 1e6, allow_nan=False), max_size=3)
_survey_doc = st.builds(
    lambda events, top, opt, extra: {**top, "events": events, **opt, **extra},
    st.lists(_survey_event, min_size=1, max_size=5),
    st.fixed_dictionaries(
        {
            "trace_id": _ident,
            "task_id": _ident,
            "edges": st.lists(
                st.fixed_dictionaries(
                    {"src": _ident, "dst": _ident, "type": st.sampled_from(["causal", "spawn"])}
                ),
                max_size=3,
            ),
            "rewards": _numbers,
            "costs": st.fixed_dictionaries(
                {"tokens": st.integers(0, 10**6), "wall_clock_s": st.floats(0, 1e6)},
                optional={"usd": st.floats(-5, 5)},
            ),
        }
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "system": _text,
            "topology": st.sampled_from(sorted(UPSTREAM_TOPOLOGIES)),
            "metrics": _numbers,
        },
    ),
    st.dictionaries(st.sampled_from(["notes", "version", "extra"]), _json, max_size=2),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_survey_doc)
def test_survey_import_then_export_is_the_identity(doc):
    for trace, problems in _both(doc):
        assert trace is not None
        assert not [p for p in problems if p.severity == "error"], problems
        assert to_upstream(trace) == doc
    slow, fast, large = _both(doc)
    assert slow[0] == fast[0] == large[0]  # the typed path agrees with the field-by-field one


_native_attrs = st.one_of(
    st.none(),
    st.dictionaries(
        st.one_of(
            st.sampled_from(
                [
                    "role",
                    "dur",
                    "cost",
                    "step",
                    "attrs",
                    "x_orchestrace_type",
                    "x_orchestrace_attrs",
                    "x_orchestrace_trace",
                    "id",
                    "note",
                ]
            ),
            _text,
        ),
        _extra_value,
        max_size=4,
    ),
)
_native_event = st.builds(
    lambda i, **kw: Event(id=f"e{i}", **kw),
    st.integers(0, 10**6),
    t=st.floats(0, 1e6),
    type=st.sampled_from([*SURVEY_TYPES, "llm_call"]),
    agent=_ident,
    dur=st.sampled_from([0.0, 1.5]),
    role=st.one_of(st.none(), _text),
    to=st.one_of(st.none(), _text),
    decision=st.sampled_from([None, "spawn", "stop"]),
    step=st.one_of(st.none(), st.integers(0, 5)),
    content=st.one_of(st.none(), _text),
    tokens_in=st.integers(0, 3),
    cost=st.sampled_from([0.0, 0.25]),
    error=st.one_of(st.none(), _text),
    trusted=st.one_of(st.none(), st.booleans()),
    attrs=_native_attrs,
)
_native_trace = st.builds(
    lambda events, topology, meta, costs, metrics, system: Trace(
        trace_id="t",
        task_id="k",
        events=tuple({e.id: e for e in events}.values()),
        topology=topology,
        meta=meta,
        costs=costs,
        metrics=metrics,
        system=system,
    ),
    st.lists(_native_event, min_size=1, max_size=5),
    st.sampled_from([None, "centralized", "critic_loop", "mixed"]),
    st.one_of(
        st.just({}),
        st.dictionaries(st.sampled_from(["seed", "upstream", "runner"]), _json, max_size=2),
        st.just({"upstream": {"fields": {"notes": 1, "metrics": {}}}}),
    ),
    st.sampled_from([{}, {"tokens": 3.0}, {"tokens": 1.0, "wall_clock_s": 2.0, "usd": 0.5}]),
    st.sampled_from([{}, {"acc": 1.0}]),
    st.one_of(st.none(), _text),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_native_trace)
def test_native_export_then_import_is_the_identity(tr):
    doc = to_upstream(tr)
    for trace, problems in _both(doc):
        assert trace == tr
        odd = [p for p in problems if p.severity == "error" or p.code in _EDIT_CODES]
        assert not odd, odd
    # what is not orchestrace's own survey data validates under the schema
    meta_fields = tr.meta.get("upstream", {})
    if not (isinstance(meta_fields, dict) and "fields" in meta_fields):
        assert schema_problems(doc) == []


def test_typed_fast_path_keeps_explicit_zeros():
    from orchestrace.io.json import _DECODER
    from orchestrace.io.upstream import from_typed

    doc = _doc()
    doc["events"][0].update({"dur": 0, "cost": 0.0, "tokens_in": 0, "tokens_out": 7})
    doc["events"][1].update({"dur": -0.0, "step": 2})
    data = json.dumps(doc).encode()
    fast = from_typed(data, _DECODER.decode(data))
    assert fast is not None  # no null, no empty metrics: the typed path is taken
    # a large document's top level is decoded raw first: the probe then reads only its events
    large = from_typed(data, _DECODER.decode(data), json_io._TOP_LEVEL.decode(data))
    assert large is not None and large == fast
    trace, problems = fast
    assert problems == [] and trace == from_upstream(doc)[0]
    assert trace.events[0].attrs == {"dur": 0, "cost": 0.0, "tokens_in": 0}
    assert to_upstream(trace) == doc
    first = to_upstream(trace)["events"][0]
    assert type(first["dur"]) is int and type(first["cost"]) is float  # kept as written


@pytest.mark.parametrize(
    "restored",
    [{"tokens_in": 0.0}, {"step": "2"}, {"dur": "x"}, {"cost": [1]}, {"trusted": 3}],
)
def test_a_marker_restoring_a_wrong_value_is_read_as_the_field_import_reads_it(restored):
    # the typed path rebuilds the event from the marker's fields; a value the event cannot
    # hold (tokens_in 0.0 reads as a field, then fails the int) must give what the
    # field-by-field import gives, not an exception; the others are kept as unknown attrs
    doc = _doc()
    doc["events"][0]["attrs"] = {"x_orchestrace_fields": restored}
    data = json.dumps(doc).encode()
    fast = parse(data, upstream=True)
    slow = from_upstream(msgspec.json.decode(data))
    assert [(p.severity, p.code, p.path, p.message) for p in fast[1]] == [
        (p.severity, p.code, p.path, p.message) for p in slow[1]
    ]
    assert (fast[0] is None) == (slow[0] is None)
    assert fast[0] is None or fast[0].events == slow[0].events


@pytest.mark.parametrize(
    ("written", "attrs"),
    [
        ({"tokens_out": 0, "cost": 0, "dur": 0}, ["tokens_out", "cost", "dur"]),  # not ours
        ({"tokens_in": 0, "attrs": {"a": 1}}, ["tokens_in", "attrs"]),  # a plain attrs property
        ({"attrs": {"a": 1}, "cost": 0.0}, ["attrs", "cost"]),
    ],
)
def test_explicit_zeros_keep_the_documents_order_on_the_typed_path(written, attrs):
    from orchestrace.io.json import dumps

    doc = _doc(topology="critic_loop")
    doc["events"][0].update(written)
    data = json.dumps(doc).encode()
    fast, slow = parse(data, upstream=True)[0], from_upstream(msgspec.json.decode(data))[0]
    with mock.patch.object(json_io, "DUPLICATE_CHECK_BYTES", -1):  # read as a large one is
        large = parse(data, upstream=True)[0]
    assert fast is not None and slow is not None
    assert list(fast.events[0].attrs) == list(slow.events[0].attrs) == attrs
    assert dumps(fast) == dumps(slow) == dumps(large)
    assert to_upstream(fast) == to_upstream(slow)
    assert list(to_upstream(fast)["events"][0]) == list(to_upstream(slow)["events"][0])


def test_problems_come_in_the_same_order_on_both_paths():
    b = TraceBuilder(task_id="t", topology="critic_loop")
    b.llm("w", tokens_in=5, dur=1.0)  # exported as a tool call with a type marker
    b.add("message", "w", to="lead")
    doc = to_upstream(b.build())
    doc["events"][0]["type"] = "message"  # the marker is now stale: a warning
    first, second = doc["events"][1]["id"], doc["events"][0]["id"]
    doc["edges"].append({"src": first, "dst": second, "type": "causal"})  # a cycle: semantic
    slow, fast, large = _both(doc)
    order = [(p.severity, p.code) for p in fast[1]]
    assert order == [(p.severity, p.code) for p in slow[1]]
    assert order == [(p.severity, p.code) for p in large[1]]
    assert order[0] == ("semantic", "causal-cycle") and ("warning", "stale-marker") in order
