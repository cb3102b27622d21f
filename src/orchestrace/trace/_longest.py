"""The critical path's kernel: each event's earliest start when it waits for its predecessors.

Kept apart from :mod:`orchestrace.trace.graph`, which prepares the edges (in an order where
every edge into an event comes before every edge out of it) and reads the path back.

Example:
    >>> import numpy as np
    >>> start, pred = longest_starts(
    ...     np.array([0, 1, 0]), np.array([1, 2, 2]), np.array([1.0, 2.0, 0.5]), 3
    ... )
    >>> start.tolist(), pred.tolist()
    ([0.0, 1.0, 3.0], [-1, 0, 1])
"""

from __future__ import annotations

import numpy as np

__all__ = ["CHUNK", "longest_starts"]

#: Rows read a slice at a time by the graph's passes (memory beyond the results stays flat).
CHUNK = 1 << 16


def longest_starts(
    src: np.ndarray, dst: np.ndarray, dur: np.ndarray, n: int, perm: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Earliest start of every event when each waits for the finish of its predecessors.

    ``start[v] = max(0, max over edges u -> v of start[u] + dur[u])``, with the edges taken in
    the order ``perm`` gives (default: as stored), in which every edge into ``u`` comes before
    every edge out of ``u``: one pass in edge order, exactly the additions and comparisons of
    the definition (a NaN finish never wins). Also returns, per event, the first source in edge
    order whose finish sets its start (-1: none; int32 below 2**31 events). The pass reads the
    edges a slice at a time, so its memory beyond the two results does not grow with the trace,
    and writes through memoryviews of the result arrays (no copies of the columns).
    """
    starts = np.zeros(n, dtype=np.float64)
    preds = np.full(n, -1, dtype=np.int32 if n < 2**31 else np.int64)
    start, durs, pred = starts.data, dur.data, preds.data
    for lo in range(0, len(src), CHUNK):
        part = slice(lo, lo + CHUNK) if perm is None else perm[lo : lo + CHUNK]
        # equal lengths by construction (slices of two arrays of one length)
        for u, v in zip(src[part].tolist(), dst[part].tolist(), strict=False):
            f = start[u] + durs[u]
            if f > start[v]:
                start[v] = f
                pred[v] = u
    return starts, preds
