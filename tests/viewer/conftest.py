"""Shared traces for the viewer tests: a recorded debate, a fork of it, a hostile trace."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from viewer_browser import HOSTILE

from orchestrace.io import dump
from orchestrace.trace.generate import generate_trace
from orchestrace.trace.model import Event, Trace


@pytest.fixture(scope="session")
def debate_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A recorded debate and its fork with one message dropped (re-executed by the runtime)."""
    from orchestrace.runtime import run
    from orchestrace.runtime.replay import DropMessage, fork

    d = tmp_path_factory.mktemp("pair")
    original = run("debate", "arith", agents=3, seed=1, task_size=16).trace
    msg = next(e for e in original.events if e.type == "message")
    forked = fork(original, [DropMessage.of(original, msg.id)]).trace
    a, b = d / "orig.json", d / "fork.json"
    dump(original, a)
    dump(forked, b)
    return a, b


def hostile_trace(big: int = 10**7) -> Trace:
    """A generated trace whose contents, attrs and names carry HTML, script and ANSI codes."""
    tr = generate_trace(agents=4, steps=40, seed=3)
    events = list(tr.events)
    for k, text in enumerate(HOSTILE):
        events[k + 2] = msgspec.structs.replace(events[k + 2], content=text, attrs={"note": text})
    events[10] = msgspec.structs.replace(events[10], content="A" * big + HOSTILE[0])
    return tr.replace(events=tuple(events))


@pytest.fixture(scope="session")
def hostile_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A hostile trace as JSON."""
    p = tmp_path_factory.mktemp("hostile") / "hostile.json"
    dump(hostile_trace(), p)
    return p


def event_of(trace: Trace, i: int) -> Event:
    """Event ``i`` of ``trace``."""
    return trace.events[i]
