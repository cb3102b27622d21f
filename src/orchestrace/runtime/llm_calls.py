"""LLM calls of the runtime: prompt, answer (replay cache or backend), ``llm_call`` event.

The event carries the token record of a trainable backend (:mod:`orchestrace.trace.tokens`).

These are methods of :class:`~orchestrace.runtime.core.Runtime` (``Runtime.generate``,
``Runtime.call_llm``), kept here as functions of the runtime so each concern of the runtime
reads on its own; agents reach them through :meth:`Context.generate
<orchestrace.runtime.context.Context.generate>`.

Example:
    >>> from orchestrace.runtime.backends.sim import SimBackend
    >>> from orchestrace.runtime.clock import run_virtual
    >>> from orchestrace.runtime.core import Runtime
    >>> from orchestrace.tasks import make_task
    >>> async def lead(ctx):
    ...     r = await ctx.generate("solve", {"truth": 3, "hardness": 0})
    ...     return r.answer
    >>> rt = Runtime(task=make_task("arith", size=4), backend=SimBackend(seed=1))
    >>> trace = run_virtual(rt.run(lead))
    >>> [e.type for e in trace.events if e.type == "llm_call"]
    ['llm_call']
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any

from orchestrace.runtime.backends.base import BackendError, LLMRequest, LLMResponse, redact
from orchestrace.runtime.cache import CallKey
from orchestrace.runtime.prompts import render

if TYPE_CHECKING:
    from orchestrace.runtime.context import AgentState
    from orchestrace.runtime.core import Runtime

__all__ = ["call_llm", "generate"]


async def generate(
    rt: Runtime,
    a: AgentState,
    kind: str,
    payload: dict[str, Any],
    messages: list[dict[str, str]] | None = None,
    max_tokens: int = 512,
) -> LLMResponse:
    """:meth:`Context.generate`: render, answer (cache or backend), record ``llm_call``."""
    rt.check_alive(a)
    rt.open_step(a, llm=True)
    req = LLMRequest(
        a.name,
        a.role,
        kind,
        messages
        or render(
            kind,
            payload,
            a.role,
            **({"spotlight": True} if rt.guard and rt.guard.d.spotlight else {}),
        ),
        payload,
        max_tokens=max_tokens,
    )
    fp = req.fingerprint()  # encoded once: the occurrence count and the key both hash it
    inputs = CallKey.llm_inputs(req, fingerprint=fp)
    key = CallKey.llm(req, a.occurrence("llm", inputs), fingerprint=fp, inputs=inputs)
    t0 = rt.now()
    recorded = rt.label_answers and key in rt.cache  # read before the call stores its answer
    resp = await rt.call_llm(req, key)
    attrs: dict[str, Any] = {"kind": kind, "key": key.id}
    if rt.label_answers and not recorded:  # a fork: say who answered this changed call
        attrs["answered_by"] = {
            "name": str(rt.backend.name),
            "model": str(resp.model or rt.backend.name),
        }
    if resp.answer is not None:
        attrs["answer"] = resp.answer
    if resp.confidence is not None:
        attrs["confidence"] = resp.confidence
    if "truth" in payload:  # ground truth of what was asked, for rewards and credit
        attrs["truth"] = payload["truth"]
        for k in ("candidate", "candidates"):
            if k in payload:
                attrs[k] = payload[k]
    token_record = getattr(resp, "token_record", None)  # trainable backends' token ids
    if token_record is not None:
        attrs["tokens_ref"] = f"e{len(rt.events) + 1}"  # the id record() gives it
    eid = rt.emit(
        a,
        "llm_call",
        t0,
        tool=resp.model or rt.backend.name,
        content=resp.text,
        tokens_in=resp.tokens_in,
        tokens_out=resp.tokens_out,
        cost=resp.cost,
        error=None if resp.error is None else redact(resp.error),
        attrs=attrs,
    )
    if token_record is not None:
        rt.token_table[eid] = token_record  # trace.meta["tokens"], keyed by event id
    rt.add_tokens(resp.tokens_in + resp.tokens_out)
    return resp


async def call_llm(rt: Runtime, req: LLMRequest, key: CallKey) -> LLMResponse:
    """Answer from the replay cache, else from the backend; wait the call's latency."""
    cached = rt.cache.llm(key)
    if cached is not None:
        rt.cache_hits += 1
        await asyncio.sleep(rt.cache.delay(key, cached.latency, rt.now()))
        if cached.error is not None and rt.config.on_error == "stop":  # as the run did
            rt.request_stop(f"backend failure: {redact(cached.error)}")
        return cached
    rt.backend_calls += 1
    if rt.backend.virtual:
        try:
            resp = await rt.backend.complete(req)
        except BackendError as err:
            resp = LLMResponse("", error=str(err)[:500], model=rt.backend.name)
        await asyncio.sleep(resp.latency)
    else:
        t0 = rt.now()
        try:
            resp = await rt.backend.complete(req)
        except BackendError as err:
            resp = LLMResponse("", error=str(err)[:500], model=rt.backend.name)
        resp = dataclasses.replace(resp, latency=round(rt.now() - t0, 9))
    if resp.error is None:
        rt.cache.put(key, resp)
    if resp.error is not None and rt.config.on_error == "stop":
        rt.request_stop(f"backend failure: {redact(resp.error)}")
    return resp
