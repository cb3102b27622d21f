"""A signal the process was started ignoring (``nohup``, a background job) stays ignored:
no part of the package turns it into an interrupt."""

from __future__ import annotations

import signal

import msgspec
import pytest

from orchestrace.learn.algorithms.llm_checkpoint import sigint_held
from orchestrace.runtime import run


@pytest.fixture
def sigint_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_checkpoint_write_does_not_turn_an_ignored_sigint_into_an_interrupt(sigint_ignored):
    try:
        with sigint_held():
            signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
        pytest.fail("an ignored SIGINT became a KeyboardInterrupt")
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_a_checkpoint_write_holds_a_sigint_until_it_ends():
    done = []
    with pytest.raises(KeyboardInterrupt), sigint_held():
        signal.raise_signal(signal.SIGINT)
        done.append(True)
    assert done == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("ignored", [True, False])
def test_a_run_stopping_on_signals_leaves_an_ignored_sigint_ignored(monkeypatch, ignored):
    from orchestrace.runtime.core import Runtime

    real = Runtime.run

    async def interrupted(self, *args, **kwargs):
        signal.raise_signal(signal.SIGINT)  # while the run's handlers are in place
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(Runtime, "run", interrupted)
    previous = signal.signal(
        signal.SIGINT, signal.SIG_IGN if ignored else signal.default_int_handler
    )
    try:
        res = run("debate", "arith", agents=3, seed=0, rounds=1, task_size=8, stop_on_signals=True)
        after = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
    stopped = "interrupted by SIGINT" in msgspec.json.encode(res.trace).decode()
    assert stopped is not ignored
    assert after is (signal.SIG_IGN if ignored else signal.default_int_handler)
