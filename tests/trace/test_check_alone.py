"""Each check runs alone on a trace; malformed data gets problems, a bug in a check does not."""

import msgspec
import pytest

import orchestrace.trace as ot
from orchestrace import Edge, Event, OrchestraceError, Trace, TraceValidationError, check_trace
from orchestrace.trace import check as check_module
from orchestrace.trace.check import CHECKS, CheckInternalError
from orchestrace.trace.graph import TraceGraph

NAMES = [c.__name__ for c in CHECKS]


def test_every_check_is_public_and_documented_with_an_example():
    assert NAMES == [
        "check_header",
        "check_nonempty",
        "check_fields",
        "check_ids",
        "check_numbers",
        "check_edges",
        "check_acyclic",
        "check_spawns",
        "check_edge_times",
        "check_totals",
        "check_partial",
    ]
    for check in CHECKS:
        assert getattr(ot, check.__name__) is check
        assert check.__name__ in ot.__all__ and check.__name__ in check_module.__all__
        assert "Example:" in check.__doc__, check.__name__


@pytest.mark.parametrize("name", NAMES)
def test_each_check_alone_passes_a_good_trace(name, small_trace, medium_trace):
    check = getattr(ot, name)
    assert check(small_trace) == [] and check(medium_trace) == []
    assert check(medium_trace, graph=medium_trace.graph) == []


def event(i, **kw):
    return Event(**{"id": f"e{i}", "t": float(i), "type": "message", "agent": "a", **kw})


def trace(*events, **kw):
    kw.setdefault("costs", {"tokens": 1, "wall_clock_s": 1.0})
    return Trace(trace_id="t1", task_id="demo", events=tuple(events), **kw)


# one fault each, and the only problem its own check reports
FAULTS = {
    "check_header": (trace(event(1), schema_version="9.0"), "schema-version"),
    "check_nonempty": (trace(), "no-events"),
    "check_fields": (trace(event(1, cost="free")), "wrong-type"),
    "check_ids": (trace(event(1), event(1)), "duplicate-id"),
    "check_numbers": (trace(event(1, dur=-2.0)), "negative-value"),
    "check_edges": (trace(event(1), edges=(Edge("e1", "e7", "causal"),)), "dangling-edge"),
    "check_acyclic": (
        trace(event(1), event(2), edges=(Edge("e1", "e2", "causal"), Edge("e2", "e1", "causal"))),
        "causal-cycle",
    ),
    "check_spawns": (trace(event(1, type="return", to="lead")), "return-without-spawn"),
    "check_edge_times": (
        trace(event(2), event(1), edges=(Edge("e2", "e1", "message"),)),
        "edge-backwards-in-time",
    ),
    "check_totals": (trace(event(1), rewards={"team": float("nan")}), "non-finite"),
    "check_partial": (trace(event(1), meta={"partial": True}), "truncated"),
}


@pytest.mark.parametrize("name", NAMES)
def test_each_check_alone_finds_its_fault(name):
    tr, code = FAULTS[name]
    assert [p.code for p in getattr(ot, name)(tr)] == [code]
    assert code in [p.code for p in check_trace(tr)]
    # the other checks do not report this fault (a cycle is also backwards in time)
    # (check_numbers, alone, reads the ill-typed cost and so returns check_fields' error)
    skip = {name, "check_edge_times", "check_acyclic", "check_edges"}
    skip |= {"check_numbers"} if name == "check_fields" else set()
    for other in CHECKS:
        if other.__name__ not in skip:
            assert code not in [p.code for p in other(tr)], other.__name__


GRAPH_CHECKS = ["check_ids", "check_numbers", "check_edges", "check_acyclic", "check_spawns"]
GRAPH_CHECKS += ["check_edge_times"]


@pytest.mark.parametrize("name", GRAPH_CHECKS)
def test_a_graph_check_alone_on_malformed_fields_returns_their_errors(name):
    tr = trace(event(1), "e2")  # every graph check compiles the events
    assert [str(p) for p in getattr(ot, name)(tr)] == [
        "$.events[1]: events[1] is 'e2', not an Event; build it with Event(...), or load the "
        "trace from a file"
    ]
    tr, _ = FAULTS["check_fields"]  # a cost of the wrong type: only check_numbers reads costs
    found = getattr(ot, name)(tr)
    assert found == (ot.check_fields(tr) if name == "check_numbers" else [])


def test_options_reach_the_checks_that_use_them():
    tr, _ = FAULTS["check_edges"]
    assert ot.check_edges(tr, known_ids=["e7"]) == []
    cut = tr.replace(meta={"partial": True})
    assert [p.severity for p in ot.check_edges(cut, partial=True)] == ["warning"]
    assert [p.severity for p in ot.check_partial(cut, partial=True)] == ["warning"]


# ------------------------------------------------------------ malformed data: problems
GOOD = trace(
    event(1, type="spawn", to="w1"), event(2, agent="w1"), edges=(Edge("e1", "e2", "spawn"),)
)
BAD_EVENT_FIELDS = [
    ("id", ["x"]), ("t", "soon"), ("t", [1]), ("t", 10**400), ("dur", None), ("type", ["x"]),
    ("agent", 3), ("role", ["r"]), ("from_", 3), ("to", ["x"]), ("tool", {"a": 1}),
    ("decision", ["x"]), ("step", "1"), ("content", 3), ("trusted", "yes"),
    ("tokens_in", -(2**70)), ("cost", "x"), ("cost", True), ("error", 3), ("attrs", [1]),
]  # fmt: skip
BAD_HEADER_FIELDS = [
    ("trace_id", None), ("topology", ["x"]), ("schema_version", 1), ("costs", None),
    ("costs", {3: 1.0}), ("rewards", [1]), ("metrics", "x"), ("meta", None), ("system", 3),
    ("events", None), ("events", [1, 2]), ("events", "ab"), ("edges", None), ("edges", [1]),
]  # fmt: skip


def with_event(field, value):
    ev = list(GOOD.events)
    ev[1] = msgspec.structs.replace(ev[1], **{field: value})
    return GOOD.replace(events=tuple(ev))


@pytest.mark.parametrize(("field", "value"), BAD_EVENT_FIELDS, ids=repr)
def test_a_wrong_event_field_is_a_problem_at_its_place(field, value):
    problems = [p for p in check_trace(with_event(field, value)) if p.severity == "error"]
    name = "from" if field == "from_" else field
    assert problems and problems[0].path == f"$.events[1].{name}", problems
    assert problems[0].code in ("wrong-type", "out-of-range", "unknown-type", "unknown-value")
    with pytest.raises(TraceValidationError):
        ot.check.validate(with_event(field, value))


@pytest.mark.parametrize(("field", "value"), BAD_HEADER_FIELDS, ids=repr)
def test_a_wrong_header_field_is_a_problem_at_its_place(field, value):
    problems = [p for p in check_trace(GOOD.replace(**{field: value})) if p.severity == "error"]
    assert problems and problems[0].path.startswith(f"$.{field}"), problems


@pytest.mark.parametrize(("end", "value"), [("src", 5), ("dst", ["x"]), ("type", ["x"])])
def test_a_wrong_edge_field_is_a_problem_at_its_place(end, value):
    tr = GOOD.replace(edges=(msgspec.structs.replace(GOOD.edges[0], **{end: value}),))
    [problem] = check_trace(tr)
    assert problem.path == f"$.edges[0].{end}"


def test_wrong_types_have_exact_messages():
    assert [str(p) for p in check_trace(with_event("t", "soon"))] == [
        "$.events[1].t (event 'e2'): t is 'soon', not a number; record t as a finite number >= 0"
    ]
    assert [str(p) for p in check_trace(GOOD.replace(events=None))] == [
        "$.events: events is None, not a sequence of Event records; "
        "pass events as a tuple of Event(...) records"
    ]


# ------------------------------------------------------------ a bug inside a check: an error
def test_a_bug_inside_a_check_is_an_internal_error_naming_it(monkeypatch, small_trace):
    def broken(self):
        raise AttributeError("'TraceGraph' object has no attribute '_lookup2'")

    monkeypatch.setattr(TraceGraph, "ids_unique", broken)
    with pytest.raises(CheckInternalError) as info:
        check_trace(small_trace)
    err = info.value
    assert err.check == "check_ids" and isinstance(err.__cause__, AttributeError)
    assert str(err) == (
        "internal error in check_ids: AttributeError: 'TraceGraph' object has no attribute "
        "'_lookup2'; this is a bug in orchestrace, not a problem of the trace: please report it "
        "(with the trace, or how it was made) to the orchestrace issue tracker"
    )
    assert not isinstance(err, OrchestraceError)  # never shown as a problem of the user's data


@pytest.mark.parametrize("exc", [KeyError("x"), TypeError("x"), ValueError("x"), IndexError(1)])
def test_any_exception_escaping_a_check_is_internal(monkeypatch, small_trace, exc):
    def check_numbers(trace, **options):
        raise exc

    replaced = tuple(check_numbers if c is ot.check_numbers else c for c in CHECKS)
    monkeypatch.setattr(check_module, "CHECKS", replaced)
    with pytest.raises(CheckInternalError, match=r"^internal error in check_numbers: "):
        check_trace(small_trace)
    with pytest.raises(CheckInternalError, match="check_numbers"):
        check_module.check_graph(small_trace.graph)


def test_errors_raised_on_purpose_pass_through(monkeypatch, small_trace):
    def check_ids(trace, **options):
        raise TraceValidationError([])

    monkeypatch.setattr(check_module, "CHECKS", (check_ids,))
    with pytest.raises(TraceValidationError):
        check_trace(small_trace)


def test_cli_reports_an_internal_error_as_a_bug(monkeypatch, tmp_path, small_trace, capsys):
    from orchestrace import dump
    from orchestrace.cli import main

    path = tmp_path / "run.json"
    dump(small_trace, path)
    monkeypatch.setattr(TraceGraph, "ids_unique", lambda self: 1 / 0)
    code = main(["validate", str(path)])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "internal error in check_ids: ZeroDivisionError" in err and "report it" in err
