"""Executors: same results in job order on local, process and Ray; failures recorded or raised."""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrace.errors import ConfigError, RuntimeError_
from orchestrace.executors import JobFailure, failures, make_executor


def _ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        if os.environ.get("ORCHESTRACE_REQUIRE_RAY") == "1":
            raise
        return False
    return True


HAS_RAY = _ray_available()
needs_ray = pytest.mark.skipif(
    not HAS_RAY, reason="ray is not installed (pip install 'orchestrace[ray]')"
)


# ---------------------------------------------------------------------------- jobs
def digest(spec: int) -> str:
    """A deterministic job whose duration varies, so jobs finish out of order."""
    time.sleep(0.02 * ((spec * 7) % 3))
    return hashlib.sha256(str(spec).encode()).hexdigest()


def with_shared(shared: bytes, spec: int) -> int:
    return len(shared) * 1000 + spec


def raises_on_three(spec: int) -> int:
    if spec == 3:
        raise ValueError(f"spec {spec} is bad")
    return spec * 2


def dies_on_three(spec: int) -> int:
    if spec == 3:
        os._exit(3)
    return spec * 2


def dies_once(spec: tuple[int, str]) -> int:
    """Kills its worker the first time it runs for a spec (a marker file says it did)."""
    n, marker = spec
    if n == 2 and not os.path.exists(marker):
        Path(marker).write_text("x")
        os._exit(3)
    return n * 2


def worker_pid(shared: Any, spec: int) -> tuple[int, int]:
    """The worker's process id, and how many times this worker unpickled a shared object."""
    return os.getpid(), _Counted.loads


class _Counted:
    """A shared object that counts how often a process unpickled one."""

    loads = 0

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (_counted, ())


def _counted() -> _Counted:
    _Counted.loads += 1
    return _Counted()


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture
def ray_local(shared_ray: str | None) -> Any:
    """A Ray executor on the test process's local Ray instance of 2 CPUs."""
    if shared_ray is None:
        pytest.skip("ray is not installed")
    import ray

    ex = make_executor("ray", 2)
    assert ray.cluster_resources().get("CPU") == 2
    return ex


@pytest.fixture(scope="module")
def pool() -> Iterator[Any]:
    """Two process workers for the tests that are not about starting or stopping them.

    A worker that dies in one test is replaced, as it would be within one command.
    """
    with make_executor("process", 2) as ex:
        yield ex


@pytest.mark.slow
# ---------------------------------------------------------------------------- local and process
def test_local_and_process_give_identical_results_in_job_order(pool: Any) -> None:
    specs = list(range(12))
    local = make_executor("local").map(digest, specs)
    one = pool.map(digest, specs)
    chunked = pool.map(digest, specs, chunksize=5)
    assert local == one == chunked == [digest(s) for s in specs]


@pytest.mark.slow
def test_process_workers_live_as_long_as_the_executor() -> None:
    with make_executor("process", 2) as ex:
        first = ex.map(worker_pid, range(8), shared=_Counted())
        second = ex.map(worker_pid, range(8), shared=_Counted())
        pids = {p for p, _ in first}
        assert {p for p, _ in second} <= pids and len(pids) <= 2 and os.getpid() not in pids
        # the shared object is unpickled once per worker and map, not once per job
        assert max(n for _, n in first) == 1 and max(n for _, n in second) == 2
        procs = [p for s in ex._slots if s is not None for p in s._processes.values()]  # type: ignore[attr-defined]
        assert procs and all(p.is_alive() for p in procs)
    assert not any(p.is_alive() for p in procs)  # closed: no worker left
    assert ex.map(abs, [-1]) == [1]  # a closed executor starts new workers when used again
    ex.close()


def test_shared_object_reaches_every_job(pool: Any) -> None:
    blob = b"x" * 3
    local = make_executor("local").map(with_shared, [1, 2], shared=blob)
    proc = pool.map(with_shared, [1, 2], shared=blob)
    assert local == proc == [3001, 3002]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["local", "process"])
def test_a_job_that_raises_is_recorded_or_raised(name: str, pool: Any) -> None:
    ex = pool if name == "process" else make_executor(name)
    out = ex.map(raises_on_three, range(6), on_error="record")
    assert out[:3] == [0, 2, 4] and out[4:] == [8, 10]
    assert failures(out) == [JobFailure(3, "ValueError: spec 3 is bad", 1, "raised")]
    with pytest.raises(RuntimeError_, match=r"job 3: ValueError: spec 3 is bad"):
        ex.map(raises_on_three, range(6))


@pytest.mark.slow
def test_process_worker_death_is_retried_then_recorded(pool: Any) -> None:
    ex = pool
    out = ex.map(dies_on_three, range(8), on_error="record")
    assert [r for i, r in enumerate(out) if i != 3] == [i * 2 for i in range(8) if i != 3]
    (fail,) = failures(out)
    assert fail.index == 3 and fail.kind == "worker-died" and fail.attempts == 2
    assert "worker died" in fail.error
    with pytest.raises(RuntimeError_, match=r"job 3: worker died .*\(2 attempts\)"):
        ex.map(dies_on_three, range(8))


@pytest.mark.slow
def test_process_worker_death_once_is_retried_and_succeeds(tmp_path: Path, pool: Any) -> None:
    marker = str(tmp_path / "died")
    out = pool.map(dies_once, [(n, marker) for n in range(6)])
    assert out == [n * 2 for n in range(6)] and Path(marker).exists()


def test_bad_executor_flags_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown executor 'gpu'"):
        make_executor("gpu")
    with pytest.raises(ConfigError, match="--workers must be >= 1"):
        make_executor("process", 0)
    with pytest.raises(ConfigError, match="--ray-address applies to --executor ray"):
        make_executor("process", ray_address="1.2.3.4:6379")
    with pytest.raises(ConfigError, match="--workers 2 needs --executor process or ray"):
        make_executor("local", 2)


# ---------------------------------------------------------------------------- Ray
@needs_ray
def test_unreachable_ray_address_is_one_line_quickly() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        make_executor("ray", ray_address=f"127.0.0.1:{port}")
    assert time.perf_counter() - t0 < 15
    msg = str(err.value)
    assert f"--ray-address 127.0.0.1:{port}: no Ray cluster answers there" in msg
    assert "ray start --head" in msg and "\n" not in msg
    with pytest.raises(ConfigError, match="is not HOST:PORT"):
        make_executor("ray", ray_address="nowhere")


@needs_ray
@pytest.mark.slow
def test_ray_gives_the_local_results(ray_local: Any) -> None:
    specs = list(range(12))
    expected = make_executor("local").map(digest, specs)
    assert ray_local.map(digest, specs) == expected
    assert ray_local.map(digest, specs, chunksize=5) == expected
    assert ray_local.map(with_shared, [1, 2], shared=b"xyz") == [3001, 3002]


@needs_ray
@pytest.mark.slow
def test_ray_records_a_raising_task(ray_local: Any) -> None:
    out = ray_local.map(raises_on_three, range(6), on_error="record")
    assert failures(out) == [JobFailure(3, "ValueError: spec 3 is bad", 1, "raised")]
    assert out[4:] == [8, 10]
    with pytest.raises(RuntimeError_, match="job 3: ValueError: spec 3 is bad"):
        ray_local.map(raises_on_three, range(6))


@needs_ray
@pytest.mark.slow
def test_ray_retries_a_dead_worker(ray_local: Any, tmp_path: Path) -> None:
    marker = str(tmp_path / "died")
    assert ray_local.map(dies_once, [(n, marker) for n in range(4)]) == [0, 2, 4, 6]
    out = ray_local.map(dies_on_three, range(5), on_error="record")
    (fail,) = failures(out)
    assert fail.index == 3 and fail.kind == "worker-died" and fail.attempts == 2
    assert out[:3] == [0, 2, 4] and out[4] == 8


# ---------------------------------------------------------------------------- command line
def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    from orchestrace.cli import main

    code = main(list(args))
    return code, capsys.readouterr().err


def test_cli_refuses_executor_flags_where_nothing_forks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from orchestrace import dump
    from orchestrace.runtime import run

    path = tmp_path / "t.json"
    dump(run("debate", "arith", agents=3, seed=1, rounds=1, task_size=6).trace, path)
    code, err = _cli(capsys, "credit", str(path), "--method", "uniform", "--workers", "2")
    assert code == 1
    # a Ray instance that an earlier test left in this test process may log about its own dead
    # workers meanwhile (those lines are Ray's, marked "(raylet)"); the command's output is one line
    own = [line for line in err.strip().splitlines() if "(raylet)" not in line]
    assert own == [
        "error: --executor, --workers and --ray-address apply to the methods that re-execute "
        "the run (counterfactual, loo, shapley), not to uniform; leave them out"
    ]
    code, err = _cli(
        capsys, "credit", str(path), "--method", "loo", "--executor", "local", "--json"
    )
    assert code == 0 and err == ""


@needs_ray
def test_cli_unreachable_ray_address_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "bench"
    code, err = _cli(
        capsys, "bench", "--suite", "smoke-v2", "--ray-address", f"127.0.0.1:{port}", "-o", str(out)
    )
    assert code == 1 and err.count("\n") == 1
    assert err.startswith(f"error: --ray-address 127.0.0.1:{port}: no Ray cluster answers there")


JOIN = """
import sys
from orchestrace.executors import make_executor
ex = make_executor("ray", ray_address=sys.argv[1])
print(ex.map(abs, [-1, -2, -3]), ex.describe()["cluster_cpus"])
"""


@needs_ray
@pytest.mark.slow
def test_ray_address_joins_a_running_cluster(shared_ray: str | None) -> None:
    import subprocess
    import sys

    # the running cluster: the local instance this test process started (2 CPUs); a fresh
    # driver joins it, as `orchestrace ... --ray-address` does; the token is in ~/.ray
    assert shared_ray is not None
    import ray

    # the instance this process runs now (a test that stops Ray and starts it again moves it)
    make_executor("ray", 2)
    address = str(ray.get_runtime_context().gcs_address)
    env = {**os.environ, "RAY_AUTH_MODE": "token"}
    out = subprocess.run(
        [sys.executable, "-c", JOIN, address],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[1, 2, 3] 2"


@needs_ray
@pytest.mark.slow
def test_an_address_that_is_not_a_ray_cluster_is_refused_in_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import http.server
    import threading

    from orchestrace import _ray_executor as executors

    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    # the bound is the join timeout: a short one is refused the same way as the default
    monkeypatch.setattr(executors, "RAY_JOIN_TIMEOUT_S", 2.0)
    address = f"127.0.0.1:{server.server_address[1]}"
    t0 = time.perf_counter()
    try:
        with pytest.raises(ConfigError) as err:
            make_executor("ray", ray_address=address)
    finally:
        server.shutdown()
    assert time.perf_counter() - t0 < 20
    msg = str(err.value)
    assert msg.startswith(f"--ray-address {address}: ") and "\n" not in msg
    assert "ray start --head" in msg


# ---------------------------------------------------------------------------- retries
def _retry_case(ex: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    marker = str(tmp_path / f"died-{ex.name}")
    once = ex.map(dies_once, [(n, marker) for n in range(4)])
    once_retried = [r.to_dict() for r in ex.retried]
    out = ex.map(dies_on_three, range(8), chunksize=4, on_error="record")
    return {
        "once": once,
        "once_retried": once_retried,
        "failures": [f.to_dict() for f in failures(out)],
        "retried": [r.to_dict() for r in ex.retried],
        "stderr": capsys.readouterr().err,
        "out": out,
    }


@pytest.mark.slow
def test_process_records_retries_and_counts_attempts_as_ray_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pool: Any
) -> None:
    got = _retry_case(pool, tmp_path, capsys)
    assert got["once"] == [0, 2, 4, 6]
    # the job whose worker died once is recorded, with the attempt and how
    assert [r["index"] for r in got["once_retried"]] == [2]
    assert got["once_retried"][0]["attempt"] == 1
    assert "worker died" in got["once_retried"][0]["reason"]
    # a chunk that keeps dying: re-run whole (retries=1), then job by job once each
    (fail,) = got["failures"]
    assert fail == {"index": 3, "error": fail["error"], "attempts": 3, "kind": "worker-died"}
    assert [r for r in got["out"] if not isinstance(r, JobFailure)] == [
        i * 2 for i in range(8) if i != 3
    ]
    assert {(r["index"], r["attempt"]) for r in got["retried"]} == {
        (i, a) for i in range(4) for a in (1, 2)
    }
    assert got["stderr"].count("note: process executor: ") == 2


@needs_ray
@pytest.mark.slow
def test_ray_records_retries_and_counts_attempts_as_process_does(
    ray_local: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    got = _retry_case(ray_local, tmp_path, capsys)
    assert got["once"] == [0, 2, 4, 6]
    assert [(r["index"], r["attempt"]) for r in got["once_retried"]] == [(2, 1)]
    (fail,) = got["failures"]
    assert fail["index"] == 3 and fail["attempts"] == 3 and fail["kind"] == "worker-died"
    assert {(r["index"], r["attempt"]) for r in got["retried"]} == {
        (i, a) for i in range(4) for a in (1, 2)
    }
    assert got["stderr"].count("note: ray executor: ") == 2
