"""LangGraph import: real run trees, streams and checkpoint history event by event, each rule.

Rules are those of docs/import-langgraph.md (``test_rule_N_*`` tests rule N).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from orchestrace.errors import TraceFormatError
from orchestrace.io import dump, import_path, load
from orchestrace.io.importers import sniff_value
from orchestrace.io.langgraph import import_values, sniff, to_json
from orchestrace.trace.check import check_trace
from orchestrace.trace.graph import critical_path
from orchestrace.trace.steps import critical_steps

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
RUNS = FIXTURES / "langgraph_runs.json"
STREAM = FIXTURES / "langgraph_stream.jsonl"
HISTORY = FIXTURES / "langgraph_history.json"


def send(node: str, arg: Any) -> dict:
    return {
        "lc": 2,
        "type": "constructor",
        "id": ["langgraph", "types", "Send"],
        "kwargs": {"node": node, "arg": arg},
    }


def command(goto: Any, update: Any = None) -> dict:
    return {
        "lc": 2,
        "type": "constructor",
        "id": ["langgraph", "types", "Command"],
        "kwargs": {"graph": None, "update": update, "resume": None, "goto": goto},
    }


def message(kind: str, **kw: Any) -> dict:
    return {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", kind],
        "kwargs": kw,
    }


def run(
    rid: str,
    parent: str | None,
    name: str,
    start: float,
    end: float,
    *,
    run_type: str = "chain",
    step: int | None = None,
    triggers: Any = None,
    node: bool | None = None,
    **kw: Any,
) -> dict:
    """A run as Run.dict() writes it; graph nodes get LangGraph's metadata and tag."""
    meta: dict[str, Any] = {"thread_id": "t1"}
    tags: list[str] = []
    if node or (node is None and step is not None and run_type == "chain"):
        meta.update(
            langgraph_node=name,
            langgraph_step=step,
            langgraph_triggers=triggers or [f"branch:to:{name}"],
        )
        tags = [f"graph:step:{step}"]
    elif step is not None:
        meta.update(langgraph_step=step)
    return {
        "id": rid,
        "name": name,
        "run_type": run_type,
        "parent_run_id": parent,
        "start_time": 1000.0 + start,
        "end_time": 1000.0 + end,
        "extra": {"metadata": meta},
        "tags": tags,
        **kw,
    }


def graph_run(end: float = 100.0) -> dict:
    return run("g", None, "LangGraph", 0, end)


def imp(items: list[Any]):
    return import_values([items], source="in.json")


def one(items: list[Any]):
    res = imp(items)
    assert len(res.traces) == 1, res.problems
    tr = res.traces[0]
    assert [p for p in check_trace(tr) if p.severity == "error"] == []
    return tr


def ev(tr):
    return {e.id: e for e in tr.events}


def edges(tr):
    return {(e.src, e.dst): e.type for e in tr.edges}


def walk(node: Any):
    yield node
    if isinstance(node, dict):
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)


# ---------------------------------------------------------------------- the real packages
@pytest.fixture(scope="module")
def tree() -> list[dict]:
    return json.loads(RUNS.read_text())


def flat(tree):
    out = []
    for r in tree:
        out.append(r)
        out.extend(flat(r.get("child_runs", [])))
    return out


def test_fixtures_are_recognised(tree):
    assert sniff(tree) and sniff_value(tree) == "langgraph"
    first = json.loads(STREAM.read_text().splitlines()[0])
    assert sniff(first) and sniff_value(first) == "langgraph"
    hist = json.loads(HISTORY.read_text())
    assert sniff(hist) and sniff_value(hist) == "langgraph"


def test_run_tree_agents_counts_tokens(tree):
    res = import_path(RUNS)
    assert res.problems == [] and len(res.traces) == 1
    tr = res.traces[0]
    assert check_trace(tr) == []
    runs = flat(tree)
    assert tr.trace_id == tree[0]["id"] and tr.task_id == "demo"
    agents = {e.agent for e in tr.events if e.type != "tool_result"}
    assert agents == {"orchestrator", "worker", "worker#2", "ask_tool", "review", "writer"}
    assert "tools" not in agents and "fan_out" not in agents  # executor and routing function
    n_llm = sum(r["run_type"] in ("llm", "chat_model") for r in runs)
    n_tool = sum(r["run_type"] == "tool" for r in runs)

    # rule 9: each node run with LLM calls opens with its own time before its first call
    def first_llm(r):
        starts = [
            c["start_time"]
            for c in flat(r.get("child_runs", []))
            if c["run_type"] in ("llm", "chat_model")
        ]
        return min(starts, default=None)

    n_open = sum(
        1
        for r in runs
        if r["run_type"] == "chain"
        and (r.get("extra") or {}).get("metadata", {}).get("langgraph_node") == r["name"]
        and first_llm(r) is not None
        and first_llm(r) > r["start_time"]
    )
    assert n_open == 4
    counts = Counter(e.type for e in tr.events)
    assert counts == {
        "llm_call": n_llm,
        "tool_call": n_tool,
        "tool_result": n_tool,
        "spawn": 3,
        "return": 2,
        "message": 3,
        "orchestrator_decision": n_open + 1,  # and the orchestrator's stop (rule 15)
    }
    stop = tr.events[-1]
    assert (stop.type, stop.decision, stop.agent, stop.role) == (
        "orchestrator_decision",
        "stop",
        "orchestrator",
        "orchestrator",
    )
    usage = [
        v["usage_metadata"]
        for r in runs
        if r["run_type"] in ("llm", "chat_model")
        for v in walk(r["outputs"])
        if isinstance(v, dict) and "usage_metadata" in v
    ]
    assert tr.costs["tokens"] == sum(u["input_tokens"] + u["output_tokens"] for u in usage)
    (tool_call,) = [e for e in tr.events if e.type == "tool_call"]
    assert (tool_call.agent, tool_call.tool) == ("ask_tool", "lookup")


def test_run_tree_edges_and_critical_path():
    tr = import_path(RUNS).traces[0]
    e = ev(tr)
    kinds = [(e[x.src], e[x.dst], x.type) for x in tr.edges]
    spawns = [(s, d) for s, d, k in kinds if k == "spawn"]
    assert sorted(d.agent for _, d in spawns) == ["worker", "worker#2", "writer"]
    assert {s.agent for s, _ in spawns} == {"orchestrator", "review"}
    handoff = next(s for s, d in spawns if d.agent == "writer")
    assert (handoff.type, handoff.decision, handoff.to) == ("spawn", "delegate", "writer")
    agg = [(s, d) for s, d, k in kinds if k == "aggregate"]
    assert sorted(s.agent for s, _ in agg) == ["worker", "worker#2"]
    assert {d.agent for _, d in agg} == {"ask_tool"}
    path = [e[i] for i in critical_path(tr).ids]
    assert path[0].agent == "orchestrator" and path[-1].agent == "writer"
    assert [x.type for x in path].count("tool_call") == 1
    assert critical_steps(tr) >= 1


def test_stream_chunks_event_by_event():
    res = import_path(STREAM)
    assert res.problems == [] and len(res.traces) == 1
    tr = res.traces[0]
    assert check_trace(tr) == []
    assert tr.meta["clock"] == "wall" and tr.trace_id.startswith("demo:")
    assert tr.meta["checkpoints"] and tr.trace_id == f"demo:{tr.meta['checkpoints'][0]}"
    assert {e.agent for e in tr.events if e.type != "tool_result"} == {
        "orchestrator",
        "worker",
        "worker#2",
        "ask_tool",
        "review",
        "writer",
    }
    counts = Counter(e.type for e in tr.events)
    # streams carry no LLM or tool runs: those come from the updates' messages
    assert counts == {
        "llm_call": 1,
        "tool_call": 1,
        "tool_result": 1,
        "spawn": 2,
        "return": 2,
        "message": 4,
        "orchestrator_decision": 1,  # the stop (rule 15); no node times without LLM runs
    }
    (llm,) = [e for e in tr.events if e.type == "llm_call"]
    assert (llm.agent, llm.tokens_in, llm.tokens_out) == ("orchestrator", 20, 5)
    assert [e.agent for e in tr.events if e.type == "tool_call"] == ["ask_tool"]


def test_history_branches_fork_and_edit():
    res = import_path(HISTORY)
    assert res.problems == []
    assert len(res.traces) == 2
    orig, fork = sorted(res.traces, key=lambda t: "fork" in t.meta)
    for tr in (orig, fork):
        assert check_trace(tr) == []
        assert tr.task_id == "demo" and tr.meta["clock"] == "checkpoints"
    assert "fork" not in orig.meta
    f = fork.meta["fork"]
    assert f["source"] == "update" and f["from_checkpoint"] in orig.meta["branch"]["checkpoints"]
    assert f["other_branches"] == [
        orig.meta["branch"]["checkpoints"][
            orig.meta["branch"]["checkpoints"].index(f["from_checkpoint"]) + 1
        ]
    ]
    (human,) = [e for e in fork.events if e.type == "human_intervention"]
    assert human.agent == "human"
    assert not [e for e in orig.events if e.type == "human_intervention"]
    # the edited state feeds the step that ran after it
    assert any(x.src == human.id for x in fork.edges)
    # both branches share the run up to the fork
    shared = [e.id for e in fork.events if e.t < human.t]
    assert shared and shared == [e.id for e in orig.events][: len(shared)]


def test_run_tree_every_format(tmp_path):
    tr = import_path(RUNS).traces[0]
    for name in ("t.json", "t.jsonl", "t.parquet"):
        dump(tr, tmp_path / name)
        assert load(tmp_path / name) == tr


# ---------------------------------------------------------------------- one test per rule
def test_rule_1_one_trace_per_root_run():
    items = [
        graph_run(5),
        run("n", "g", "a", 0, 1, step=1),
        run("g2", None, "LangGraph", 10, 12),
        run("n2", "g2", "a", 10, 11, step=1),
    ]
    res = imp(items)
    assert [t.trace_id for t in res.traces] == ["g", "g2"]
    tr = res.traces[0]
    assert (tr.task_id, tr.system) == ("t1", "langgraph")
    assert tr.meta["source"] == {
        "format": "langgraph",
        "root_run_id": "g",
        "graph": "LangGraph",
        "thread_id": "t1",
    }
    assert tr.meta["nodes"] == {"a": {"node": "a", "runs": 1}}


def test_rule_2_times_and_order_clock():
    tr = one([graph_run(), run("n", "g", "a", 2, 5, step=1)])
    e, stop = tr.events
    assert (e.t, e.dur) == (2.0, 3.0) and tr.meta["clock"] == "wall"
    assert (stop.t, stop.decision) == (100.0, "stop")  # when the graph run ended
    chunks = [
        ["tasks", {"id": "t1", "name": "a", "input": {}, "triggers": ["branch:to:a"]}],
        ["tasks", {"id": "t1", "name": "a", "result": {"x": 1}, "error": None, "interrupts": []}],
        ["tasks", {"id": "t2", "name": "b", "input": {}, "triggers": ["branch:to:b"]}],
        ["tasks", {"id": "t2", "name": "b", "result": {"y": 2}, "error": None, "interrupts": []}],
    ]
    tr = import_values(chunks, source="s.jsonl").traces[0]
    assert tr.meta["clock"] == "order"
    assert [(e.agent, e.t, e.dur) for e in tr.events] == [
        ("a", 0.0, 1.0),
        ("b", 2.0, 1.0),
        ("a", 3.0, 0.0),  # the stop, when the last task ended
    ]


def test_rule_2_updates_only_stream_in_order():
    chunks = [
        ["updates", {"plan": {"x": 1}}],
        ["updates", {"act": {"y": 2}}],
        ["updates", {"__interrupt__": [{"value": "ok?"}]}],
    ]
    res = import_values(chunks, source="u.jsonl")
    assert res.problems == [] and res.unmapped == {}
    tr = res.traces[0]
    assert [(e.type, e.agent, e.t, e.step) for e in tr.events] == [
        ("message", "plan", 0.0, 1),
        ("message", "act", 1.0, 2),
        ("human_intervention", "interrupt", 2.0, 3),
    ]
    assert [(x.src, x.dst, x.type) for x in tr.edges] == [
        ("update0:plan.update", "update1:act.update", "causal"),
        ("update1:act.update", "update2:__interrupt__.interrupt", "causal"),
    ]


def test_rule_3_node_runs_are_agents_parallel_ones_distinct():
    items = [
        graph_run(),
        run("a1", "g", "w", 0, 2, step=1),
        run("a2", "g", "w", 0.5, 1.5, step=1),
        run("a3", "g", "w", 3, 4, step=2),
    ]
    tr = one(items)
    assert {e.attrs["run_id"]: e.agent for e in tr.events if e.decision != "stop"} == {
        "a1": "w",
        "a2": "w#2",
        "a3": "w",
    }
    assert tr.meta["nodes"]["w"]["runs"] == 2


def test_rule_4_routing_functions_and_tool_executors_are_not_agents():
    ai = message("AIMessage", content="", tool_calls=[{"name": "calc", "args": {}, "id": "c1"}])
    tm = message("ToolMessage", content="2", tool_call_id="c1", name="calc")
    items = [
        graph_run(),
        run("p", "g", "planner", 0, 2, step=1, outputs={"messages": [ai]}),
        run("r", "p", "route", 1, 2, step=1, node=False, outputs={"output": "tools"}),
        run("t", "g", "tools", 2, 4, step=2, outputs={"messages": [tm]}),
        run(
            "tc",
            "t",
            "calc",
            2.5,
            3.5,
            run_type="tool",
            step=2,
            inputs={"input": "1+1"},
            outputs={"output": tm},
        ),
        run("n", "g", "next", 4, 5, step=3),
    ]
    tr = one(items)
    agents = {e.agent for e in tr.events if e.type != "tool_result"}
    assert agents == {"planner", "next"}
    e = ev(tr)
    assert (e["tc"].type, e["tc"].agent, e["tc"].content) == ("tool_call", "planner", "1+1")
    assert e["tc.result"].content == "2"
    assert edges(tr)[("tc.result", "n.update")] == "causal"
    assert tr.meta["nodes"]["tools"]["tool_executor"] is True


def test_rule_5_llm_runs_are_llm_calls_with_tokens_and_model():
    items = [
        graph_run(),
        run("n", "g", "agent", 0, 3, step=1),
        run(
            "l",
            "n",
            "ChatFake",
            0.5,
            2,
            run_type="chat_model",
            step=1,
            outputs={
                "generations": [
                    [
                        {
                            "text": "hi",
                            "message": message(
                                "AIMessage",
                                content="hi",
                                usage_metadata={
                                    "input_tokens": 9,
                                    "output_tokens": 4,
                                    "total_tokens": 13,
                                },
                            ),
                        }
                    ]
                ]
            },
            extra={"metadata": {"ls_model_name": "gpt-x", "langgraph_step": 1}},
        ),
        run(
            "l2",
            "n",
            "OpenAI",
            2,
            2.5,
            run_type="llm",
            step=1,
            outputs={"llm_output": {"token_usage": {"prompt_tokens": 3, "completion_tokens": 1}}},
            extra={"metadata": {"langgraph_step": 1}, "invocation_params": {"model": "m2"}},
        ),
    ]
    e = ev(one(items))
    assert (
        e["l"].type,
        e["l"].agent,
        e["l"].tool,
        e["l"].tokens_in,
        e["l"].tokens_out,
        e["l"].content,
        e["l"].step,
    ) == ("llm_call", "agent", "gpt-x", 9, 4, "hi", 1)
    assert (e["l2"].tool, e["l2"].tokens) == ("m2", 4)
    # the node's update closes after its last LLM call
    assert (e["n.update"].t, e["n.update"].dur) == (2.5, 0.5)


def test_rule_6_tool_call_by_the_agent_that_asked():
    items = [
        graph_run(),
        run("n", "g", "agent", 0, 3, step=1),
        run("l", "n", "Chat", 0, 1, run_type="chat_model", step=1),
        run(
            "t",
            "n",
            "search",
            1,
            2,
            run_type="tool",
            step=1,
            inputs={"input": "q"},
            outputs={"output": "found"},
        ),
        run("rt", "n", "docs", 2, 2.5, run_type="retriever", step=1),
    ]
    tr = one(items)
    e = ev(tr)
    assert (e["t"].agent, e["t"].tool, e["t"].dur, e["t"].content) == ("agent", "search", 1.0, "q")
    assert (e["t.result"].agent, e["t.result"].content, e["t.result"].t) == ("search", "found", 2.0)
    assert edges(tr)[("t", "t.result")] == "tool_dependency"
    assert e["rt"].type == "tool_call" and e["rt"].tool == "docs"


def test_rule_7_send_fan_out_spawns_and_returns():
    items = [
        graph_run(),
        run("o", "g", "orch", 0, 2, step=1),
        run(
            "r",
            "o",
            "fan_out",
            1,
            2,
            step=1,
            node=False,
            outputs={"output": [send("w", {"topic": "a"}), send("w", {"topic": "b"})]},
        ),
        run("w1", "g", "w", 2, 4, step=2, triggers=["__pregel_push"], inputs={"topic": "b"}),
        run("w2", "g", "w", 2, 5, step=2, triggers=["__pregel_push"], inputs={"topic": "a"}),
        run("n", "g", "join", 5, 6, step=3),
    ]
    tr = one(items)
    e = ev(tr)
    assert (
        e["w1.spawn"].agent,
        e["w1.spawn"].to,
        e["w1.spawn"].content,
        e["w1.spawn"].t,
        e["w1.spawn"].step,
    ) == ("orch", "w#2", '{"topic":"b"}', 2.0, 1)
    # the k-th Send runs as instance k, whichever run starts first
    assert e["w2.spawn"].to == "w" and e["w2.spawn"].content == '{"topic":"a"}'
    assert (e["w1.return"].type, e["w1.return"].agent, e["w1.return"].to) == (
        "return",
        "w#2",
        "orch",
    )
    ed = edges(tr)
    assert ed[("w1.spawn", "w1.return")] == "spawn"  # a worker with no LLM call only returns
    assert ed[("w1.return", "n.update")] == ed[("w2.return", "n.update")] == "aggregate"


def test_rule_8_command_goto_is_handoff():
    items = [
        graph_run(),
        run("a", "g", "triage", 0, 1, step=1, outputs={"output": command("expert", {"k": 1})}),
        run("b", "g", "expert", 1, 2, step=2),
        run("c", "g", "expert", 2, 3, step=3, outputs={"output": command(["triage"])}),
        run("d", "g", "triage", 3, 4, step=4),
    ]
    tr = one(items)
    e = ev(tr)
    h = e["a.handoff"]
    assert (h.type, h.agent, h.to, h.decision, h.content) == (
        "spawn",
        "triage",
        "expert",
        "delegate",
        '{"k":1}',
    )
    assert (e["c.handoff"].type, e["c.handoff"].to) == ("message", "triage")
    ed = edges(tr)
    assert ed[("a.handoff", "b.update")] == "spawn" and ed[("c.handoff", "d.update")] == "message"


def test_rule_9_other_nodes_close_with_their_update():
    tr = one([graph_run(), run("n", "g", "a", 0, 1, step=1, outputs={"answer": "x"})])
    e, stop = tr.events
    assert (stop.content, stop.attrs["answer"]) == ('{"answer":"x"}', '{"answer":"x"}')
    assert (e.id, e.type, e.from_, e.to, e.content) == (
        "n.update",
        "message",
        "a",
        None,
        '{"answer":"x"}',
    )


def test_rule_10_superstep_data_flow():
    items = [
        graph_run(),
        run("a", "g", "a", 0, 1, step=1),
        run("b", "g", "b", 1, 2, step=2),
        run("c", "g", "c", 1, 3, step=2),
        run("d", "g", "d", 3, 4, step=3),
    ]
    tr = one(items)
    ed = edges(tr)
    assert ed[("a.update", "b.update")] == ed[("a.update", "c.update")] == "causal"
    assert ed[("b.update", "d.update")] == ed[("c.update", "d.update")] == "aggregate"
    assert critical_path(tr).length == pytest.approx(4.0)


def test_rule_11_interrupt_is_human_intervention():
    tr = one(
        [
            graph_run(),
            run("n", "g", "ask", 0, 1, step=1, error="GraphInterrupt((Interrupt(value='ok?'),))"),
        ]
    )
    (e,) = tr.events
    assert (e.type, e.agent, e.error) == ("human_intervention", "ask", None)
    assert "ok?" in e.content and e.attrs["interrupt"] is True


def snap(cid, parent, step, source, created, tasks=(), nxt=()):
    conf = lambda c: {"configurable": {"thread_id": "t1", "checkpoint_ns": "", "checkpoint_id": c}}  # noqa: E731
    return {
        "values": {},
        "next": list(nxt),
        "config": conf(cid),
        "parent_config": conf(parent) if parent else None,
        "metadata": {"source": source, "step": step, "parents": {}},
        "created_at": f"2026-01-01T00:00:{created:02d}+00:00",
        "tasks": list(tasks),
        "interrupts": [],
    }


def task(tid, name, result, path=None):
    return {
        "id": tid,
        "name": name,
        "path": path or ["__pregel_pull", name],
        "error": None,
        "interrupts": [],
        "result": result,
    }


def test_rule_12_history_fork_and_update():
    hist = [
        snap("c0", None, -1, "input", 0, [task("t0", "__start__", {})]),
        snap("c1", "c0", 0, "loop", 1, [task("t1", "a", {"x": 1})]),
        snap("c2", "c1", 1, "loop", 3, [task("t2", "b", {"y": 1})]),
        snap("c3", "c2", 2, "loop", 5),
        # fork: the state at c1 edited, then b ran again on the new branch
        snap("u1", "c1", 1, "update", 7, [task("t3", "b", {"y": 2})]),
        snap("u2", "u1", 2, "loop", 9),
    ]
    res = import_values([list(reversed(hist))], source="h.json")
    assert res.problems == []
    main_, fork = res.traces
    assert main_.trace_id == "t1:c3" and fork.trace_id == "t1:u2"
    assert main_.meta["branch"]["checkpoints"] == ["c0", "c1", "c2", "c3"]
    assert fork.meta["fork"] == {
        "from_checkpoint": "c1",
        "checkpoint": "u1",
        "source": "update",
        "step": 1,
        "other_branches": ["c2"],
    }
    assert [(e.type, e.agent, e.decision) for e in main_.events] == [
        ("message", "a", None),
        ("message", "b", None),
        ("orchestrator_decision", "a", "stop"),  # c3 has nothing left to run
    ]
    # a's task at c1 ran on the first branch only: on the fork the state at c1 was edited
    assert [(e.type, e.agent, e.t) for e in fork.events] == [
        ("human_intervention", "human", 7.0),
        ("message", "b", 7.0),
        ("orchestrator_decision", "b", 9.0),  # b is the first node acting on the fork
    ]
    assert edges(fork)[("u1.update", "u1:t3.update")] == "causal"


def test_rule_12_new_input_on_thread_is_human_intervention():
    hist = [
        snap("c0", None, -1, "input", 0, [task("t0", "__start__", {})]),
        snap("c1", "c0", 0, "loop", 1, [task("t1", "a", {})]),
        snap("c2", "c1", 1, "loop", 2, [task("t9", "__start__", {})]),
        snap("c3", "c2", 2, "input", 3, [task("t2", "a", {})]),
        snap("c4", "c3", 3, "loop", 4),
    ]
    tr = import_values(hist, source="h.jsonl").traces[0]
    assert [e.type for e in tr.events] == [
        "message",
        "human_intervention",
        "message",
        "orchestrator_decision",
    ]


def test_rule_13_unmapped_modes_kept_and_counted():
    chunks = [
        ["values", {"x": 1}],
        ["custom", {"progress": 0.5}],
        ["tasks", {"id": "t1", "name": "a", "input": {}, "triggers": ["branch:to:a"]}],
        ["tasks", {"id": "t1", "name": "a", "result": {}, "error": None, "interrupts": []}],
        {"event": "on_custom_event", "run_id": "r", "name": "tick", "data": {}},
    ]
    res = import_values(chunks, source="s.jsonl")
    assert res.unmapped == {
        "stream mode 'values'": 1,
        "stream mode 'custom'": 1,
        "stream event 'on_custom_event'": 1,
    }
    assert res.traces[0].meta["unmapped"] == [chunks[0], chunks[1], chunks[4]]


def test_astream_events_v2_become_runs():
    evs = [
        {
            "event": "on_chain_start",
            "run_id": "g",
            "name": "LangGraph",
            "parent_ids": [],
            "metadata": {},
            "tags": [],
            "data": {"input": {}},
        },
        {
            "event": "on_chain_start",
            "run_id": "n",
            "name": "a",
            "parent_ids": ["g"],
            "metadata": {"langgraph_node": "a", "langgraph_step": 1},
            "tags": ["graph:step:1"],
            "data": {"input": {}},
        },
        {
            "event": "on_chat_model_start",
            "run_id": "l",
            "name": "Chat",
            "parent_ids": ["g", "n"],
            "metadata": {"langgraph_node": "a", "langgraph_step": 1},
            "tags": [],
            "data": {},
        },
        {
            "event": "on_chat_model_stream",
            "run_id": "l",
            "name": "Chat",
            "parent_ids": ["g", "n"],
            "data": {"chunk": {}},
        },
        {
            "event": "on_chat_model_end",
            "run_id": "l",
            "name": "Chat",
            "parent_ids": ["g", "n"],
            "metadata": {"langgraph_node": "a", "langgraph_step": 1},
            "tags": [],
            "data": {
                "output": message(
                    "AIMessage",
                    content="hi",
                    usage_metadata={"input_tokens": 5, "output_tokens": 2},
                )
            },
        },
        {
            "event": "on_chain_end",
            "run_id": "n",
            "name": "a",
            "parent_ids": ["g"],
            "metadata": {"langgraph_node": "a", "langgraph_step": 1},
            "tags": ["graph:step:1"],
            "data": {"output": {"x": 1}},
        },
        {
            "event": "on_chain_end",
            "run_id": "g",
            "name": "LangGraph",
            "parent_ids": [],
            "data": {"output": {}},
        },
    ]
    res = import_values(evs, source="e.jsonl")
    assert res.unmapped == {}
    tr = res.traces[0]
    assert [(e.type, e.agent, e.tokens) for e in tr.events] == [
        ("llm_call", "a", 7),
        ("message", "a", 0),
        ("orchestrator_decision", "a", 0),
    ]


def test_to_json_writes_langgraph_objects():
    from langgraph.types import Command, Send

    out = to_json({"s": Send("w", {"k": 1}), "c": Command(goto="x")})
    assert out["s"] == send("w", {"k": 1})
    assert out["c"]["id"][-1] == "Command" and out["c"]["kwargs"]["goto"] == "x"


# ---------------------------------------------------------------------- bad input (rule 14)
def codes(res):
    return [p.code for p in res.problems]


def test_bad_missing_parent():
    res = imp([graph_run(), run("n", "gone", "a", 0, 1, step=1)])
    assert "missing-parent" in codes(res)
    p = next(p for p in res.problems if p.code == "missing-parent")
    assert p.event_id == "n" and "run 'n'" in p.message and "export the parent run" in p.fix


def test_bad_clock_skew():
    res = imp([graph_run(), run("n", "g", "a", -3, 1, step=1)])
    assert codes(res) == ["clock-skew"] and res.problems[0].event_id == "n"
    assert check_trace(res.traces[0]) == []


def test_bad_duplicate_ids():
    n = run("n", "g", "a", 0, 1, step=1)
    res = imp([graph_run(), n, dict(n), run("n", "g", "b", 1, 2, step=2)])
    assert codes(res) == ["duplicate-id", "duplicate-id"]
    assert check_trace(res.traces[0]) == []


def test_bad_unknown_items_and_nothing_mappable():
    res = imp([graph_run(), run("n", "g", "a", 0, 1, step=1), {"run_type": 3}, "junk"])
    assert codes(res) == ["unknown-item", "unknown-item"]
    with pytest.raises(TraceFormatError) as err:
        imp([graph_run()])
    assert "\n" not in str(err.value) and "holds no LangGraph run" in str(err.value)


def test_bad_history_missing_parent_and_duplicates():
    hist = [snap("c1", "c0", 0, "loop", 1, [task("t1", "a", {})]), snap("c2", "c1", 1, "loop", 2)]
    res = import_values(
        [
            [*hist, hist[1]],
        ],
        source="h.json",
    )
    assert codes(res) == ["duplicate-id", "missing-parent"]
    assert [e.type for e in res.traces[0].events] == ["message", "orchestrator_decision"]


def test_bad_truncated_stream(tmp_path):
    text = STREAM.read_text()
    path = tmp_path / "cut.jsonl"
    path.write_text(text[: len(text) - 40])
    res = import_path(path)
    assert res.problems[0].code == "truncated"
    tr = res.traces[0]
    assert tr.meta["partial"] is True
    assert [p for p in check_trace(tr, partial=True) if p.severity == "error"] == []


JUNK = [
    None,
    0,
    -1,
    1e308,
    "",
    "x",
    [],
    {},
    [1],
    {"a": 1},
    True,
    "2026-13-45T99:99",
    3.5,
    send(3, None),
    command(None),
]


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


def test_bad_damaged_input_never_raises_a_traceback():
    import random

    sources = [
        [json.loads(RUNS.read_text())],
        [json.loads(line) for line in STREAM.read_text().splitlines()],
        [json.loads(HISTORY.read_text())],
    ]
    for seed in range(240):
        rng = random.Random(seed)
        values = mutate(sources[seed % 3], rng, rng.choice([0.01, 0.05, 0.2]))
        try:
            res = import_values(values, source="f")
        except TraceFormatError as err:
            assert "\n" not in str(err)
            continue
        for tr in res.traces:
            assert [p for p in check_trace(tr) if p.severity == "error"] == [], seed


def test_rewards_and_non_re_executing_credit_work_on_the_import():
    from orchestrace.credit import ASSIGNERS, check_credit
    from orchestrace.rewards import make

    tr = import_path(RUNS).traces[0].replace(rewards={"team": 1.0})
    for name in ("orchestration", "process", "tool", "critical_steps"):
        (value,) = make(name)([tr])
        assert value is not None, name
    assert make("critical_steps")([tr]) == [-float(critical_steps(tr))]
    for name in ("uniform", "discounted"):
        table = ASSIGNERS[name]().assign(tr)
        assert check_credit(table, tr) == [], name


def test_rule_7_and_8_langsmith_serialised_send_and_command():
    items = [
        graph_run(),
        run("o", "g", "orch", 0, 2, step=1),
        run(
            "r",
            "o",
            "fan_out",
            1,
            2,
            step=1,
            node=False,
            outputs={
                "output": [
                    "Send(node='w', arg={'topic': 'a'})",
                    "Send(node='w', arg=__import__('os'))",
                ]
            },
        ),
        run("w1", "g", "w", 2, 4, step=2, triggers=["__pregel_push"], inputs={"topic": "a"}),
        run("w2", "g", "w", 2, 5, step=2, triggers=["__pregel_push"], inputs={"topic": "b"}),
        run(
            "h",
            "g",
            "review",
            5,
            6,
            step=3,
            outputs={
                "output": {"graph": None, "update": {"k": 1}, "resume": None, "goto": "writer"}
            },
        ),
        run("x", "g", "writer", 6, 7, step=4),
    ]
    tr = one(items)
    e = ev(tr)
    assert (e["w1.spawn"].agent, e["w1.spawn"].to, e["w1.spawn"].content) == (
        "orch",
        "w",
        '{"topic":"a"}',
    )
    assert e["w2.spawn"].to == "w#2" and e["w2.spawn"].content == '{"topic":"b"}'
    # an argument that is not a literal is kept as text, never evaluated
    from orchestrace.io.langgraph import _as_send

    assert _as_send("Send(node='w', arg=__import__('os'))") == ("w", "__import__('os')")
    assert (e["h.handoff"].type, e["h.handoff"].to, e["h.handoff"].decision) == (
        "spawn",
        "writer",
        "delegate",
    )


# ---------------------------------------------------------------------- repairs kept in one trace
def test_rule_9_node_time_before_its_first_call_is_counted():
    # a node computes 0.3 s, then makes one LLM call: its own time is on the critical path
    runs = [
        run("g", None, "LangGraph", 0.0, 0.5, node=None),
        run("n", "g", "slow", 0.0, 0.35, step=1),
        run(
            "l",
            "n",
            "Fake",
            0.3,
            0.34,
            run_type="chat_model",
            outputs={"llm_output": {"token_usage": {"prompt_tokens": 1, "completion_tokens": 1}}},
        ),
        run("m", "g", "fast", 0.36, 0.5, step=2),
    ]
    tr = import_values([runs], source="r.json").traces[0]
    e = ev(tr)
    opening = e["n.start"]
    assert (opening.type, opening.agent, opening.t, opening.dur) == (
        "orchestrator_decision",
        "slow",
        0.0,
        pytest.approx(0.3),
    )
    assert edges(tr)[("n.start", "l")] == "causal"
    assert critical_path(tr).length == pytest.approx(0.3 + 0.04 + 0.01 + 0.14)
    # work between two calls (and an inner routing run after them) is the node's too
    runs = [
        run("g", None, "LangGraph", 0.0, 1.0, node=None),
        run("n", "g", "a", 0.0, 1.0, step=1),
        run("l1", "n", "Fake", 0.1, 0.2, run_type="chat_model"),
        run("l2", "n", "Fake", 0.5, 0.6, run_type="chat_model"),
        run("route", "n", "route", 0.7, 0.9),
    ]
    tr = import_values([runs], source="r.json").traces[0]
    assert [(x.id, x.t, x.dur) for x in tr.events if x.decision != "stop"] == [
        ("n.start", 0.0, 0.1),
        ("l1", 0.1, 0.1),
        ("n.work1", 0.2, pytest.approx(0.3)),
        ("l2", 0.5, pytest.approx(0.1)),
        ("n.update", 0.6, pytest.approx(0.4)),
    ]
    assert critical_path(tr).length == pytest.approx(1.0)


def test_rule_14_parent_cycle_is_broken_at_the_run_closing_it():
    # node n names itself as parent: one warning, its LLM call stays its own, one trace
    runs = [
        run("g", None, "LangGraph", 0.0, 1.0, node=None),
        run("n", "n", "worker", 0.1, 0.9, step=1),
        run("l", "n", "Fake", 0.2, 0.8, run_type="chat_model"),
    ]
    res = import_values([runs], source="r.json")
    cycles = [p for p in res.problems if p.code == "parent-cycle"]
    assert len(cycles) == 1 and cycles[0].event_id == "n"
    (tr,) = res.traces  # n became a root run; g alone maps to no event
    assert tr.trace_id == "n"
    assert ev(tr)["l"].agent == "worker"
    assert all(0.0 <= x.t <= 1.0 for x in tr.events)


def test_rule_14_duplicate_run_id_stays_in_one_trace():
    # a tool run carrying its executor node's id: renamed, kept in the same trace, and its
    # call belongs to the agent that asked for it, never to the tool executor
    ask = message(
        "AIMessage",
        content="",
        tool_calls=[{"name": "lookup", "args": {}, "id": "tc1", "type": "tool_call"}],
    )
    runs = [
        run("g", None, "LangGraph", 0.0, 1.0, node=None),
        run("a", "g", "agent", 0.0, 0.2, step=1, outputs={"messages": [ask]}),
        run("al", "a", "Fake", 0.05, 0.15, run_type="chat_model"),
        run("t", "g", "tools", 0.3, 0.6, step=2),
        run(
            "t",
            "t",
            "lookup",
            0.35,
            0.55,
            run_type="tool",
            step=2,
            outputs={
                "output": message("ToolMessage", content="4", tool_call_id="tc1", name="lookup")
            },
        ),
    ]
    res = import_values([runs], source="r.json")
    assert len(res.traces) == 1
    dups = [p for p in res.problems if p.code == "duplicate-id"]
    assert len(dups) == 1 and "'t~2'" in dups[0].fix
    assert not [p for p in res.problems if p.code == "missing-parent"]
    e = ev(res.traces[0])
    assert (e["t~2"].type, e["t~2"].agent) == ("tool_call", "agent")


def test_rule_6_unasked_tool_call_belongs_to_the_graph_not_the_executor():
    runs = [
        run("g", None, "LangGraph", 0.0, 1.0, node=None),
        run("t", "g", "tools", 0.1, 0.6, step=1),
        run("x", "t", "lookup", 0.2, 0.5, run_type="tool", step=1),
    ]
    tr = import_values([runs], source="r.json").traces[0]
    assert ev(tr)["x"].agent == "LangGraph"
    assert "tools" not in {x.agent for x in tr.events}


def test_rule_15_roles_and_stop():
    # plan sends two workers; the run ends with writer's update: plan stops the run
    items = [
        graph_run(10),
        run(
            "p",
            "g",
            "plan",
            0,
            1,
            step=1,
            outputs={"x": [send("w", {"k": 1}), send("w", {"k": 2})]},
        ),
        run("w1", "g", "w", 1, 3, step=2, triggers=["__pregel_push"], inputs={"k": 1}),
        run("w2", "g", "w", 1, 4, step=2, triggers=["__pregel_push"], inputs={"k": 2}),
        run("r", "g", "writer", 5, 6, step=3, outputs={"answer": "done"}),
    ]
    tr = one(items)
    e = ev(tr)
    assert (e["p.update"].role, e["w1.spawn"].role, e["w1.return"].role) == (
        "orchestrator",
        "worker",
        "worker",
    )
    assert e["r.update"].role == "worker"
    stop = tr.events[-1]
    assert (stop.id, stop.agent, stop.role, stop.decision, stop.t, stop.content) == (
        "g.stop",
        "plan",
        "orchestrator",
        "stop",
        10.0,
        '{"answer":"done"}',
    )
    assert edges(tr)[("r.update", "g.stop")] == "causal"
    # an interrupted last node: the run ended with no answer
    items[-1] = run("r", "g", "writer", 5, 6, step=3, error="GraphInterrupt(ok?)")
    assert all(x.decision != "stop" for x in one(items).events)
