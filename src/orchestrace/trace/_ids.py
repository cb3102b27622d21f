"""Map event id strings to event indices in bulk.

Ids of the common form ``prefix + canonical decimal`` (``e1``, ``e2``...) are parsed with
C-level string operations and looked up in a dense integer table, several times faster than
hashing a million strings; any other ids go through a dict. Used by the graph compilers
(:meth:`~orchestrace.trace.graph.TraceGraph.from_trace` and the columnar compile in
``orchestrace.io``).

Example:
    >>> idx, unique, lookup = map_ids(["a", "b", "a"], ["b", "zz"])
    >>> idx.tolist(), unique, lookup
    ([1, -1], False, {'a': 0, 'b': 1})
    >>> int_ids(["e10", "e2"], "e").tolist(), int_ids(["e01"], "e")
    ([10, 2], None)
"""

from __future__ import annotations

import warnings
from itertools import repeat

import numpy as np

__all__ = ["DIGITS", "POW10", "dense_table", "int_ids", "lookup_ints", "map_ids"]

#: ``10**k`` for k = 0..18: the bounds of each decimal width that fits an int64.
POW10 = np.array([10**k for k in range(19)], dtype=np.int64)
_INT64_MAX = np.iinfo(np.int64).max
#: The decimal digits.
DIGITS = frozenset("0123456789")
#: What numpy's reader takes for the number 0 when it stands alone (other whitespace, a sign).
_ZERO_ALONE = "\t\n\v\f\r+-"


def int_ids(strs: list[str], prefix: str) -> np.ndarray | None:
    """Parse ids of the exact form ``prefix + canonical decimal`` in bulk, else ``None``.

    Every step is a C-level string operation, so this is several times faster than hashing a
    million strings. It only accepts ids that the integer identifies uniquely.
    """
    n = len(strs)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    joined = " ".join(strs)
    if prefix:
        if not joined.startswith(prefix) or joined.count(prefix) != n:
            return None
        if joined.count(" " + prefix) != n - 1:
            return None
        joined = joined.replace(prefix, "")
    # only the n - 1 separators, and nothing numpy reads as 0 alone (it takes "-" for 0)
    if not joined.isascii() or joined.count(" ") != n - 1 or any(c in joined for c in _ZERO_ALONE):
        return None
    # numpy stops at the first thing that is not a decimal (fewer numbers: refused below)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            ints = np.fromstring(joined, dtype=np.int64, sep=" ")
    except ValueError:  # numpy >= 2.x: unread data is an error, not a warning
        return None
    # the largest int64 also stands for every larger number numpy clamped to it
    if len(ints) != n or (ints < 0).any() or (ints == _INT64_MAX).any():
        return None
    # canonical: only digits, no leading zeros, so the characters between the n - 1 spaces
    # are exactly the decimal widths of the numbers
    if _total_width(ints) != len(joined) - (n - 1):
        return None
    return np.asarray(ints)


def _total_width(ints: np.ndarray) -> int:
    """The sum of the decimal widths of the non-negative ``ints`` (0 is one digit wide).

    One count per width the largest number reaches: a number of ``w`` digits is at least
    ``10**k`` for each ``k < w``, so it is counted once for its first digit and once more for
    each of the others (a few passes of comparisons, far cheaper than a search per number).
    """
    total = len(ints)
    top = int(ints.max()) if total else 0
    for k in range(1, len(POW10)):
        if POW10[k] > top:
            break
        total += int(np.count_nonzero(ints >= POW10[k]))
    return total


def dense_table(id_ints: np.ndarray, n: int) -> tuple[np.ndarray, bool] | None:
    """Position of each integer id (first occurrence), and whether all ids are distinct."""
    top = int(id_ints.max()) + 1 if len(id_ints) else 0
    if top > 4 * n + 1024:
        return None
    # positions fit 32 bits below 2**31 events: half the memory of the table and its fill
    kind = np.int32 if n < 2**31 else np.int64
    table: np.ndarray = np.full(top, -1, dtype=kind)
    table[id_ints[::-1]] = np.arange(n - 1, -1, -1, dtype=kind)
    return table, bool(np.count_nonzero(table >= 0) == n)


def lookup_ints(table: np.ndarray, ref_ints: np.ndarray) -> np.ndarray:
    """Look integer ids up in a :func:`dense_table` (-1: absent)."""
    if not len(ref_ints) or int(ref_ints.max()) < len(table):  # every ref inside the table
        found: np.ndarray = table[ref_ints].astype(np.int64, copy=False)
        return found
    ok = ref_ints < len(table)
    out = np.full(len(ref_ints), -1, dtype=np.int64)
    out[ok] = table[ref_ints[ok]]
    return out


def map_ids(ids: list[str], refs: list[str]) -> tuple[np.ndarray, bool, dict[str, int] | None]:
    """``(index of each ref or -1, ids are unique, id -> index dict or None)``."""
    n = len(ids)
    prefix = ids[0].rstrip("0123456789") if n else ""
    if n >= 1024 and " " not in prefix and not (DIGITS & set(prefix)):
        id_ints = int_ids(ids, prefix)
        dense = dense_table(id_ints, n) if id_ints is not None else None
        if dense is not None:
            ref_ints = int_ids(refs, prefix)
            if ref_ints is not None:
                return lookup_ints(dense[0], ref_ints), dense[1], None
    lookup = dict(zip(reversed(ids), range(n - 1, -1, -1), strict=True))
    idx = np.fromiter(map(lookup.get, refs, repeat(-1)), dtype=np.int64, count=len(refs))
    return idx, len(lookup) == n, lookup
