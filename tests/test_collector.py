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


def test_paused_leaves_the_collector_alone_outside_the_main_thread(collector_on: None) -> None:
    # the collector is one per process: pauses overlapping in several threads could keep it
    # off for every thread indefinitely
    inside, leave = threading.Event(), threading.Event()
    seen = []

    def worker() -> None:
        with paused():
            seen.append(gc.isenabled())
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=worker)
    t.start()
    inside.wait(10)
    with paused():
        assert not gc.isenabled()
    assert gc.isenabled()  # the worker's step does not hold it off
    leave.set()
    t.join(10)
    assert seen == [True]
    assert gc.isenabled()


def test_an_interrupt_right_after_the_pause_began_leaves_it_restored(
    collector_on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = gc.disable

    def then_interrupt() -> None:
        real()
        raise KeyboardInterrupt  # as a signal handler may, between two steps of paused()

    def step() -> None:
        with paused():
            pass

    monkeypatch.setattr(gc, "disable", then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        step()
    monkeypatch.undo()
    assert gc.isenabled()
    with paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_child_forked_by_another_thread_gets_the_collector_back(collector_on: None) -> None:
    import os

    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    r, w = os.pipe()
    out = []

    def fork_from_worker() -> None:
        pid = os.fork()
        if pid == 0:  # the child: the main thread's step does not exist here
            os.write(w, b"1" if gc.isenabled() else b"0")
            os._exit(0)
        os.waitpid(pid, 0)
        out.append(os.read(r, 1))

    with paused():
        t = threading.Thread(target=fork_from_worker)
        t.start()
        t.join(30)
    os.close(r)
    os.close(w)
    assert out == [b"1"]


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
    """The collections during a call come from its set-up alone: they do not grow with size.

    Unpaused, these calls ran 56 to 69,839 collections at this threshold on 2,000 events.
    """
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    counts = []
    for steps in (300, 6000):
        tr = generate_trace(agents=5, steps=steps, depth=1, seed=2)
        path = tmp_path / f"{steps}-{name}"
        got = [
            _collections_during(lambda: dump(tr, path)),  # noqa: B023 (called at once)
            _collections_during(lambda: load(path)),  # noqa: B023
            _collections_during(lambda: generate_trace(agents=5, steps=steps, depth=1)),  # noqa: B023
        ]
        if name == "t.json":
            data = path.read_bytes()
            got.append(_collections_during(lambda: parse(data)))  # noqa: B023
        counts.append(got)
    small, big = counts
    assert all(b <= s + 5 for s, b in zip(small, big, strict=True)), counts
    assert gc.isenabled()


@pytest.mark.parametrize("name", ["t.jsonl", "t.parquet"])
def test_the_callers_iterable_runs_with_the_collector_on(
    collector_on: None, tmp_path: Path, name: str
) -> None:
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    seen = []

    def traces() -> Iterator[object]:
        for seed in range(2):
            seen.append(gc.isenabled())  # the caller's own code (a run, say)
            yield generate_trace(agents=3, steps=50, seed=seed)

    dump(traces(), tmp_path / name)  # type: ignore[arg-type]
    assert seen == [True, True]
    if name.endswith(".parquet"):
        from orchestrace.io.parquet import write_parquet

        seen.clear()
        write_parquet(traces(), tmp_path / "w.parquet")  # type: ignore[arg-type]
        assert seen == [True, True]
