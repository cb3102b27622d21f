"""The rounds' answer tally: ``top_counts`` is ``Counter.most_common`` (ties included)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from orchestrace.runtime.rounds import top_counts


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_top_counts_equals_most_common(n: int) -> None:
    rnd = random.Random(n)
    for _ in range(2000):
        keys = [rnd.choice("abcde") for _ in range(rnd.randint(0, 14))]
        assert top_counts(keys, n) == Counter(keys).most_common(n)
    ties = ["c", "a", "b", "a", "c", "b"]  # equal counts: the order first seen
    assert top_counts(ties, n) == Counter(ties).most_common(n)
    assert top_counts(ties, 2) == [("c", 2), ("a", 2)]
