"""Mutation fuzzing through the Python API: every exception is one of the project's own.

10,000 structure-aware and byte mutants of generated traces, recorded runs and a record stream
(``tests/hostile/fuzz.py``) are read as the command line reads them and, when accepted,
analysed, rewarded, credited and exported to the survey schema; an accepted trace must also be
written and read back. ``ORCHESTRACE_FUZZ_MUTATIONS=100000`` (and ``ORCHESTRACE_FUZZ_SEED``)
run more; ``python tests/hostile/fuzz.py --mutations N`` does the same from the shell.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from hostile.fuzz import FuzzReport, Mutant, check_mutant, fuzz, make_mutant, seed_inputs

MUTATIONS = int(os.environ.get("ORCHESTRACE_FUZZ_MUTATIONS", "10000"))
SEED = int(os.environ.get("ORCHESTRACE_FUZZ_SEED", "0"))


@pytest.fixture(scope="module")
def seeds():
    return seed_inputs()


@pytest.mark.slow
def test_mutants_raise_only_project_errors(seeds, tmp_path: Path) -> None:
    rep = fuzz(MUTATIONS, seed=SEED, workdir=tmp_path, seeds=seeds)
    summary = (
        f"{rep.mutants:,} mutants in {rep.seconds:.1f} s ({rep.accepted:,} accepted), "
        f"{len(rep.hangs)} hang(s); replay one with "
        f"`python tests/hostile/fuzz.py --seed {SEED} --only INDEX`"
    )
    assert not rep.failures, summary + "\n" + "\n".join(rep.lines())
    assert rep.mutants == MUTATIONS
    # the mutants exercise both sides: many refused with a project error, many used
    assert rep.accepted > MUTATIONS // 10, summary
    assert sum(rep.project_errors.values()) > MUTATIONS // 2, summary


def test_mutants_are_reproducible(seeds) -> None:
    a = [make_mutant(seeds, i, seed=5) for i in range(80)]
    b = [make_mutant(seeds, i, seed=5) for i in range(80)]
    assert a == b
    assert len({m.data for m in a}) > 70
    assert {m.kind for m in a} == {"json", "jsonl", "parquet"}


def test_a_foreign_exception_is_reported(seeds, tmp_path: Path, monkeypatch) -> None:
    import orchestrace.trace.analyze as analyze

    def broken(*args, **kwargs):
        raise KeyError("lo")

    monkeypatch.setattr(analyze, "summarize", broken)
    rep = FuzzReport()
    good = next(s for s in seeds if s.kind == "json")
    check_mutant(Mutant(0, good.name, "json", good.data, ()), tmp_path, rep)
    assert rep.accepted == 1
    assert [k.split(" at ")[0] for k in rep.failures] == ["summarize: KeyError"]


def test_a_hang_is_reported(seeds, tmp_path: Path, monkeypatch) -> None:
    import time

    import hostile.fuzz as fz
    import orchestrace.trace.analyze as analyze

    monkeypatch.setattr(analyze, "summarize", lambda *a, **k: time.sleep(5))
    monkeypatch.setattr(fz, "TIME_LIMIT", 0.3)
    rep = FuzzReport()
    good = next(s for s in seeds if s.kind == "json")
    check_mutant(Mutant(0, good.name, "json", good.data, ()), tmp_path, rep)
    assert rep.hangs == [0]


def test_byte_mutations_cover_every_kind() -> None:
    from hostile.fuzz import mutate_bytes

    rng = random.Random(0)
    seen = {mutate_bytes(b'{"trace_id": "x", "events": []}', rng)[1] for _ in range(200)}
    assert seen == {"flip", "insert", "delete", "truncate", "duplicate span", "digits"}
