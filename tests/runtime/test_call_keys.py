"""Replay keys and tool draws: the shortcuts the runtime takes give the same keys and draws."""

from __future__ import annotations

import random
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrace.runtime import RunConfig, Runtime, make_task
from orchestrace.runtime.backends.base import LLMRequest, request_key
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.cache import CallKey, ReplayCache, encode_args
from orchestrace.runtime.clock import run_virtual
from orchestrace.runtime.tools import run_tool

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(name=st.text(), args=st.dictionaries(st.text(), _json, max_size=4) | _json)
def test_tool_inputs_from_encoded_arguments_are_the_same_hash(name: str, args: Any) -> None:
    plain = CallKey.tool_inputs(name, args)
    assert CallKey.tool_inputs(name, args, encoded_args=encode_args(args)) == plain
    assert CallKey.tool("w1", name, args, 2, inputs=plain) == CallKey.tool("w1", name, args, 2)


@settings(max_examples=100, deadline=None)
@given(
    content=st.text(), payload=st.dictionaries(st.text(), _json, max_size=3), n=st.integers(0, 9)
)
def test_llm_key_from_a_fingerprint_is_the_same_key(
    content: str, payload: dict[str, Any], n: int
) -> None:
    req = LLMRequest("w\udc801", "worker", "solve", [{"role": "user", "content": content}], payload)
    fp = req.fingerprint()
    assert CallKey.llm(req, n, fingerprint=fp) == CallKey.llm(req, n)
    assert CallKey.llm(req, n, fingerprint=fp, inputs=CallKey.llm_inputs(req)) == CallKey.llm(
        req, n
    )
    assert request_key(req, n, fingerprint=fp) == request_key(req, n)


@pytest.mark.parametrize(("latency", "fail_rate"), [(0.3, 0.0), (0.0, 0.4), (0.7, 0.5)])
def test_tool_draws_are_the_seeded_draws(latency: float, fail_rate: float) -> None:
    cfg = RunConfig(seed=5, tool_latency_s=latency, tool_failure_rate=fail_rate)
    for i in range(40):
        key = f"k{i}"
        value, error, got = run_tool(lambda a: a["x"], "f", {"x": i}, key, cfg, ["f"])
        rng = random.Random(f"5:tool:{key}")
        assert got == latency * rng.uniform(0.5, 1.5)
        failed = bool(fail_rate) and rng.random() < fail_rate
        assert (value, error) == (
            (None, "RuntimeError: injected tool failure") if failed else (i, None)
        )


def test_a_tool_call_without_latency_or_failures_draws_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_draws(*_: Any) -> None:
        raise AssertionError("a draw that can change nothing was seeded")

    monkeypatch.setattr(random, "Random", no_draws)
    cfg = RunConfig(seed=5, tool_latency_s=0.0, tool_failure_rate=0.0)
    assert run_tool(lambda a: a["x"], "f", {"x": 3}, "k", cfg, ["f"]) == (3, None, 0.0)


def test_a_tool_that_changes_its_arguments_records_them_as_called_in_run_and_replay() -> None:
    def grab(args: dict[str, Any]) -> Any:
        args["seen"] = True  # a tool that writes into the arguments it was given
        return sorted(args)

    async def lead(ctx: Any) -> Any:
        res = await ctx.call_tool("grab", {"q": 1})
        return res.value

    def once(cache: ReplayCache | None) -> Any:
        rt = Runtime(
            task=make_task("arith", size=4),
            backend=SimBackend(seed=1),
            config=RunConfig(seed=1),
            tools={"grab": grab},
            cache=cache,
        )
        return run_virtual(rt.run(lead))

    first = once(None)
    call = next(e for e in first.events if e.type == "tool_call")
    assert call.content == '{"q":1}'
    again = once(ReplayCache.from_trace(first))
    enc = msgspec.json.encode
    assert enc([again.events, again.edges]) == enc([first.events, first.edges])
