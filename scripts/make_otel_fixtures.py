"""Regenerate tests/fixtures/otel/: spans of real OpenTelemetry instrumentation, made offline.

Two flows, each an orchestrator with parallel workers, tools and a handoff:

- GenAI semantic conventions, recorded with the real OTel SDK (``TracerProvider``, a seeded id
  generator and explicit times, so the files are the same on every run): ``invoke_agent``
  orchestrator -> ``chat`` plan -> three concurrent ``invoke_agent`` workers (two invocations of
  ``researcher``, one ``coder``; each ``chat`` + ``execute_tool`` [+ ``chat``], one tool fails)
  -> ``chat`` aggregate -> ``execute_tool transfer_to_reviewer`` with
  ``gen_ai.agent.handoff.*`` -> ``invoke_agent reviewer`` -> ``chat``. Written as
  ``genai_otlp.json`` (OTLP JSON as the SDK's OTLP encoder builds it, ids in hex as the OTLP/JSON
  spec and the collector's file exporter write them), ``genai_spans.jsonl``
  (``ReadableSpan.to_json(indent=None)``, one span per line) and ``genai_console.txt`` (what
  ``ConsoleSpanExporter`` prints: indented spans one after another).
- OpenInference: the OpenAI Agents SDK flow of ``scripts/make_framework_fixtures.py`` (scripted
  model, two workers run as tools in parallel, a function tool, an input guardrail, a handoff
  to a writer) traced by ``openinference-instrumentation-openai-agents`` into an OTel SDK
  ``TracerProvider``. Written as ``openinference_agents.json`` (OTLP JSON).
- OpenInference: the LangGraph flow of the same script (``GenericFakeChatModel`` nodes, two
  parallel workers via ``Send``, a ``ToolNode``, a ``Command`` handoff to a writer) traced by
  ``openinference-instrumentation-langchain``. Written as ``openinference_langgraph.json``.

The OpenInference files' times and ids come from the run.

Usage::

    python scripts/make_otel_fixtures.py [OUT_DIR]
"""

from __future__ import annotations

import importlib.util
import io
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "otel"
T0 = 1_750_000_000 * 10**9  # 2025-06-15T15:06:40Z
MS = 10**6


def otlp_json(spans: Sequence[Any]) -> dict[str, Any]:
    """OTLP JSON of SDK spans: the SDK's protobuf encoding, ids as hex (OTLP/JSON)."""
    import base64

    from google.protobuf import json_format
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    doc: dict[str, Any] = json_format.MessageToDict(encode_spans(spans))

    def hexify(node: Any) -> None:
        if isinstance(node, dict):
            for key in ("traceId", "spanId", "parentSpanId"):
                if isinstance(node.get(key), str):
                    node[key] = base64.b64decode(node[key]).hex()
            for v in node.values():
                hexify(v)
        elif isinstance(node, list):
            for v in node:
                hexify(v)

    hexify(doc)
    return doc


def _provider(processors: Sequence[Any], seed: int | None = None) -> Any:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class SeededIds(IdGenerator):
        def __init__(self, seed: int) -> None:
            self.rng = random.Random(seed)

        def generate_span_id(self) -> int:
            return self.rng.getrandbits(64) or 1

        def generate_trace_id(self) -> int:
            return self.rng.getrandbits(128) or 1

    fixed = {"service.name": "research-app", "service.instance.id": "research-app-1"}
    kw: dict[str, Any] = {"resource": Resource.create(fixed)}
    if seed is not None:
        kw["id_generator"] = SeededIds(seed)
    tp = TracerProvider(**kw)
    for p in processors:
        tp.add_span_processor(p)
    return tp


def run_genai_flow(processors: Sequence[Any], seed: int = 7) -> None:
    """Record the GenAI-semconv flow through ``processors`` (real SDK spans, fixed times)."""
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    tp = _provider(processors, seed)
    tracer = tp.get_tracer("research-app.agents", "1.0")

    def span(name: str, start: int, parent: Any = None, **attrs: Any) -> Any:
        ctx = trace.set_span_in_context(parent) if parent is not None else None
        return tracer.start_span(
            name,
            context=ctx,
            start_time=T0 + start * MS,
            attributes={k.replace("__", "."): v for k, v in attrs.items()},
            kind=trace.SpanKind.INTERNAL if "agent" in name else trace.SpanKind.CLIENT,
        )

    def chat(parent: Any, start: int, end: int, model: str, tin: int, tout: int) -> None:
        s = span(
            f"chat {model}",
            start,
            parent,
            gen_ai__operation__name="chat",
            gen_ai__provider__name="openai",
            gen_ai__request__model=model,
            gen_ai__response__model=f"{model}-2025-01-01",
            gen_ai__usage__input_tokens=tin,
            gen_ai__usage__output_tokens=tout,
            gen_ai__response__finish_reasons=("stop",),
        )
        s.end(T0 + end * MS)

    def tool(
        parent: Any, start: int, end: int, name: str, args: str, result: str | None, **extra: Any
    ) -> None:
        s = span(
            f"execute_tool {name}",
            start,
            parent,
            gen_ai__operation__name="execute_tool",
            gen_ai__tool__name=name,
            gen_ai__tool__call__id=f"call_{name}_{start}",
            gen_ai__tool__call__arguments=args,
            **extra,
        )
        if result is None:
            s.set_status(Status(StatusCode.ERROR, "search backend timed out"))
            s.add_event(
                "exception",
                {"exception.type": "TimeoutError", "exception.message": "search backend timed out"},
                timestamp=T0 + end * MS,
            )
        else:
            s.set_attribute("gen_ai.tool.call.result", result)
        s.end(T0 + end * MS)

    def agent(name: str, aid: str, start: int, parent: Any = None) -> Any:
        return span(
            f"invoke_agent {name}",
            start,
            parent,
            gen_ai__operation__name="invoke_agent",
            gen_ai__agent__name=name,
            gen_ai__agent__id=aid,
            gen_ai__provider__name="openai",
        )

    root = agent("orchestrator", "agt_orch", 0)
    chat(root, 0, 1000, "gpt-4o", 200, 50)
    r1 = agent("researcher", "agt_res", 1000, root)
    r2 = agent("researcher", "agt_res", 1000, root)
    cd = agent("coder", "agt_code", 1000, root)
    chat(r1, 1000, 1500, "gpt-4o-mini", 100, 20)
    chat(r2, 1000, 2000, "gpt-4o-mini", 120, 30)
    chat(cd, 1000, 2000, "gpt-4o-mini", 150, 40)
    tool(r1, 1500, 3000, "web_search", '{"q": "part 1"}', "result 1")
    tool(r2, 2000, 3500, "web_search", '{"q": "part 2"}', None)
    tool(cd, 2000, 4500, "run_python", '{"code": "sum(range(10))"}', "45")
    chat(r1, 3000, 4000, "gpt-4o-mini", 300, 60)
    r2.end(T0 + 3500 * MS)
    r1.set_attribute("output.value", "part 1 summary")
    r1.end(T0 + 4000 * MS)
    chat(cd, 4500, 5000, "gpt-4o-mini", 200, 25)
    cd.end(T0 + 5000 * MS)
    chat(root, 5000, 6000, "gpt-4o", 800, 90)
    tool(
        root,
        6000,
        6100,
        "transfer_to_reviewer",
        "{}",
        '{"assistant": "reviewer"}',
        gen_ai__agent__handoff__source__name="orchestrator",
        gen_ai__agent__handoff__target__name="reviewer",
    )
    rv = agent("reviewer", "agt_rev", 6100, root)
    chat(rv, 6100, 9000, "gpt-4o", 900, 150)
    rv.end(T0 + 9000 * MS)
    root.end(T0 + 9000 * MS)
    tp.force_flush()
    tp.shutdown()


def _framework_flows() -> Any:
    """``scripts/make_framework_fixtures.py``, where the Agents SDK and LangGraph flows live."""
    name = "_framework_fixtures"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parent / "make_framework_fixtures.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # LangGraph reads the state schema's annotations from it
    spec.loader.exec_module(mod)
    return mod


def run_langchain_flow(processors: Sequence[Any]) -> str:
    """Run the LangGraph flow traced by ``openinference-instrumentation-langchain``."""
    from openinference.instrumentation.langchain import LangChainInstrumentor

    mod = _framework_flows()
    tp = _provider(processors)
    inst = LangChainInstrumentor()
    inst.instrument(tracer_provider=tp)
    try:
        graph = mod.build_graph()
        out = graph.invoke({"question": "question"}, {"configurable": {"thread_id": "otel"}})
    finally:
        inst.uninstrument()
    tp.force_flush()
    tp.shutdown()
    return str(out.get("answer"))


def run_openinference_flow(processors: Sequence[Any]) -> str:
    """Run the OpenAI Agents SDK flow traced by the OpenInference instrumentor's processor."""
    from openinference.instrumentation import OITracer, TraceConfig
    from openinference.instrumentation.openai_agents._processor import (
        OpenInferenceTracingProcessor,
    )

    mod = _framework_flows()
    tp = _provider(processors)
    tracer = OITracer(
        tp.get_tracer("openinference.instrumentation.openai_agents"), config=TraceConfig()
    )
    answer: str = mod.run_agents_flow([OpenInferenceTracingProcessor(tracer)])  # type: ignore[arg-type]
    tp.force_flush()
    tp.shutdown()
    return answer


def collect(run: Any) -> list[Any]:
    """The SDK spans ``run`` records, in the order they ended."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    mem = InMemorySpanExporter()
    run([SimpleSpanProcessor(mem)])
    return list(mem.get_finished_spans())


def main(argv: list[str]) -> int:
    """Write the fixtures to ``argv[1]`` (default: tests/fixtures/otel)."""
    out = Path(argv[1]) if len(argv) > 1 else OUT
    out.mkdir(parents=True, exist_ok=True)
    spans = collect(run_genai_flow)
    (out / "genai_otlp.json").write_text(json.dumps(otlp_json(spans), indent=1) + "\n")
    (out / "genai_spans.jsonl").write_text("".join(s.to_json(indent=None) + "\n" for s in spans))
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    buf = io.StringIO()
    run_genai_flow([SimpleSpanProcessor(ConsoleSpanExporter(out=buf))])
    (out / "genai_console.txt").write_text(buf.getvalue())
    oi = collect(run_openinference_flow)
    (out / "openinference_agents.json").write_text(json.dumps(otlp_json(oi), indent=1) + "\n")
    lc = collect(run_langchain_flow)
    (out / "openinference_langgraph.json").write_text(json.dumps(otlp_json(lc), indent=1) + "\n")
    print(
        f"wrote {out}: {len(spans)} GenAI spans, {len(oi)} OpenInference Agents SDK spans, "
        f"{len(lc)} OpenInference LangGraph spans"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
