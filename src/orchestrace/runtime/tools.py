"""Tool calls: answered from the replay cache, or run (with injected failures), and recorded.

A call records a ``tool_call`` event of the calling agent and a ``tool_result`` event of the tool
(a ``tool_dependency`` edge between them); the result feeds the agent's next event. The tool's
output is stored in the run's :class:`~orchestrace.runtime.cache.ReplayCache` under the call's
:class:`~orchestrace.runtime.cache.CallKey`, so a replay answers it from the trace. Failures
(an unknown tool, an exception, a value that is not JSON, a failure injected at
``RunConfig.tool_failure_rate``) are recorded as the result's ``error``, never raised.

Example:
    >>> from orchestrace.runtime.config import RunConfig
    >>> run_tool(lambda args: args["x"] * 2, "double", {"x": 4}, "k1", RunConfig(), ["double"])[:2]
    (8, None)
    >>> run_tool(None, "nope", {}, "k1", RunConfig(), ["double"])[1]
    "unknown tool 'nope'; registered: ['double']"
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from orchestrace._safe import _SECRETS, scrub_known
from orchestrace.runtime.aggregate import text_of
from orchestrace.runtime.cache import CallKey, ToolOutcome, encode_args
from orchestrace.runtime.config import RunConfig
from orchestrace.runtime.context import AgentState, ToolResult
from orchestrace.trace.model import Edge, Event

if TYPE_CHECKING:
    from orchestrace.runtime.core import Runtime

__all__ = ["call_tool", "run_tool"]

_ENC = msgspec.json.Encoder(order="deterministic")


async def call_tool(rt: Runtime, a: AgentState, name: str, args: dict[str, Any]) -> ToolResult:
    """Agent ``a`` of ``rt`` calls tool ``name``: answer it, record the call and its result."""
    rt.check_alive(a)
    g = rt.guard
    if g is not None:
        if not g.allow(a, "tool", tool=name):
            return ToolResult(name, None, False, f"denied: role {a.role!r} may not call {name!r}")
        if g.policy is not None and name in g.policy.side_effect_tools and g.gate(a, "tool", []):
            return ToolResult(name, None, False, f"blocked: tainted inputs may not drive {name!r}")
    fn = rt.tools.get(name)
    rt.open_step(a)
    # the arguments are encoded once: for the key, and as the call's recorded content (as the
    # tool was called, so a replay, which does not run the tool, records the same)
    encoded = encode_args(args)
    inputs = CallKey.tool_inputs(name, args, encoded_args=encoded)
    key = CallKey.tool(a.name, name, args, a.occurrence("tool", inputs), inputs=inputs)
    content = encoded.decode()
    t0 = rt.now()
    cached = rt.cache.tool(key)
    if cached is not None:
        rt.cache_hits += 1
        value, error = cached.value, cached.error
        text = None if error else text_of(value)
        await asyncio.sleep(cached.latency)
    else:
        rt.tool_runs += 1
        value, error, latency, text = _run_tool(fn, name, args, key.id, rt.config, rt.tools)
        if rt.backend.virtual:
            await asyncio.sleep(latency)
        else:
            latency = rt.now() - t0
        rt.cache.put(key, ToolOutcome(value, error, round(latency, 9)))
    call_id = rt.emit(a, "tool_call", t0, tool=name, content=content, attrs={"key": key.id})
    res_id = _record_result(
        rt,
        name,
        call_id,
        rt.now(),
        text,
        error,
        None if g is None or not g.d.taint else g.tool_attrs(name),
    )
    if g is not None:
        g.tool_result(name, res_id, text)
        if error is None and g.screen(a.name, res_id, text_of(value) if text is None else text):
            value, error = None, "quarantined: the injection detector flagged this result"
    a.pending.append((res_id, "causal"))
    a.turn_open = False
    if error is not None and rt.config.on_error == "stop":
        rt.request_stop(f"tool failure: {error}")
    return ToolResult(name, value, error is None, error, res_id)


def run_tool(
    fn: Callable[[dict[str, Any]], Any] | None,
    name: str,
    args: dict[str, Any],
    key_id: str,
    config: RunConfig,
    registered: Iterable[str],
) -> tuple[Any, str | None, float]:
    """Run a tool: its value, its error (``None`` when it succeeded) and its latency (seconds).

    Latency and injected failures are drawn from the run's seed and the call's key, so a run
    repeats them exactly. A run with neither (``tool_latency_s`` and ``tool_failure_rate``
    zero) draws nothing: its latency is 0.0, as any draw would give.
    """
    return _run_tool(fn, name, args, key_id, config, registered)[:3]


def _run_tool(
    fn: Callable[[dict[str, Any]], Any] | None,
    name: str,
    args: dict[str, Any],
    key_id: str,
    config: RunConfig,
    registered: Iterable[str],
) -> tuple[Any, str | None, float, str | None]:
    """:func:`run_tool`, and the value as recorded text (``None`` when the call failed)."""
    if fn is None:
        return None, f"unknown tool {name!r}; registered: {sorted(registered)}", 0.0, None
    mean, fail_rate = config.tool_latency_s, config.tool_failure_rate
    latency = 0.0
    failed = False
    if mean or fail_rate:
        # seeding costs microseconds per call: only done when a draw can change something
        rng = random.Random(f"{config.seed}:tool:{key_id}")
        latency = mean * rng.uniform(0.5, 1.5)
        failed = bool(fail_rate) and rng.random() < fail_rate
    try:
        if failed:
            raise RuntimeError("injected tool failure")
        value = fn(args)
        encoded = _ENC.encode(value)  # a tool's value must be JSON
    except Exception as err:
        return None, f"{type(err).__name__}: {str(err)[:300]}", latency, None
    return value, None, latency, value if isinstance(value, str) else encoded.decode()


def _record_result(
    rt: Runtime,
    tool: str,
    call_id: str,
    t: float,
    content: str | None,
    error: str | None,
    attrs: dict[str, Any] | None,
) -> str:
    """Record a ``tool_result`` event of ``tool`` with its ``tool_dependency`` edge."""
    eid = f"e{len(rt.events) + 1}"
    if _SECRETS:  # a secret a tool echoed never reaches the trace
        content, error, attrs = scrub_known((content, error, attrs))
    ev = Event(
        id=eid,
        t=t,
        type="tool_result",
        agent=tool,
        tool=tool,
        content=content,
        trusted=False,
        error=error,
        attrs=attrs,
    )
    edge = Edge(call_id, eid, "tool_dependency")
    rt.events.append(ev)
    rt.edges.append(edge)
    if rt.recorder.processors or rt._custom_recorder:
        rt.recorder.event(ev, [edge])
    return eid
