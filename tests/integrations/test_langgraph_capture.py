"""Live capture for LangGraph: callback handler and stream adapter equal the import of native output."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from orchestrace.io import import_path, load
from orchestrace.trace.check import check_trace
from orchestrace.trace.model import Trace

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "frameworks"
HAVE_LANGGRAPH = importlib.util.find_spec("langgraph") is not None
needs_langgraph = pytest.mark.skipif(not HAVE_LANGGRAPH, reason="langgraph is not installed")


def flow_module():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import make_framework_fixtures as m
    finally:
        sys.path.pop(0)
    return m


def same(live: Trace, imported: Trace) -> None:
    """Equal traces; events and edges may be listed in another order (threads call back)."""
    assert live.replace(events=(), edges=()) == imported.replace(events=(), edges=())
    assert sorted(live.events, key=lambda e: e.id) == sorted(imported.events, key=lambda e: e.id)
    key = lambda e: (e.src, e.dst, e.type)  # noqa: E731
    assert sorted(live.edges, key=key) == sorted(imported.edges, key=key)


def test_fixture_handler_recording_equals_run_tree_import():
    live = load(FIXTURES / "langgraph_live.jsonl")
    imported = import_path(FIXTURES / "langgraph_runs.json").traces[0]
    same(live, imported)
    assert check_trace(live) == []


def test_fixture_stream_recording_equals_stream_import():
    live = load(FIXTURES / "langgraph_stream_live.jsonl")
    imported = import_path(FIXTURES / "langgraph_stream.jsonl").traces[0]
    same(live, imported)


@pytest.mark.slow
@needs_langgraph
def test_live_run_equals_import(tmp_path):
    from orchestrace.integrations.langgraph import (
        OrchestraceCallbackHandler,
        record_stream,
        stream_chunk_json,
    )

    m = flow_module()
    graph = m.build_graph()
    handler = OrchestraceCallbackHandler(tmp_path / "run.jsonl")
    chunks = [
        stream_chunk_json(c)
        for c in record_stream(
            graph,
            {"question": "q", "results": [], "messages": []},
            {"configurable": {"thread_id": "live"}, "callbacks": [handler]},
            path=tmp_path / "stream.jsonl",
            stream_mode=["updates", "tasks"],
        )
    ]
    handler.close()
    assert {c["mode"] for c in chunks} == {"updates", "tasks"}  # debug was not asked for
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps(handler.roots()))
    same(load(tmp_path / "run.jsonl"), import_path(runs).traces[0])
    # the adapter asked for debug chunks itself: a stream of the same run with them imports
    rec = load(tmp_path / "stream.jsonl")
    assert rec.task_id == "live" and check_trace(rec) == []
    assert {e.agent for e in rec.events if e.type == "return"} == {"worker", "worker#2"}


@needs_langgraph
def test_stream_adapter_yields_what_stream_yields(tmp_path):
    from orchestrace.integrations.langgraph import record_stream

    m = flow_module()
    cfg = {"configurable": {"thread_id": "a"}}
    plain = list(m.build_graph().stream({"question": "q"}, cfg, stream_mode="updates"))
    got = list(record_stream(m.build_graph(), {"question": "q"}, cfg, path=tmp_path / "r.jsonl"))
    assert [list(c) for c in got] == [list(c) for c in plain]
    assert load(tmp_path / "r.jsonl").n_events > 0


@needs_langgraph
def test_recording_loads_as_partial_while_the_graph_runs(tmp_path):
    from langgraph.graph import END, START, StateGraph

    from orchestrace.integrations.langgraph import OrchestraceCallbackHandler

    path = tmp_path / "run.jsonl"
    seen: list[Trace] = []

    def first(state: dict) -> dict:
        return {"x": 1}

    def second(state: dict) -> dict:
        seen.append(load(path, partial=True))
        return {"x": 2}

    g = StateGraph(dict)
    g.add_node("first", first)
    g.add_node("second", second)
    g.add_edge(START, "first")
    g.add_edge("first", "second")
    g.add_edge("second", END)
    handler = OrchestraceCallbackHandler(path)
    g.compile().invoke({"x": 0}, {"callbacks": [handler]})
    handler.close()
    (mid,) = seen
    assert mid.meta["partial"] is True and [e.agent for e in mid.events] == ["first"]
    final = load(path)
    # the run ends with the first node's agent (the orchestrator) stopping it (rule 15)
    assert [(e.agent, e.decision) for e in final.events] == [
        ("first", None),
        ("second", None),
        ("first", "stop"),
    ]
    assert not final.meta.get("partial")


@needs_langgraph
def test_interrupted_stream_leaves_partial_recording(tmp_path):
    from orchestrace.integrations.langgraph import record_stream

    m = flow_module()
    path = tmp_path / "r.jsonl"
    it = record_stream(
        m.build_graph(), {"question": "q"}, {"configurable": {"thread_id": "b"}}, path=path
    )
    next(it)
    it.close()  # the consumer stops early
    tr = load(path, partial=True)
    assert tr.meta["partial"] is True


def test_missing_packages_give_install_hint(monkeypatch):
    from orchestrace.integrations import langgraph

    langgraph._classes.cache_clear()
    monkeypatch.setitem(sys.modules, "langchain_core.tracers.base", None)
    try:
        with pytest.raises(ImportError, match=r"pip install 'orchestrace\[langgraph\]'"):
            langgraph.OrchestraceCallbackHandler  # noqa: B018
    finally:
        langgraph._classes.cache_clear()
    monkeypatch.setitem(sys.modules, "langgraph", None)
    with pytest.raises(ImportError, match=r"pip install 'orchestrace\[langgraph\]'"):
        next(langgraph.record_stream(object(), {}, path="x.jsonl"))


@needs_langgraph
def test_runs_as_langchain_serialises_them_import_like_run_trees(tmp_path):
    """Every run as LangSmith's client serialises it, one per line (flat; ``Send`` as its
    ``repr``, ``Command`` as a plain object), imports as the nested run tree does."""
    from langchain_core.tracers.base import BaseTracer
    from langsmith._internal._serde import dumps_json

    from orchestrace.integrations.langgraph import run_json

    class Keep(BaseTracer):
        def __init__(self) -> None:
            super().__init__()
            self.roots: list = []

        def _persist_run(self, run) -> None:
            self.roots.append(run)

    def walk(run):
        yield run
        for c in run.child_runs:
            yield from walk(c)

    keep = Keep()
    m = flow_module()
    m.build_graph().invoke(
        {"question": "q"}, {"configurable": {"thread_id": "z"}, "callbacks": [keep]}
    )
    (root,) = keep.roots
    flat = tmp_path / "runs.jsonl"
    flat.write_bytes(
        b"".join(dumps_json(r.model_dump(exclude={"child_runs"})) + b"\n" for r in walk(root))
    )
    nested = tmp_path / "tree.json"
    nested.write_text(json.dumps([run_json(root)]))
    a, b = import_path(flat), import_path(nested)
    assert a.problems == [] and b.problems == []
    ta, tb = a.traces[0], b.traces[0]
    assert ta.task_id == tb.task_id == "z"
    assert [(e.id, e.type, e.agent, e.tokens) for e in sorted(ta.events, key=lambda e: e.id)] == [
        (e.id, e.type, e.agent, e.tokens) for e in sorted(tb.events, key=lambda e: e.id)
    ]
    assert {e.agent for e in ta.events if e.type == "spawn"} == {"orchestrator", "review"}


def _two_node_graph():
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(dict)
    g.add_node("a", lambda s: {"x": 1})
    g.add_node("b", lambda s: {"x": 2})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g.compile()


@needs_langgraph
def test_one_handler_records_sequential_runs_as_traces(tmp_path):
    from orchestrace.integrations.langgraph import OrchestraceCallbackHandler
    from orchestrace.io import load_all

    path = tmp_path / "runs.jsonl"
    handler = OrchestraceCallbackHandler(path)
    graph = _two_node_graph()
    for _ in range(2):
        graph.invoke({"x": 0}, {"callbacks": [handler]})
    handler.close()
    traces = load_all(path)
    assert len(traces) == 2 and traces[0].trace_id != traces[1].trace_id
    assert [[e.agent for e in t.events] for t in traces] == [["a", "b", "a"], ["a", "b", "a"]]
    assert all(t.events[-1].decision == "stop" for t in traces)


@needs_langgraph
def test_concurrent_run_in_one_handler_is_named_not_mixed(tmp_path):
    import asyncio

    from langgraph.graph import END, START, StateGraph

    from orchestrace.errors import OrchestraceError
    from orchestrace.integrations.langgraph import OrchestraceCallbackHandler

    path = tmp_path / "runs.jsonl"
    handler = OrchestraceCallbackHandler(path)

    async def both():
        # node a of each run waits until both runs are inside it: the runs really overlap,
        # however the machine schedules them
        entered = 0
        both_in = asyncio.Event()

        async def a(state: dict) -> dict:
            nonlocal entered
            entered += 1
            if entered == 2:
                both_in.set()
            await asyncio.wait_for(both_in.wait(), timeout=30)
            return {"x": 1}

        g = StateGraph(dict)
        g.add_node("a", a)
        g.add_node("b", lambda s: {"x": 2})
        g.add_edge(START, "a")
        g.add_edge("a", "b")
        g.add_edge("b", END)
        graph = g.compile()
        cfg = {"callbacks": [handler]}
        await asyncio.gather(graph.ainvoke({"x": 0}, cfg), graph.ainvoke({"x": 0}, cfg))

    asyncio.run(both())
    with pytest.raises(OrchestraceError, match="give each concurrent run its own handler"):
        handler.close()
    tr = load(path, partial=True)
    assert [e.agent for e in tr.events] == ["a", "b", "a"]  # the one recorded run, then its stop


@needs_langgraph
def test_interrupt_and_resume_are_human_interventions(tmp_path):
    from langgraph.checkpoint.memory import MemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, interrupt

    from orchestrace.integrations.langgraph import OrchestraceCallbackHandler
    from orchestrace.io import load_all

    def ask(state: dict) -> dict:
        return {"x": interrupt("ok?")}

    g = StateGraph(dict)
    g.add_node("ask", ask)
    g.add_node("after", lambda s: {"y": 1})
    g.add_edge(START, "ask")
    g.add_edge("ask", "after")
    g.add_edge("after", END)
    app = g.compile(checkpointer=MemorySaver())
    handler = OrchestraceCallbackHandler(tmp_path / "run.jsonl")
    cfg = {"configurable": {"thread_id": "i"}, "callbacks": [handler]}
    app.invoke({"x": 0}, cfg)
    app.invoke(Command(resume="yes"), cfg)
    handler.close()
    first, second = load_all(tmp_path / "run.jsonl")
    ((kind, agent, content),) = [(e.type, e.agent, e.content) for e in first.events]
    assert (kind, agent) == ("human_intervention", "ask") and "ok?" in content
    assert "Traceback" not in content
    assert [(e.type, e.agent) for e in second.events] == [
        ("human_intervention", "human"),
        ("message", "ask"),
        ("message", "after"),
        ("orchestrator_decision", "ask"),
    ]
    # the interrupted run ended with no answer: no stop; the resumed one stops
    assert second.events[-1].decision == "stop"
    assert second.events[0].content == "yes"
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps(handler.roots()))
    for live, imported in zip((first, second), import_path(runs).traces, strict=True):
        same(live, imported)


@needs_langgraph
def test_subgraph_steps_flow_through_their_node(tmp_path):
    from langgraph.graph import END, START, StateGraph

    from orchestrace.integrations.langgraph import OrchestraceCallbackHandler

    inner = StateGraph(dict)
    for name in ("i1", "i2"):
        inner.add_node(name, lambda s, n=name: {"x": n})
    inner.add_edge(START, "i1")
    inner.add_edge("i1", "i2")
    inner.add_edge("i2", END)
    outer = StateGraph(dict)
    outer.add_node("a", lambda s: {"x": 0})
    outer.add_node("sub", inner.compile())
    outer.add_node("b", lambda s: {"x": 9})
    outer.add_edge(START, "a")
    outer.add_edge("a", "sub")
    outer.add_edge("sub", "b")
    outer.add_edge("b", END)
    handler = OrchestraceCallbackHandler(tmp_path / "run.jsonl")
    outer.compile().invoke({"x": 0}, {"callbacks": [handler]})
    handler.close()
    tr = load(tmp_path / "run.jsonl")
    assert check_trace(tr) == []
    by = {e.agent: e.id for e in tr.events if e.decision != "stop"}
    flow = {(x.src, x.dst) for x in tr.edges}
    for src, dst in (("a", "i1"), ("i1", "i2"), ("i2", "sub"), ("sub", "b")):
        assert (by[src], by[dst]) in flow, (src, dst)
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps(handler.roots()))
    same(tr, import_path(runs).traces[0])


@needs_langgraph
def test_node_time_before_its_llm_call_is_on_the_critical_path(tmp_path):
    # a node works 0.2 s, then calls a model once: the callback recording (LLM runs, rule 9's
    # opening event) and the stream recording (whole-node updates) agree on the critical path
    import time

    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, StateGraph

    from orchestrace.integrations.langgraph import OrchestraceCallbackHandler, record_stream
    from orchestrace.trace.graph import critical_path_length

    def slow(state: dict) -> dict:
        time.sleep(0.2)
        FakeMessagesListChatModel(responses=[AIMessage(content="hi")]).invoke("q")
        return {"x": 1}

    g = StateGraph(dict)
    g.add_node("slow", slow)
    g.add_node("fast", lambda s: {"x": 2})
    g.add_edge(START, "slow")
    g.add_edge("slow", "fast")
    g.add_edge("fast", END)
    app = g.compile()
    # one run recorded both ways: the two recordings time the same node executions (two
    # runs each time their own, and on a loaded machine those differ by more than 0.05 s)
    handler = OrchestraceCallbackHandler(tmp_path / "cb.jsonl")
    for _ in record_stream(app, {"x": 0}, {"callbacks": [handler]}, path=tmp_path / "st.jsonl"):
        pass
    handler.close()
    cb, st = load(tmp_path / "cb.jsonl"), load(tmp_path / "st.jsonl")
    opening = next(e for e in cb.events if e.id.endswith(".start"))
    assert (opening.type, opening.agent) == ("orchestrator_decision", "slow")
    assert opening.dur >= 0.2
    a, b = critical_path_length(cb), critical_path_length(st)
    assert a >= 0.2 and b >= 0.2 and abs(a - b) < 0.05, (a, b)


@needs_langgraph
def test_existing_output_fails_before_the_graph_runs(tmp_path, marked_outputs):
    from orchestrace.integrations.langgraph import OrchestraceCallbackHandler, record_stream
    from orchestrace.io._output import OutputError

    ran: list[int] = []
    path = tmp_path / "run.jsonl"
    path.write_text("keep me\n")
    with pytest.raises(OutputError, match="exists"):
        OrchestraceCallbackHandler(path)

    class Graph:
        def stream(self, *a, **k):
            ran.append(1)
            yield from ()

    with pytest.raises(OutputError, match="exists"):
        record_stream(Graph(), {}, path=path)  # the call itself, before any chunk
    assert ran == [] and path.read_text() == "keep me\n"
    with pytest.raises(OutputError, match="orchestrace did not write it"):
        OrchestraceCallbackHandler(path, overwrite=True)  # a user's file, even so
    assert path.read_text() == "keep me\n"
    path.unlink()
    OrchestraceCallbackHandler(path).close()
    OrchestraceCallbackHandler(path, overwrite=True).close()  # replacing its own is allowed


@needs_langgraph
def test_roles_follow_who_spawns(tmp_path):
    # plan fans out to two workers with Send: plan orchestrates, workers work; the run stops
    import operator
    from typing import Annotated, TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    from orchestrace.integrations.langgraph import OrchestraceCallbackHandler

    S = TypedDict("S", {"out": Annotated[list, operator.add]})  # noqa: UP013 (resolved here)

    g = StateGraph(S)
    g.add_node("plan", lambda s: {"out": []})
    g.add_node("work", lambda s: {"out": [s["k"]]})
    g.add_conditional_edges("plan", lambda s: [Send("work", {"k": i}) for i in range(2)])
    g.add_edge(START, "plan")
    g.add_edge("work", END)
    handler = OrchestraceCallbackHandler(tmp_path / "r.jsonl")
    g.compile().invoke({"out": []}, {"callbacks": [handler]})
    handler.close()
    tr = load(tmp_path / "r.jsonl")
    roles = {(e.agent, e.type): e.role for e in tr.events}
    assert roles[("plan", "message")] == "orchestrator"
    assert roles[("plan", "spawn")] == "worker"  # a spawn names the role of the agent it starts
    assert roles[("work", "return")] == roles[("work#2", "return")] == "worker"
    assert (tr.events[-1].decision, tr.events[-1].agent) == ("stop", "plan")
    from orchestrace.trace.analyze import summarize

    assert summarize(tr)["agents_by_role"] == {"orchestrator": 1, "worker": 2}
