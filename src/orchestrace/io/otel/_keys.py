"""The GenAI semantic-convention and OpenInference attributes the OTel importer maps, and span roles.

A span's role (agent, LLM, tool, chain, guardrail) comes from ``gen_ai.operation.name`` or
``openinference.span.kind``; names, models, tokens and tool payloads from the first key of each
list below that the span carries.

Example:
    >>> _first({"llm.model_name": "m"}, _MODEL)
    ('llm.model_name', 'm')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from orchestrace._safe import decimal

if TYPE_CHECKING:  # the reader imports this module's keys
    from orchestrace.io.otel._read import OtelSpan

_OI_KIND = "openinference.span.kind"
_OP = "gen_ai.operation.name"
_HANDOFF_TARGET = "gen_ai.agent.handoff.target.name"
_HANDOFF_SOURCE = "gen_ai.agent.handoff.source.name"
_HANDOFF_PREFIX = "handoff to "

# ---------------------------------------------------------------------- span kinds
_LLM_OPS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})
_TOOL_OPS = frozenset({"execute_tool", "retrieval"})
_CHAIN_OPS = frozenset({"invoke_workflow"})
_LLM_KINDS = frozenset({"LLM", "EMBEDDING"})
_TOOL_KINDS = frozenset({"TOOL", "RETRIEVER", "RERANKER"})
_CHAIN_KINDS = frozenset({"CHAIN", "EVALUATOR", "PROMPT", "UNKNOWN"})

_TOKENS_IN = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
_TOKENS_OUT = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
)
_MODEL = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name", "embedding.model_name")
_AGENT_NAME = ("gen_ai.agent.name", "agent.name", "graph.node.id", "gen_ai.agent.id")
_TOOL_NAME = ("gen_ai.tool.name", "tool.name")
_TOOL_ARGS = ("gen_ai.tool.call.arguments", "input.value")
_TOOL_RESULT = ("gen_ai.tool.call.result", "output.value")
_OUTPUT = ("output.value",)
_COST = ("llm.cost.total", "gen_ai.usage.cost")


# ---------------------------------------------------------------------- classifying spans
def _first(attrs: Mapping[str, Any], keys: Iterable[str]) -> tuple[str | None, Any]:
    for k in keys:
        v = attrs.get(k)
        if v is not None and v != "":
            return k, v
    return None, None


def _classify(sp: OtelSpan) -> tuple[str, str | None]:
    """The span's role and, for an unknown kind, the kind it named."""
    a = sp.attrs
    op = a.get(_OP)
    oi = a.get(_OI_KIND)
    oi = oi.upper() if isinstance(oi, str) else None
    if _HANDOFF_TARGET in a or (
        oi == "TOOL" and sp.name.startswith(_HANDOFF_PREFIX) and len(sp.name) > len(_HANDOFF_PREFIX)
    ):
        return "handoff", None
    if op == "invoke_agent" or oi == "AGENT":
        return "agent", None
    if op == "create_agent":
        return "create", None
    if op in _LLM_OPS or oi in _LLM_KINDS:
        return "llm", None
    if op in _TOOL_OPS or oi in _TOOL_KINDS:
        return "tool", None
    if oi == "GUARDRAIL" or (isinstance(op, str) and "guardrail" in op):
        return "guardrail", None
    if op in _CHAIN_OPS or oi in _CHAIN_KINDS:
        return "chain", None
    if oi is not None:
        return "chain", f"openinference.span.kind {oi}"
    if op is not None:
        return "chain", f"gen_ai.operation.name {op}"
    return "chain", ""


def _agent_name(sp: OtelSpan) -> tuple[str | None, str]:
    key, v = _first(sp.attrs, _AGENT_NAME)
    if isinstance(v, str) and v:
        return key, v
    name = sp.name
    if name.startswith("invoke_agent "):
        name = name[len("invoke_agent ") :]
    if name.startswith("create_agent "):
        name = name[len("create_agent ") :]
    return None, name or "agent"


def _tool_name(sp: OtelSpan) -> tuple[str | None, str]:
    key, v = _first(sp.attrs, _TOOL_NAME)
    if isinstance(v, str) and v:
        return key, v
    name = sp.name
    if name.startswith("execute_tool "):
        name = name[len("execute_tool ") :]
    return None, name or "tool"


def _count(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int) and 0 <= v < 2**63:
        return v
    if isinstance(v, float) and v.is_integer() and 0 <= v < 2**63:
        return int(v)
    if isinstance(v, str) and len(v) < 19:
        return decimal(v)
    return None
