"""Dictionary-encoded columns compile exactly as plain strings do (codes in order of first use)."""

from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

from orchestrace.io._columnar import from_batches  # noqa: E402
from orchestrace.trace.enums import EVENT_CODE, EventType  # noqa: E402


def _batches(agents: list[list[str]], tos: list[list[str | None]], as_dict: bool) -> list:
    out = []
    pos = 0
    for agent, to in zip(agents, tos, strict=True):
        n = len(agent)
        a = pa.array(agent, pa.string())
        t = pa.array(to, pa.string())
        if as_dict:
            # a dictionary listing unused names first, in another order than the rows use them
            names = sorted({*agent, *(x for x in to if x)} | {"zz-unused", "aa-unused"})[::-1]
            d = pa.array(names, pa.string())
            a = pa.DictionaryArray.from_arrays(pa.array([names.index(x) for x in agent]), d)
            t = pa.DictionaryArray.from_arrays(
                pa.array([None if x is None else names.index(x) for x in to], pa.int32()), d
            )
        out.append(
            {
                "id": pa.array([f"e{pos + i}" for i in range(n)], pa.string()),
                "t": pa.array(np.arange(pos, pos + n, dtype=np.float64)),
                "dur": pa.array(np.ones(n)),
                "type": pa.array(["spawn"] * n, pa.string()),
                "agent": a,
                "to": t,
            }
        )
        pos += n
    return out


def test_dictionary_columns_give_the_same_codes() -> None:
    rng = np.random.default_rng(5)
    pool = [f"agent{k}" for k in range(12)]
    agents = [[pool[i] for i in rng.integers(0, 12, size=50)] for _ in range(4)]
    tos = [
        [None if rng.random() < 0.3 else pool[i] for i in rng.integers(0, 12, 50)] for _ in range(4)
    ]
    plain = from_batches(_batches(agents, tos, False), [])
    coded = from_batches(_batches(agents, tos, True), [])
    assert coded.names == plain.names
    assert "zz-unused" not in coded.names
    assert np.array_equal(coded.agent_code, plain.agent_code)
    assert np.array_equal(coded.to_code, plain.to_code)


def test_unknown_type_in_a_dictionary_is_refused_only_when_used() -> None:
    batch = _batches([["a", "b"]], [[None, None]], False)[0]
    d = pa.array(["bogus", "spawn", "message"], pa.string())
    batch["type"] = pa.DictionaryArray.from_arrays(pa.array([1, 2], pa.int32()), d)
    g = from_batches([batch], [])
    assert g.type_code.tolist() == [EVENT_CODE[EventType.SPAWN], EVENT_CODE[EventType.MESSAGE]]
    batch["type"] = pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int32()), d)
    with pytest.raises(ValueError, match="unknown event type \\['bogus'\\]"):
        from_batches([batch], [])
