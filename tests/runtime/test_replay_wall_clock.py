"""Replay of a trace recorded on wall-clock time: concurrent answers complete in recorded order."""

from __future__ import annotations

import msgspec

from orchestrace.runtime import run
from orchestrace.runtime.replay import replay, reproduces
from orchestrace.trace.model import Trace


def _served(trace: Trace) -> Trace:
    """The trace as a served model could record it: wall-clock time, where the second of two
    concurrent calls started later and took less time than the first, yet finished after it."""
    meta = dict(trace.meta)
    meta["backend"] = {**dict(meta["backend"]), "virtual": False}
    calls = [e for e in trace.events if e.type == "llm_call" and e.step == 0]
    first, second = calls[0], calls[1]
    assert first.agent != second.agent and first.t == second.t
    end = second.t + second.dur
    assert end > first.t + first.dur
    late = msgspec.structs.replace(second, t=end - 0.9 * first.dur, dur=0.9 * first.dur)
    events = [late if e.id == second.id else e for e in trace.events]
    return msgspec.structs.replace(trace, meta=meta, events=events)


def test_replay_keeps_recorded_completion_order_of_a_wall_clock_trace() -> None:
    original = _served(run("debate", "arith", agents=3, seed=1, task_size=16).trace)
    res = replay(original)
    assert res.backend_calls == 0
    ids = [(e.id, e.agent, e.type) for e in res.trace.events]
    assert ids == [(e.id, e.agent, e.type) for e in original.events]
    # the trace id is a digest of the header, which the edit above changed
    assert reproduces(msgspec.structs.replace(original, trace_id=res.trace.trace_id), res.trace)


def test_sim_replay_stays_byte_identical() -> None:
    original = run("debate", "arith", agents=3, seed=1, task_size=16).trace
    new = replay(original).trace
    assert msgspec.json.encode(new) == msgspec.json.encode(original)
    assert reproduces(original, new)
    other = run("debate", "arith", agents=3, seed=2, task_size=16).trace
    assert not reproduces(original, other)
