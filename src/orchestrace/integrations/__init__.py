"""Live capture for other frameworks: each writes a crash-safe orchestrace JSONL recording as a run happens.

- :mod:`orchestrace.integrations.otel`: an OpenTelemetry ``SpanExporter`` / ``SpanProcessor`` for any
  OTel-instrumented framework (extra ``[otel]``).
- :mod:`orchestrace.integrations.openai_agents`: a tracing processor for the OpenAI Agents SDK
  (extra ``[agents]``).
- :mod:`orchestrace.integrations.langgraph`: a LangChain/LangGraph callback handler and stream adapter
  (extra ``[langgraph]``).

The framework packages are imported only by the module that needs them.
"""

#: The public names live in the submodules; each imports its framework (an extra) itself.
__all__: list[str] = []
