"""The runtime's fast paths record exactly what the plain paths record."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import inspect
import pickle
from typing import Any

import msgspec
import pytest

from orchestrace.runtime import RunConfig, Runtime, make_task
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.clock import VirtualTimeLoop, run_virtual
from orchestrace.runtime.context import Message, Result, ToolResult
from orchestrace.runtime.topologies import get_topology


def _trace_bytes(topology: str, seed: int, latency: float, options: dict[str, Any]) -> bytes:
    n = 24 if topology == "swarm" else 4
    rt = Runtime(
        task=make_task("wide-search-v0", seed=seed, size=4 * n),
        backend=SimBackend(seed=seed, latency_scale=latency),
        config=RunConfig(agents=n, seed=seed, tool_latency_s=0.0, options=options),
        topology=topology,
    )
    trace = run_virtual(rt.run(get_topology(topology).root))
    return msgspec.json.encode([trace.events, trace.edges])


@pytest.mark.parametrize(
    ("topology", "latency", "options"),
    [
        ("swarm", 0.0, {"gossip": 0.8}),
        ("swarm", 0.0, {"gossip": 1.0, "chunks": 2, "patience": 3.0}),
        ("swarm", 1.0, {"gossip": 0.5}),
        ("debate", 0.0, {"rounds": 3}),
        ("pipeline", 0.0, {}),
    ],
)
def test_receiving_a_waiting_message_at_once_records_the_same_trace(
    monkeypatch: pytest.MonkeyPatch, topology: str, latency: float, options: dict[str, Any]
) -> None:
    taken = []
    settle = VirtualTimeLoop.settle_wait

    def counted(self: VirtualTimeLoop, timeout: float) -> bool:
        taken.append(settle(self, timeout))
        return taken[-1]

    monkeypatch.setattr(VirtualTimeLoop, "settle_wait", counted)
    fast = [_trace_bytes(topology, seed, latency, options) for seed in range(3)]
    monkeypatch.setattr(VirtualTimeLoop, "settle_wait", lambda self, timeout: False)
    plain = [_trace_bytes(topology, seed, latency, options) for seed in range(3)]
    assert fast == plain
    if topology == "swarm" and latency == 0.0:
        assert any(taken)  # the fast path was taken


def test_settle_wait_leaves_the_loop_alone_when_another_callback_is_ready() -> None:
    async def main() -> tuple[bool, int]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualTimeLoop)
        loop.call_soon(lambda: None)
        before = len(loop._scheduled)  # type: ignore[attr-defined]
        return loop.settle_wait(5.0), len(loop._scheduled) - before  # type: ignore[attr-defined]

    assert run_virtual(main()) == (False, 0)


def test_the_virtual_loop_pauses_the_collector_only_while_it_runs() -> None:
    async def main() -> bool:
        await asyncio.sleep(10)
        return gc.isenabled()

    assert gc.isenabled()
    assert run_virtual(main()) is False
    assert gc.isenabled()
    gc.disable()
    try:  # a collector switched off by the caller stays off
        run_virtual(main())
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_record_rejects_an_unknown_event_field() -> None:
    async def lead(ctx: Any) -> None:
        ctx._rt.record(ctx._a, "message", ctx.now, colour="red")

    rt = Runtime(task=make_task("arith", seed=0, size=4), backend=SimBackend(seed=1))
    trace = run_virtual(rt.run(lead))
    assert "record() got unexpected event fields ['colour']" in str(trace.meta["result"])


@pytest.mark.parametrize(
    ("topology", "options"),
    [
        ("swarm", {"gossip": 0.8, "chunks": 2}),
        ("hierarchical", {}),
        ("debate", {"rounds": 2}),
        ("centralized", {}),
        ("pipeline", {}),
    ],
)
def test_emit_records_what_record_records(
    monkeypatch: pytest.MonkeyPatch, topology: str, options: dict[str, Any]
) -> None:
    calls = []
    emit = Runtime.emit

    def counted(self: Runtime, *args: Any, **kw: Any) -> str:
        calls.append(1)
        return emit(self, *args, **kw)

    def through_record(self: Runtime, a: Any, type_: Any, t: float, **kw: Any) -> str:
        role = kw.pop("role", None)
        if role is not None:
            kw["role"] = role
        return self.record(a, type_, t, **kw)

    def traces() -> list[bytes]:
        out = []
        for seed, latency in ((0, 0.0), (1, 1.0)):
            n = 12 if topology == "swarm" else 4
            rt = Runtime(
                task=make_task("wide-search-v0", seed=seed, size=4 * n),
                backend=SimBackend(seed=seed, latency_scale=latency),
                config=RunConfig(agents=n, seed=seed, tool_failure_rate=0.2, options=options),
                topology=topology,
            )
            trace = run_virtual(rt.run(get_topology(topology).root))
            out.append(msgspec.json.encode([trace.events, trace.edges]))
        return out

    monkeypatch.setattr(Runtime, "emit", counted)
    fast = traces()
    assert calls
    monkeypatch.setattr(Runtime, "emit", through_record)
    assert traces() == fast


@pytest.mark.parametrize("cls", [Message, Result, ToolResult])
def test_outcome_classes_take_their_fields_as_a_dataclass_does(cls: type) -> None:
    fields = dataclasses.fields(cls)
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [(p.name, p.default) for p in params] == [
        (f.name, inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default)
        for f in fields
    ]
    values = [f"v{i}" for i in range(len(fields))]
    obj = cls(*values)
    assert [getattr(obj, f.name) for f in fields] == values
    assert obj == cls(*values) and hash(obj) == hash(cls(*values))
    assert dataclasses.replace(obj, **{fields[1].name: 7}) == cls(values[0], 7, *values[2:])
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, fields[0].name, "x")
    assert pickle.loads(pickle.dumps(obj)) == obj
