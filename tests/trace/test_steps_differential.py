"""Critical Steps, level by level, equals the per-episode walk on random and adversarial shapes."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrace.trace import steps
from orchestrace.trace.generate import generate_trace
from orchestrace.trace.steps import StepStructure, _critical_steps_loop, _walk_depths


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
    rng = np.random.default_rng(len(shape) * 1000 + level_cost % 97)
    for n_ep in (1, 2, 3, 5, 17, 200):
        for _ in range(20):
            s = _random_structure(rng, n_ep, shape)
            assert s.critical_steps() == _reference(s), (shape, n_ep)


@pytest.mark.parametrize("seed", range(6))
def test_generated_traces(seed: int, monkeypatch) -> None:
    monkeypatch.setattr(steps, "_LEVEL_COST", 0)
    tr = generate_trace(agents=3 + 5 * seed, steps=400, depth=1 + seed % 4, seed=seed)
    s = steps.step_structure(tr.graph)
    assert s.critical_steps() == _reference(s)
