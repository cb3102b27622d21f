"""Behaviour pinned by hash: traces, Parquet round trips, summaries and credit on fixed seeds.

A change that should not alter behaviour (a refactor, a speed-up) must leave every one of these
byte-identical. A change meant to alter recorded traces regenerates them with
``python scripts/golden_hashes.py --write`` and says why.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "golden_hashes", ROOT / "scripts" / "golden_hashes.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def hashes() -> tuple[dict[str, str], dict[str, str]]:
    mod = _script()
    want = json.loads(mod.HERE.read_text())
    return want, mod.compute()


def test_every_pinned_output_is_still_computed(
    hashes: tuple[dict[str, str], dict[str, str]],
) -> None:
    want, got = hashes
    assert len(want) >= 60
    assert sorted(got) == sorted(want)


def test_outputs_are_byte_identical_to_the_pinned_ones(
    hashes: tuple[dict[str, str], dict[str, str]],
) -> None:
    want, got = hashes
    changed = sorted(k for k in want if got.get(k) != want[k])
    assert not changed, f"{len(changed)} outputs changed, e.g. {changed[:5]}"
