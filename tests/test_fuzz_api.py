"""Mutation fuzzing through the Python API: every exception is one of the project's own.

Structure-aware and byte mutants of generated traces, recorded runs and a record stream
(``tests/hostile/fuzz.py``) are read as the command line reads them and, when accepted,
analysed, rewarded, credited and exported to the survey schema; an accepted trace must also be
written and read back.

A run checks a stratified sample of the first 10,000 mutants (``POOL``; making one costs about
a tenth of checking it): every mutant of a (seed input, kind of mutation) stratum among the
first ``PER_STRATUM`` of that stratum, then a uniform sample of the rest up to ``MUTATIONS``
(2,000). Every kind of mutation on every seed input is tried as in the full run, at a fifth of
the cost. ``ORCHESTRACE_FUZZ_MUTATIONS=100000`` (and ``ORCHESTRACE_FUZZ_SEED``) check that many
mutants, all of them; ``python tests/hostile/fuzz.py --mutations N`` does the same from the
shell.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from hostile.fuzz import FuzzReport, Mutant, check_mutant, fuzz, make_mutant, seed_inputs

POOL = 10_000
MUTATIONS = int(os.environ.get("ORCHESTRACE_FUZZ_MUTATIONS", "2000"))
SEED = int(os.environ.get("ORCHESTRACE_FUZZ_SEED", "0"))
PER_STRATUM = 3
_TWO_WORDS = {"duplicate", "swap", "drop", "merge"}


def mutation_kind(op: str) -> str:
    """The kind of a mutation, without the field, line or column it hit.

    >>> mutation_kind("line 3: set dur"), mutation_kind("events: null role")
    ('set', 'events: null')
    """
    op = re.sub(r"^line \d+: ", "", op)
    words = op.split(" ")
    keep = 2 if words[0].endswith(":") or words[0] in _TWO_WORDS else 1
    return " ".join(words[:keep])


def strata(m: Mutant) -> set[tuple[str, str]]:
    """The (seed input, kind of mutation) pairs a mutant belongs to."""
    return {(m.seed_name, mutation_kind(op)) for op in m.ops} or {(m.seed_name, "none")}


def stratified(mutants: list[Mutant], n: int, seed: int) -> list[Mutant]:
    """``n`` of ``mutants``: the first ``PER_STRATUM`` of every stratum, then a uniform sample."""
    if n >= len(mutants):
        return mutants
    seen: Counter[tuple[str, str]] = Counter()
    chosen: list[Mutant] = []
    for m in mutants:
        st = strata(m)
        if any(seen[x] < PER_STRATUM for x in st):
            chosen.append(m)
            seen.update(st)
    picked = {m.index for m in chosen}
    rest = [m for m in mutants if m.index not in picked]
    fill = random.Random(f"stratified:{seed}").sample(rest, max(0, n - len(chosen)))
    return sorted(chosen + fill, key=lambda m: m.index)


@pytest.fixture(scope="module")
def seeds():
    return seed_inputs()


@pytest.mark.slow
def test_mutants_raise_only_project_errors(seeds, tmp_path: Path) -> None:
    if MUTATIONS > POOL:
        rep = fuzz(MUTATIONS, seed=SEED, workdir=tmp_path, seeds=seeds)
    else:
        pool = [make_mutant(seeds, i, SEED) for i in range(POOL)]
        sample = stratified(pool, MUTATIONS, SEED)
        assert set().union(*map(strata, sample)) == set().union(*map(strata, pool))
        rep = FuzzReport()
        t0 = time.perf_counter()
        for m in sample:
            check_mutant(m, tmp_path, rep)
            rep.mutants += 1
        rep.seconds = time.perf_counter() - t0
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


def test_the_stratified_sample_keeps_every_kind_of_mutation(seeds) -> None:
    pool = [make_mutant(seeds, i, seed=3) for i in range(400)]
    sample = stratified(pool, 150, seed=3)
    assert sample == stratified(pool, 150, seed=3)
    assert len(sample) >= 150 and len({m.index for m in sample}) == len(sample)
    assert set().union(*map(strata, sample)) == set().union(*map(strata, pool))
    for st in set().union(*map(strata, pool)):  # each stratum as often as in the pool, up to 3
        have = sum(st in strata(m) for m in sample)
        assert have >= min(PER_STRATUM, sum(st in strata(m) for m in pool)), st
    assert mutation_kind("line 12: duplicate id across lines") == "duplicate id"
    assert stratified(pool, 1_000, seed=3) == pool
