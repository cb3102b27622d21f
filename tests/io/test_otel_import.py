"""OTel import: one test per mapping rule of docs/import-otel.md, real framework output, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrace.errors import TraceFormatError
from orchestrace.io import import_path
from orchestrace.io.importers import sniff_value
from orchestrace.io.otel import import_values, sniff, sniff_openinference
from orchestrace.trace.check import check_trace
from orchestrace.trace.model import Trace

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "otel"
TID = "5b8efff798038103d269b633813fc60c"
S = 10**9
T0 = 1_700_000_000 * S


# ---------------------------------------------------------------------- building inputs
def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    return {"stringValue": v}


def span(
    sid: str,
    parent: str | None,
    start: float,
    end: float | None,
    name: str = "span",
    *,
    trace_id: str = TID,
    status: dict[str, Any] | None = None,
    links: list[dict[str, Any]] | None = None,
    events: list[dict[str, Any]] | None = None,
    **attrs: Any,
) -> dict[str, Any]:
    """An OTLP span; attribute names use ``__`` for dots (``gen_ai__agent__name``)."""
    out: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": sid.rjust(16, "0"),
        "name": name,
        "kind": "SPAN_KIND_INTERNAL",
        "startTimeUnixNano": str(T0 + int(start * S)),
        "attributes": [{"key": k.replace("__", "."), "value": _value(v)} for k, v in attrs.items()],
    }
    if end is not None:
        out["endTimeUnixNano"] = str(T0 + int(end * S))
    if parent is not None:
        out["parentSpanId"] = parent.rjust(16, "0")
    if status:
        out["status"] = status
    if links:
        out["links"] = links
    if events:
        out["events"] = events
    return out


def doc(*spans: dict[str, Any], service: str = "app") -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": service}}]
                },
                "scopeSpans": [{"scope": {"name": "tests", "version": "1"}, "spans": list(spans)}],
            }
        ]
    }


def agent(sid: str, parent: str | None, start: float, end: float, name: str, **kw: Any) -> Any:
    return span(
        sid,
        parent,
        start,
        end,
        f"invoke_agent {name}",
        gen_ai__operation__name="invoke_agent",
        gen_ai__agent__name=name,
        **kw,
    )


def chat(
    sid: str, parent: str, start: float, end: float, tin: int = 10, tout: int = 5, **kw: Any
) -> Any:
    return span(
        sid,
        parent,
        start,
        end,
        "chat m",
        gen_ai__operation__name="chat",
        gen_ai__request__model="m",
        gen_ai__usage__input_tokens=tin,
        gen_ai__usage__output_tokens=tout,
        **kw,
    )


def tool(sid: str, parent: str, start: float, end: float, name: str = "calc", **kw: Any) -> Any:
    return span(
        sid,
        parent,
        start,
        end,
        f"execute_tool {name}",
        gen_ai__operation__name="execute_tool",
        gen_ai__tool__name=name,
        **kw,
    )


def imp(*spans: dict[str, Any]) -> tuple[Trace, list[Any]]:
    res = import_values([doc(*spans)], source="in.json")
    assert len(res.traces) == 1
    tr = res.traces[0]
    errors = [p for p in check_trace(tr) if p.severity == "error"]
    assert errors == [], errors
    return tr, res.problems


def ev(tr: Trace, eid: str) -> Any:
    return tr.event(eid.rjust(16, "0") if "." not in eid and eid != "stop" else eid)


def E(x: str) -> str:
    head, _, tail = x.partition(".")
    return head.rjust(16, "0") + (f".{tail}" if tail else "") if head != "stop" else x


def edges(tr: Trace) -> set[tuple[str, str, str]]:
    return {(e.src, e.dst, e.type) for e in tr.edges}


# ---------------------------------------------------------------------- rule 1: input forms
def test_rule1_forms_give_the_same_trace_and_t_counts_from_the_earliest_start() -> None:
    a = import_path(FIX / "genai_otlp.json").traces
    b = import_path(FIX / "genai_spans.jsonl").traces
    c = import_path(FIX / "genai_console.txt", format="otel").traces
    assert len(a) == len(b) == len(c) == 1
    assert a[0].events == b[0].events == c[0].events
    assert a[0].edges == b[0].edges == c[0].edges
    assert min(e.t for e in a[0].events) == 0.0
    assert a[0].meta["source"]["start_time_unix_nano"] == 1_750_000_000 * S
    assert a[0].system == "research-app"


def test_rule1_one_trace_per_trace_id() -> None:
    other = "f" * 32
    res = import_values(
        [
            doc(
                agent("1", None, 0, 2, "a"),
                agent("2", None, 5, 6, "b", trace_id=other),
            )
        ],
        source="x",
    )
    assert [t.trace_id for t in res.traces] == [TID, other]


def test_sniffing_is_by_structure() -> None:
    d = json.loads((FIX / "genai_otlp.json").read_text())
    oi = json.loads((FIX / "openinference_agents.json").read_text())
    line = json.loads((FIX / "genai_spans.jsonl").read_text().splitlines()[0])
    assert sniff(d) and sniff(line) and sniff(oi)
    assert not sniff_openinference(d) and sniff_openinference(oi)
    assert sniff_value(d) == "otel" and sniff_value(oi) == "openinference"
    assert sniff_value(line) == "otel"
    assert not sniff({"trace_id": "t", "events": []}) and not sniff([1, 2]) and not sniff(None)


# ---------------------------------------------------------------------- rule 2: span kinds
def test_rule2_kinds_from_gen_ai_operation_and_openinference() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        span("2", "1", 0, 1, "llm", openinference__span__kind="LLM"),
        span("3", "1", 1, 2, "t", openinference__span__kind="TOOL", tool__name="t"),
        span("4", "1", 2, 3, "r", openinference__span__kind="RETRIEVER"),
        span("5", "1", 3, 4, "g", openinference__span__kind="GUARDRAIL"),
        span("6", "1", 4, 5, "c", openinference__span__kind="CHAIN"),
        span("7", "1", 5, 6, "emb", gen_ai__operation__name="embeddings"),
        span("8", "1", 6, 7, "wf", gen_ai__operation__name="invoke_workflow"),
    )
    types = {e.id: e.type for e in tr.events}
    assert types[E("2")] == "llm_call"
    assert types[E("3")] == "tool_call" and types[E("3.result")] == "tool_result"
    assert types[E("4")] == "tool_call"
    assert types[E("5")] == "safety_event"
    assert types[E("6")] == "orchestrator_decision"
    assert types[E("7")] == "llm_call"
    assert types[E("8")] == "orchestrator_decision"


# ---------------------------------------------------------------------- rule 3: agents
def test_rule3_a_chat_span_inherits_the_nearest_agent_and_chains_are_not_agents() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        span("2", "1", 0, 9, "router", openinference__span__kind="CHAIN"),
        span("3", "2", 0, 4, "branch", openinference__span__kind="CHAIN"),
        chat("4", "3", 0, 2),
        agent("5", "3", 2, 4, "", agent__name="helper"),
        chat("6", "5", 2, 3),
    )
    assert ev(tr, "4").agent == "lead"
    assert ev(tr, "2").agent == ev(tr, "3").agent == "lead"
    assert ev(tr, "6").agent == "helper"  # agent.name (OpenInference) names it
    assert {a for e in tr.events for a in (e.agent,)} == {"lead", "helper"}


def test_rule3_agent_name_falls_back_to_graph_node_and_span_name() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        span("2", "1", 0, 2, "x", openinference__span__kind="AGENT", graph__node__id="node_a"),
        span("3", "1", 2, 4, "invoke_agent planner", gen_ai__operation__name="invoke_agent"),
        span(
            "4",
            "1",
            4,
            5,
            "invoke_agent",
            gen_ai__operation__name="invoke_agent",
            gen_ai__agent__id="asst_7",
        ),
    )
    assert ev(tr, "2").to == "node_a"
    assert ev(tr, "3").to == "planner"
    assert ev(tr, "4").to == "asst_7"


# ---------------------------------------------------------------------- rule 4: concurrency
def test_rule4_concurrent_invocations_of_one_agent_get_numbered() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        agent("2", "1", 1, 5, "worker"),
        agent("3", "1", 1, 4, "worker"),
        agent("4", "1", 6, 8, "worker"),
        chat("5", "2", 1, 2),
        chat("6", "3", 1, 2),
    )
    # ordered by start, then end: the shorter one keeps the plain name
    assert ev(tr, "3").to == "worker" and ev(tr, "2").to == "worker#2"
    assert ev(tr, "4").to == "worker"  # the name is free again
    assert ev(tr, "6").agent == "worker" and ev(tr, "5").agent == "worker#2"


# ---------------------------------------------------------------------- rule 5: the root
def test_rule5_root_agent_ends_with_a_stop_carrying_its_output() -> None:
    tr, _ = imp(agent("1", None, 0, 3, "lead", output__value="42"), chat("2", "1", 0, 1))
    stop = tr.events[-1]
    assert stop.id == E("1.stop") and stop.type == "orchestrator_decision"
    assert stop.decision == "stop" and stop.agent == "lead" and stop.content == "42"
    assert stop.attrs is not None and stop.attrs["answer"] == "42"
    assert stop.t == 3.0


def test_rule5_a_workflow_root_is_a_pseudo_agent() -> None:
    tr, _ = imp(
        span("1", None, 0, 5, "my flow", gen_ai__operation__name="invoke_workflow"),
        agent("2", "1", 1, 4, "worker"),
    )
    assert ev(tr, "1").agent == "my flow" and ev(tr, "1").type == "orchestrator_decision"
    assert ev(tr, "2").type == "spawn" and ev(tr, "2").agent == "my flow"
    stop = tr.event("stop")
    assert stop.agent == "my flow" and stop.decision == "stop" and stop.t == 5.0


# ---------------------------------------------------------------------- rule 6: sub-agents
def test_rule6_sub_agent_is_spawn_and_return() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        agent("2", "1", 1, 4, "worker", output__value="done"),
        chat("3", "2", 1, 3),
        agent("4", "1", 5, 6, "worker"),
    )
    sp, ret = ev(tr, "2"), tr.event(E("2.return"))
    assert (sp.type, sp.agent, sp.to, sp.decision, sp.t) == (
        "spawn",
        "lead",
        "worker",
        "spawn",
        1.0,
    )
    assert (ret.type, ret.agent, ret.from_, ret.to, ret.t) == (
        "return",
        "worker",
        "worker",
        "lead",
        4.0,
    )
    assert ret.content == "done"
    assert ev(tr, "4").decision == "delegate"  # invoked again: delegated to
    assert (E("2"), E("3"), "spawn") in edges(tr)
    assert (E("3"), E("2.return"), "causal") in edges(tr)


# ---------------------------------------------------------------------- rule 7: handoffs
def test_rule7_handoff_is_a_delegate_message_to_the_next_invocation() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        agent("2", "1", 0, 3, "triage"),
        tool(
            "3",
            "2",
            1,
            2,
            "transfer_to_writer",
            gen_ai__agent__handoff__source__name="triage",
            gen_ai__agent__handoff__target__name="writer",
        ),
        agent("4", "1", 3, 8, "writer"),
        chat("5", "4", 3, 7),
    )
    h = ev(tr, "3")
    assert (h.type, h.agent, h.from_, h.to, h.decision) == (
        "message",
        "triage",
        "triage",
        "writer",
        "delegate",
    )
    assert h.tool == "transfer_to_writer"
    assert (E("3"), E("5"), "message") in edges(tr)


def test_rule7_openinference_handoff_span() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "wf"),
        span("2", "1", 0, 3, "triage", openinference__span__kind="AGENT", agent__name="triage"),
        span(
            "3",
            "2",
            1,
            2,
            "handoff to writer",
            openinference__span__kind="TOOL",
            input__value="triage",
            output__value="writer",
        ),
        span("4", "1", 3, 8, "writer", openinference__span__kind="AGENT", agent__name="writer"),
    )
    assert ev(tr, "3").type == "message" and ev(tr, "3").to == "writer"
    assert (E("3"), E("4.return"), "message") in edges(tr)


def test_rule7_handoff_without_target_span_is_named() -> None:
    tr, problems = imp(
        agent("1", None, 0, 10, "lead"),
        tool("3", "1", 1, 2, "t", gen_ai__agent__handoff__target__name="ghost"),
    )
    assert ev(tr, "3").to == "ghost"
    assert [p.code for p in problems] == ["handoff-target"]
    assert "ghost" in str(problems[0]) and problems[0].event_id == E("3")


# ---------------------------------------------------------------------- rule 8: tools
def test_rule8_tool_span_is_call_and_result() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        tool(
            "2",
            "1",
            1,
            3,
            "search",
            gen_ai__tool__call__arguments='{"q": 1}',
            gen_ai__tool__call__result="found",
        ),
        tool("3", "1", 3, 4, "search", status={"code": 2, "message": "boom"}),
    )
    call, res = ev(tr, "2"), tr.event(E("2.result"))
    assert (call.type, call.agent, call.tool, call.t, call.dur, call.content) == (
        "tool_call",
        "lead",
        "search",
        1.0,
        2.0,
        '{"q": 1}',
    )
    assert (res.type, res.agent, res.tool, res.t, res.content) == (
        "tool_result",
        "search",
        "search",
        3.0,
        "found",
    )
    assert (E("2"), E("2.result"), "tool_dependency") in edges(tr)
    assert tr.event(E("3.result")).error == "boom"


# ---------------------------------------------------------------------- rule 9: LLM calls
def test_rule9_llm_span_is_llm_call_with_model_and_tokens() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        span(
            "2",
            "1",
            1,
            2.5,
            "chat",
            gen_ai__operation__name="chat",
            gen_ai__request__model="req",
            gen_ai__response__model="resp",
            gen_ai__usage__input_tokens=120,
            gen_ai__usage__output_tokens=30,
        ),
        span(
            "3",
            "1",
            3,
            4,
            "oi",
            openinference__span__kind="LLM",
            llm__model_name="gpt",
            llm__token_count__prompt=7,
            llm__token_count__completion=2,
            llm__cost__total=0.5,
        ),
    )
    a, b = ev(tr, "2"), ev(tr, "3")
    assert (a.type, a.agent, a.tool, a.tokens_in, a.tokens_out, a.dur) == (
        "llm_call",
        "lead",
        "resp",
        120,
        30,
        1.5,
    )
    assert a.attrs is not None and a.attrs["otel"]["attributes"] == {"gen_ai.request.model": "req"}
    assert (b.tool, b.tokens_in, b.tokens_out, b.cost) == ("gpt", 7, 2, 0.5)


# ---------------------------------------------------------------------- rule 10: guardrails
def test_rule10_guardrail_is_a_safety_event() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        span(
            "2",
            "1",
            0,
            1,
            "no_secrets",
            openinference__span__kind="GUARDRAIL",
            status={"code": "STATUS_CODE_ERROR", "message": "tripwire"},
        ),
    )
    g = ev(tr, "2")
    assert (g.type, g.agent, g.error) == ("safety_event", "lead", "tripwire")


# ---------------------------------------------------------------------- rule 11: create_agent
def test_rule11_create_agent_is_a_spawn_and_later_invocations_delegate() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        span(
            "2",
            "1",
            0,
            1,
            "create_agent helper",
            gen_ai__operation__name="create_agent",
            gen_ai__agent__name="helper",
        ),
        agent("3", "1", 2, 4, "helper"),
    )
    assert (ev(tr, "2").type, ev(tr, "2").to, ev(tr, "2").decision) == ("spawn", "helper", "spawn")
    assert ev(tr, "3").decision == "delegate"


# ---------------------------------------------------------------------- rule 12: other spans
def test_rule12_chain_and_plain_spans_are_orchestrator_decisions() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        span("2", "1", 0, 1, "should_continue", openinference__span__kind="CHAIN"),
        span("3", "1", 1, 2, "GET /api"),
    )
    for sid in ("2", "3"):
        e = ev(tr, sid)
        assert (e.type, e.agent, e.decision) == ("orchestrator_decision", "lead", None)
    assert ev(tr, "3").attrs["otel"]["name"] == "GET /api"


# ---------------------------------------------------------------------- rule 13: durations
def test_rule13_a_span_with_children_lasts_until_its_first_child() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        tool("2", "1", 1, 9, "agent_tool"),
        agent("3", "2", 4, 8, "inner"),
        span("4", "1", 9, 10, "c", openinference__span__kind="CHAIN"),
    )
    assert ev(tr, "2").dur == 3.0  # 1 -> 4, the nested agent carries the rest
    assert tr.event(E("2.result")).t == 9.0
    assert ev(tr, "4").dur == 1.0  # a leaf lasts the whole span
    assert ev(tr, "3").dur == 0.0 and tr.event(E("3.return")).dur == 0.0


# ---------------------------------------------------------------------- rule 14: edges
def test_rule14_concurrency_gives_fan_out_and_aggregate_edges() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        chat("2", "1", 0, 1),
        agent("3", "1", 1, 4, "a"),
        agent("4", "1", 1, 5, "b"),
        chat("5", "3", 1, 4),
        chat("6", "4", 1, 5),
        chat("7", "1", 5, 6),
        chat("8", "1", 6, 7),
        tool("9", "1", 12, 13, "late"),  # ends after its parent: not waited for
    )
    g = edges(tr)
    assert {(E("2"), E("3"), "causal"), (E("2"), E("4"), "causal")} <= g  # fan-out
    assert {(E("3"), E("5"), "spawn"), (E("4"), E("6"), "spawn")} <= g
    assert {(E("3.return"), E("7"), "aggregate"), (E("4.return"), E("7"), "aggregate")} <= g
    assert (E("7"), E("8"), "causal") in g
    assert (E("8"), E("1.stop"), "causal") in g
    assert not any(d == E("1.stop") and s.startswith(E("9")) for s, d, _ in g)
    assert (E("8"), E("9"), "causal") in g
    cp = tr.graph.critical_path()
    assert cp.length == pytest.approx(8.0)  # 1 + 4 + 1 + 1 + the late tool call
    assert [tr.events[i].id for i in cp.indices][:4] == [E("2"), E("4"), E("6"), E("4.return")]


def test_rule14_a_single_return_is_a_return_edge() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        agent("2", "1", 0, 4, "a"),
        chat("3", "1", 4, 5),
    )
    assert (E("2.return"), E("3"), "return") in edges(tr)
    assert (E("2"), E("2.return"), "spawn") in edges(tr)


# ---------------------------------------------------------------------- rule 15: links
def test_rule15_links_become_edges_and_cycles_are_dropped() -> None:
    link = {"traceId": TID, "spanId": "2".rjust(16, "0")}
    back = {"traceId": TID, "spanId": "4".rjust(16, "0")}
    other = {"traceId": "e" * 32, "spanId": "1".rjust(16, "0")}
    tr, problems = imp(
        agent("1", None, 0, 10, "lead"),
        agent("2", "1", 0, 4, "a"),
        agent("3", "1", 0, 6, "b", links=[link, other]),
        chat("4", "3", 5, 6, links=[]),
        chat("5", "2", 1, 2, links=[back]),
    )
    g = edges(tr)
    assert (E("2"), E("3"), "causal") in g  # 2 started before 3 started
    assert any(p.code == "link-backwards" for p in problems)
    assert tr.event(E("3")).attrs["otel"]["links"][1]["trace_id"] == "e" * 32


def test_rule15_link_cycle_is_named_and_left_out() -> None:
    a = {"traceId": TID, "spanId": "3".rjust(16, "0")}
    b = {"traceId": TID, "spanId": "2".rjust(16, "0")}
    tr, problems = imp(
        agent("1", None, 0, 10, "lead"),
        chat("2", "1", 1, 2, links=[a]),
        chat("3", "1", 1, 2, links=[b]),
    )
    assert tr.graph.find_cycle() is None
    assert any(p.code == "causal-cycle" for p in problems)


# ---------------------------------------------------------------------- rule 16: steps
def test_rule16_each_llm_call_starts_a_step() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        chat("2", "1", 0, 1),
        tool("3", "1", 1, 2),
        chat("4", "1", 2, 3),
        agent("5", "1", 3, 4, "w"),
    )
    assert [ev(tr, x).step for x in "2345"] == [0, 0, 1, 1]
    assert tr.event(E("3.result")).step is None


# ---------------------------------------------------------------------- rule 17: lossless
def test_rule17_unmapped_is_kept_verbatim_and_counted() -> None:
    res = import_values(
        [
            doc(
                agent("1", None, 0, 10, "lead", custom__flag=True, deep__list=[1, 2]),
                chat(
                    "2",
                    "1",
                    0,
                    1,
                ),
                span(
                    "3",
                    "1",
                    1,
                    2,
                    "x",
                    events=[
                        {
                            "name": "exception",
                            "timeUnixNano": str(T0 + S),
                            "attributes": [
                                {"key": "exception.type", "value": {"stringValue": "E"}}
                            ],
                        }
                    ],
                ),
            )
        ],
        source="in.json",
    )
    tr = res.traces[0]
    otel = tr.event(E("1.stop")).attrs["otel"]
    assert otel["attributes"] == {"custom.flag": True, "deep.list": [1, 2]}
    assert otel["span_id"] == E("1") and otel["start_time_unix_nano"] == T0
    assert otel["end_time_unix_nano"] == T0 + 10 * S
    x = tr.event(E("3")).attrs["otel"]
    assert x["events"][0]["attributes"] == {"exception.type": "E"}
    assert tr.meta["source"]["resource"] == {"service.name": "app"}
    assert res.unmapped["attribute custom.*"] == 1 and res.unmapped["span event"] == 1
    assert res.unmapped["span without a GenAI kind"] == 1
    line = res.summary("in.json")
    assert "kept verbatim, unmapped" in line and "1 x span event" in line


# ---------------------------------------------------------------------- rule 20: roles
def test_rule20_roles_follow_the_spawn_tree() -> None:
    tr, _ = imp(
        agent("1", None, 0, 10, "lead"),
        agent("2", "1", 1, 6, "manager"),
        agent("3", "2", 2, 5, "leaf"),
        tool("4", "3", 2, 3),
    )
    assert {(e.agent, e.role) for e in tr.events if e.type != "spawn" and e.role} == {
        ("lead", "orchestrator"),
        ("manager", "manager"),
        ("leaf", "worker"),
    }
    assert (ev(tr, "2").role, ev(tr, "3").role) == ("manager", "worker")  # the started agent's
    assert tr.event(E("4.result")).role is None


# ---------------------------------------------------------------------- rule 18: bad input
def test_bad_missing_parent_is_imported_top_level() -> None:
    tr, problems = imp(agent("1", None, 0, 10, "lead"), chat("2", "dead", 1, 2))
    assert [p.code for p in problems] == ["missing-parent"]
    p = problems[0]
    assert p.event_id == E("2") and "dead".rjust(16, "0") in p.message and p.source == "in.json"
    assert "export the whole trace" in p.fix
    assert ev(tr, "2").type == "llm_call"


def test_bad_clock_skew_moves_the_subtree_into_its_parent() -> None:
    tr, problems = imp(
        agent("1", None, 10, 20, "lead"),
        agent("2", "1", 8, 12, "w"),  # 2 s before its parent
        chat("3", "2", 9, 11),
    )
    assert [p.code for p in problems] == ["clock-skew"]
    assert problems[0].event_id == E("2") and "2 s before its parent" in problems[0].message
    assert ev(tr, "2").t == 0.0 and ev(tr, "3").t == 1.0 and ev(tr, "3").dur == 2.0
    assert check_trace(tr) == []


def test_bad_duplicate_span_ids_are_renamed() -> None:
    tr, problems = imp(agent("1", None, 0, 10, "lead"), chat("2", "1", 1, 2), chat("2", "1", 3, 4))
    assert [p.code for p in problems] == ["duplicate-span-id"]
    assert problems[0].event_id == E("2") + "~2"
    assert {e.id for e in tr.events} >= {E("2"), E("2") + "~2"}


def test_bad_parent_cycle_is_broken() -> None:
    tr, problems = imp(agent("1", None, 0, 10, "lead"), chat("2", "3", 1, 2), chat("3", "2", 1, 2))
    assert [(p.code, p.event_id) for p in problems] == [("parent-cycle", E("2"))]
    assert "its own ancestor" in problems[0].message
    assert {ev(tr, "2").type, ev(tr, "3").type} == {"llm_call"}


def test_bad_unknown_span_kind_is_named_and_kept() -> None:
    tr, problems = imp(
        agent("1", None, 0, 10, "lead"),
        span("2", "1", 0, 1, "q", openinference__span__kind="QUANTUM"),
        span("3", "1", 1, 2, "r", gen_ai__operation__name="teleport"),
    )
    assert [p.code for p in problems] == ["unknown-span-kind", "unknown-span-kind"]
    assert "QUANTUM" in problems[0].message and "teleport" in problems[1].message
    assert ev(tr, "2").type == "orchestrator_decision"
    assert ev(tr, "2").attrs["otel"]["attributes"] == {"openinference.span.kind": "QUANTUM"}


def test_bad_times_and_ids() -> None:
    res = import_values(
        [
            doc(
                agent("1", None, 0, 10, "lead"),
                span("2", "1", 5, 4, "backwards"),
                span("3", "1", 2, None, "open"),
                {**span("4", "1", 1, 2, "noid"), "spanId": "xyz"},
            )
        ],
        source="in.json",
    )
    codes = sorted(p.code for p in res.problems)
    assert codes == ["bad-id", "negative-duration", "no-end-time"]
    tr = res.traces[0]
    assert tr.event(E("2")).dur == 0.0 and not [p for p in check_trace(tr) if p.severity == "error"]


def test_bad_truncated_file_keeps_complete_lines(tmp_path: Path) -> None:
    lines = (FIX / "genai_spans.jsonl").read_bytes().splitlines(keepends=True)
    path = tmp_path / "cut.jsonl"
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])
    res = import_path(path)
    assert res.problems[0].code == "truncated" and res.problems[0].source == f"{path}:{len(lines)}"
    tr = res.traces[0]
    assert tr.meta["partial"] is True
    assert not [p for p in check_trace(tr, partial=True) if p.severity == "error"]


def test_bad_truncated_document_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_bytes((FIX / "genai_otlp.json").read_bytes()[:5000])
    with pytest.raises(TraceFormatError) as err:
        import_path(path, format="otel")
    assert "\n" not in str(err.value) and "cut off" in str(err.value)


def test_bad_no_spans_is_one_line_error() -> None:
    with pytest.raises(TraceFormatError) as err:
        import_values(
            [{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x"}]}]}]}], source="f"
        )
    assert "no span could be imported" in str(err.value) and "\n" not in str(err.value)


def test_cli_convert_bad_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_bytes(b'{"resourceSpans": [{"scopeSpans": [')
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrace",
            "convert",
            str(path),
            "--from",
            "otel",
            "-o",
            str(tmp_path / "o.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 1 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------------- real framework output
def test_real_genai_semconv_flow_event_by_event() -> None:
    res = import_path(FIX / "genai_otlp.json")
    assert res.problems == []
    tr = res.traces[0]
    assert check_trace(tr) == []
    agents = {e.agent for e in tr.events if e.type != "tool_result"}
    assert agents == {"orchestrator", "researcher", "researcher#2", "coder", "reviewer"}
    counts: dict[str, int] = {}
    for e in tr.events:
        counts[e.type] = counts.get(e.type, 0) + 1
    assert counts == {
        "llm_call": 8,
        "spawn": 4,
        "return": 4,
        "tool_call": 3,
        "tool_result": 3,
        "message": 1,
        "orchestrator_decision": 1,
    }
    assert sum(e.tokens_in for e in tr.events) == 200 + 100 + 120 + 150 + 300 + 200 + 800 + 900
    assert sum(e.tokens_out for e in tr.events) == 50 + 20 + 30 + 40 + 60 + 25 + 90 + 150
    assert {e.tool for e in tr.events if e.type == "llm_call"} == {
        "gpt-4o-2025-01-01",
        "gpt-4o-mini-2025-01-01",
    }
    errors = [e for e in tr.events if e.error]
    assert [(e.type, e.tool) for e in errors] == [("tool_result", "web_search")]
    kinds: dict[str, int] = {}
    for d in tr.edges:
        kinds[d.type] = kinds.get(d.type, 0) + 1
    assert kinds == {
        "causal": 14,
        "spawn": 4,
        "tool_dependency": 3,
        "aggregate": 3,
        "message": 1,
        "return": 1,
    }
    handoff = next(e for e in tr.events if e.type == "message")
    assert (handoff.agent, handoff.to, handoff.decision) == ("orchestrator", "reviewer", "delegate")
    cp = tr.graph.critical_path()
    assert cp.length == pytest.approx(9.0)
    path = [tr.events[i] for i in cp.indices]
    assert [e.agent for e in path if e.type == "llm_call"] == [
        "orchestrator",
        "coder",
        "coder",
        "orchestrator",
        "reviewer",
    ]
    assert tr.graph.critical_steps() == 5


def test_real_openinference_agents_flow_event_by_event() -> None:
    res = import_path(FIX / "openinference_agents.json")
    assert res.problems == []
    tr = res.traces[0]
    assert tr.meta["source"]["format"] == "openinference"
    assert check_trace(tr) == []
    by_type: dict[str, list[Any]] = {}
    for e in tr.events:
        by_type.setdefault(e.type, []).append(e)
    assert {e.to for e in by_type["spawn"]} == {
        "orchestrator",
        "researcher_a",
        "researcher_b",
        "writer",
    }
    assert len(by_type["return"]) == 4
    assert sorted((e.agent, e.tokens_in, e.tokens_out) for e in by_type["llm_call"]) == [
        ("orchestrator", 100, 15),
        ("orchestrator", 150, 4),
        ("researcher_a", 30, 8),
        ("researcher_a", 50, 5),
        ("researcher_b", 40, 6),
        ("writer", 120, 20),
    ]
    assert {e.tool for e in by_type["llm_call"]} == {"fake-large", "fake-mini"}
    assert sorted(e.tool for e in by_type["tool_call"]) == ["lookup", "research_a", "research_b"]
    assert [e.agent for e in by_type["safety_event"]] == ["orchestrator"]
    (handoff,) = by_type["message"]
    assert (handoff.agent, handoff.to, handoff.decision) == ("orchestrator", "writer", "delegate")
    writer_first = next(e for e in tr.events if e.agent == "writer")
    assert any(d.src == handoff.id and d.type == "message" for d in tr.edges)
    assert writer_first.t >= handoff.t
    # the two workers ran in parallel: their spawns both follow the orchestrator's first call
    spawns = {e.to: e for e in by_type["spawn"]}
    first_llm = by_type["llm_call"][0]
    assert first_llm.agent == "orchestrator"
    for w in ("researcher_a", "researcher_b"):
        assert spawns[w].t >= first_llm.end - 1e-6
    cp = tr.graph.critical_path()
    assert {tr.events[i].agent for i in cp.indices} >= {"orchestrator", "writer"}
    assert tr.events[-1].decision == "stop"


def test_real_openinference_langgraph_flow_event_by_event() -> None:
    res = import_path(FIX / "openinference_langgraph.json")
    assert res.problems == []
    tr = res.traces[0]
    assert check_trace(tr) == []
    # LangGraph nodes are CHAIN spans: never agents; everything runs under the graph's root
    assert {e.agent for e in tr.events if e.type != "tool_result"} == {"LangGraph"}
    names = {e.id: e.attrs["otel"]["name"] for e in tr.events if e.attrs}
    counts: dict[str, int] = {}
    for e in tr.events:
        counts[e.type] = counts.get(e.type, 0) + 1
    assert counts == {
        "orchestrator_decision": 10,
        "llm_call": 4,
        "tool_call": 1,
        "tool_result": 1,
    }
    assert sorted(e.tokens_in for e in tr.events if e.type == "llm_call") == [10, 10, 20, 30]
    assert [e.tool for e in tr.events if e.type == "tool_call"] == ["lookup"]
    fan_out = next(i for i, n in names.items() if n == "fan_out")
    workers = [i for i, n in names.items() if n == "worker"]
    ask = next(i for i, n in names.items() if n == "ask_tool")
    g = edges(tr)
    assert all((fan_out, w, "causal") in g for w in workers)  # the routing fans out
    into_ask = [d.src for d in tr.edges if d.dst == ask]
    assert len(into_ask) == 2  # both worker branches join before ask_tool
    assert tr.events[-1].decision == "stop"
    assert tr.graph.critical_steps() == 4


@pytest.mark.slow
def test_live_packages_regenerate_fixtures_that_import_alike(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk")
    pytest.importorskip("agents")
    pytest.importorskip("openinference.instrumentation.openai_agents")
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_otel_fixtures.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    # the GenAI flow has fixed ids and times: the same bytes as the committed fixtures
    for name in ("genai_otlp.json", "genai_spans.jsonl", "genai_console.txt"):
        assert (tmp_path / name).read_bytes() == (FIX / name).read_bytes(), name
    # the Agents SDK run has fresh ids and times: the same structure. Its two researchers run
    # concurrently, so how their events interleave depends on timing: each agent's own
    # sequence must be the same
    a = import_path(tmp_path / "openinference_agents.json").traces[0]
    b = import_path(FIX / "openinference_agents.json").traces[0]

    def per_agent(trace):
        seqs: dict[str, list[tuple]] = {}
        for e in trace.events:
            seqs.setdefault(e.agent, []).append((e.type, e.to, e.tokens))
        return seqs

    assert per_agent(a) == per_agent(b)
    assert len(a.events) == len(b.events)
    assert sorted(d.type for d in a.edges) == sorted(d.type for d in b.edges)
    a = import_path(tmp_path / "openinference_langgraph.json").traces[0]
    b = import_path(FIX / "openinference_langgraph.json").traces[0]
    assert sorted((e.type, e.agent, e.tokens) for e in a.events) == sorted(
        (e.type, e.agent, e.tokens) for e in b.events
    )
    assert len(a.edges) == len(b.edges)


def test_bad_deep_nesting_and_long_parent_cycles_do_not_hang() -> None:
    import time

    n = 5000
    deep = [agent("1", None, 0, n + 1, "lead")]
    deep += [
        span(f"{i:x}", f"{i - 1:x}", 0, n + 1 - i / n, "c", openinference__span__kind="CHAIN")
        for i in range(2, n)
    ]
    ring = [
        chat(f"{i:x}", f"{i - 1 if i > 100_001 else 100_000 + n - 1:x}", 1, 2)
        for i in range(100_001, 100_000 + n)
    ]
    t0 = time.perf_counter()
    tr, problems = imp(*deep, *ring)
    assert time.perf_counter() - t0 < 30
    # the broken ring makes a second top-level span: lead is spawned under a workflow root
    assert tr.n_events == 2 * n
    assert [p.code for p in problems] == ["parent-cycle"]


def test_bad_deeply_nested_attribute_is_one_line_error() -> None:
    value: dict[str, Any] = {"stringValue": "x"}
    for _ in range(5000):
        value = {"arrayValue": {"values": [value]}}
    bad = span("1", None, 0, 1, "x")
    bad["attributes"] = [{"key": "deep", "value": value}]
    with pytest.raises(TraceFormatError) as err:
        import_values([doc(bad)], source="deep.json")
    assert "nested too deeply" in str(err.value) and "\n" not in str(err.value)
