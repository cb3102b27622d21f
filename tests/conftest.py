"""Shared fixtures: reference files from ../shared (skipped when absent), small traces."""

from __future__ import annotations

import gc
import os
import shlex
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import lanes
from orchestrace import Trace, TraceBuilder, generate_trace

# Two test processes share two cores: a library that starts a thread per core (torch's and
# OpenBLAS's pools) would run four busy threads on two cores, whose waiting threads spin.
# One thread each, here and in the commands the tests start; a test that needs more sets it.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

ROOT = Path(__file__).resolve().parents[1]
#: Set in the fresh interpreter that runs ``runtime/test_snapshot_forks.py``.
SNAPSHOT_CHILD = "ORCHESTRACE_SNAPSHOT_TEST_IN_CHILD"


def reference_dir() -> Path | None:
    env = os.environ.get("ORCHESTRACE_REFERENCE")
    candidates = [Path(env)] if env else []
    candidates += [ROOT.parent / "shared" / "reference", ROOT / ".." / "shared" / "reference"]
    for c in candidates:
        if (c / "trace_schema.json").exists():
            return c.resolve()
    return None


@pytest.fixture
def reference() -> Path:
    ref = reference_dir()
    if ref is None:
        pytest.skip("shared reference files (trace_schema.json, example_trace.json) not present")
    return ref


@pytest.fixture
def small_trace() -> Trace:
    b = TraceBuilder(task_id="demo", topology="centralized")
    plan = b.llm("lead", dur=1.0, step=0, tokens_in=100, tokens_out=20)
    spawns = [b.spawn("lead", f"w{i}", role="worker", after=[plan], step=1) for i in range(3)]
    rets = []
    for i, s in enumerate(spawns):
        _c, r = b.tool(f"w{i}", "search", after=[s], dur=float(i + 1))
        rets.append(b.ret(f"w{i}", "lead", after=[r], content=str(i)))
    b.aggregate("lead", rets, dur=0.5, step=2, content="0,1,2")
    b.stop("lead", "done", step=3)
    return b.build(rewards={"team": 1.0})


@pytest.fixture
def medium_trace() -> Trace:
    return generate_trace(agents=40, steps=600, depth=2, seed=7)


@pytest.fixture
def marked_outputs(tmp_path: Path) -> None:
    """Skip where files cannot carry orchestrace's ownership mark (an extended attribute).

    There nothing can tell a user's file from an output, and ``--force`` replaces any file.
    """
    import errno
    import os

    if not hasattr(os, "setxattr"):
        pytest.skip("this platform's Python sets no extended attributes")
    probe = tmp_path / ".xattr-probe"
    probe.write_bytes(b"")
    try:
        os.setxattr(probe, "user.orchestrace.probe", b"1")
    except OSError as err:
        if err.errno in (errno.ENOTSUP, getattr(errno, "EOPNOTSUPP", errno.ENOTSUP)):
            pytest.skip("this file system keeps no user extended attributes")
        raise
    finally:
        probe.unlink()


def _ray_missing() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        if os.environ.get("ORCHESTRACE_REQUIRE_RAY") == "1":
            raise
        return True
    return False


@pytest.fixture(scope="session")
def shared_ray() -> Iterator[str | None]:
    """One local Ray instance (2 CPUs) per test process, shared by every test that needs one.

    Yields its address (a driver joins it with ``--ray-address``), or ``None`` when Ray is
    not installed (a test then checks the other executors only). ``make_executor("ray", 2)``
    in a test uses this instance instead of starting one, and leaves it running (only the
    executor that started Ray stops it, through ``owned``); it stops at the end of the
    session. Tests about starting, joining or refusing a cluster start their own.
    """
    if _ray_missing():
        yield None
        return
    import ray

    from orchestrace.executors import make_executor, shutdown_ray

    shutdown_ray()
    make_executor("ray", 2)
    _raylet_messages_to_process_stderr()
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        shutdown_ray()


def _raylet_messages_to_process_stderr() -> None:
    """Print what Ray's driver thread reports later (a worker that died) to the real stderr.

    Those messages arrive on a background thread whenever Ray publishes them, possibly while a
    later, unrelated test captures stderr; on the process's own stderr they stay out of it.
    """
    import sys

    mod = sys.modules.get("ray._private.worker")
    show = getattr(mod, "print_worker_logs", None)
    if mod is None or show is None:
        return

    def to_stderr(data: dict[str, object], ignore_prefix: bool) -> None:
        show(data, sys.__stderr__, ignore_prefix)

    to_stderr._to_stderr = True  # type: ignore[attr-defined]
    mod.print_to_stdstream = to_stderr


def pytest_configure(config: pytest.Config) -> None:
    """With ``-n N`` and no ``--dist`` given, tests are sent to the workers a file at a time
    (:func:`pytest_xdist_make_scheduler`); an explicit ``--dist`` is kept.

    SIGINT is put back to Python's default when the suite was started ignoring it (in the
    background, ``&``): the commands the tests start and then interrupt inherit it, and a
    command started ignoring SIGINT rightly keeps ignoring it.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # the command line, PYTEST_ADDOPTS and the ini file's addopts
    args = [
        *map(str, config.invocation_params.args),
        *shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
        *config.getini("addopts"),
    ]
    given = any(a.startswith("--dist") or a == "-d" for a in args)
    if getattr(config.option, "dist", None) == "load" and not given:
        config.option.dist = "loadfile"
        config.option.loadscopereorder = False  # in the order LONGEST_FIRST gives (below)
    controller = not hasattr(config, "workerinput")
    if controller and getattr(config.option, "dist", "no") != "no":
        config._orchestrace_lanes = lanes.Lanes(config)  # type: ignore[attr-defined]


#: The files that use the per-process Ray instance (``shared_ray``): one process runs them
#: all (a lane of their own with ``-n N``, see ``tests/lanes.py``), so the suite starts Ray
#: once and one process pays its background work.
RAY_FILES = (
    "test_executors.py",
    "learn/test_study_executors.py",
    "credit/test_credit_executors.py",
    "credit/test_credit_partial_executors.py",
    "masbench/test_suite_executors.py",
    "learn/test_rollouts_executors.py",
    "test_executors_ray_output.py",
)

#: With ``-n N``, these run in a pytest of their own next to the workers (``tests/lanes.py``):
#: the Ray files, mostly waiting, and the snapshot forks, which need a fresh interpreter.
lanes.configure(
    (
        ("ray", RAY_FILES, {}),
        ("snapshots", ("runtime/test_snapshot_forks.py",), {SNAPSHOT_CHILD: "1"}),
        ("browser", ("viewer/test_viewer_browser.py",), {}),
    )
)

#: The files whose tests take longest (worker-seconds from ``--durations=0`` on a 2-core
#: machine), longest first, after the Ray files. Each file runs on one worker, so its module
#: fixtures (a browser, a process pool, corpus seeds) are made once; sending the long files
#: out first keeps one of them from being the last thing running while the other worker sits
#: idle.
LONGEST_FIRST = (
    "test_hostile_corpus.py",
    "viewer/test_viewer_browser.py",
    "runtime/test_snapshot_forks.py",
    "learn/test_worker_signals.py",
    "runtime/test_sandbox.py",
    "learn/test_stopping_study.py",
    "io/test_jsonl_differential.py",
    "learn/test_llm_train.py",
    "test_fuzz_api.py",
    "io/test_columnar_differential.py",
    "credit/test_credit_openai_server.py",
    "runtime/test_openai_faults.py",
    "learn/test_llm_interrupt.py",
    "learn/test_llm_resume.py",
    "test_examples.py",
    "test_api.py",
    "test_laws_credit.py",
    "cli/test_report_dirs_full_disk.py",
    "masbench/test_suite_backend_failures.py",
)


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the Ray files first, then the longest files (a stable sort: the order within a
    file and of the other files is kept); on an xdist worker, the lanes' tests are replaced
    by their results, last."""
    here = Path(__file__).parent
    names = RAY_FILES + LONGEST_FIRST
    missing = [name for name in names if not (here / name).is_file()]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py names no file {missing[0]}")
    stray = [i.nodeid for i in items if "shared_ray" in getattr(i, "fixturenames", ())]
    stray = [n for n in stray if lanes.lane_of(n) != "ray"]
    if stray:
        raise pytest.UsageError(
            f"{stray[0]} uses shared_ray: add its file to RAY_FILES in tests/conftest.py"
        )
    rank = {str(here / name): i for i, name in enumerate(names)}
    items.sort(key=lambda item: rank.get(str(item.path), len(rank)))
    if lanes.active(config):
        lanes.replace_items(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Start the lanes with the tests the first worker collected (the same on every worker)."""
    runner = getattr(node.config, "_orchestrace_lanes", None)
    if runner is not None:
        runner.start(ids)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    lanes.record(report)  # only in a lane's own pytest


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    runner = getattr(config, "_orchestrace_lanes", None)
    for line in runner.summary if runner is not None else ():
        terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    runner = getattr(config, "_orchestrace_lanes", None)
    if runner is not None:
        runner.stop()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Leave what collection made (modules, test functions) out of the collector's passes."""
    _freeze_modules()


#: ``len(sys.modules)`` when the collector last set the loaded modules aside.
_FROZEN_AT = [0]


def _freeze_modules() -> None:
    """``gc.freeze()`` once many modules were loaded since the last time.

    A test process holds about a million objects once torch, transformers, Ray and
    matplotlib are loaded, nearly all of them module contents that live as long as it does;
    each full pass of the cyclic collector walked them all (about 0.3 s, some 20 times per
    worker). Frozen, they are skipped. What a test left for the collector at that moment is
    frozen too and never freed, once per burst of imports; frozen objects are not listed by
    ``gc.get_objects`` or ``gc.get_referrers`` (no test relies on those).
    """
    if len(sys.modules) - _FROZEN_AT[0] >= 100:
        gc.freeze()
        _FROZEN_AT[0] = len(sys.modules)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Set newly loaded modules aside from the collector (:func:`_freeze_modules`); stop the
    shared Ray instance once this process has run the last test of the Ray files.

    Ray's processes (GCS, raylet, idle workers) take about 3% of a core while they wait; the
    rest of the session does not use them. Tests outside the Ray files cannot ask for
    ``shared_ray`` (:func:`pytest_collection_modifyitems` refuses that).
    """
    _freeze_modules()
    if nextitem is None or "ray" not in sys.modules:
        return
    if lanes.lane_of(item.nodeid) != "ray" or lanes.lane_of(nextitem.nodeid) == "ray":
        return
    from orchestrace.executors import shutdown_ray

    shutdown_ray()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (set by :func:`pytest_configure`), the Ray files as one unit."""
    if config.option.dist != "loadfile" or config.option.loadscopereorder:
        return None  # an explicit --dist: xdist's own
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "ray" if lanes.lane_of(nodeid) == "ray" else nodeid.split("::", 1)[0]

    return Scheduling(config, log)
