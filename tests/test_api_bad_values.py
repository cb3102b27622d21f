"""The public API refuses values it cannot use exactly, before it creates or runs anything.

Writers refuse what a file cannot hold (NaN and infinity, which JSON writes as ``null``; a
field of the wrong type) and anything that is not a trace; a run refuses an output name it
would not write in that format, processors and backends it cannot drive, and interventions
that are not interventions or force a team over its cap; schedules, weights, rates and
advantages refuse NaN and infinity instead of returning them.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import msgspec
import pytest

from orchestrace import ConfigError, Event, TraceBuilder
from orchestrace.errors import TraceValidationError
from orchestrace.io import StreamWriter, dump, dumps, export_bytes, write_jsonl, write_parquet
from orchestrace.trace.generate import generate_trace

_NAN = float("nan")


@pytest.fixture(scope="module")
def good():
    return generate_trace(agents=4, steps=40, seed=1)


def _bad_traces(good):
    first, rest = good.events[0], good.events[1:]
    return {
        "reward inf": good.replace(rewards={"x": math.inf}),
        "dur nan": good.replace(events=(msgspec.structs.replace(first, dur=_NAN), *rest)),
        "cost inf": good.replace(events=(msgspec.structs.replace(first, cost=math.inf), *rest)),
        "t wrong type": good.replace(events=(msgspec.structs.replace(first, t="soon"), *rest)),
    }


@pytest.mark.parametrize("fmt", ["json", "jsonl", "parquet", "upstream.json"])
def test_writers_refuse_values_a_file_cannot_hold_and_write_nothing(tmp_path, good, fmt):
    for name, bad in _bad_traces(good).items():
        out = tmp_path / f"{name.replace(' ', '_')}.{fmt}"
        with pytest.raises(TraceValidationError, match="nothing was written") as err:
            dump(bad, out)
        assert "$." in str(err.value), name  # names the value
        assert not out.exists(), name
        assert sorted(os.listdir(tmp_path)) == [], name  # no temporary left either
    dump(good, tmp_path / f"good.{fmt}")  # a good trace is written


def test_every_writer_refuses_them(tmp_path, good):
    bad = good.replace(rewards={"x": _NAN})
    with pytest.raises(TraceValidationError):
        dumps(bad)
    with pytest.raises(TraceValidationError):
        write_jsonl([good, bad], tmp_path / "a.jsonl")
    with pytest.raises(TraceValidationError):
        write_parquet([good, bad], tmp_path / "a.parquet")
    with pytest.raises(TraceValidationError):
        export_bytes([bad], format="otlp")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("items", [{"a": 1}, 5, None, "t.json", b"x"])
def test_dump_refuses_what_is_not_a_trace(tmp_path, items):
    with pytest.raises(ConfigError, match="Trace"):
        dump(items, tmp_path / "a.jsonl")
    assert os.listdir(tmp_path) == []


def test_dump_names_the_item_that_is_not_a_trace(tmp_path, good):
    with pytest.raises(ConfigError, match="item 1 is a int"):
        dump([good, 5], tmp_path / "a.jsonl")
    with pytest.raises(ConfigError, match="item 0 is a int"):
        dumps(5)  # type: ignore[arg-type]


def test_stream_writer_checks_its_header_before_creating_the_file(tmp_path):
    for kw in ({"meta": 5}, {"trace_id": None}, {"topology": "bogus"}, {"meta": {"x": object()}}):
        args = {"trace_id": "t", "task_id": "k", **kw}
        with pytest.raises(ConfigError):
            StreamWriter(tmp_path / "s.jsonl", **args)
    assert os.listdir(tmp_path) == []


def test_stream_writer_refuses_records_it_cannot_write(tmp_path):
    w = StreamWriter(tmp_path / "s.jsonl", trace_id="t", task_id="k")
    for bad in (None, 5, {"id": "e1"}):
        with pytest.raises(ConfigError, match="takes an Event"):
            w.event(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="t is nan"):
        w.event(Event(id="e1", t=_NAN, type="message", agent="a"))
    with pytest.raises(ConfigError, match="takes an Edge"):
        w.edge(("e1", "e2"))  # type: ignore[arg-type]
    w.event(Event(id="e1", t=0.0, type="message", agent="a"))
    w.close()
    lines = (tmp_path / "s.jsonl").read_text().splitlines()
    assert len(lines) == 3  # header, the one good event, footer


def test_a_run_refuses_what_it_cannot_use_before_any_file_exists(tmp_path):
    from orchestrace.runtime import run
    from orchestrace.runtime.interventions import ForceDecision

    cases = [
        ({"output": tmp_path / "o.json"}, "streams its trace to a .jsonl"),
        ({"output": tmp_path / "o.txt"}, "streams its trace to a .jsonl"),
        ({"output": tmp_path / "o.jsonl", "processors": [5]}, r"processors\[0\] is a int"),
        ({"output": tmp_path / "o.jsonl", "backend": None}, "backend is a NoneType"),
        ({"output": tmp_path / "o.jsonl", "interventions": [5]}, r"interventions\[0\] is a int"),
        (
            {"output": tmp_path / "o.jsonl", "interventions": [ForceDecision("n_workers", 10**9)]},
            "over the run's max_agents",
        ),
    ]
    for kw, says in cases:
        with pytest.raises(ConfigError, match=says):
            run("debate", "arith-mapreduce-v0", agents=3, **kw)
        assert os.listdir(tmp_path) == [], kw


@pytest.mark.parametrize(
    "make",
    [
        lambda: __import__("orchestrace.runtime.interventions", fromlist=["x"]).ForceDecision(
            "n_workers", "x"
        ),
        lambda: __import__("orchestrace.runtime.interventions", fromlist=["x"]).ForceDecision(
            "n_workers", 0
        ),
        lambda: __import__("orchestrace.runtime.interventions", fromlist=["x"]).ForceStop(step=1.5),
        lambda: __import__("orchestrace.runtime.interventions", fromlist=["x"]).ForceStop(step="x"),
        lambda: __import__("orchestrace.masbench", fromlist=["x"]).DropMessages(_NAN),
        lambda: __import__("orchestrace.masbench", fromlist=["x"]).DropMessages(2),
    ],
    ids=["n_workers x", "n_workers 0", "stop 1.5", "stop x", "drop nan", "drop 2"],
)
def test_interventions_refuse_values_they_cannot_apply(make):
    with pytest.raises(ConfigError):
        make()


def test_schedules_weights_and_advantages_refuse_nan_and_infinity(good):
    from orchestrace import rewards as R
    from orchestrace.credit import group_relative
    from orchestrace.learn.env import make_env

    with pytest.raises(ConfigError, match="finite"):
        R.Anneal(start=_NAN)
    with pytest.raises(ConfigError, match="steps must be >= 1"):
        R.Anneal(1.0, steps=_NAN)
    with pytest.raises(ConfigError, match="finite"):
        R.Composite({"t": (R.make("team"), _NAN)})

    def one(traces, **_):
        return [1.0] * len(traces)

    huge = R.Composite({"a": (one, 1e308), "b": (one, 1e308)})
    with pytest.raises(ConfigError, match="is inf"):
        huge([good])
    with pytest.raises(ConfigError, match="latency_weight"):
        R.parl_components(good, latency_weight=_NAN, steps_budget=3)
    with pytest.raises(ConfigError, match="latency_weight"):
        R.parl_components(good, latency_weight=-5, steps_budget=3)
    with pytest.raises(ConfigError, match="steps_budget"):
        R.parl_components(good, steps_budget=0)
    with pytest.raises(ConfigError, match="finite rewards"):
        group_relative([1.0, _NAN, 2.0])
    for kw in ({"token_cost": _NAN}, {"lambda1": _NAN}, {"lambda2": math.inf}, {"reward_fn": 5}):
        with pytest.raises(ConfigError):
            make_env("orchestrate-v1", **kw)


def test_file_readers_refuse_a_number_for_a_path(tmp_path):
    from orchestrace.rewards import load_spec
    from orchestrace.runtime._keys import RunSecret
    from orchestrace.runtime.security import CapabilityPolicy

    spec = tmp_path / "s.toml"
    spec.write_text("[reward.team]\nweight = 1.0\n")
    with open(spec, "rb") as fh:
        for read in (load_spec, RunSecret.from_file, CapabilityPolicy.from_toml):
            with pytest.raises(ConfigError, match="path"):
                read(fh.fileno())  # type: ignore[arg-type]
        assert fh.read()  # the caller's file is still open
    assert Path(spec).exists()


def test_caps_on_sizes_that_would_not_finish():
    from orchestrace.credit.shapley import shapley_mc
    from orchestrace.learn import VectorEnv

    with pytest.raises(ConfigError, match="samples"):
        shapley_mc(["a", "b"], lambda s: float(len(s)), 10**7)
    with pytest.raises(ConfigError, match="evaluate the value function"):
        shapley_mc(list(range(10**6)), lambda s: float(len(s)), 1000)
    with pytest.raises(ConfigError, match="samples"):
        shapley_mc(["a"], lambda s: 1.0, 1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="num_envs"):
        VectorEnv(10**6)


def test_unknown_names_and_types_are_refused_with_the_known_ones():
    from orchestrace import Edge, Trace, check_trace, critical_path, generate_trace
    from orchestrace import rewards as R

    ev = (
        Event(id="e1", t=0.0, type="message", agent="a"),
        Event(id="e2", t=1.0, type="message", agent="a"),
    )
    bad_edge = Trace(trace_id="t", task_id="k", events=ev, edges=(Edge("e1", "e2", "bogus"),))
    with pytest.raises(TraceValidationError, match=r"\$\.edges\[0\]\.type.*use one of: aggr"):
        critical_path(bad_edge)
    bad_event = Trace(
        trace_id="t", task_id="k", events=(Event(id="e1", t=0.0, type="bogus", agent="a"),)
    )
    with pytest.raises(TraceValidationError, match=r"\$\.events\[0\]\.type"):
        critical_path(bad_event)
    assert "unknown-type" in [p.code for p in check_trace(bad_edge)]  # listed, not raised
    with pytest.raises(ConfigError, match="check_trace takes a Trace, not a int"):
        check_trace(5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="named by a string"):
        R.make(5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="seed must be an integer"):
        generate_trace(seed="x")  # type: ignore[arg-type]
    b = TraceBuilder(task_id="k")
    with pytest.raises(ConfigError, match="unknown event type 'bogus'; use one of"):
        b.add("bogus", "a")
    first = b.add("message", "a")
    with pytest.raises(ConfigError, match=r"write after=\['e1'\]"):
        b.add("message", "a", after=first)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown edge type"):
        b.add("message", "a", after=[(first, "bogus")])
    with pytest.raises(ConfigError, match="unknown topology 'bogus'"):
        TraceBuilder(task_id="k", topology="bogus")


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda S, run: S("x", agents=0), "agents must be an integer >= 1"),
        (lambda S, run: S("x", topologies=("bogus",)), "unknown topologies"),
        (lambda S, run: S("x", faults=("bogus",)), "unknown faults"),
        (lambda S, run: S("x", fault_rate=5), "fault rate must be a probability"),
        (lambda S, run: run("smoke-v2", backend="bogus"), "unknown backend 'bogus'"),
        (lambda S, run: run("smoke-v2", backend_options={"zz": 1}), "has no option 'zz'"),
        (lambda S, run: run("smoke-v2", jobs=0), "jobs must be an integer >= 1"),
    ],
    ids=["agents", "topology", "fault", "rate", "backend", "option", "jobs"],
)
def test_a_suite_refuses_settings_it_cannot_run_instead_of_reporting_every_run_missing(make, says):
    from orchestrace.masbench.suite import Suite, run_suite

    with pytest.raises(ConfigError, match=says):
        make(Suite, run_suite)


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"dur": _NAN}, "dur must be a finite number >= 0"),
        ({"dur": -100.0}, "dur must be a finite number >= 0"),
        ({"t": math.inf}, "t must be a finite number >= 0"),
        ({"cost": _NAN}, "cost must be a finite number >= 0"),
        ({"tokens_in": -5}, "tokens_in must be an integer"),
        ({"tokens_in": 2.5}, "tokens_in must be an integer"),
    ],
    ids=["dur nan", "dur negative", "t inf", "cost nan", "tokens negative", "tokens float"],
)
def test_trace_builder_refuses_numbers_an_event_cannot_hold(kw, says):
    b = TraceBuilder(task_id="k")
    with pytest.raises(ConfigError, match=says):
        b.add("message", "a", **kw)
    with pytest.raises(ConfigError, match="agent must be a non-empty string"):
        b.add("message", 5)  # type: ignore[arg-type]
    assert b.events == []  # nothing was added


def test_env_papers_envelope_and_credit_refuse_what_they_cannot_use():
    from orchestrace.credit.normalize import agentwise
    from orchestrace.learn.env import make_env
    from orchestrace.masbench.envelope import envelope_point
    from orchestrace.papers import check_pool

    with pytest.raises(ConfigError, match=r"unknown settings \['zz'\]"):
        make_env("orchestrate-v1", zz=1)
    assert [p.code for p in check_pool(None)] == ["bad-path"]  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="agents must be an integer >= 1"):
        envelope_point(0, 10)
    with pytest.raises(ConfigError, match="eps must be a finite number > 0"):
        agentwise([], eps=0)


def test_credit_and_forks_refuse_what_is_not_a_trace_or_an_intervention():
    from orchestrace.credit import make_assigner
    from orchestrace.runtime import run
    from orchestrace.runtime.replay import fork, fork_many, replay

    for method in ("uniform", "loo", "shapley", "discounted", "counterfactual"):
        with pytest.raises(ConfigError, match="not a NoneType"):
            make_assigner(method).assign(None)  # type: ignore[arg-type]
    tr = run("debate", "arith", agents=2, seed=1, task_size=8).trace
    with pytest.raises(ConfigError, match="a credit unit is a name"):
        make_assigner("uniform").assign(tr, unit=None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="takes a Trace recorded by the runtime"):
        replay(None)  # type: ignore[arg-type]
    for bad, says in (
        (None, "must be a list"),
        ([5], r"interventions\[0\] is a int"),
        ("drop", "got a str"),
    ):
        with pytest.raises(ConfigError, match=says):
            fork(tr, bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="jobs must be a list"):
        fork_many(tr, None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"jobs\[0\] must be an \(interventions, backend\) pair"):
        fork_many(tr, [([],)])  # type: ignore[list-item]


def test_review_of_the_checks_numpy_numbers_aliases_lists_and_iterators(tmp_path, good):
    """What the checks must still take: numpy scalars, topology aliases, list pairs..."""
    import dataclasses

    import numpy as np

    from orchestrace import rewards as R
    from orchestrace.learn._orchestration_env import EnvConfig
    from orchestrace.masbench import DropMessages
    from orchestrace.masbench.suite import SUITES, Suite
    from orchestrace.runtime import run
    from orchestrace.runtime.interventions import ForceDecision, ForceStop

    fd = ForceDecision("n_workers", np.int64(3), step=np.int64(1))
    assert (fd.value, fd.step) == (3, 1) and type(fd.value) is int
    assert type(ForceStop(np.int64(2)).step) is int
    assert R.Anneal(np.float32(1), 0, np.int64(10))(5) == pytest.approx(0.5)
    assert EnvConfig(lambda1=np.float32(0.25), token_cost=np.int64(1)).token_cost == 1.0
    assert DropMessages(np.float32(0.5)).rate == 0.5
    assert R.Composite({"a": [lambda trs, **_: [1.0] * len(trs), np.float32(2)]})([good]) == [2.0]
    assert isinstance(dataclasses.replace(SUITES["sim-v2"], topologies=("committee",)), Suite)
    assert generate_trace(agents=np.int64(2), steps=np.int64(10), seed=np.int64(3)).n_events
    b = TraceBuilder(task_id="k")
    b.llm("a", dur=np.float32(1.5), tokens_in=np.int64(5))
    tr = b.build()
    assert type(tr.events[0].dur) is float and type(tr.events[0].tokens_in) is int
    dumps(tr)  # writable: the numpy numbers became Python's
    assert len(export_bytes(iter([good, good]), format="otlp")) > 1000  # an iterator is exported
    # an upper-case suffix is what the other commands take too
    res = run("swarm", "arith", agents=2, output=tmp_path / "x.JSONL")
    assert (tmp_path / "x.JSONL").read_bytes().startswith(b'{"header"') and res.trace.n_events


def test_a_negative_custom_cost_is_written_in_every_format(tmp_path, good):
    # a meaning rule (listed by validate), not a value a file cannot hold
    tr = good.replace(costs={**good.costs, "latency_ms": -3.0})
    for fmt in ("json", "upstream.json", "jsonl", "parquet"):
        dump(tr, tmp_path / f"o.{fmt}")


def test_stream_writer_refuses_footer_numbers_json_cannot_hold(tmp_path):
    w = StreamWriter(tmp_path / "s.jsonl", trace_id="t", task_id="k")
    w.event(Event(id="e1", t=0.0, type="message", agent="a"))
    for kw in ({"rewards": {"r": _NAN}}, {"costs": {"c": math.inf}}, {"metrics": {"m": "x"}}):
        with pytest.raises(ConfigError, match="finite numbers"):
            w.close(**kw)
    w.close(rewards={"r": 1.0})
    assert (tmp_path / "s.jsonl").read_text().splitlines()[-1] == '{"footer":{"rewards":{"r":1.0}}}'


def test_nan_nested_in_meta_or_attrs_is_refused_not_written_as_null(tmp_path, good):
    first, rest = good.events[0], good.events[1:]
    in_attrs = good.replace(
        events=(
            *rest[:3],
            msgspec.structs.replace(first, attrs={"x": [1.0, {"y": _NAN}]}),
            *rest[3:],
        )
    )
    with pytest.raises(TraceValidationError, match=r"\$\.events\[3\]\.attrs.*NaN or infinity"):
        dump(in_attrs, tmp_path / "a.json")
    with pytest.raises(TraceValidationError, match=r"\$\.meta"):
        dump(good.replace(meta={"run": {"score": math.inf}}), tmp_path / "m.jsonl")
    with pytest.raises(ConfigError, match="NaN or infinity"):
        StreamWriter(tmp_path / "s.jsonl", trace_id="t", task_id="k", meta={"x": _NAN})
    w = StreamWriter(tmp_path / "s.jsonl", trace_id="t", task_id="k")
    with pytest.raises(ConfigError, match="NaN or infinity"):
        w.close(meta={"x": [math.inf]})
    w.close()
    assert sorted(os.listdir(tmp_path)) == ["s.jsonl"]
    dump(good.replace(meta={"ok": None, "text": "NaN"}), tmp_path / "fine.json")  # None is fine


def test_audit_metrics_and_reports_refuse_what_is_not_theirs(tmp_path):
    from orchestrace.masbench.metrics import run_metrics
    from orchestrace.masbench.report import write_report
    from orchestrace.safety.audit import audit_trace

    with pytest.raises(ConfigError, match="audit_trace takes a Trace"):
        audit_trace(None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="run_metrics takes a Trace"):
        run_metrics("x")  # type: ignore[arg-type]
    for bad in (None, {}, {"suite": 5, "runs": []}):
        with pytest.raises(ConfigError, match="write_report takes the report"):
            write_report(bad, tmp_path / "r")  # type: ignore[arg-type]
    assert not (tmp_path / "r").exists()


def test_the_parquet_stream_writer_refuses_records_it_cannot_write(tmp_path):
    from orchestrace.io.parquet_stream import ParquetStreamWriter

    w = ParquetStreamWriter(tmp_path / "s.parquet", trace_id="t")
    with pytest.raises(ConfigError, match="takes an Event"):
        w.event(None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="dur is nan"):
        w.event(Event(id="e1", t=0.0, type="message", agent="a", dur=_NAN))
    assert w.n_events == 0
    w.abort()


def test_env_reset_options_and_the_shapley_confidence_are_checked():
    from orchestrace.credit.shapley import ShapleyCredit
    from orchestrace.learn.env import make_env

    env = make_env("stop-v0")
    for options, says in (
        ({"size": 0}, "size must be an integer >= 1"),
        ({"size": "x"}, "size must be an integer >= 1"),
        ({"size": 2.7}, "size must be an integer >= 1"),
        ({"zz": 1}, r"unknown reset options \['zz'\]"),
    ):
        with pytest.raises(ConfigError, match=says):
            env.reset(seed=0, options=options)
    env.reset(seed=0, options={"size": 4})
    for delta in (7, _NAN, 0):
        with pytest.raises(ConfigError, match="delta must be a probability"):
            ShapleyCredit(permutations=5, delta=delta)


def test_failure_detection_refuses_modes_it_does_not_have(good):
    from orchestrace.masbench.taxonomy import detect

    with pytest.raises(ConfigError, match=r"unknown failure modes \['bogus'\]"):
        detect(good, ["bogus"])
    with pytest.raises(ConfigError, match="must be a list"):
        detect(good, "premature_termination")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="detect takes a Trace"):
        detect(None)  # type: ignore[arg-type]
    assert detect(good, ["premature_termination"]) == [
        f for f in detect(good) if f.mode == "premature_termination"
    ]


def _numpy_traces(good):
    np = pytest.importorskip("numpy")
    first, rest = good.events[0], good.events[1:]
    edge = good.edges[0]

    def ev(**kw):
        return good.replace(events=(msgspec.structs.replace(first, **kw), *rest))

    return {
        "dur float64": (ev(dur=np.float64(1.5)), r"\$\.events\[0\]\.dur"),
        "agent str_": (ev(agent=np.str_(first.agent)), r"\$\.events\[0\]\.agent"),
        "role str_": (ev(role=np.str_("worker")), r"\$\.events\[0\]\.role"),
        "type str_": (ev(type=np.str_(first.type)), r"\$\.events\[0\]\.type"),
        "attrs float32": (ev(attrs={"x": [1, {"y": np.float32(2)}]}), r"attrs\.x\[1\]\.y"),
        "edge str_": (
            good.replace(edges=(msgspec.structs.replace(edge, src=np.str_(edge.src)),)),
            r"\$\.edges\[0\]\.src",
        ),
        "reward float64": (good.replace(rewards={"r": np.float64(1.0)}), r"\$\.rewards\.r"),
        "trace_id str_": (good.replace(trace_id=np.str_("t")), r"\$\.trace_id"),
        "meta int64": (good.replace(meta={"a": {"b": np.int64(1)}}), r"\$\.meta\.a\.b"),
    }


@pytest.mark.parametrize("fmt", ["json", "jsonl", "parquet"])
def test_numpy_values_in_a_trace_are_named_not_a_raw_encoder_error(tmp_path, good, fmt):
    """numpy's scalars equal plain values but JSON cannot write them: every writer refuses
    them alike, naming where they are, and check_trace reports them too."""
    from orchestrace import check_trace

    for name, (bad, where) in _numpy_traces(good).items():
        out = tmp_path / f"{name.replace(' ', '_')}.{fmt}"
        with pytest.raises(TraceValidationError, match=where) as err:
            dump(bad, out)
        assert "nothing was written" in str(err.value), name
        says = ("plain Python", "JSON cannot write", "JSON has no form for")
        assert any(x in str(err.value) for x in says), name
        assert not out.exists() and os.listdir(tmp_path) == [], name
        if name in ("dur float64", "type str_", "reward float64", "trace_id str_"):
            # (numbers, names and the header; other values are the writers' to check)
            assert [p.code for p in check_trace(bad) if p.severity == "error"], name


def test_stream_writer_refuses_a_record_it_cannot_encode_and_keeps_the_others(tmp_path):
    np = pytest.importorskip("numpy")
    from orchestrace.io import load

    w = StreamWriter(tmp_path / "s.jsonl", trace_id="t", task_id="k")
    w.event(Event(id="e1", t=0.0, type="llm_call", agent="a", dur=1.0))
    with pytest.raises(ConfigError, match=r"dur is 1\.0; a numpy\.float64, not a plain Python"):
        w.event(Event(id="e2", t=1.0, type="llm_call", agent="a", dur=np.float64(1.0)))
    with pytest.raises(ConfigError, match=r"\$\.attrs\.x.*numpy\.float32"):
        w.event(Event(id="e2", t=1.0, type="llm_call", agent="a", attrs={"x": np.float32(1)}))
    w.event(Event(id="e3", t=2.0, type="llm_call", agent="a", dur=1.0))
    w.close()
    assert [e.id for e in load(tmp_path / "s.jsonl").events] == ["e1", "e3"]


@pytest.mark.parametrize("fmt", ["json", "jsonl", "parquet"])
def test_a_trace_without_events_is_not_written_since_no_reader_takes_it_back(tmp_path, good, fmt):
    out = tmp_path / f"empty.{fmt}"
    with pytest.raises(TraceValidationError, match="trace has no events"):
        dump(good.replace(events=(), edges=()), out)
    assert os.listdir(tmp_path) == []


_UNREADABLE = [
    (Event(id="e2", t=1.0, type="thinking", agent="a"), "type"),
    (Event(id="e2", t=1.0, type="llm_call", agent="a", dur=-1.0), "dur"),
    (Event(id="e2", t=1.0, type="llm_call", agent=""), "agent"),
    (Event(id="e2", t=1.0, type="llm_call", agent="a", role=5), "role"),  # type: ignore[arg-type]
    (Event(id="e2", t=1.0, type="llm_call", agent="a", tokens_in=-3), "tokens_in"),
    (Event(id="e2", t=1.0, type="llm_call", agent="a", decision="dance"), "decision"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("event,field", _UNREADABLE)
def test_stream_writers_refuse_a_record_the_reader_would_refuse(tmp_path, event, field):
    """A recording must load back: a record its reader would refuse is refused as it is
    written (one line naming the field), and the records around it are kept."""
    from orchestrace import Edge
    from orchestrace.io import load
    from orchestrace.io.parquet_stream import ParquetStreamWriter

    w = StreamWriter(tmp_path / "s.jsonl", trace_id="t", task_id="k")
    w.event(Event(id="e1", t=0.0, type="llm_call", agent="a", dur=1.0))
    with pytest.raises(ConfigError, match=f"cannot record this event.*{field}"):
        w.event(event)
    with pytest.raises(ConfigError, match=r"cannot record this edge.*type"):
        w.edge(Edge("e1", "e3", "hunch"))
    w.event(Event(id="e3", t=2.0, type="llm_call", agent="a", dur=1.0))
    w.close()
    assert [e.id for e in load(tmp_path / "s.jsonl").events] == ["e1", "e3"]

    p = ParquetStreamWriter(tmp_path / "s.parquet", trace_id="t")
    with pytest.raises(ConfigError, match=f"cannot record this event.*{field}"):
        p.event(event)
    with pytest.raises(ConfigError, match=r"cannot record this edge.*type"):
        p.event(Event(id="e1", t=0.0, type="llm_call", agent="a"), [Edge("e0", "e1", "hunch")])
    assert p.n_events == 0
    p.abort()


def _more_variants(good):
    import datetime
    import decimal
    from fractions import Fraction

    class MyInt(int):
        pass

    first, rest = good.events[0], good.events[1:]

    def ev(**kw):
        return good.replace(events=(msgspec.structs.replace(first, **kw), *rest))

    cycle: dict = {}
    cycle["self"] = cycle
    deep: list = []
    node = deep
    for _ in range(3000):
        node.append([])
        node = node[0]
    return {
        "decimal dur": (ev(dur=decimal.Decimal("1.5")), r"\$\.events\[0\]\.dur"),
        "fraction cost": (ev(cost=Fraction(1, 2)), r"\$\.events\[0\]\.cost"),
        "int subclass tokens": (ev(tokens_out=MyInt(3)), r"\$\.events\[0\]\.tokens_out"),
        "surrogate agent": (ev(agent="\udc80"), r"\$\.events\[0\]\.agent.*surrogate"),
        "surrogate content": (ev(content="x\ud800y"), r"\$\.events\[0\]\.content.*surrogate"),
        "surrogate trace_id": (good.replace(trace_id="\udc80"), r"\$\.trace_id.*surrogate"),
        "cycle in meta": (good.replace(meta=cycle), r"\$\.meta\.self.*cycle"),
        "deep attrs": (ev(attrs={"d": deep}), r"\$\.events\[0\]\.attrs\.d.*too deep"),
        "date in attrs": (
            ev(attrs={"when": datetime.date(2020, 1, 1)}),
            r"\$\.events\[0\]\.attrs\.when.*datetime\.date",
        ),
        "bytes in meta": (good.replace(meta={"raw": b"xx"}), r"\$\.meta\.raw.*bytes"),
    }


@pytest.mark.parametrize("fmt", ["json", "jsonl", "parquet"])
def test_values_json_cannot_hold_exactly_are_named_in_every_writer(tmp_path, good, fmt):
    for name, (bad, where) in _more_variants(good).items():
        out = tmp_path / f"{name.replace(' ', '_')}.{fmt}"
        with pytest.raises(TraceValidationError, match=where):
            dump(bad, out)
        assert os.listdir(tmp_path) == [], name


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_stream_writers_keep_only_what_reads_back_unchanged(tmp_path, suffix):
    """What a stream writer accepts reads back equal; the rest is refused as it comes (a
    later flush never fails on a value, so nothing recorded before is lost)."""
    import datetime
    import decimal

    np = pytest.importorskip("numpy")
    from orchestrace import Edge, Trace
    from orchestrace.io import load
    from orchestrace.io.parquet_stream import ParquetStreamWriter

    cycle: dict = {}
    cycle["self"] = cycle
    bad = [
        ({"content": "x\ud800"}, r"\$\.content.*surrogate"),
        ({"agent": "\udc80"}, r"\$\.agent.*surrogate"),
        ({"attrs": {"s": np.float64(0.5)}}, r"\$\.attrs\.s.*numpy"),
        ({"attrs": {"when": datetime.date(2020, 1, 1)}}, r"\$\.attrs\.when.*datetime"),
        ({"attrs": {"n": float("nan")}}, r"\$\.attrs\.n.*NaN"),
        ({"attrs": {1: "x"}}, r"\$\.attrs.*key 1"),
        ({"attrs": {"tags": {"a"}}}, r"\$\.attrs\.tags.*set"),
        ({"attrs": cycle}, r"\$\.attrs.*cycle"),
        ({"cost": decimal.Decimal("0.5")}, r"cost is 0\.5; a decimal\.Decimal"),
        ({"t": 10**400}, r"t is \d+"),
    ]
    good = [Event(id=f"e{i}", t=float(i), type="llm_call", agent="a", dur=1.0) for i in range(5)]

    def odd(kw):
        return Event(**{"id": "x", "t": 9.0, "type": "llm_call", "agent": "a", **kw})

    path = tmp_path / f"s.{suffix}"
    edge = Edge("e0", "e1", "causal")
    if suffix == "jsonl":
        w = StreamWriter(path, trace_id="t", task_id="k")
        w.event(good[0])
        for kw, says in bad:
            with pytest.raises(ConfigError, match=says):
                w.event(odd(kw))
        for e in good[1:]:
            w.event(e)
        w.edge(edge)
        w.close()
    else:
        p = ParquetStreamWriter(path, trace_id="t", row_group=2)
        p.event(good[0])
        for kw, says in bad:
            with pytest.raises(ConfigError, match=says):
                p.event(odd(kw))
        for e in good[1:]:
            p.event(e, [edge] if e.id == "e1" else [])
        p.finish(Trace(trace_id="t", task_id="k", events=tuple(good), edges=(edge,)))
    back = load(path)
    assert [e.id for e in back.events] == [e.id for e in good]


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_int_times_are_written_when_a_float_holds_them_exactly(tmp_path, fmt):
    from orchestrace import TraceBuilder
    from orchestrace.io import load

    def trace(t):
        b = TraceBuilder(task_id="k")
        b.llm("a", dur=2)
        tr = b.build()
        first = msgspec.structs.replace(tr.events[0], t=t)
        return tr.replace(events=(first, *tr.events[1:]))

    exact = trace(2**60)  # an int a float holds exactly
    dump(exact, tmp_path / f"ok.{fmt}")
    assert load(tmp_path / f"ok.{fmt}").events[0].t == 2**60
    with pytest.raises(TraceValidationError, match=r"\$\.events\[0\]\.t.*no float holds exactly"):
        dump(trace(2**53 + 1), tmp_path / f"bad.{fmt}")
    assert not (tmp_path / f"bad.{fmt}").exists()


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_int_totals_are_written_when_a_float_holds_them_exactly(tmp_path, good, fmt):
    from orchestrace.io import load

    dump(good.replace(rewards={"r": 2**70}), tmp_path / f"ok.{fmt}")
    assert load(tmp_path / f"ok.{fmt}").rewards == {"r": 2**70}
    with pytest.raises(TraceValidationError, match=r"\$\.rewards\.r.*no float holds exactly"):
        dump(good.replace(rewards={"r": 2**53 + 1}), tmp_path / f"bad.{fmt}")


def test_a_refusal_among_several_traces_names_the_trace(tmp_path, good):
    bad = good.replace(trace_id="second", rewards={"x": _NAN})
    for write, name in ((write_jsonl, "a.jsonl"), (write_parquet, "a.parquet")):
        with pytest.raises(TraceValidationError, match=r"trace #1 \('second'\)"):
            write([good, bad], tmp_path / name)
    assert os.listdir(tmp_path) == []
