"""check_trace: each test injects one fault and asserts the exact message."""

import math

import msgspec
import pytest

from orchestrace import Edge, Event, TraceValidationError, check_trace, is_valid, validate
from orchestrace.trace.check import check_graph
from orchestrace.trace.diagnose import check_structure


def lines(trace, **kw):
    return [str(p) for p in check_trace(trace, **kw)]


def replace_event(tr, i, **changes):
    ev = list(tr.events)
    ev[i] = msgspec.structs.replace(ev[i], **changes)
    return tr.replace(events=tuple(ev))


def test_good_traces_have_no_problems_not_even_warnings(small_trace, medium_trace):
    assert check_trace(small_trace) == []
    assert check_trace(medium_trace) == []
    assert is_valid(small_trace)
    assert validate(small_trace) is small_trace


def test_duplicate_id(small_trace):
    tr = replace_event(small_trace, 3, id="e2")
    assert lines(tr)[0] == (
        "$.events[3].id: duplicate event id 'e2' (first used at $.events[1]); "
        "give every event a unique id"
    )


def test_dangling_edge(small_trace):
    tr = small_trace.replace(edges=(*small_trace.edges, Edge("e1", "ghost", "causal")))
    assert lines(tr) == [
        f"$.edges[{len(small_trace.edges)}].dst: edge points to unknown event "
        "'ghost'; add an event with id 'ghost' or remove the edge"
    ]


def test_causal_cycle(small_trace):
    tr = small_trace.replace(edges=(*small_trace.edges, Edge("e5", "e2", "causal")))
    assert lines(tr)[0] == (
        "$.events[1]: causal cycle through events 'e2' -> 'e5' -> "
        "'e2'; remove or reverse one edge of the cycle: an event cannot depend "
        "on itself"
    )


def test_negative_time_and_cost(small_trace):
    tr = replace_event(small_trace, 2, t=-1.0)
    assert (
        "$.events[2].t (event 'e3'): t is negative -1.0; record t as a finite number >= 0 "
        "(seconds since the trace start)" in lines(tr)
    )
    tr = replace_event(small_trace, 0, cost=-0.5)
    assert lines(tr) == [
        "$.events[0].cost (event 'e1'): cost is negative -0.5; record cost as a finite number >= 0"
    ]
    tr = replace_event(small_trace, 0, dur=math.nan)
    assert lines(tr)[0] == (
        "$.events[0].dur (event 'e1'): dur is not a finite number: nan; record "
        "dur as a finite number >= 0"
    )
    tr = replace_event(small_trace, 0, tokens_out=-2)
    assert lines(tr) == [
        "$.events[0].tokens_out (event 'e1'): tokens_out is negative -2; record "
        "tokens_out as a finite number >= 0"
    ]


def test_unknown_type_in_python_built_trace(small_trace):
    tr = replace_event(small_trace, 0, type="thinking")
    assert lines(tr)[0].startswith(
        "$.events[0].type (event 'e1'): unknown event type 'thinking'; "
        "use one of: orchestrator_decision, spawn,"
    )


def test_return_without_spawn(small_trace):
    idx = next(i for i, e in enumerate(small_trace.events) if e.type == "return")
    tr = replace_event(small_trace, idx, agent="stranger", from_="stranger")
    got = lines(tr)
    assert (
        f"$.events[{idx}] (event '{tr.events[idx].id}'): agent 'stranger' returns but no spawn "
        "event creates it; add a spawn event (to='stranger') before it, or record a message "
        "instead"
    ) in got


def test_child_event_before_spawn(small_trace):
    idx = next(i for i, e in enumerate(small_trace.events) if e.agent == "w1")
    tr = replace_event(small_trace, idx, t=0.0)
    got = lines(tr)
    assert got[0] == (
        f"$.events[{idx}].t (event '{tr.events[idx].id}'): agent 'w1' acts at t=0.0 "
        "before its spawn ('e3' at t=1.0); fix the timestamps, or move the spawn "
        "event earlier"
    )
    # the moved event now also starts before what it depends on: a warning, not an error
    assert any("warning: " in x and "starts before" in x for x in got)


def test_missing_costs_is_a_warning(small_trace):
    tr = small_trace.replace(costs={})
    problems = check_trace(tr)
    assert {p.severity for p in problems} == {"warning"} and is_valid(tr)


def test_no_events_and_partial(small_trace):
    empty = small_trace.replace(events=(), edges=())
    assert lines(empty) == ["$.events: trace has no events; record at least one event"]
    cut = small_trace.replace(meta={"partial": True, "truncated": "no footer"})
    assert lines(cut) == [
        "$: trace is truncated: no footer; every complete event was kept; "
        "validate with --partial to accept it"
    ]
    assert [p.severity for p in check_trace(cut, partial=True)] == ["warning"]


def test_validate_raises_listing_problems(small_trace):
    tr = replace_event(small_trace, 3, id="e2")
    with pytest.raises(TraceValidationError) as err:
        validate(tr, source="x.json")
    assert "problem(s) in trace x.json:\n  x.json: $.events[3].id: duplicate event id" in str(
        err.value
    )
    assert err.value.problems[0].code == "duplicate-id"


def test_many_problems_are_capped(small_trace):
    extra = tuple(Edge("e1", f"ghost{i}", "causal") for i in range(150))
    tr = small_trace.replace(edges=small_trace.edges + extra)
    got = lines(tr)
    assert len(got) == 101 and got[-1] == (
        "$: 50 more problem(s) of this kind not listed; fix the ones above and validate again"
    )


def test_hostile_strings_are_escaped_and_bounded(small_trace):
    evil = "x\n\x1b[31m" + "A" * 10_000_000
    tr = small_trace.replace(edges=(*small_trace.edges, Edge("e1", evil, "causal")))
    (line,) = lines(tr)
    assert "\n" not in line and "\x1b" not in line and len(line) < 400


def test_graph_only_checks_match(medium_trace):
    tr = replace_event(medium_trace, 5, id="e1")
    assert [p.code for p in check_graph(tr.graph, tr)] == [p.code for p in check_trace(tr)]


# ---------------------------------------------------------------- structural path
def doc(**over):
    base = {
        "trace_id": "t",
        "task_id": "x",
        "schema_version": "1.0",
        "costs": {"tokens": 0, "wall_clock_s": 1},
        "events": [
            {"id": "e1", "t": 0, "type": "message", "agent": "a"},
            {"id": "e2", "t": 1, "type": "message", "agent": "a"},
        ],
        "edges": [{"src": "e1", "dst": "e2", "type": "causal"}],
    }
    base.update(over)
    return base


def test_structure_reports_every_bad_event():
    d = doc()
    d["events"] = [
        {"id": "e1", "t": 0, "type": "think", "agent": "a"},
        {"id": "e2", "t": "soon", "type": "message", "agent": "a"},
        {"id": "e3", "type": "message", "agent": "a"},
        {"id": "e4", "t": 0, "type": "message", "agent": "a", "colour": "red"},
    ]
    d["edges"] = [
        {"src": "e1", "dst": "e4", "type": "causal"},
        {"src": "e4", "dst": "e9", "type": "causal"},
    ]
    trace, problems = check_structure(d)
    assert [str(p) for p in problems] == [
        "$.events[0].type: unknown event type 'think'; use one of: orchestrator_decision, spawn, "
        "despawn, message, tool_call, tool_result, return, aggregate, human_intervention, "
        "safety_event, llm_call",
        "$.events[1].t: expected float, got str; make the value a float",
        "$.events[2]: missing required field `t`; add `t` (every event needs id, t, type and agent)",
        "$.events[3]: unknown field `colour`; remove it, or move it under `attrs`",
        "$.edges[1].dst: edge points to unknown event 'e9'; add an event with id 'e9' or remove "
        "the edge",
    ]
    assert trace is not None and trace.n_events == 0


def test_structure_top_level():
    assert [str(p) for p in check_structure([1, 2])[1]] == [
        "$: top-level JSON value is a list, not an object; a trace file holds one JSON object; "
        "store many traces as JSONL"
    ]
    problems = check_structure(doc(events="nope"))[1]
    assert str(problems[0]) == "$.events: events is a str, not an array; make `events` a JSON array"
    d = doc()
    del d["task_id"]
    assert "missing required field `task_id`" in str(check_structure(d)[1][0])


def test_event_defaults_constructed():
    e = Event(id="a", t=0.0, type="message", agent="x")
    assert e.dur == 0.0 and e.attrs is None
