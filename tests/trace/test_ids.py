"""Bulk id parsing (``orchestrace.trace._ids``) against a plain, one-id-at-a-time reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from orchestrace.io._columnar import _arrow_int_ids
from orchestrace.trace._ids import int_ids, map_ids


def _reference(strs: list[str], prefix: str) -> list[int] | None:
    out = []
    for s in strs:
        rest = s[len(prefix) :] if s.startswith(prefix) else None
        if rest is None or not rest or not (rest.isascii() and rest.isdigit()):
            return None
        # canonical, below the largest int64 (numpy clamps larger numbers to it)
        if rest != str(int(rest)) or int(rest) >= 2**63 - 1:
            return None
        out.append(int(rest))
    return out


#: Ids made to sit near the edge of the form: signs, spaces, leading zeros, other digits,
#: the prefix inside the number, huge numbers.
_PARTS = st.sampled_from(
    [
        *("0", "1", "7", "10", "007", "-1", "+1", "-", "+", " ", "\\t", "\r", "\n", "\x0b"),
        *("\x0c", "\x1c", "e", "x", "\u0661", "1.5", "1e3"),
    ]
)
_ID = st.one_of(
    st.integers(0, 10**6).map(lambda k: f"e{k}"),
    st.lists(_PARTS, min_size=0, max_size=3).map(lambda p: "e" + "".join(p).replace("\\t", "\t")),
    st.sampled_from(["e9223372036854775807", "e9223372036854775808", "e99999999999999999999"]),
    st.text(max_size=4),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ID, min_size=1, max_size=12), st.sampled_from(["e", ""]))
@example(["e "], "e")  # numpy reads a lone space as the number 0
@example(["e1", "e "], "e")
@example([" "], "")
@example(["e\r"], "e")
@example(["-"], "")
@example(["e1", "e+"], "e")
@example(["e1\n", "e2"], "e")
def test_int_ids_agrees_with_the_reference(ids, prefix):
    got = int_ids(ids, prefix)
    want = _reference(ids, prefix)
    if want is None:
        assert got is None, (ids, got)
    else:
        assert got is not None and got.tolist() == want, (ids, got)
    # the Arrow twin of the columnar compile: the same, or None (it leaves 19 digits to a dict)
    pa = pytest.importorskip("pyarrow")
    arrow = _arrow_int_ids(pa.array(ids, pa.string()), prefix)
    if arrow is not None:
        assert want is not None and arrow.tolist() == want, (ids, arrow)
    else:
        assert want is None or any(len(s) - len(prefix) > 18 for s in ids), ids


@settings(max_examples=100, deadline=None)
@given(st.lists(_ID, min_size=1, max_size=30), st.lists(_ID, max_size=30), st.integers(0, 3))
def test_map_ids_agrees_with_a_dict(ids, refs, repeat):
    ids = ids * (1 + repeat * 400)  # over 1,024 ids: the bulk path is tried
    idx, unique, _ = map_ids(ids, refs)
    first = {}
    for i, s in enumerate(ids):
        first.setdefault(s, i)
    assert idx.tolist() == [first.get(r, -1) for r in refs]
    assert unique == (len(first) == len(ids))


def test_a_reference_of_spaces_names_no_event():
    ids = [f"e{k}" for k in range(2000)]
    idx, unique, _ = map_ids(ids, ["e ", "e1", "e  "])
    assert idx.tolist() == [-1, 1, -1] and unique


def test_a_million_canonical_ids_parse_in_bulk():
    ids = [f"e{k}" for k in range(1, 1_000_001)]
    assert np.array_equal(int_ids(ids, "e"), np.arange(1, 1_000_001))
