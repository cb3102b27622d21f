"""The Ray executor (``--executor ray``): jobs as Ray tasks, locally or on a cluster.

Ray is imported when an executor is made (``pip install 'orchestrace[ray]'``). Scheduling,
the transfer of the shared object (``ray.put`` once) and the re-run of a task whose worker
died (``max_retries``) are Ray's; what a failed chunk becomes is
:meth:`orchestrace.executors.Executor.map`'s, the same on every executor.

Example:
    >>> shutdown_ray()  # nothing runs: nothing to stop
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from orchestrace._safe import decimal
from orchestrace.errors import ConfigError
from orchestrace.executors import _NO_SHARED, Executor, _Died, _one_line, _Outcome, _run_chunk

__all__ = ["RAY_CONNECT_TIMEOUT_S", "RAY_JOIN_TIMEOUT_S", "RayExecutor", "shutdown_ray"]

#: Seconds to wait for a Ray cluster's address to accept a connection.
RAY_CONNECT_TIMEOUT_S = 10.0
#: Seconds for a Ray driver to join the cluster at an address that accepts connections
#: (checked in a child process, which is killed at the deadline: Ray itself keeps retrying).
RAY_JOIN_TIMEOUT_S = 60.0

_RAY_HINT = "pip install 'orchestrace[ray]'"


def _import_ray() -> Any:
    try:
        import ray  # noqa: PLC0415  optional extra [ray]
    except ImportError:
        raise ConfigError(
            f"--executor ray needs Ray, which is not installed; {_RAY_HINT} "
            "(or use --executor process)"
        ) from None
    return ray


def _check_address(address: str) -> None:
    """Refuse an address nothing answers at, within :data:`RAY_CONNECT_TIMEOUT_S` seconds."""
    if address in ("auto", "local"):
        return
    target = address.split("://", 1)[-1].rsplit("/", 1)[0]
    host, _, port = target.rpartition(":")
    if not host or decimal(port) is None:
        raise ConfigError(
            f"--ray-address {address!r} is not HOST:PORT (e.g. 10.0.0.5:6379, or "
            "ray://10.0.0.5:10001 for Ray Client); `ray start --head` prints the address"
        )
    try:
        with socket.create_connection((host, int(port)), timeout=RAY_CONNECT_TIMEOUT_S):
            pass
    except OSError as err:
        raise ConfigError(
            f"--ray-address {address}: no Ray cluster answers there ({_one_line(err)}); start "
            "one with `ray start --head` on that machine and pass the address it prints, or "
            "leave --ray-address out to start a local Ray instance"
        ) from None
    code = (
        "import sys, ray\n"
        "ray.init(address=sys.argv[1], include_dashboard=False, log_to_driver=False)\n"
        "ray.shutdown()\n"
    )
    try:
        probe = subprocess.run(
            [sys.executable, "-c", code, address],
            capture_output=True,
            text=True,
            timeout=RAY_JOIN_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"--ray-address {address}: something accepts connections there, but no Ray cluster "
            f"let a driver join within {RAY_JOIN_TIMEOUT_S:.0f} s; check the address (`ray "
            "start --head` prints it; `ray status` on the head node shows the cluster), or "
            "leave --ray-address out to start a local Ray instance"
        ) from None
    if probe.returncode != 0:
        if "InvalidAuthToken" in probe.stderr:
            raise ConfigError(
                f"--ray-address {address}: the Ray cluster there requires its authentication "
                "token; set RAY_AUTH_MODE=token with the cluster's token in ~/.ray/auth_token "
                "(`ray get-auth-token` on the head node prints it)"
            )
        lines = [ln for ln in probe.stderr.splitlines() if ln.strip()]
        why = " ".join(lines[-1].split())[:300] if lines else f"exit {probe.returncode}"
        raise ConfigError(
            f"--ray-address {address}: could not join the Ray cluster there ({why}); check the "
            "address (`ray start --head` prints it) and that this machine runs the cluster's "
            "Ray and Python versions, or leave --ray-address out to start a local Ray instance"
        )


class RayExecutor(Executor):
    """Jobs as Ray tasks, on a cluster (``ray_address``) or a local instance of ``workers`` CPUs.

    Ray schedules the tasks (one CPU each), sends ``shared`` through its object store once
    and re-runs a task whose worker died up to ``retries`` times (``max_retries``); what a
    chunk that failed anyway becomes is decided by :meth:`Executor.map`, as on every executor.

    Example:
        >>> with RayExecutor(workers=2) as ex:  # doctest: +SKIP
        ...     ex.map(abs, [-1, -2])
        [1, 2]
    """

    name = "ray"

    def __init__(
        self, workers: int | None = None, retries: int = 1, address: str | None = None
    ) -> None:
        super().__init__(workers, retries)
        self.address = address
        self._ray = _import_ray()
        self._started = False
        self._task: Any = None
        self._attempts: dict[Any, int] = {}  # a finished task's attempts past its first
        ray = self._ray
        _errors_to_stderr()
        if address is not None:
            _check_address(address)
        if ray.is_initialized():
            session = RayExecutor._session
            if session is None:
                return  # Ray started by the caller: its session is the one to use
            same = session[0] == address and (
                address is not None or workers is None or session[1] == workers
            )
            if same:
                return
            ray.shutdown()  # another cluster, or a local instance of another size
        kw: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,  # workers' output stays in Ray's session logs
            "configure_logging": False,
        }
        if address is not None:
            kw["address"] = address
        else:
            kw["num_cpus"] = workers or os.cpu_count() or 1
        # the local instance's workers inherit the environment: this process's modules
        # (those on sys.path) are importable there as here
        saved = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(_paths())
        try:
            ray.init(**kw)
        except (ConnectionError, TimeoutError, ValueError) as err:
            where = f"--ray-address {address}" if address else "a local Ray instance"
            raise ConfigError(
                f"{where}: Ray did not start ({_one_line(err)}); start a cluster with "
                "`ray start --head` and pass its address, or use --executor process"
            ) from None
        finally:
            if saved is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = saved
        self._started = True
        RayExecutor._session = (address, None if address else kw["num_cpus"])

    #: The Ray session this process started: ``(address, local CPUs)``.
    _session: tuple[str | None, int | None] | None = None

    def describe(self) -> dict[str, Any]:
        """What a report records: the executor, workers and cluster CPUs."""
        out = super().describe()
        out["ray_address"] = self.address
        out["cluster_cpus"] = int(self._ray.cluster_resources().get("CPU", 0))
        return out

    def _open(self, fn: Callable[..., Any], shared: Any) -> None:
        ray = self._ray
        if self._task is None:
            self._task = ray.remote(num_cpus=1, max_retries=self.retries)(_run_ray_chunk)
        super()._open(ray.put(fn), ray.put(shared) if shared is not _NO_SHARED else _NO_SHARED)

    def _capacity(self) -> int:
        return sys.maxsize  # every chunk at once: Ray schedules them

    def _submit(self, chunk: list[Any], solo: bool = False) -> Any:
        task = self._task.options(max_retries=0) if solo else self._task
        return task.remote(self._fn, self._shared, chunk)

    def _reran(self, handle: Any, died: bool, solo: bool) -> int:
        if died:  # Ray gave up after its own retries
            return 0 if solo else self.retries
        return self._attempts.pop(handle, 0)

    def _wait(self, handles: list[Any]) -> list[tuple[Any, _Outcome]]:
        ray = self._ray
        done, _ = ray.wait(handles, num_returns=1)
        out: list[tuple[Any, _Outcome]] = []
        for ref in done:
            try:
                attempt, outcome = ray.get(ref)
                if attempt:
                    self._attempts[ref] = attempt
            except ray.exceptions.RayError as err:
                dead = (
                    ray.exceptions.WorkerCrashedError,
                    ray.exceptions.NodeDiedError,
                    ray.exceptions.OutOfMemoryError,
                )
                outcome = (
                    _Died(type(err).__name__)
                    if isinstance(err, dead)
                    else _one_line(getattr(err, "cause", None) or err)
                )
            out.append((ref, outcome))
        return out

    def _cancel(self, handles: list[Any]) -> None:
        for ref in handles:
            self._ray.cancel(ref, force=True)

    def _release(self) -> None:
        super()._release()
        self._attempts.clear()

    def close(self) -> None:
        """Leave the Ray instance running (a later map reuses it); see :func:`shutdown_ray`."""


def _run_ray_chunk(fn: Any, shared: Any, chunk: list[Any]) -> tuple[int, Any]:
    """A chunk as a Ray task: ``(attempts of this task before this one, outcomes)``."""
    worker = sys.modules["ray._private.worker"].global_worker
    get = getattr(getattr(worker, "core_worker", None), "get_current_task_attempt_number", None)
    return (int(get()) if get is not None else 0), _run_chunk(fn, shared, chunk)


def _errors_to_stderr() -> None:
    """Send what Ray's driver prints (a dead worker, a failed task) to stderr, never stdout.

    Ray prints the errors its raylet publishes on this process's stdout, where they would
    mix with a command's output (``--json`` rows); diagnostics belong on stderr.
    """
    mod = sys.modules.get("ray._private.worker")
    original = getattr(mod, "print_to_stdstream", None)
    if original is None or getattr(original, "_to_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        original({**data, "is_err": True}, ignore_prefix=ignore_prefix)

    to_stderr._to_stderr = True  # type: ignore[attr-defined]
    mod.print_to_stdstream = to_stderr  # type: ignore[union-attr]


def _paths() -> list[str]:
    return [p for p in sys.path if p and os.path.isdir(p)]


def shutdown_ray() -> None:
    """Stop the Ray instance this process runs (nothing when Ray is not running).

    Example:
        >>> shutdown_ray()  # nothing to stop here
    """
    if "ray" in sys.modules:
        ray = sys.modules["ray"]
        if ray.is_initialized():
            ray.shutdown()
    RayExecutor._session = None
