"""Regenerate tests/fixtures/frameworks/: native output of real agent frameworks, made offline.

Runs the real packages with scripted models (no network) in one flow: an orchestrator fans out
to two parallel workers, a worker calls a tool, the orchestrator hands off to a writer that
answers.

- OpenAI Agents SDK (``[agents]``): a scripted ``Model`` subclass; the workers run as tools of
  the orchestrator (called in parallel), the orchestrator has an input guardrail and hands off
  to the writer. Written: ``agents_run.json`` (the ``{"data": [...]}`` payload the SDK's
  backend exporter sends: the trace item, then every span as it ends) and
  ``agents_live.jsonl`` (what :class:`~orchestrace.integrations.openai_agents.
  OrchestraceTracingProcessor` recorded during the same run).
- LangGraph (``[langgraph]``): a ``StateGraph`` with an orchestrator node, two parallel workers
  via ``Send`` (each calls a ``GenericFakeChatModel``), a node asking for a tool run by a
  ``ToolNode``, a ``Command(goto=...)`` handoff to a writer, and a ``MemorySaver``
  checkpointer; then one fork with ``update_state`` from an earlier checkpoint and a resumed
  run. Written: ``langgraph_stream.jsonl`` (``graph.stream(stream_mode=[...])`` chunks),
  ``langgraph_runs.json`` (the LangChain run trees the recording tracer built),
  ``langgraph_history.json`` (``get_state_history`` snapshots, with the fork) and
  ``langgraph_live.jsonl`` / ``langgraph_stream_live.jsonl`` (what the callback handler and
  the stream adapter recorded during the first run).

Usage::

    python scripts/make_framework_fixtures.py [OUT_DIR]
"""

from __future__ import annotations

import asyncio
import json
import operator
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any, TypedDict

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "frameworks"


# ---------------------------------------------------------------------- OpenAI Agents SDK
def run_agents_flow(processors: list[Any]) -> str:
    """Run the Agents SDK flow with ``processors`` as the only trace processors; the answer."""
    from agents import (
        Agent,
        GuardrailFunctionOutput,
        RunConfig,
        Runner,
        function_tool,
        input_guardrail,
    )
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.tracing import generation_span, set_trace_processors
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    def msg(text: str) -> Any:
        return ResponseOutputMessage(
            id="msg",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )

    def call(name: str, args: dict[str, Any], cid: str) -> Any:
        return ResponseFunctionToolCall(
            type="function_call", name=name, arguments=json.dumps(args), call_id=cid, id=cid
        )

    class ScriptedModel(Model):
        """Answers each turn from a script, inside a generation span like the SDK's models."""

        def __init__(self, name: str, turns: list[tuple[list[Any], int, int]]) -> None:
            self.name = name
            self.turns = list(turns)

        async def get_response(
            self,
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            *,
            previous_response_id=None,
            conversation_id=None,
            prompt=None,
        ):  # type: ignore[no-untyped-def]
            out, tin, tout = self.turns.pop(0)
            with generation_span(
                model=self.name,
                model_config={"temperature": 0.0},
                disabled=tracing.is_disabled(),
            ) as span:
                await asyncio.sleep(0.02)
                span.span_data.usage = {
                    "requests": 1,
                    "input_tokens": tin,
                    "output_tokens": tout,
                    "total_tokens": tin + tout,
                }
                if tracing.include_data():
                    span.span_data.input = (
                        input if isinstance(input, list) else [{"role": "user", "content": input}]
                    )
                    span.span_data.output = [o.model_dump() for o in out]
            usage = Usage(requests=1, input_tokens=tin, output_tokens=tout, total_tokens=tin + tout)
            return ModelResponse(output=out, usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    async def lookup(topic: str) -> str:
        """Look up a fact about a topic."""
        await asyncio.sleep(0.01)
        return f"fact about {topic}"

    @input_guardrail
    async def no_secrets(ctx: Any, agent: Any, user_input: Any) -> Any:
        return GuardrailFunctionOutput(output_info={"secrets": 0}, tripwire_triggered=False)

    worker_a = Agent(
        name="researcher_a",
        instructions="research",
        tools=[lookup],
        model=ScriptedModel(
            "fake-mini",
            [
                ([call("lookup", {"topic": "a"}, "call_a1")], 30, 8),
                ([msg("A: fact about a")], 50, 5),
            ],
        ),
    )
    worker_b = Agent(
        name="researcher_b",
        instructions="research",
        model=ScriptedModel("fake-mini", [([msg("B: done")], 40, 6)]),
    )
    writer = Agent(
        name="writer",
        instructions="write the answer",
        model=ScriptedModel("fake-large", [([msg("final answer")], 120, 20)]),
    )
    lead = Agent(
        name="orchestrator",
        instructions="plan, delegate, hand off",
        handoffs=[writer],
        input_guardrails=[no_secrets],
        tools=[
            worker_a.as_tool(tool_name="research_a", tool_description="research part a"),
            worker_b.as_tool(tool_name="research_b", tool_description="research part b"),
        ],
        model=ScriptedModel(
            "fake-large",
            [
                (
                    [
                        call("research_a", {"input": "part a"}, "call_1"),
                        call("research_b", {"input": "part b"}, "call_2"),
                    ],
                    100,
                    15,
                ),
                ([call("transfer_to_writer", {}, "call_3")], 150, 4),
            ],
        ),
    )
    set_trace_processors(processors)
    try:
        result = asyncio.run(
            Runner.run(lead, "question", run_config=RunConfig(workflow_name="research-demo"))
        )
    finally:
        for p in processors:
            p.force_flush()
    return str(result.final_output)


class Collector:
    """A tracing processor keeping what the SDK's batch exporter would send, in its order."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def on_trace_start(self, trace: Any) -> None:
        """Part of the TracingProcessor interface."""
        self.items.append(trace.export())

    def on_trace_end(self, trace: Any) -> None:
        """Part of the TracingProcessor interface."""
        pass

    def on_span_start(self, span: Any) -> None:
        """Part of the TracingProcessor interface."""
        pass

    def on_span_end(self, span: Any) -> None:
        """Part of the TracingProcessor interface."""
        self.items.append(span.export())

    def shutdown(self) -> None:
        """Part of the TracingProcessor interface."""
        pass

    def force_flush(self) -> None:
        """Part of the TracingProcessor interface."""
        pass


def make_agents(out: Path) -> None:
    """Run the Agents SDK flow once; write its native export and the live recording."""
    from orchestrace.integrations.openai_agents import OrchestraceTracingProcessor

    collector = Collector()
    with tempfile.TemporaryDirectory() as tmp:
        live = OrchestraceTracingProcessor(tmp)
        answer = run_agents_flow([collector, live])
        assert answer == "final answer", answer
        (path,) = live.paths.values()
        shutil.copyfile(path, out / "agents_live.jsonl")
    (out / "agents_run.json").write_text(
        json.dumps({"data": collector.items}, indent=1, ensure_ascii=False) + "\n"
    )


# ---------------------------------------------------------------------- LangGraph
class FlowState(TypedDict, total=False):
    """State of the LangGraph flow."""

    question: str
    topic: str
    results: Annotated[list[str], operator.add]
    messages: Annotated[list[Any], operator.add]
    answer: str


def build_graph() -> Any:
    """The LangGraph flow, compiled with a ``MemorySaver`` checkpointer."""
    import time

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import MemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.prebuilt import ToolNode
    from langgraph.types import Command, Send

    @tool
    def lookup(topic: str) -> str:
        """Look up a fact about a topic."""
        time.sleep(0.01)
        return f"fact about {topic}"

    def chat(text: str, tin: int, tout: int) -> Any:
        return GenericFakeChatModel(
            messages=iter(
                [
                    AIMessage(
                        content=text,
                        usage_metadata={
                            "input_tokens": tin,
                            "output_tokens": tout,
                            "total_tokens": tin + tout,
                        },
                    )
                ]
            )
        )

    def orchestrator(state: FlowState) -> dict[str, Any]:
        plan = chat("split into a and b", 20, 5).invoke(state["question"])
        return {"messages": [plan]}

    def fan_out(state: FlowState) -> list[Any]:
        return [Send("worker", {"question": state["question"], "topic": t}) for t in ("a", "b")]

    def worker(state: FlowState) -> dict[str, Any]:
        time.sleep(0.01)
        reply = chat(f"result {state['topic']}", 10, 3).invoke(state["topic"])
        return {"results": [str(reply.content)]}

    def ask_tool(state: FlowState) -> dict[str, Any]:
        return {
            "messages": [
                AIMessage(
                    content="",
                    tool_calls=[{"name": "lookup", "args": {"topic": "x"}, "id": "call_1"}],
                )
            ]
        }

    def review(state: FlowState) -> Any:
        return Command(goto="writer", update={"results": ["reviewed"]})

    def writer(state: FlowState) -> dict[str, Any]:
        reply = chat("final answer", 30, 7).invoke(" ".join(state.get("results", [])))
        return {"answer": str(reply.content)}

    g = StateGraph(FlowState)
    g.add_node("orchestrator", orchestrator)
    g.add_node("worker", worker)
    g.add_node("ask_tool", ask_tool)
    g.add_node("tools", ToolNode([lookup]))
    g.add_node("review", review)
    g.add_node("writer", writer)
    g.add_edge(START, "orchestrator")
    g.add_conditional_edges("orchestrator", fan_out, ["worker"])
    g.add_edge("worker", "ask_tool")
    g.add_edge("ask_tool", "tools")
    g.add_edge("tools", "review")
    g.add_edge("writer", END)
    return g.compile(checkpointer=MemorySaver())


def make_langgraph(out: Path) -> None:
    """Run the LangGraph flow; write stream chunks, run tree, history and the live recording."""
    from orchestrace.integrations.langgraph import (
        OrchestraceCallbackHandler,
        record_stream,
        snapshot_json,
        stream_chunk_json,
    )

    graph = build_graph()
    cfg: dict[str, Any] = {"configurable": {"thread_id": "demo"}}
    with tempfile.TemporaryDirectory() as tmp:
        live_path = Path(tmp) / "live.jsonl"
        stream_path = Path(tmp) / "stream.jsonl"
        handler = OrchestraceCallbackHandler(live_path)  # also collects the run trees
        chunks = []
        for chunk in record_stream(
            graph,
            {"question": "q", "results": [], "messages": []},
            {**cfg, "callbacks": [handler]},
            path=stream_path,
            stream_mode=["updates", "debug", "tasks", "checkpoints"],
        ):
            chunks.append(stream_chunk_json(chunk))
        handler.close()
        shutil.copyfile(live_path, out / "langgraph_live.jsonl")
        shutil.copyfile(stream_path, out / "langgraph_stream_live.jsonl")
    (out / "langgraph_stream.jsonl").write_text(
        "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in chunks)
    )
    (out / "langgraph_runs.json").write_text(
        json.dumps(handler.roots(), indent=1, ensure_ascii=False) + "\n"
    )
    # fork: go back to the checkpoint before the tool ran, change the state, run on from there
    history = list(graph.get_state_history(cfg))
    before_tools = next(s for s in history if s.next == ("tools",))
    forked = graph.update_state(before_tools.config, {"results": ["human note"]})
    for _ in graph.stream(None, forked, stream_mode="updates"):
        pass
    history = list(graph.get_state_history(cfg))
    (out / "langgraph_history.json").write_text(
        json.dumps([snapshot_json(s) for s in history], indent=1, ensure_ascii=False) + "\n"
    )


def main(argv: list[str]) -> int:
    """Write the fixtures to ``argv[0]`` (default: tests/fixtures/frameworks)."""
    out = Path(argv[0]) if argv else OUT
    out.mkdir(parents=True, exist_ok=True)
    make_agents(out)
    make_langgraph(out)
    for p in sorted(out.iterdir()):
        print(f"wrote {p} ({p.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
