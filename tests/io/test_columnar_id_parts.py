"""Ids parsed a batch at a time give what one parse of the whole column gives."""

from __future__ import annotations

import random

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

from orchestrace.io._columnar import _arrow_int_ids, _parts_int_ids  # noqa: E402

_ODD = ["e01", "e", "x7", "e-1", "e1_0", "e²", "e9999999999999999999", "", "e 1", "E5"]


@pytest.mark.parametrize("seed", range(30))
def test_parts_parse_as_the_whole_column(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randrange(0, 300)
    ids = [f"e{rng.randrange(0, 10 ** rng.randrange(1, 19))}" for _ in range(n)]
    if ids and rng.random() < 0.5:  # now and then one id that is not canonical
        ids[rng.randrange(n)] = rng.choice(_ODD)
    cuts = sorted(rng.sample(range(n + 1), min(n + 1, rng.randrange(1, 6))))
    parts = [pa.array(ids[a:b], pa.string()) for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
    whole = _arrow_int_ids(pa.array(ids, pa.string()), "e")
    got = _parts_int_ids(parts, "e")
    if whole is None:
        assert got is None
    else:
        assert got is not None and np.array_equal(got, whole)
