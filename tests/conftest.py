"""Shared fixtures: reference files from ../shared (skipped when absent), small traces."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrace import Trace, TraceBuilder, generate_trace

ROOT = Path(__file__).resolve().parents[1]


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
