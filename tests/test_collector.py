"""The cyclic collector is paused around bulk steps, and put back as it was."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchestrace import generate_trace
from orchestrace._collector import paused
from orchestrace.io import dump, load
from orchestrace.io.json import parse


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_nests_and_restores(collector_on: None) -> None:
    with paused():
        assert not gc.isenabled()
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer step still runs
    assert gc.isenabled()


def test_paused_leaves_a_disabled_collector_off(collector_on: None) -> None:
    gc.disable()
    with paused():
        pass
    assert not gc.isenabled()


def test_paused_when_false_changes_nothing(collector_on: None) -> None:
    with paused(False):
        assert gc.isenabled()


def test_paused_restores_after_an_error(collector_on: None) -> None:
    @paused()
    def boom() -> None:
        raise ValueError("x")

    with pytest.raises(ValueError):
        boom()
    assert gc.isenabled()


def test_paused_across_threads_is_back_on_when_the_last_ends(collector_on: None) -> None:
    inside, leave = threading.Event(), threading.Event()

    def worker() -> None:
        with paused():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=worker)
    t.start()
    inside.wait(10)
    with paused():
        pass
    assert not gc.isenabled()  # the worker's step still runs
    leave.set()
    t.join(10)
    assert gc.isenabled()


def test_generate_trace_leaves_no_cycles_behind(collector_on: None) -> None:
    generate_trace(agents=6, steps=500, depth=2, seed=0)  # imports and caches settle
    gc.collect()
    gc.disable()
    try:
        generate_trace(agents=6, steps=3000, depth=2, seed=1)
        # a recursive closure once kept every record alive until a collection (2 per event)
        assert gc.collect() == 0
    finally:
        gc.enable()


def _collections_during(call: Callable[[], object]) -> int:
    runs = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            runs.append(info["generation"])

    old = gc.get_threshold()
    gc.callbacks.append(count)
    gc.set_threshold(1, 1, 1)  # a collection at nearly every allocation, when on
    try:
        call()
        return len(runs)
    finally:
        gc.set_threshold(*old)
        gc.callbacks.remove(count)


@pytest.mark.parametrize("name", ["t.json", "t.jsonl", "t.parquet"])
def test_bulk_io_runs_without_collections(collector_on: None, tmp_path: Path, name: str) -> None:
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    tr = generate_trace(agents=5, steps=2000, depth=1, seed=2)
    path = tmp_path / name
    # only the few that the call's own set-up (before the pause) and the first allocation
    # after it start: unpaused, these calls ran 56 to 69,839 collections at this threshold
    assert _collections_during(lambda: dump(tr, path)) <= 10
    assert _collections_during(lambda: load(path)) <= 10
    assert _collections_during(lambda: generate_trace(agents=5, steps=2000, depth=1)) <= 10
    if name == "t.json":
        data = path.read_bytes()
        assert _collections_during(lambda: parse(data)) <= 10
    assert gc.isenabled()
