"""Checks that compare whole columns slice by slice find exactly what one pass finds."""

from __future__ import annotations

import random

import msgspec
import pytest

from orchestrace import generate_trace
from orchestrace.trace import _check_graph
from orchestrace.trace.check import check_edge_times, check_spawns
from orchestrace.trace.model import Trace


def _scrambled(seed: int) -> Trace:
    """A generated trace with some times moved earlier: effects before causes, agents
    acting before their spawn."""
    tr = generate_trace(agents=12, steps=600, depth=2, seed=seed)
    rng = random.Random(seed)
    events = list(tr.events)
    first: dict[str, int] = {}  # each agent's first event: at its spawn
    for i, e in enumerate(events):
        first.setdefault(e.agent, i)
    spawned = [first[a] for a in sorted(first) if a.startswith("agent_")]
    for i in {*rng.sample(range(len(events)), 60), *rng.sample(spawned, 3)}:
        events[i] = msgspec.structs.replace(events[i], t=events[i].t - rng.uniform(0.5, 5))
    return tr.replace(events=tuple(events))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("check", [check_spawns, check_edge_times])
def test_slices_find_what_one_pass_finds(
    monkeypatch: pytest.MonkeyPatch, seed: int, check: object
) -> None:
    tr = _scrambled(seed)
    whole = check(tr)  # type: ignore[operator]
    assert whole  # the scrambled times are found
    for size in (1, 7, 64):
        monkeypatch.setattr(_check_graph, "_SLICE", size)
        assert check(_scrambled(seed)) == whole  # type: ignore[operator]


@pytest.mark.parametrize("seed", range(3))
def test_summarize_by_slices_is_the_one_pass_summary(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    from orchestrace.trace import analyze

    whole = analyze.summarize(_scrambled(seed))
    for size in (1, 5, 97):
        monkeypatch.setattr(analyze, "_SLICE", size)
        assert analyze.summarize(_scrambled(seed)) == whole
