"""Critical Steps' fast paths agree with the plain definitions on random and adversarial shapes.

Level by level equals the per-episode walk; the plain-Python path for small traces equals the
array passes, step structure and Critical Steps alike.
"""

from __future__ import annotations

import numpy as np
import pytest

from orchestrace.trace import steps
from orchestrace.trace.enums import DECISION_CODE, EVENT_CODE, EVENT_TYPES, EventType
from orchestrace.trace.generate import generate_trace
from orchestrace.trace.steps import (
    StepStructure,
    _critical_steps_loop,
    _walk_depths,
    critical_steps,
)


def _reference(s: StepStructure) -> int:
    """Critical Steps as one walk per episode, deepest first (the definition, step by step)."""
    n_ep = len(s.episode_agent)
    if n_ep == 0:
        return 0
    stage_ep = s.stage_episode.tolist()
    parent_ep = [stage_ep[k] if k >= 0 else -1 for k in s.episode_parent_stage.tolist()]
    return _critical_steps_loop(s, parent_ep, _walk_depths(parent_ep))


def _random_structure(rng: np.random.Generator, n_ep: int, shape: str) -> StepStructure:
    per_ep = rng.integers(1, 4, size=n_ep)
    stage_episode = np.repeat(np.arange(n_ep), per_ep)
    n_stages = len(stage_episode)
    stage_main = rng.integers(0, 5, size=n_stages)
    first_stage = np.concatenate(([0], np.cumsum(per_ep)[:-1]))
    parent = np.full(n_ep, -1, dtype=np.int64)
    for e in range(1, n_ep):
        if shape == "chain":  # each episode spawned by the one before: depth n_ep - 1
            parent[e] = first_stage[e - 1]
        elif shape == "wide":  # everything spawned by the root
            parent[e] = int(rng.integers(0, per_ep[0]))
        elif shape == "cycles":  # any stage, earlier or later: cycles and self-loops
            parent[e] = int(rng.integers(-1, n_stages))
        else:  # a random tree: parents are earlier episodes
            p = int(rng.integers(0, e))
            parent[e] = first_stage[p] + int(rng.integers(0, per_ep[p]))
    if shape == "cycles":
        parent[0] = int(rng.integers(-1, n_stages))
    return StepStructure(stage_main, stage_episode, parent, np.arange(n_ep))


@pytest.mark.parametrize("shape", ["tree", "chain", "wide", "cycles"])
@pytest.mark.parametrize("level_cost", [0, 32, 10**9])
def test_levels_equal_the_walk(shape: str, level_cost: int, monkeypatch) -> None:
    # level_cost 10**9 forces the per-episode walk, 0 the level-by-level pass
    monkeypatch.setattr(steps, "_LEVEL_COST", level_cost)
    monkeypatch.setattr(steps, "_SMALL", 0)
    rng = np.random.default_rng(len(shape) * 1000 + level_cost % 97)
    for n_ep in (1, 2, 3, 5, 17, 200):
        for _ in range(20):
            s = _random_structure(rng, n_ep, shape)
            assert s.critical_steps() == _reference(s), (shape, n_ep)


@pytest.mark.parametrize("seed", range(6))
def test_generated_traces(seed: int, monkeypatch) -> None:
    monkeypatch.setattr(steps, "_LEVEL_COST", 0)
    monkeypatch.setattr(steps, "_SMALL", 0)
    tr = generate_trace(agents=3 + 5 * seed, steps=400, depth=1 + seed % 4, seed=seed)
    s = steps.step_structure(tr.graph)
    assert s.critical_steps() == _reference(s)


class _Columns:
    """Random compiled-trace columns: ties in time, agents delegating to each other, tools."""

    def __init__(self, rng: np.random.Generator, n: int, names: int, t_values: int) -> None:
        self.n = n
        self.t = rng.integers(0, t_values, size=n).astype(np.float64)
        self.type_code = rng.integers(0, len(EVENT_TYPES), size=n).astype(np.int8)
        self.agent_code = rng.integers(0, names, size=n).astype(np.int32)
        self.to_code = rng.integers(-1, names, size=n).astype(np.int32)
        self.decision_code = rng.integers(-1, len(DECISION_CODE), size=n).astype(np.int8)
        self.step = rng.integers(-1, 4, size=n).astype(np.int32)
        m = int(rng.integers(0, 3 * n + 1))
        self._edges = (rng.integers(0, n, size=m), rng.integers(0, n, size=m))

    def tool_mask(self) -> np.ndarray:
        names = int(max(self.agent_code.max(initial=0), self.to_code.max(initial=0))) + 1
        result = self.type_code == EVENT_CODE[EventType.TOOL_RESULT]
        acting = np.bincount(self.agent_code[~result], minlength=names) > 0
        return (np.bincount(self.agent_code[result], minlength=names) > 0) & ~acting

    def dependency_edges(self) -> tuple[np.ndarray, np.ndarray]:
        return self._edges


def _both(g: object, monkeypatch: pytest.MonkeyPatch) -> tuple[StepStructure, StepStructure]:
    """``step_structure`` through the array passes and through the plain-Python loops."""
    monkeypatch.setattr(steps, "_SMALL", 0)
    arrays = steps.step_structure(g)  # type: ignore[arg-type]
    monkeypatch.setattr(steps, "_SMALL", 10**9)
    loops = steps.step_structure(g)  # type: ignore[arg-type]
    return arrays, loops


def _same(a: StepStructure, b: StepStructure) -> None:
    for f in ("stage_main", "stage_episode", "episode_parent_stage", "episode_agent"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype == np.int64, f
        assert x.tolist() == y.tolist(), f


@pytest.mark.parametrize("n", [0, 1, 2, 3, 8, 40, 300])
def test_small_path_equals_arrays_on_random_columns(n: int, monkeypatch) -> None:
    rng = np.random.default_rng(n)
    for trial in range(60):
        # few names and few distinct times: equal times, self-spawns and delegation cycles
        g = _Columns(rng, n, names=1 + trial % 6, t_values=1 + trial % 5 * 7)
        a, b = _both(g, monkeypatch)
        _same(a, b)
        for cut in (0, 10**9):  # Critical Steps: the loops and the array passes agree too
            monkeypatch.setattr(steps, "_SMALL", cut)
            assert a.critical_steps() == b.critical_steps() == _reference(a)


def test_small_path_leaves_nan_times_to_the_arrays(monkeypatch) -> None:
    g = _Columns(np.random.default_rng(5), 30, names=4, t_values=3)
    g.t[[3, 7]] = np.nan
    a, b = _both(g, monkeypatch)
    _same(a, b)


@pytest.mark.parametrize("seed", range(4))
def test_small_path_equals_arrays_on_traces(seed: int, monkeypatch) -> None:
    from orchestrace.runtime import run

    for tr in (
        generate_trace(agents=2 + 3 * seed, steps=30 + 200 * seed, depth=1 + seed % 3, seed=seed),
        run("centralized", "arith", agents=2 + 2 * seed, seed=seed).trace,
        run("hierarchical", "arith", agents=3 + 2 * seed, seed=seed).trace,
    ):
        a, b = _both(tr.graph, monkeypatch)
        _same(a, b)
        for cut in (0, 10**9):
            monkeypatch.setattr(steps, "_SMALL", cut)
            assert a.critical_steps() == b.critical_steps() == critical_steps(tr)
