"""OpenAI Agents SDK import: the real SDK's export event by event, each mapping rule, bad input.

Rules are those of docs/import-agents.md (``test_rule_N_*`` tests rule N).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

from orchestrace.errors import TraceFormatError
from orchestrace.io import dump, import_path, load
from orchestrace.io.importers import sniff_value
from orchestrace.io.openai_agents import import_values, sniff
from orchestrace.io.upstream import to_upstream
from orchestrace.trace.check import check_trace
from orchestrace.trace.graph import critical_path
from orchestrace.trace.steps import critical_steps

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
RUN = FIXTURES / "agents_run.json"
T0 = 1_700_000_000.0


def span(sid: str, parent: str | None, kind: str, start: float, end: float, **data: Any) -> dict:
    """A span item as Span.export() writes it (times as ISO strings)."""
    from datetime import UTC, datetime

    def iso(x: float) -> str:
        return datetime.fromtimestamp(T0 + x, UTC).isoformat()

    error = data.pop("error", None)
    return {
        "object": "trace.span",
        "id": sid,
        "trace_id": "trace_1",
        "parent_id": parent,
        "started_at": iso(start),
        "ended_at": iso(end),
        "span_data": {"type": kind, **data},
        "error": error,
    }


def head(**kw: Any) -> dict:
    return {"object": "trace", "id": "trace_1", "workflow_name": "wf", **kw}


def run(items: list[dict], **kw: Any):
    return import_values([items], source="in.json", **kw)


def one(items: list[dict]):
    res = run(items)
    assert len(res.traces) == 1
    tr = res.traces[0]
    assert [p for p in check_trace(tr) if p.severity == "error"] == []
    return tr


def by_id(tr):
    return {e.id: e for e in tr.events}


# ---------------------------------------------------------------------- the real SDK's output
@pytest.fixture(scope="module")
def fixture_items() -> list[dict]:
    return json.loads(RUN.read_text())["data"]


@pytest.fixture(scope="module")
def imported():
    res = import_path(RUN)
    assert len(res.traces) == 1
    return res


def test_fixture_is_recognised(fixture_items):
    doc = json.loads(RUN.read_text())
    assert sniff(doc) and sniff_value(doc) == "openai-agents"
    assert sniff(fixture_items) and sniff(fixture_items[0])


def test_fixture_agents_and_event_counts(imported, fixture_items):
    tr = imported.traces[0]
    assert imported.problems == [] and imported.unmapped == {}
    assert check_trace(tr) == []
    spans = [i for i in fixture_items if i["object"] == "trace.span"]
    kinds = Counter(s["span_data"]["type"] for s in spans)
    assert {e.agent for e in tr.events if e.type != "tool_result"} == {
        s["span_data"]["name"] for s in spans if s["span_data"]["type"] == "agent"
    }
    counts = Counter(e.type for e in tr.events)
    tool_agents = {
        s["span_data"]["name"]
        for s in spans
        if s["span_data"]["type"] == "function"
        and any(
            a["parent_id"] in {x["id"] for x in spans if x["parent_id"] == s["id"]}
            for a in spans
            if a["span_data"]["type"] == "agent"
        )
    }
    assert tool_agents == {"research_a", "research_b"}
    plain_functions = kinds["function"] - len(tool_agents)
    assert counts == {
        "llm_call": kinds["generation"],
        "tool_call": plain_functions,
        "tool_result": plain_functions,
        "spawn": len(tool_agents) + kinds["handoff"],
        "return": len(tool_agents),
        "safety_event": kinds["guardrail"],
        "orchestrator_decision": 1,  # the root agent's stop (rule 14)
    }
    stop = tr.events[-1]
    answer = [e for e in tr.events if e.type == "llm_call"][-1]
    assert (stop.type, stop.decision, stop.agent, stop.role) == (
        "orchestrator_decision",
        "stop",
        "orchestrator",
        "orchestrator",
    )
    assert stop.content == answer.content == "final answer"
    assert "causal" in {x.type for x in tr.edges if (x.src, x.dst) == (answer.id, stop.id)}
    roles = {e.agent: e.role for e in tr.events if e.type not in ("tool_result", "spawn")}
    assert roles == {
        "orchestrator": "orchestrator",
        "researcher_a": "worker",
        "researcher_b": "worker",
        "writer": "worker",
    }


def test_fixture_tokens_and_models(imported, fixture_items):
    tr = imported.traces[0]
    gens = {
        i["id"]: i["span_data"]
        for i in fixture_items
        if i.get("span_data", {}).get("type") == "generation"
    }
    for e in tr.events:
        if e.type == "llm_call":
            g = gens[e.id]
            assert (e.tokens_in, e.tokens_out, e.tool) == (
                g["usage"]["input_tokens"],
                g["usage"]["output_tokens"],
                g["model"],
            )
    root_task = next(
        i for i in fixture_items if i["object"] == "trace.span" and i["parent_id"] is None
    )
    usage = root_task["span_data"]["data"]["usage"]
    assert tr.costs["tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_fixture_edges(imported):
    tr = imported.traces[0]
    ev = by_id(tr)
    spawn_edges = [(ev[e.src], ev[e.dst]) for e in tr.edges if e.type == "spawn"]
    # each spawned agent's first event is fed by its spawn
    assert sorted(d.agent for _, d in spawn_edges) == ["researcher_a", "researcher_b", "writer"]
    assert all(s.to == d.agent and s.type == "spawn" for s, d in spawn_edges)
    handoff = next(s for s, d in spawn_edges if d.agent == "writer")
    assert handoff.decision == "delegate" and handoff.agent == "orchestrator"
    agg = [(ev[e.src], ev[e.dst]) for e in tr.edges if e.type == "aggregate"]
    assert sorted(s.agent for s, _ in agg) == ["researcher_a", "researcher_b"]
    assert {d.id for _, d in agg} == {agg[0][1].id} and agg[0][1].type == "llm_call"
    assert all(s.type == "return" and s.to == "orchestrator" for s, _ in agg)
    dep = [e for e in tr.edges if e.type == "tool_dependency"]
    assert [(ev[e.src].type, ev[e.dst].type) for e in dep] == [("tool_call", "tool_result")]


def test_fixture_critical_path_and_steps(imported):
    tr = imported.traces[0]
    ev = by_id(tr)
    path = [ev[i] for i in critical_path(tr).ids]
    # the longer worker (two LLM turns and a tool) lies on the path, then the handoff
    assert next(e.agent for e in path if e.agent.startswith("researcher")) == "researcher_a"
    assert "tool_call" in [e.type for e in path]
    assert path[-1].agent == "writer" and path[-1].type == "llm_call"
    assert path[0].agent == "orchestrator"
    assert critical_path(tr).length <= tr.costs["wall_clock_s"] + 1e-6
    # orchestrator 2 turns + the longer worker's 2 turns (its own step numbering) + writer
    assert critical_steps(tr) >= 3


def test_fixture_every_format_and_schema(imported, tmp_path):
    tr = imported.traces[0]
    for name in ("t.json", "t.jsonl", "t.parquet"):
        dump(tr, tmp_path / name)
        assert load(tmp_path / name) == tr
    doc = to_upstream(tr)
    assert {e["type"] for e in doc["events"]} <= {
        "spawn",
        "return",
        "tool_call",
        "tool_result",
        "safety_event",
        "message",
        "orchestrator_decision",
    }


def test_fixture_convert_and_analyze_cli(tmp_path, capsys):
    from orchestrace.cli import main

    out = tmp_path / "out.json"
    assert main(["convert", str(RUN), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "imported 1 trace(s), 15 events; 0 problem(s)" in err
    assert main(["analyze", str(out)]) == 0


# ---------------------------------------------------------------------- one test per rule
def test_rule_1_traces_grouped_with_source_meta():
    items = [
        head(group_id="g1", metadata={"k": "v"}),
        span("a", None, "agent", 0, 2, name="lead"),
        span("g", "a", "generation", 0, 1, model="m"),
        {**span("b", None, "agent", 0, 1, name="other"), "trace_id": "trace_2"},
        {**span("h", "b", "generation", 0, 1, model="m"), "trace_id": "trace_2"},
    ]
    res = run(items)
    assert [t.trace_id for t in res.traces] == ["trace_1", "trace_2"]
    t1, t2 = res.traces
    assert (t1.task_id, t1.system) == ("wf", "openai-agents")
    assert t1.meta["source"] == {
        "format": "openai-agents",
        "trace_id": "trace_1",
        "workflow_name": "wf",
        "group_id": "g1",
        "metadata": {"k": "v"},
    }
    assert t2.task_id == "agents-workflow"  # no trace item, no task span


def test_rule_2_times_relative_to_first_span():
    tr = one(
        [head(), span("a", None, "agent", 5, 9, name="x"), span("g", "a", "generation", 6, 8.5)]
    )
    (e,) = tr.events
    assert (e.t, e.dur) == (pytest.approx(1.0), pytest.approx(2.5))


def test_rule_3_concurrent_agents_of_one_name_are_distinct():
    items = [
        head(),
        span("a1", None, "agent", 0, 4, name="w", tools=["t"]),
        span("g1", "a1", "generation", 0, 1),
        span("a2", None, "agent", 1, 3, name="w"),
        span("g2", "a2", "generation", 1, 2),
        span("a3", None, "agent", 5, 6, name="w"),
        span("g3", "a3", "generation", 5, 6),
    ]
    tr = one(items)
    assert {e.id: e.agent for e in tr.events} == {"g1": "w", "g2": "w#2", "g3": "w"}
    assert tr.meta["agents"]["w"]["spans"] == ["a1", "a3"]
    assert tr.meta["agents"]["w"]["tools"] == ["t"]


def test_rule_4_generation_inherits_nearest_agent():
    items = [
        head(),
        span("a", None, "agent", 0, 4, name="lead"),
        span("c", "a", "custom", 0, 3, name="inner", data={}),
        span("g", "c", "generation", 1, 2),
        span("loose", None, "generation", 4, 5),
    ]
    tr = one(items)
    assert by_id(tr)["g"].agent == "lead"
    assert by_id(tr)["loose"].agent == "wf"


def test_rule_5_generation_is_llm_call_with_tokens_and_model():
    items = [
        head(),
        span("a", None, "agent", 0, 4, name="lead"),
        span(
            "g",
            "a",
            "generation",
            0,
            1,
            model="gpt-x",
            usage={"prompt_tokens": 7, "completion_tokens": 2},
            output=[{"role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}],
            model_config={"temperature": 0},
        ),
        span(
            "r",
            "a",
            "response",
            1,
            2,
            response_id="resp_1",
            usage={"input_tokens": 3, "output_tokens": 1},
        ),
        span("s", "a", "speech", 2, 3, model="tts-1", output={"data": "", "format": "pcm"}),
    ]
    g, r, s, stop = one(items).events
    assert (stop.decision, stop.agent, stop.t) == ("stop", "lead", 4.0)  # the trace end
    assert (g.type, g.tool, g.tokens_in, g.tokens_out, g.content) == (
        "llm_call",
        "gpt-x",
        7,
        2,
        "hi",
    )
    assert g.attrs["span_data"]["model_config"] == {"temperature": 0}
    assert (r.type, r.tokens, r.attrs["span_data"]["response_id"]) == ("llm_call", 4, "resp_1")
    assert (s.type, s.tool) == ("llm_call", "tts-1")


def test_rule_6_function_is_tool_call_and_result():
    items = [
        head(),
        span("a", None, "agent", 0, 5, name="lead"),
        span("f", "a", "function", 1, 2, name="calc", input="1+1", output="2"),
        span(
            "bad",
            "a",
            "function",
            2,
            3,
            name="calc",
            input="x",
            output=None,
            error={"message": "boom", "data": {"k": 1}},
        ),
        span("g", "a", "generation", 3, 4),
        span("m", "a", "mcp_tools", 4, 5, server="fs", result=["read"]),
    ]
    tr = one(items)
    ev = by_id(tr)
    assert (ev["f"].type, ev["f"].tool, ev["f"].content, ev["f"].dur) == (
        "tool_call",
        "calc",
        "1+1",
        1.0,
    )
    res = ev["f.result"]
    assert (res.type, res.agent, res.t, res.content) == ("tool_result", "calc", 2.0, "2")
    assert ev["bad.result"].error == 'boom: {"k":1}'
    edges = {(e.src, e.dst): e.type for e in tr.edges}
    assert edges[("f", "f.result")] == "tool_dependency"
    # a result feeds the agent's next event
    assert edges[("f.result", "bad")] == "causal" and edges[("bad.result", "g")] == "causal"
    assert ev["m"].tool == "mcp_list_tools:fs" and ev["m.result"].content == '["read"]'


def test_rule_7_agent_as_tool_spawns_and_returns():
    items = [
        head(),
        span("a", None, "agent", 0, 10, name="lead"),
        span("f", "a", "function", 1, 6, name="ask_worker", input="sub", output="done"),
        span(
            "task", "f", "custom", 1, 6, name="task", data={"sdk_span_type": "task", "name": "wf"}
        ),
        span("w", "task", "agent", 1.5, 5.5, name="worker"),
        span("wg", "w", "generation", 2, 5),
        span("g2", "a", "generation", 7, 8),
    ]
    tr = one(items)
    ev = by_id(tr)
    sp, ret = ev["f.spawn"], ev["f.return"]
    assert (sp.type, sp.agent, sp.to, sp.decision, sp.t, sp.content) == (
        "spawn",
        "lead",
        "worker",
        "spawn",
        1.0,
        "sub",
    )
    assert (ret.type, ret.agent, ret.to, ret.t, ret.content) == (
        "return",
        "worker",
        "lead",
        6.0,
        "done",
    )
    edges = {(e.src, e.dst): e.type for e in tr.edges}
    assert edges[("f.spawn", "wg")] == "spawn"
    assert edges[("f.return", "g2")] == "return"
    assert "f" not in ev  # no tool_call for an agent run as a tool


def test_rule_8_handoff_is_delegating_spawn_or_message():
    items = [
        head(),
        span("a", None, "agent", 0, 3, name="lead"),
        span("g", "a", "generation", 0, 1),
        span("h", "a", "handoff", 2, 3, from_agent="lead", to_agent="writer"),
        span("b", None, "agent", 3, 6, name="writer"),
        span("bg", "b", "generation", 3, 4),
        span("h2", "b", "handoff", 5, 6, from_agent="writer", to_agent="lead"),
        span("c", None, "agent", 6, 8, name="lead"),
        span("cg", "c", "generation", 6, 7),
    ]
    tr = one(items)
    ev = by_id(tr)
    assert (ev["h"].type, ev["h"].agent, ev["h"].to, ev["h"].decision) == (
        "spawn",
        "lead",
        "writer",
        "delegate",
    )
    assert (ev["h2"].type, ev["h2"].to, ev["h2"].decision) == ("message", "lead", "delegate")
    edges = {(e.src, e.dst): e.type for e in tr.edges}
    assert edges[("h", "bg")] == "spawn" and edges[("h2", "cg")] == "message"


def test_rule_9_guardrail_is_safety_event():
    items = [
        head(),
        span("a", None, "agent", 0, 2, name="lead"),
        span("gr", "a", "guardrail", 0, 1, name="no_pii", triggered=True),
    ]
    (e,) = one(items).events
    assert (e.type, e.agent, e.content) == ("safety_event", "lead", "guardrail no_pii triggered")
    assert e.attrs["span_data"]["triggered"] is True


def test_rule_10_turns_give_steps():
    def turn(sid, parent, n, s, e):
        return span(
            sid,
            parent,
            "custom",
            s,
            e,
            name="turn",
            data={"sdk_span_type": "turn", "turn": n, "agent_name": "lead"},
        )

    items = [
        head(),
        span("a", None, "agent", 0, 10, name="lead"),
        turn("t1", "a", 1, 0, 4),
        span("g1", "t1", "generation", 0, 1),
        span("f1", "t1", "function", 1, 3, name="calc"),
        turn("t2", "a", 2, 4, 8),
        span("g2", "t2", "generation", 4, 5),
    ]
    res = run(items)
    ev = by_id(res.traces[0])
    assert (ev["g1"].step, ev["f1"].step, ev["g2"].step) == (1, 1, 2)
    assert res.unmapped == {}  # turn spans are mapped (as steps)


def test_rule_10_without_turns_steps_count_llm_calls():
    items = [
        head(),
        span("a", None, "agent", 0, 10, name="lead"),
        span("g1", "a", "generation", 0, 1),
        span("f1", "a", "function", 1, 2, name="calc"),
        span("f2", "a", "function", 1, 3, name="calc"),
        span("g2", "a", "generation", 4, 5),
        span("b", None, "agent", 0, 10, name="other"),
        span("h1", "b", "generation", 0, 1),
    ]
    ev = by_id(one(items))
    assert [ev[k].step for k in ("g1", "f1", "f2", "g2", "h1")] == [1, 1, 1, 2, 1]


def test_rule_11_concurrency_and_data_flow():
    items = [
        head(),
        span("a", None, "agent", 0, 10, name="lead"),
        span("g", "a", "generation", 0, 1),
        span("f1", "a", "function", 1, 4, name="t1"),
        span("f2", "a", "function", 1, 3, name="t2"),
        span("g2", "a", "generation", 5, 6),
    ]
    tr = one(items)
    edges = {(e.src, e.dst): e.type for e in tr.edges}
    # parallel tool calls are not chained to each other
    assert ("f1", "f2") not in edges and ("f2", "f1") not in edges
    assert edges[("g", "f1")] == edges[("g", "f2")] == "causal"
    # the next call consumes both results
    assert edges[("f1.result", "g2")] == edges[("f2.result", "g2")] == "causal"
    assert critical_path(tr).length == pytest.approx(5.0)  # 1 + 3 (longer tool) + 1


def test_rule_11_returns_of_several_workers_aggregate():
    items = [
        head(),
        span("a", None, "agent", 0, 10, name="lead"),
        span("g", "a", "generation", 0, 1),
    ]
    for k, (s, e) in enumerate([(1, 4), (1, 5)]):
        items += [
            span(f"f{k}", "a", "function", s, e, name=f"ask{k}", output="r"),
            span(f"w{k}", f"f{k}", "agent", s, e, name=f"worker{k}"),
            span(f"wg{k}", f"w{k}", "generation", s, e),
        ]
    items.append(span("g2", "a", "generation", 6, 7))
    tr = one(items)
    edges = {(e.src, e.dst): e.type for e in tr.edges}
    assert edges[("f0.return", "g2")] == edges[("f1.return", "g2")] == "aggregate"


def test_rule_12_unmapped_kept_verbatim_and_counted():
    odd = span("x", "a", "realtime_audio", 1, 2, payload={"k": [1, 2]})
    custom = span("c", "a", "custom", 1, 2, name="retrieval", data={"docs": 3})
    res = run(
        [
            head(),
            span("a", None, "agent", 0, 3, name="lead"),
            span("g", "a", "generation", 0, 1),
            odd,
            custom,
        ]
    )
    tr = res.traces[0]
    assert res.unmapped == {"span type 'realtime_audio'": 1, "custom span 'retrieval'": 1}
    assert tr.meta["unmapped"] == [odd, custom]
    assert [p.code for p in res.problems] == ["unknown-span-type"]
    assert res.problems[0].event_id == "x" and "meta.unmapped" in res.problems[0].fix
    assert "kept verbatim, unmapped: 1 x custom span 'retrieval', 1 x span type" in res.summary("f")


# ---------------------------------------------------------------------- bad input (rule 13)
def codes(res):
    return [p.code for p in res.problems]


def test_bad_missing_parent_attached_to_root():
    res = run(
        [head(), span("a", "gone", "agent", 0, 2, name="lead"), span("g", "a", "generation", 0, 1)]
    )
    assert codes(res) == ["missing-parent"]
    p = res.problems[0]
    assert p.event_id == "a" and "'gone'" in p.message and "export the parent span" in p.fix
    assert by_id(res.traces[0])["g"].agent == "lead"


def test_bad_clock_skew_moved_to_parent_start():
    res = run(
        [head(), span("a", None, "agent", 5, 9, name="lead"), span("g", "a", "generation", 3, 6)]
    )
    assert codes(res) == ["clock-skew"]
    assert res.problems[0].event_id == "g" and "moved to its parent's start" in res.problems[0].fix
    assert check_trace(res.traces[0]) == []
    g = by_id(res.traces[0])["g"]
    assert (g.t, g.dur) == (0.0, pytest.approx(1.0))


def test_bad_end_before_start_and_missing_times():
    a = span("a", None, "agent", 0, 4, name="lead")
    g = span("g", "a", "generation", 3, 1)
    h = {**span("h", "a", "generation", 1, 2), "started_at": None, "ended_at": "not a time"}
    res = run([head(), a, g, h])
    assert sorted(codes(res)) == ["clock-skew", "missing-time"]
    ev = by_id(res.traces[0])
    assert ev["g"].dur == 0.0 and ev["h"].t == 0.0


def test_bad_duplicate_ids():
    g = span("g", "a", "generation", 0, 1)
    other = span("g", "a", "generation", 1, 2, model="other")
    res = run([head(), span("a", None, "agent", 0, 3, name="lead"), g, dict(g), other])
    assert codes(res) == ["duplicate-id", "duplicate-id"]
    assert "same content" in res.problems[0].message and "'g~2'" in res.problems[1].fix
    assert [e.id for e in res.traces[0].events] == ["g", "g~2"]
    assert check_trace(res.traces[0]) == []


def test_bad_parent_cycle():
    res = run(
        [
            head(),
            span("a", "b", "agent", 0, 3, name="x"),
            span("b", "a", "agent", 0, 3, name="y"),
            span("g", "b", "generation", 0, 1),
        ]
    )
    assert codes(res) == ["parent-cycle"]  # broken once, where the cycle closes
    assert check_trace(res.traces[0]) == []


def test_bad_self_parent_keeps_its_subtree_under_its_agents():
    # a task span made its own parent (the cycle closes at that span): one warning; the agent
    # inside keeps its LLM call, and nothing else moves
    res = run(
        [
            head(),
            span("r", None, "agent", 0, 10, name="boss"),
            span("g1", "r", "generation", 0, 1, output=[]),
            span("task", "task", "custom", 2, 6, name="task", data={"sdk_span_type": "task"}),
            span("b", "task", "agent", 2, 6, name="beta"),
            span("g2", "b", "generation", 3, 5),
            span("g3", "r", "generation", 7, 9),
        ]
    )
    assert codes(res) == ["parent-cycle"]
    p = res.problems[0]
    assert p.event_id == "task" and "its descendants keep their parents" in p.fix
    e = by_id(res.traces[0])
    assert (e["g2"].agent, e["g1"].agent, e["g3"].agent) == ("beta", "boss", "boss")


def test_bad_cycle_with_skewed_child_keeps_times_sane():
    # the span under the re-rooted one starts decades early: moved to its parent's start
    items = [
        head(),
        span("r", None, "agent", 0, 10, name="boss"),
        span("c", "c", "custom", 1, 5, name="task", data={"sdk_span_type": "task"}),
        span("b", "c", "agent", 1, 5, name="beta"),
        span("g", "b", "generation", -8e8, 4),
    ]
    res = run(items)
    assert codes(res) == ["parent-cycle", "clock-skew"]
    tr = res.traces[0]
    assert max(e.t for e in tr.events) <= 10.0
    assert by_id(tr)["g"].t == 1.0


def test_rule_14_roles_manager_and_stop():
    # lead runs mid as a tool; mid runs leaf as a tool: lead orchestrates, mid manages
    items = [
        head(),
        span("a", None, "agent", 0, 10, name="lead"),
        span("f1", "a", "function", 1, 8, name="ask_mid"),
        span("m", "f1", "agent", 1, 8, name="mid"),
        span("f2", "m", "function", 2, 6, name="ask_leaf"),
        span("l", "f2", "agent", 2, 6, name="leaf"),
        span("gl", "l", "generation", 3, 5),
        span("gm", "m", "generation", 6.5, 7.5),
        span(
            "ga",
            "a",
            "generation",
            8.5,
            9.5,
            output=[{"role": "assistant", "content": [{"type": "output_text", "text": "42"}]}],
        ),
    ]
    tr = one(items)
    e = by_id(tr)
    assert [(x.agent, x.role) for x in (e["ga"], e["gm"], e["gl"])] == [
        ("lead", "orchestrator"),
        ("mid", "manager"),
        ("leaf", "worker"),
    ]
    assert (e["f1.spawn"].role, e["f2.spawn"].role) == ("manager", "worker")
    stop = tr.events[-1]
    assert (stop.id, stop.agent, stop.decision, stop.content, stop.t) == (
        "stop",
        "lead",
        "stop",
        "42",
        10.0,
    )
    # a run whose last LLM call failed ended with no answer: no stop
    items[-1] = span("ga", "a", "generation", 8.5, 9.5, error={"message": "boom"})
    assert "stop" not in by_id(one(items))


def test_bad_items_skipped_and_nothing_mappable_is_one_line():
    res = run(
        [
            head(),
            {"object": "weird"},
            7,
            span("a", None, "agent", 0, 1, name="l"),
            span("g", "a", "generation", 0, 1),
        ]
    )
    assert codes(res) == ["unknown-item", "unknown-item"]
    with pytest.raises(TraceFormatError) as err:
        run([head(), span("a", None, "agent", 0, 1, name="lonely")])
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("in.json: file: holds no Agents SDK span")


def test_bad_truncated_jsonl_keeps_complete_lines(tmp_path, fixture_items):
    lines = [json.dumps(i) for i in fixture_items]
    text = "\n".join(lines)
    cut = text[: len(text) - len(lines[-1]) // 2]
    path = tmp_path / "cut.jsonl"
    path.write_text(cut)
    res = import_path(path)
    assert res.problems[0].code == "truncated" and res.problems[0].severity == "warning"
    tr = res.traces[0]
    assert tr.meta["partial"] is True
    assert [p for p in check_trace(tr, partial=True) if p.severity == "error"] == []
    full = import_path(RUN).traces[0]
    assert 0 < tr.n_events <= full.n_events


def test_bad_truncated_json_document_is_one_line(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text(RUN.read_text()[:5000])
    with pytest.raises(TraceFormatError) as err:
        import_path(path, format="openai-agents")
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_epoch_times_and_jsonl_lines_accepted():
    items = [
        head(),
        span("a", None, "agent", 0, 2, name="lead"),
        span("g", "a", "generation", 0, 1),
    ]
    for it in items[1:]:
        it["started_at"] = T0 + (0 if it["id"] == "a" else 0.5)
        it["ended_at"] = T0 + 1
    res = import_values(items, source="lines.jsonl")  # one item per line
    assert by_id(res.traces[0])["g"].t == 0.5
    assert msgspec.json.decode(msgspec.json.encode(res.traces[0]))["trace_id"] == "trace_1"


def test_bad_lost_times_are_placed_and_named():
    items = [
        head(),
        span("a", None, "agent", 0, 3, name="lead"),
        span("g", "a", "generation", 1, 2),
        span("h", "a", "handoff", 2, 3, from_agent="lead", to_agent="writer"),
        {**span("b", None, "agent", 3, 6, name="writer"), "started_at": None, "ended_at": None},
        {**span("bg", "b", "generation", 3, 4), "started_at": None, "ended_at": None},
    ]
    res = run(items)
    assert codes(res) == ["missing-time", "missing-time"]
    assert [p.event_id for p in res.problems] == ["b", "bg"]
    assert [p for p in check_trace(res.traces[0]) if p.severity == "error"] == []


def test_bad_events_before_their_spawn_are_moved_and_named():
    from orchestrace.io.openai_agents import settle_spawns
    from orchestrace.trace.model import Event

    evs = [
        Event(id="s", t=2.0, type="spawn", agent="a", to="b"),
        Event(id="x", t=0.5, type="llm_call", agent="b", dur=1.0),
        Event(id="y", t=3.0, type="llm_call", agent="b"),
    ]
    found: list = []
    out = settle_spawns(evs, found, "f.json")
    assert [(e.id, e.t, e.dur) for e in out] == [("s", 2.0, 0.0), ("x", 2.0, 1.0), ("y", 3.0, 0.0)]
    (p,) = found
    assert (p.code, p.event_id, p.severity) == ("event-before-spawn", "x", "warning")
    assert "moved to the spawn's time" in p.fix


JUNK = [None, 0, -1, 1e308, "", "x", [], {}, [1], {"a": 1}, True, "2026-13-45T99:99", 3.5]


def mutate(v, rng, p):
    """A copy of ``v`` with values replaced by junk, keys dropped and items repeated."""
    if isinstance(v, dict):
        return {
            k: (rng.choice(JUNK) if rng.random() < p else mutate(x, rng, p))
            for k, x in v.items()
            if rng.random() > p / 2
        }
    if isinstance(v, list):
        out = [rng.choice(JUNK) if rng.random() < p else mutate(x, rng, p) for x in v]
        if out and rng.random() < p:
            out.append(rng.choice(out))
        return out
    return v


def test_bad_damaged_exports_never_raise_a_traceback(fixture_items):
    import random

    for seed in range(200):
        rng = random.Random(seed)
        value = mutate({"data": fixture_items}, rng, rng.choice([0.01, 0.05, 0.2]))
        try:
            res = import_values([value], source="f.json")
        except TraceFormatError as err:
            assert "\n" not in str(err)
            continue
        for tr in res.traces:
            assert [p for p in check_trace(tr) if p.severity == "error"] == [], seed


def test_rewards_and_non_re_executing_credit_work_on_the_import():
    from orchestrace.credit import ASSIGNERS, check_credit
    from orchestrace.rewards import make

    tr = import_path(RUN).traces[0].replace(rewards={"team": 1.0})
    for name in ("orchestration", "process", "tool", "critical_steps"):
        (value,) = make(name)([tr])
        assert value is not None, name
    assert make("critical_steps")([tr]) == [-float(critical_steps(tr))]
    for name in ("uniform", "discounted"):
        table = ASSIGNERS[name]().assign(tr)
        assert check_credit(table, tr) == [], name


def test_one_span_per_line_file_is_told_from_a_trace(tmp_path):
    """A span line has a ``trace_id`` like a trace, yet is imported, not read as one."""
    from orchestrace.io import load_all

    path = tmp_path / "spans.jsonl"
    path.write_text(
        json.dumps(span("g", None, "generation", 0, 1, model="m", usage={"input_tokens": 2})) + "\n"
    )
    (tr,) = load_all(path)
    assert [(e.type, e.tokens_in) for e in tr.events] == [("llm_call", 2)]


def test_bad_span_with_its_parents_id_stays_with_its_agent():
    # a generation carrying its agent span's id: renamed, kept in the same trace and agent
    res = run(
        [
            head(),
            span("a", None, "agent", 0, 3, name="lead"),
            span("a", "a", "generation", 1, 2, model="m"),
        ]
    )
    assert codes(res) == ["duplicate-id"] and len(res.traces) == 1
    e = by_id(res.traces[0])
    assert (e["a~2"].type, e["a~2"].agent, e["a~2"].tool) == ("llm_call", "lead", "m")
