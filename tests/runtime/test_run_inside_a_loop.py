"""The synchronous API works where an event loop already runs (a Jupyter cell, an async
program, Playwright's synchronous API): the run goes to a thread of its own."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from orchestrace.runtime import run
from orchestrace.runtime.clock import run_real, run_virtual
from orchestrace.runtime.replay import DropMessage, fork, replay


def _bytes(trace) -> bytes:
    return msgspec.json.Encoder(order="deterministic").encode(trace)


def test_run_replay_and_fork_inside_a_running_loop_equal_those_outside() -> None:
    outside = run("debate", "arith", agents=3, seed=1, task_size=16).trace
    msg = next(e for e in outside.events if e.type == "message")

    async def cell():
        tr = run("debate", "arith", agents=3, seed=1, task_size=16).trace
        return tr, replay(tr).trace, fork(tr, [DropMessage.of(tr, msg.id)]).trace

    inside, replayed, forked = asyncio.run(cell())
    assert _bytes(inside) == _bytes(outside)
    assert _bytes(replayed) == _bytes(outside)
    assert _bytes(forked) == _bytes(fork(outside, [DropMessage.of(outside, msg.id)]).trace)


def test_errors_inside_a_running_loop_reach_the_caller() -> None:
    async def boom():
        raise ValueError("from the run")

    async def cell():
        with pytest.raises(ValueError, match="from the run"):
            run_virtual(boom())
        with pytest.raises(ValueError, match="from the run"):
            run_real(boom())
        return asyncio.get_running_loop()

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(cell()) is loop
    finally:
        loop.close()


def test_virtual_time_inside_a_running_loop() -> None:
    async def sleeper():
        await asyncio.sleep(3600)
        return asyncio.get_running_loop().time()

    async def cell():
        return run_virtual(sleeper())

    assert asyncio.run(cell()) == 3600.0


def test_environments_step_inside_a_running_loop_as_outside() -> None:
    from orchestrace.learn.env import make_env
    from orchestrace.learn.policies import KAgree
    from orchestrace.learn.vector import VectorEnv

    def episodes() -> list:
        env = make_env("stop-v0", task="arith-mapreduce-v0")
        pol = KAgree(k=2)
        got = []
        for seed in range(3):
            obs, info = env.reset(seed=seed)
            while True:
                obs, r, term, trunc, info = env.step(pol.act(obs, info, env))
                if term or trunc:
                    got.append((r, obs.tolist(), _bytes(env.trace)))
                    break
        env.reset(seed=9)
        env.close()  # abandoned mid-episode: its tasks are cancelled on its own loop
        with VectorEnv(2, "stop-v0", task="arith-mapreduce-v0") as vec:
            obs, _ = vec.reset(seed=0)
            got.append(obs.tolist())
        return got

    async def cell():
        return episodes()

    assert asyncio.run(cell()) == episodes()
