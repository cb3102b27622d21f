"""The trace audit: one tamper at a time, each with its exact finding; clean runs audit clean."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import pytest

from orchestrace.errors import ConfigError
from orchestrace.runtime import TOPOLOGIES, run
from orchestrace.safety import CapabilityPolicy, Defenses, audit_trace
from orchestrace.safety.audit import (
    check_aggregates,
    check_answer,
    check_capabilities,
    check_senders,
    check_signatures,
    check_taint,
)
from orchestrace.trace.check import check_trace
from orchestrace.trace.model import Edge, Event, Trace

POLICY = CapabilityPolicy.from_dict(
    {
        "roles": {
            "orchestrator": {
                "may_spawn": True,
                "may_delegate": True,
                "may_stop": True,
                "may_aggregate": True,
            },
            "worker": {"tools": ["lookup"]},
        }
    }
)


@pytest.fixture(scope="module")
def tool_run() -> Trace:
    """A defended run with tools, endorsements, returns and an aggregate."""
    d = Defenses(sign_messages=True, capabilities=POLICY, taint=True, detector="builtin")
    return run("centralized", "multihop", agents=2, seed=2, defenses=d).trace


@pytest.fixture(scope="module")
def msg_run() -> Trace:
    """A defended run with signed messages."""
    d = dataclasses.replace(Defenses.all(), keys="seed")  # MACs the audit re-verifies
    return run("swarm", "arith", agents=3, seed=2, defenses=d).trace


@pytest.fixture(scope="module")
def plain_run() -> Trace:
    """An undefended run (the default policy applies)."""
    return run("centralized", "arith", agents=2, seed=2).trace


def _first(tr: Trace, **want: Any) -> Event:
    return next(e for e in tr.events if all(getattr(e, k) == v for k, v in want.items()))


def _edit(tr: Trace, ev: Event, **changes: Any) -> Trace:
    new = msgspec.structs.replace(ev, **changes)
    return tr.replace(events=tuple(new if e.id == ev.id else e for e in tr.events))


def _append(tr: Trace, after: str, **fields: Any) -> tuple[Trace, str]:
    eid = f"e{len(tr.events) + 1}"
    t = max(e.t + e.dur for e in tr.events)
    ev = Event(id=eid, t=t, **fields)
    return tr.replace(events=(*tr.events, ev), edges=(*tr.edges, Edge(after, eid, "causal"))), eid


def _codes(tr: Trace) -> list[tuple[str, str | None]]:
    return [(p.code, p.event_id) for p in audit_trace(tr)]


def _last_of(tr: Trace, agent: str) -> str:
    return [e.id for e in tr.events if e.agent == agent][-1]


# ---------------------------------------------------------------------- clean runs
def test_clean_runs_audit_clean(tool_run: Trace, msg_run: Trace, plain_run: Trace) -> None:
    for tr in (tool_run, msg_run, plain_run):
        assert audit_trace(tr) == []
    assert check_trace(tool_run, level="security") == []


@pytest.mark.slow
@pytest.mark.parametrize("topology", sorted(TOPOLOGIES))
def test_every_topology_defended_audits_clean(topology: str) -> None:
    for task in ("arith", "multihop"):
        for d in (Defenses.none(), Defenses.all()):
            tr = run(topology, task, agents=3, seed=5, defenses=d).trace
            found = audit_trace(tr)
            # undefended: tool output drives only decisions of roles that may endorse, and
            # aggregations, so taint derived from the graph is no finding either
            assert found == [], (topology, task, d.is_none())
            kinds = {(e.attrs or {}).get("kind") for e in tr.events if e.type == "safety_event"}
            assert kinds <= {"endorsement"}, kinds


# ---------------------------------------------------------------------- one tamper each
def test_spoofed_sender(plain_run: Trace, msg_run: Trace) -> None:
    ret = _first(plain_run, type="return")
    bad = _edit(plain_run, ret, from_="orchestrator")
    [p] = audit_trace(bad)
    assert (p.code, p.event_id) == ("spoofed-sender", ret.id)
    assert p.message == (
        f"return '{ret.id}' claims to be from 'orchestrator' but agent {ret.agent!r} produced it"
    )
    assert "Defenses(sign_messages=True)" in p.fix


def test_spoofed_signed_message_fails_its_mac(msg_run: Trace) -> None:
    msg = _first(msg_run, type="message")
    bad = _edit(msg_run, msg, from_="orchestrator")
    assert _codes(bad) == [("spoofed-sender", msg.id), ("invalid-signature", msg.id)]


def test_forged_signature(msg_run: Trace) -> None:
    msg = _first(msg_run, type="message")
    bad = _edit(msg_run, msg, attrs={**(msg.attrs or {}), "mac": "0" * 64})
    [p] = list(check_signatures(bad))
    assert (p.code, p.event_id) == ("invalid-signature", msg.id)
    assert _codes(bad) == [("invalid-signature", msg.id)]


def test_content_changed_after_signing(msg_run: Trace) -> None:
    msg = _first(msg_run, type="message")
    assert _codes(_edit(msg_run, msg, content="999")) == [("invalid-signature", msg.id)]


def test_data_changed_after_signing(msg_run: Trace) -> None:
    """The MAC covers ``attrs.data`` (what aggregators act on), not only the content."""
    msg = next(e for e in msg_run.events if e.type == "message" and "data" in (e.attrs or {}))
    data = msg.attrs["data"]
    forged = {**data, "value": 999} if isinstance(data, dict) else 999
    bad = _edit(msg_run, msg, attrs={**msg.attrs, "data": forged})
    assert ("invalid-signature", msg.id) in _codes(bad)


def test_unsigned_message_when_signing_was_on(msg_run: Trace) -> None:
    msg = _first(msg_run, type="message")
    attrs = {k: v for k, v in (msg.attrs or {}).items() if k not in ("sig", "mac")}
    assert _codes(_edit(msg_run, msg, attrs=attrs or None)) == [("unsigned-message", msg.id)]


def test_invalid_message_accepted(msg_run: Trace) -> None:
    msg = _first(msg_run, type="message")
    bad = _edit(msg_run, msg, attrs={**(msg.attrs or {}), "sig": "invalid"})
    [p] = audit_trace(bad)
    assert (p.code, p.event_id) == ("forgery-accepted", msg.id)
    assert p.message == f"message '{msg.id}' is invalid but no forgery_rejected event rejected it"


def test_worker_spawn(plain_run: Trace) -> None:
    bad, eid = _append(
        plain_run,
        _last_of(plain_run, "worker1"),
        type="spawn",
        agent="worker1",
        to="worker1.helper1",
        role="worker",
        decision="spawn",
    )
    [p] = list(check_capabilities(bad))
    assert (p.code, p.event_id) == ("capability", eid)
    assert p.message == (
        f"agent 'worker1' (role 'worker') did spawn ('{eid}'), which the default policy "
        "does not allow"
    )
    assert _codes(bad) == [("capability", eid)]


def test_worker_spawns_an_orchestrator(plain_run: Trace) -> None:
    bad, eid = _append(
        plain_run,
        _last_of(plain_run, "worker1"),
        type="spawn",
        agent="worker1",
        to="boss",
        role="orchestrator",
        decision="spawn",
    )
    assert _codes(bad) == [("role-escalation", eid), ("capability", eid)]


def test_worker_stop(plain_run: Trace) -> None:
    bad, eid = _append(
        plain_run,
        _last_of(plain_run, "worker1"),
        type="orchestrator_decision",
        agent="worker1",
        decision="stop",
        attrs={"answer": 7},
    )
    assert _codes(bad) == [("capability", eid)]


def test_tool_outside_policy(tool_run: Trace) -> None:
    call = _first(tool_run, type="tool_call")
    bad = _edit(tool_run, call, tool="shell")
    [p] = audit_trace(bad)
    assert (p.code, p.event_id) == ("capability", call.id)
    assert "call tool 'shell'" in p.message and "the recorded policy" in p.message


def test_human_intervention_by_a_worker(plain_run: Trace) -> None:
    bad, eid = _append(
        plain_run, _last_of(plain_run, "worker1"), type="human_intervention", agent="worker1"
    )
    assert _codes(bad) == [("capability", eid)]


def test_tainted_decision_without_endorsement(tool_run: Trace) -> None:
    endorsement = _first(tool_run, type="safety_event")
    assert endorsement.attrs is not None and endorsement.attrs["kind"] == "endorsement"
    [ret] = endorsement.attrs["endorses"]
    decision = next(e for e in tool_run.edges if e.src == endorsement.id and e.type == "causal")
    agg = _first(tool_run, type="aggregate")  # the same return feeds the aggregate too
    bad = _edit(tool_run, endorsement, attrs={**endorsement.attrs, "endorses": []})
    p = next(iter(check_taint(bad)))
    assert (p.code, p.event_id) == ("tainted-decision", decision.dst)
    assert p.message == (
        f"spawn '{decision.dst}' of 'orchestrator' is driven by tainted data ('{ret}') "
        "with no endorsement"
    )
    assert _codes(bad) == [("tainted-decision", decision.dst), ("tainted-decision", agg.id)]


def test_trusted_tool_output(tool_run: Trace) -> None:
    res = _first(tool_run, type="tool_result")
    [p] = audit_trace(_edit(tool_run, res, trusted=True))
    assert (p.code, p.event_id) == ("trusted-tool-output", res.id)


def test_taint_label_dropped(tool_run: Trace) -> None:
    llm = next(e for e in tool_run.events if e.type == "llm_call" and e.trusted is False)
    attrs = {k: v for k, v in (llm.attrs or {}).items() if k != "taint"}
    bad = _edit(tool_run, llm, trusted=None, attrs=attrs)
    assert _codes(bad) == [("taint-dropped", llm.id)]


def test_forged_aggregate(tool_run: Trace) -> None:
    agg = _first(tool_run, type="aggregate")
    bad = _edit(tool_run, agg, attrs={**(agg.attrs or {}), "value": 999999})
    [p] = list(check_aggregates(bad))
    assert (p.code, p.event_id) == ("aggregate-mismatch", agg.id)
    assert p.message.startswith(f"aggregate '{agg.id}' records '999999' but 'combine' over its")
    stop = next(e for e in tool_run.events if e.decision == "stop")
    assert _codes(bad) == [("aggregate-mismatch", agg.id), ("stop-answer-mismatch", stop.id)]


def test_forged_aggregate_of_reported_messages(msg_run: Trace) -> None:
    """A swarm aggregate is recomputed from the values its messages reported."""
    agg = _first(msg_run, type="aggregate")
    bad = _edit(msg_run, agg, attrs={**(agg.attrs or {}), "value": 424242})
    assert ("aggregate-mismatch", agg.id) in list(
        (p.code, p.event_id) for p in check_aggregates(bad)
    )
    ret = next(e for e in msg_run.events if e.type == "return" and e.agent == agg.agent)
    assert ("return-mismatch", ret.id) in _codes(bad)


def test_stop_answer_differs_from_the_consumed_aggregate(plain_run: Trace) -> None:
    stop = next(
        e for e in plain_run.events if e.type == "orchestrator_decision" and e.decision == "stop"
    )
    bad = _edit(plain_run, stop, attrs={**(stop.attrs or {}), "answer": 23})
    assert ("stop-answer-mismatch", stop.id) in _codes(bad)


def test_aggregate_inputs_removed(plain_run: Trace) -> None:
    agg = _first(plain_run, type="aggregate")
    edges = tuple(e for e in plain_run.edges if not (e.dst == agg.id and e.type == "aggregate"))
    assert _codes(plain_run.replace(edges=edges)) == [("aggregate-without-inputs", agg.id)]


def test_misrouted_return(plain_run: Trace) -> None:
    ret = _first(plain_run, type="return")
    assert _codes(_edit(plain_run, ret, to="worker2")) == [("misrouted-return", ret.id)]


def test_answer_from_a_worker(plain_run: Trace) -> None:
    bad, eid = _append(
        plain_run,
        _last_of(plain_run, "worker1"),
        type="orchestrator_decision",
        agent="worker1",
        decision="stop",
        attrs={"answer": 4242},
    )
    meta = dict(bad.meta)
    meta["result"] = {**meta["result"], "answer": 4242}
    bad = bad.replace(meta=meta)
    [p] = list(check_answer(bad))
    assert (p.code, p.event_id) == ("answer-from-non-orchestrator", eid)
    assert _codes(bad) == [("capability", eid), ("answer-from-non-orchestrator", eid)]


def test_answer_changed_after_the_run(plain_run: Trace) -> None:
    meta = dict(plain_run.meta)
    meta["result"] = {**meta["result"], "answer": -1}
    stop = [e for e in plain_run.events if e.decision == "stop"][-1]
    assert _codes(plain_run.replace(meta=meta)) == [("answer-mismatch", stop.id)]


def test_answer_only_from_a_worker_without_result(plain_run: Trace) -> None:
    bad, eid = _append(
        plain_run,
        _last_of(plain_run, "worker1"),
        type="orchestrator_decision",
        agent="worker1",
        decision="stop",
        attrs={"answer": 1},
    )
    meta = {k: v for k, v in bad.meta.items() if k != "result"}
    events = tuple(
        e for e in bad.events if not (e.agent == "orchestrator" and e.decision == "stop")
    )
    bad = bad.replace(meta=meta, events=events)
    bad = bad.replace(edges=tuple(e for e in bad.edges if e.dst in {x.id for x in events}))
    assert ("answer-from-non-orchestrator", eid) in _codes(bad)


def test_senders_check_alone(plain_run: Trace) -> None:
    assert list(check_senders(plain_run)) == []


# ---------------------------------------------------------------------- levels and bad input
def test_check_trace_security_level(plain_run: Trace) -> None:
    ret = _first(plain_run, type="return")
    bad = _edit(plain_run, ret, from_="orchestrator")
    assert check_trace(bad) == []
    assert [p.code for p in check_trace(bad, level="security")] == ["spoofed-sender"]
    with pytest.raises(ConfigError, match="unknown check level 'secure'; use one of: security"):
        check_trace(bad, level="secure")


def test_malformed_recorded_defenses(plain_run: Trace) -> None:
    meta = dict(plain_run.meta)
    meta["config"] = {**meta["config"], "defenses": {"sign": True}}
    with pytest.raises(
        ConfigError, match=r"cannot audit: meta.config.defenses: unknown key 'sign'"
    ):
        audit_trace(plain_run.replace(meta=meta))


def test_odd_values_never_crash_the_audit(tool_run: Trace, msg_run: Trace) -> None:
    odd: list[Any] = [None, 5, "x", [], {}, [1, [2]], {"a": None}, float("inf")]
    for base in (tool_run, msg_run):
        for value in odd:
            for i in range(0, len(base.events), 3):
                ev = base.events[i]
                attrs = {k: value for k in (ev.attrs or {})} or {"taint": value}
                attrs |= {"endorses": value, "kind": "endorsement", "value": value}
                audit_trace(_edit(base, ev, attrs=attrs))
            meta = {**base.meta, "result": value, "task": value}
            audit_trace(base.replace(meta=meta))
            cfg = {**base.meta["config"], "seed": value}
            audit_trace(base.replace(meta={**base.meta, "config": cfg}))


# ---------------------------------------------------------------------- taint derived from the graph
FIXTURES = __import__("pathlib").Path(__file__).parents[1] / "fixtures"


def test_derived_taint_flags_a_run_recorded_without_taint_tracking() -> None:
    from orchestrace.safety.audit import derive_taint

    tr = run("centralized", "multihop", agents=2, seed=2).trace  # defenses off
    taint = derive_taint(tr)
    by_id = {e.id: e for e in tr.events}
    results = [e.id for e in tr.events if e.type == "tool_result"]
    assert results and all(r in taint[r] for r in results)
    stop = [e for e in tr.events if e.type == "orchestrator_decision" and e.decision == "stop"][-1]
    assert stop.id in taint and by_id[stop.id].agent == "orchestrator"
    # the orchestrator may endorse: its decisions on tool output are what the runtime allows
    assert [p for p in check_taint(tr) if p.code == "tainted-decision"] == []
    # a policy under which the orchestrator may not endorse: the stop is flagged, as a warning
    strict = CapabilityPolicy.from_dict(
        {"roles": {"orchestrator": {"may_stop": True, "may_spawn": True, "may_endorse": False}}}
    )
    found = [p for p in audit_trace(tr, policy=strict) if p.code == "tainted-decision"]
    assert stop.id in {p.event_id for p in found}
    assert {p.severity for p in found} == {"warning"}
    for p in found:  # each finding names a decision and tool results that reach it
        assert by_id[p.event_id].type in ("spawn", "orchestrator_decision")
        assert any(f"'{r}'" in p.message for r in taint[p.event_id] if r in results)
    # the same run recorded with taint tracking on: the runtime endorsed, nothing to flag
    on = run("centralized", "multihop", agents=2, seed=2, defenses=Defenses(taint=True)).trace
    assert [p for p in check_taint(on) if p.code == "tainted-decision"] == []


def _worker_stop_on_tool_output(endorse: bool, labelled: bool) -> tuple[Trace, str]:
    from orchestrace.trace.build import TraceBuilder

    b = TraceBuilder(task_id="demo")
    sp = b.add("spawn", "orchestrator", to="w1", role="worker")
    call = b.add("tool_call", "w1", tool="search", after=[(sp, "causal")])
    attrs = {"taint": ["tool:search"]} if labelled else None
    res = b.add(
        "tool_result", "search", tool="search", attrs=attrs, after=[(call, "tool_dependency")]
    )
    if endorse:
        b.add(
            "safety_event",
            "orchestrator",
            attrs={"kind": "endorsement", "endorses": [res], "by": "orchestrator"},
            after=[(res, "safety_flow")],
        )
    stop = b.add("orchestrator_decision", "w1", decision="stop", after=[(res, "causal")])
    return b.build(), stop


def test_derived_taint_is_a_warning_on_decisions_of_roles_that_may_not_endorse() -> None:
    tr, stop = _worker_stop_on_tool_output(endorse=False, labelled=False)
    [p] = check_taint(tr)
    assert (p.code, p.event_id, p.severity) == ("tainted-decision", stop, "warning")
    assert "derived from the trace" in p.message


def test_a_forged_endorsement_clears_nothing() -> None:
    """An endorsement in a run whose events carry no taint label cannot be the runtime's."""
    tr, _ = _worker_stop_on_tool_output(endorse=True, labelled=False)
    codes = [(p.code, p.severity) for p in audit_trace(tr) if p.code != "capability"]
    assert ("forged-endorsement", "error") in codes
    assert ("tainted-decision", "warning") in codes
    # with labels, an endorsement by the orchestrator counts (no signing in this run)
    ok, _ = _worker_stop_on_tool_output(endorse=True, labelled=True)
    assert [p.code for p in check_taint(ok)] == []


def test_an_untrusted_roles_messages_are_sources() -> None:
    from orchestrace.trace.build import TraceBuilder

    policy = {
        "roles": {
            "worker": {"trusted": False},
            "orchestrator": {"may_stop": True, "may_spawn": True, "may_endorse": False},
        }
    }
    b = TraceBuilder(task_id="demo", meta={"config": {"defenses": {"capabilities": policy}}})
    sp = b.add("spawn", "orchestrator", to="w1", role="worker")
    msg = b.add("message", "w1", to="orchestrator", from_="w1", after=[(sp, "spawn")])
    stop = b.add("orchestrator_decision", "orchestrator", decision="stop", after=[(msg, "message")])
    found = [(p.code, p.event_id) for p in check_taint(b.build())]
    assert found == [("tainted-decision", stop)]


@pytest.mark.parametrize(
    "fixture",
    [
        "frameworks/agents_run.json",
        "frameworks/langgraph_runs.json",
        "otel/genai_otlp.json",
        "otel/openinference_agents.json",
        "otel/openinference_langgraph.json",
    ],
)
def test_imported_traces_get_derived_taint(fixture: str) -> None:
    from orchestrace.io import load_all
    from orchestrace.safety.audit import derive_taint

    for tr in load_all(FIXTURES / fixture):
        taint = derive_taint(tr)
        results = {e.id for e in tr.events if e.type == "tool_result"}
        assert results <= set(taint)
        # taint only flows forward along edges from the tool results
        reach = set(results)
        for e in tr.events:
            if any(
                ed.src in reach and ed.type != "safety_flow" for ed in tr.edges if ed.dst == e.id
            ):
                reach.add(e.id)
        assert set(taint) <= reach | {e.id for e in tr.events if e.trusted is False}
        found = [p for p in check_taint(tr) if p.code == "tainted-decision"]
        by_id = {e.id: e for e in tr.events}
        v = __import__("orchestrace.safety._audit_view", fromlist=["_View"])._View(tr)
        for p in found:  # derived: warnings, on decisions of agents that may not endorse
            assert p.severity == "warning" and not v.may_endorse(by_id[p.event_id].agent)
            assert p.event_id in taint
            assert by_id[p.event_id].type in (
                "spawn",
                "aggregate",
                "orchestrator_decision",
                "message",
            )


def test_imported_trace_derived_taint_is_a_warning_in_the_cli(tmp_path: Any) -> None:
    import subprocess
    import sys

    path = FIXTURES / "frameworks" / "langgraph_runs.json"
    from orchestrace.io import load_all

    found = [p for tr in load_all(path) for p in audit_trace(tr)]
    warnings = [p for p in found if p.severity == "warning"]
    errors = [p for p in found if p.severity == "error"]

    def audit(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "orchestrace", "audit", str(path), *extra],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )

    out = audit()
    shown = [ln for ln in out.stdout.splitlines() if ": $." in ln]
    assert len(shown) == len(found)
    assert sum("warning: " in ln for ln in shown) == len(warnings)
    assert out.returncode == (1 if errors else 0)
    strict = audit("--fail-on", "warning")
    assert strict.returncode == (1 if found else 0)
    quiet = audit("--level", "error", "-q")
    assert [ln for ln in quiet.stdout.splitlines() if ": $." in ln] == [
        ln for ln in shown if "warning: " not in ln
    ]
    codes = sorted({p.code for p in found})
    if codes:
        none = audit(*(x for c in codes for x in ("--ignore", c)))
        assert none.returncode == 0 and "clean" in none.stdout


def test_cli_re_verifies_macs_with_the_run_secret(tmp_path: Any) -> None:
    import subprocess
    import sys

    from orchestrace.io import dump
    from orchestrace.safety import RunSecret

    secret = RunSecret.new()
    d = Defenses(sign_messages=True, secret=secret)
    tr = run("swarm", "arith", agents=3, seed=2, defenses=d).trace
    good, bad, key = tmp_path / "good.json", tmp_path / "bad.json", tmp_path / "run.secret"
    dump(tr, good)
    msg = _first(tr, type="message")
    dump(_edit(tr, msg, content=str(msg.content) + "0"), bad)
    secret.save(key)

    def audit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "orchestrace", "audit", *args],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )

    ok = audit(str(good), "--secret-file", str(key))
    assert ok.returncode == 0 and "clean" in ok.stdout
    found = audit(str(bad), "--secret-file", str(key))
    assert found.returncode == 1 and "invalid-signature" not in found.stderr
    assert f"message '{msg.id}' is marked valid but its MAC does not verify" in found.stdout
    blind = audit(str(bad))  # without the secret the MAC cannot be checked, and it says so
    assert blind.returncode == 0 and "note: MACs were not re-checked" in blind.stderr
    wrong = tmp_path / "wrong.secret"
    RunSecret.new().save(wrong)
    other = audit(str(good), "--secret-file", str(wrong))
    assert other.returncode == 1 and "does not match this run" in other.stdout
    assert "changed after signing" not in other.stdout
    plain = tmp_path / "plain.json"
    dump(run("swarm", "arith", agents=3, seed=2).trace, plain)
    unused = audit(str(plain), "--secret-file", str(key))
    assert "note: --secret-file not used: the run's messages are not signed" in unused.stderr
    for out in (ok, found):
        assert secret.hex() not in out.stdout + out.stderr
    junk = tmp_path / "junk.secret"
    junk.write_text("zz" * 40)
    res = audit(str(good), "--secret-file", str(junk))
    assert res.returncode == 1 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("error: ") and "not a run secret" in res.stderr


# ---------------------------------------------------------------------- fields a tamperer controls
def test_aggregate_method_removed_or_set_to_judge_is_caught(msg_run: Trace) -> None:
    agg = _first(msg_run, type="aggregate")
    attrs = {k: v for k, v in (agg.attrs or {}).items() if k != "method"}
    gone = _edit(msg_run, agg, attrs={**attrs, "value": 999999})
    assert ("aggregate-method-unknown", agg.id) in _codes(gone)
    judged = _edit(msg_run, agg, attrs={**attrs, "value": 999999, "method": "judge"})
    assert ("aggregate-mismatch", agg.id) in _codes(judged)


def test_dropping_the_recorded_defenses_does_not_switch_signature_checks_off(
    msg_run: Trace,
) -> None:
    meta = dict(msg_run.meta)
    meta["config"] = {k: v for k, v in meta["config"].items() if k != "defenses"}
    msg = _first(msg_run, type="message")
    stripped = _edit(msg_run.replace(meta=meta), msg, attrs={**(msg.attrs or {}), "sig": "bad"})
    codes = [c for c, _ in _codes(stripped)]
    assert "defenses-record-mismatch" in codes and "unsigned-message" in codes


def test_an_endorsement_must_be_signed_when_messages_are() -> None:
    d = dataclasses.replace(Defenses.all(), keys="seed")  # MACs the audit re-verifies
    msg_run = run("centralized", "multihop", agents=2, seed=2, defenses=d).trace
    ends = [
        e for e in msg_run.events if e.type == "safety_event" and e.attrs["kind"] == "endorsement"
    ]
    assert ends and all(isinstance(e.attrs.get("mac"), str) for e in ends)
    assert audit_trace(msg_run) == []
    e = ends[0]
    unsigned = _edit(msg_run, e, attrs={k: v for k, v in e.attrs.items() if k != "mac"})
    assert ("forged-endorsement", e.id) in _codes(unsigned)
    bad_mac = _edit(msg_run, e, attrs={**e.attrs, "mac": "0" * 64})
    assert ("forged-endorsement", e.id) in _codes(bad_mac)  # seed keys: re-verified
