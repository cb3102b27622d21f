"""The critical path equals a step-by-step reference and networkx on random and adversarial graphs.

The reference is the dynamic programme written out edge by edge (every edge into an event
relaxed before any edge out of it, a strictly larger finish replaces the predecessor held);
``TraceGraph.critical_path`` must give the same length bit for bit, the same events and the
same tie-breaking, on long chains, wide fan-outs, equal weights, zero and non-finite
durations, and edges recorded out of order.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from orchestrace.io._columnar import from_columns
from orchestrace.trace.enums import EDGE_CODE, EdgeType
from orchestrace.trace.graph import TraceGraph


def _reference(n: int, src: list[int], dst: list[int], dur: list[float]) -> tuple[float, list[int]]:
    """Longest path by Kahn order (ties: recording order), one edge at a time."""
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for u, v in zip(src, dst, strict=True):
        succ[u].append(v)
        indeg[v] += 1
    import heapq

    heap = [i for i in range(n) if indeg[i] == 0]
    heapq.heapify(heap)
    pos = [0] * n
    k = 0
    while heap:
        u = heapq.heappop(heap)
        pos[u] = k
        k += 1
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(heap, v)
    edges = sorted(range(len(src)), key=lambda e: (pos[dst[e]], e))
    start = [0.0] * n
    pred = [-1] * n
    for e in edges:
        u, v = src[e], dst[e]
        f = start[u] + dur[u]
        if f > start[v]:
            start[v] = f
            pred[v] = u
    finish = [s + d for s, d in zip(start, dur, strict=True)]
    end = int(np.argmax(np.asarray(finish)))
    path = [end]
    while pred[path[-1]] >= 0:
        path.append(pred[path[-1]])
    return finish[end], path[::-1]


def _graph(n: int, src: list[int], dst: list[int], dur: list[float]) -> TraceGraph:
    ids = [f"e{i}" for i in range(n)]
    return from_columns(
        ids,
        [0.0] * n,
        dur,
        ["message"] * n,
        ["a"] * n,
        [ids[u] for u in src],
        [ids[v] for v in dst],
        ["causal"] * len(src),
    )


def _check(n: int, src: list[int], dst: list[int], dur: list[float]) -> None:
    length, path = _reference(n, src, dst, dur)
    cp = _graph(n, src, dst, dur).critical_path()
    assert list(cp.indices) == path
    assert cp.ids == tuple(f"e{i}" for i in path)
    assert (math.isnan(length) and math.isnan(cp.length)) or cp.length == length


def _random_dag(rng: np.random.Generator, n: int, m: int, shuffle: bool) -> tuple[list, list]:
    u = rng.integers(0, n, size=m)
    v = rng.integers(0, n, size=m)
    keep = u != v
    u, v = u[keep], v[keep]
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    if shuffle:  # relabel: edges no longer go forward in recording order
        perm = rng.permutation(n)
        lo, hi = perm[lo], perm[hi]
        order = rng.permutation(len(lo))
        lo, hi = lo[order], hi[order]
    return lo.tolist(), hi.tolist()


def _durations(rng: np.random.Generator, n: int, kind: str) -> list[float]:
    if kind == "ties":  # few distinct values: many equal-length paths
        return rng.integers(0, 3, size=n).astype(float).tolist()
    if kind == "zero":
        return [0.0] * n
    if kind == "tiny":  # sums that round differently in another order
        return (rng.random(n) * 1e-3 + 0.1).tolist()
    if kind == "nonfinite":
        d = rng.random(n)
        d[rng.integers(0, n, size=max(1, n // 20))] = np.nan
        d[rng.integers(0, n, size=max(1, n // 50))] = np.inf
        return d.tolist()
    return rng.random(n).tolist()


@pytest.mark.parametrize("kind", ["random", "ties", "zero", "tiny", "nonfinite"])
@pytest.mark.parametrize("shuffle", [False, True])
def test_random_dags(kind: str, shuffle: bool) -> None:
    rng = np.random.default_rng(hash((kind, shuffle)) % 2**32)
    for n in (1, 2, 3, 8, 40, 300):
        for _ in range(15):
            src, dst = _random_dag(rng, n, int(rng.integers(0, 4 * n + 1)), shuffle)
            _check(n, src, dst, _durations(rng, n, kind))


@pytest.mark.parametrize("kind", ["random", "ties", "zero"])
def test_adversarial_shapes(kind: str) -> None:
    rng = np.random.default_rng(7)
    n = 3000
    dur = _durations(rng, n, kind)
    chain = list(range(n - 1)), list(range(1, n))
    fan_out = [0] * (n - 1), list(range(1, n))
    fan_in = list(range(n - 1)), [n - 1] * (n - 1)
    # a chain plus every shortcut of length 2: each event has two equal-hop predecessors
    ladder = [*range(n - 1), *range(n - 2)], [*range(1, n), *range(2, n)]
    diamond = [0] * 100 + list(range(1, 101)), list(range(1, 101)) + [101] * 100
    for src, dst in (chain, fan_out, fan_in, ladder, diamond):
        _check(n, src, dst, dur)
        # the same edges listed backwards: the order of edges into one event decides ties
        _check(n, src[::-1], dst[::-1], dur)


def test_slices_of_the_predecessor_pass() -> None:
    # more than 2^20 edges into few events: groups of one destination span two slices
    n = 40
    m = (1 << 20) + 5000
    rng = np.random.default_rng(3)
    src = rng.integers(0, n - 4, size=m)
    dst = rng.integers(n - 4, n, size=m)
    dur = rng.integers(0, 3, size=n).astype(float).tolist()
    length, path = _reference(n, src.tolist(), dst.tolist(), dur)
    ids = [f"e{i}" for i in range(n)]
    g = from_columns(ids, [0.0] * n, dur, ["message"] * n, ["a"] * n, [], [], [])
    g.src, g.dst = src.astype(np.int64), dst.astype(np.int64)
    g.edge_code = np.full(m, EDGE_CODE[EdgeType.CAUSAL], dtype=np.int8)
    g._dep_cache.clear()
    cp = g.critical_path()
    assert (cp.length, list(cp.indices)) == (length, path)


def test_agrees_with_networkx() -> None:
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(11)
    for _ in range(10):
        n = 200
        src, dst = _random_dag(rng, n, 600, True)
        dur = rng.random(n).tolist()
        g = nx.DiGraph()
        g.add_nodes_from(range(n))
        g.add_weighted_edges_from((u, v, dur[u]) for u, v in zip(src, dst, strict=True))
        g.add_weighted_edges_from((k, "sink", dur[k]) for k in range(n))
        best = nx.path_weight(g, nx.dag_longest_path(g), "weight")
        assert _graph(n, src, dst, dur).critical_path().length == pytest.approx(best, rel=1e-12)
