"""Executors: run many independent jobs in this process, in worker processes, or on Ray.

A *job* is a pure function of a picklable spec (seeds, a config, trace bytes) that returns a
picklable result. :meth:`Executor.map` runs ``fn(spec)`` for every spec (``fn(shared, spec)``
when ``shared`` is given: one object every job reads, sent to each worker once) and returns
the results **in job order**, so a caller's output does not depend on the executor: the same
seeds give the same results on every executor, byte for byte where the job is deterministic.

* ``local``: one after another in this process (no pickling at all).
* ``process``: a :class:`concurrent.futures.ProcessPoolExecutor` of ``workers`` processes
  started with ``forkserver`` (``spawn`` where that is missing), never ``fork``: a worker
  never inherits this process's threads or event loop.
* ``ray``: Ray tasks (``pip install 'orchestrace[ray]'``). With ``ray_address`` they run on an
  existing cluster (``ray start --head`` prints its address; an address that does not answer,
  or where no cluster lets a driver join within :data:`RAY_JOIN_TIMEOUT_S`, is refused);
  without, on a local Ray instance with ``workers`` CPUs. Ray schedules the tasks, moves the shared object through its object
  store (``ray.put`` once) and re-runs a task whose worker died (``max_retries``).

Failures. A job that **raises** is not re-run (a pure function raises again on the same
spec); with ``on_error="raise"`` (the default) the map stops and raises
:class:`~orchestrace.errors.RuntimeError_` naming the job and the error; with
``on_error="record"`` the job's place in the result list holds a :class:`JobFailure` and the
other jobs complete. A **worker that dies** (killed, out of memory, a crash in native code)
is retried ``retries`` times (default 1): Ray re-runs the task itself; the process executor
re-runs the unfinished jobs in a fresh pool and, if that pool breaks too, runs them one at a
time so the job that kills its worker is identified; a job whose worker died on every attempt
is a :class:`JobFailure` (or the error, with ``on_error="raise"``).

Example:
    >>> ex = make_executor("local")
    >>> ex.map(abs, [-2, 3, -1])
    [2, 3, 1]
    >>> ex.map(divmod, [7, 9], shared=10)
    [(1, 3), (1, 1)]
    >>> out = ex.map(int, ["4", "x"], on_error="record")
    >>> out[0], isinstance(out[1], JobFailure), out[1].index
    (4, True, 1)
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Literal

from orchestrace.errors import ConfigError, RuntimeError_

__all__ = [
    "EXECUTORS",
    "Executor",
    "JobFailure",
    "LocalExecutor",
    "ProcessExecutor",
    "RayExecutor",
    "add_executor_flags",
    "executor_from_args",
    "failures",
    "make_executor",
    "shutdown_ray",
]

#: Executor names, as ``--executor`` takes them.
EXECUTORS = ("local", "process", "ray")

#: Seconds to wait for a Ray cluster's address to accept a connection.
RAY_CONNECT_TIMEOUT_S = 10.0
#: Seconds for a Ray driver to join the cluster at an address that accepts connections
#: (checked in a child process, which is killed at the deadline: Ray itself keeps retrying).
RAY_JOIN_TIMEOUT_S = 60.0

_RAY_HINT = "pip install 'orchestrace[ray]'"


class _NoShared:
    """No shared object (pickles by reference, so it stays itself in a worker)."""

    def __reduce__(self) -> str:
        return "_NO_SHARED"


_NO_SHARED: Any = _NoShared()
OnError = Literal["raise", "record"]


@dataclass(frozen=True)
class JobFailure:
    """A job that did not return: where it was, what went wrong, how often it was tried.

    Attributes:
        index: The job's position in the spec list.
        error: One line: the exception type and message, or how the worker died.
        attempts: How many times the job was started.
        kind: ``"raised"`` (the job raised) or ``"worker-died"`` (its worker process died).
    """

    index: int
    error: str
    attempts: int = 1
    kind: Literal["raised", "worker-died"] = "raised"

    def __str__(self) -> str:
        tries = "" if self.attempts == 1 else f" ({self.attempts} attempts)"
        return f"job {self.index}: {self.error}{tries}"

    def to_dict(self) -> dict[str, Any]:
        """The failure as a JSON-ready dict."""
        return {
            "index": self.index,
            "error": self.error,
            "attempts": self.attempts,
            "kind": self.kind,
        }


def failures(results: Sequence[Any]) -> list[JobFailure]:
    """The :class:`JobFailure` entries of a result list (``on_error="record"``).

    Example:
        >>> failures([1, JobFailure(1, "ValueError: bad"), 3])
        [JobFailure(index=1, error='ValueError: bad', attempts=1, kind='raised')]
    """
    return [r for r in results if isinstance(r, JobFailure)]


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


# ---------------------------------------------------------------------------- job running
#: The shared object of the process pool's worker (set by its initializer).
_WORKER: dict[str, Any] = {"shared": _NO_SHARED}


def _init_worker(shared: Any) -> None:
    _WORKER["shared"] = shared


def _run_chunk(fn: Callable[..., Any], shared: Any, chunk: Sequence[Any]) -> list[tuple[bool, Any]]:
    """Run a chunk of jobs; each entry is ``(True, result)`` or ``(False, one-line error)``."""
    out: list[tuple[bool, Any]] = []
    for spec in chunk:
        try:
            out.append((True, fn(spec) if shared is _NO_SHARED else fn(shared, spec)))
        except Exception as err:  # recorded per job: the chunk's other jobs still run
            out.append((False, _one_line(err)))
    return out


def _run_chunk_in_pool(fn: Callable[..., Any], chunk: Sequence[Any]) -> list[tuple[bool, Any]]:
    return _run_chunk(fn, _WORKER["shared"], chunk)


def _chunks(n: int, size: int) -> list[range]:
    return [range(i, min(i + size, n)) for i in range(0, n, size)]


class _Progress:
    """A tqdm bar over jobs (or nothing)."""

    def __init__(self, total: int, desc: str | None) -> None:
        self.bar: Any = None
        if desc is not None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="job", desc=desc)

    def update(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Executor:
    """Runs independent jobs and returns their results in job order (see the module docstring).

    Attributes:
        name: ``local``, ``process`` or ``ray``.
        workers: Jobs run at the same time (``None`` on a Ray cluster: as many as it has CPUs).
        retries: Re-runs of a job whose worker died.

    Example:
        >>> with make_executor("local") as ex:
        ...     ex.map(len, ["ab", "c"])
        [2, 1]
    """

    name = "executor"

    def __init__(self, workers: int | None = 1, retries: int = 1) -> None:
        if workers is not None and (isinstance(workers, bool) or workers < 1):
            raise ConfigError(f"--workers must be >= 1, got {workers}")
        if retries < 0:
            raise ConfigError(f"retries must be >= 0, got {retries}")
        self.workers = workers
        self.retries = retries

    def describe(self) -> dict[str, Any]:
        """What a report records about the executor."""
        return {"executor": self.name, "workers": self.workers}

    def map(
        self,
        fn: Callable[..., Any],
        specs: Sequence[Any],
        *,
        shared: Any = _NO_SHARED,
        chunksize: int = 1,
        progress: str | None = None,
        on_error: OnError = "raise",
    ) -> list[Any]:
        """Run ``fn`` on every spec; results in spec order.

        Args:
            fn: A module-level function (``fn(spec)``, or ``fn(shared, spec)`` with ``shared``).
            specs: Picklable job specs.
            shared: One object every job reads (sent once per worker, not once per job).
            chunksize: Jobs sent to a worker at a time (fewer round trips for short jobs).
            progress: A progress bar's label (no bar when ``None``).
            on_error: ``raise`` (stop at the first failed job) or ``record`` (a
                :class:`JobFailure` in the failed job's place; the others complete).

        Raises:
            RuntimeError_: A job failed and ``on_error`` is ``raise``.
        """
        if on_error not in ("raise", "record"):
            raise ConfigError(f"on_error must be 'raise' or 'record', got {on_error!r}")
        if chunksize < 1:
            raise ConfigError(f"chunksize must be >= 1, got {chunksize}")
        specs = list(specs)
        results: list[Any] = [None] * len(specs)
        bar = _Progress(len(specs), progress)
        try:
            for i, ok, value, attempts in self._run(fn, specs, shared, chunksize, bar):
                if ok:
                    results[i] = value
                    continue
                kind: Literal["raised", "worker-died"] = (
                    "worker-died" if value.startswith("worker died") else "raised"
                )
                failure = JobFailure(i, value, attempts, kind)
                if on_error == "raise":
                    raise RuntimeError_(
                        f"{self.name} executor: {failure}; the job's spec is {_short(specs[i])}"
                    )
                results[i] = failure
        finally:
            bar.close()
        return results

    def _run(
        self,
        fn: Callable[..., Any],
        specs: list[Any],
        shared: Any,
        chunksize: int,
        bar: _Progress,
    ) -> Iterator[tuple[int, bool, Any, int]]:
        """Yield ``(index, ok, result or error line, attempts)`` as jobs finish."""
        raise NotImplementedError

    def close(self) -> None:
        """Release workers (the local executor has none)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _short(spec: Any) -> str:
    text = repr(spec)
    return text if len(text) <= 200 else text[:197] + "..."


class LocalExecutor(Executor):
    """Every job in this process, one after another (today's behaviour of every command).

    Example:
        >>> LocalExecutor().map(str, [1, 2])
        ['1', '2']
    """

    name = "local"

    def __init__(self, workers: int | None = 1, retries: int = 0) -> None:
        super().__init__(1, retries)

    def _run(
        self,
        fn: Callable[..., Any],
        specs: list[Any],
        shared: Any,
        chunksize: int,
        bar: _Progress,
    ) -> Iterator[tuple[int, bool, Any, int]]:
        for i, spec in enumerate(specs):
            ((ok, value),) = _run_chunk(fn, shared, [spec])
            bar.update(1)
            yield i, ok, value, 1


def _mp_context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


class ProcessExecutor(Executor):
    """Jobs in a pool of worker processes (``forkserver``, else ``spawn``).

    Example:
        >>> with ProcessExecutor(workers=2) as ex:  # doctest: +SKIP
        ...     ex.map(abs, [-1, -2])
        [1, 2]
    """

    name = "process"

    def __init__(self, workers: int | None = None, retries: int = 1) -> None:
        super().__init__((os.cpu_count() or 1) if workers is None else workers, retries)

    def _pool(self, shared: Any, workers: int | None = None) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=workers or self.workers,
            mp_context=_mp_context(),
            initializer=_init_worker,
            initargs=(shared,),
        )

    def _run(
        self,
        fn: Callable[..., Any],
        specs: list[Any],
        shared: Any,
        chunksize: int,
        bar: _Progress,
    ) -> Iterator[tuple[int, bool, Any, int]]:
        pending = _chunks(len(specs), chunksize)
        attempts = dict.fromkeys(range(len(specs)), 0)
        for round_ in range(self.retries + 1):
            last = round_ == self.retries
            if round_ == 0 or not last:
                broken = yield from self._round(fn, specs, shared, pending, attempts, bar)
            else:  # the last try: one job at a time, so a crash names its job
                broken = yield from self._isolated(fn, specs, shared, pending, attempts, bar)
            if not broken:
                return
            pending = broken
        for chunk in pending:  # retries == 0: a broken pool's jobs fail
            for i in chunk:
                yield i, False, "worker died (BrokenProcessPool)", attempts[i]

    def _round(
        self,
        fn: Callable[..., Any],
        specs: list[Any],
        shared: Any,
        chunks: list[range],
        attempts: dict[int, int],
        bar: _Progress,
    ) -> Generator[tuple[int, bool, Any, int], None, list[range]]:
        """One pool over ``chunks``; returns the chunks left unfinished when the pool broke."""
        pool = self._pool(shared, min(self.workers or 1, len(chunks)))
        futs: dict[Future[list[tuple[bool, Any]]], range] = {}
        broken: list[range] = []
        try:
            for chunk in chunks:
                for i in chunk:
                    attempts[i] += 1
                futs[pool.submit(_run_chunk_in_pool, fn, [specs[i] for i in chunk])] = chunk
            todo = set(futs)
            while todo:
                done, todo = wait(todo, return_when=FIRST_COMPLETED)
                for fut in done:
                    chunk = futs[fut]
                    try:
                        out = fut.result()
                    except BrokenProcessPool:
                        broken.append(chunk)
                        continue
                    except Exception as err:  # the spec or result could not be pickled
                        out = [(False, _one_line(err))] * len(chunk)
                    bar.update(len(chunk))
                    for i, (ok, value) in zip(chunk, out, strict=True):
                        yield i, ok, value, attempts[i]
        finally:
            _stop(pool)
        return sorted(broken, key=lambda r: r.start)

    def _isolated(
        self,
        fn: Callable[..., Any],
        specs: list[Any],
        shared: Any,
        chunks: list[range],
        attempts: dict[int, int],
        bar: _Progress,
    ) -> Generator[tuple[int, bool, Any, int], None, list[range]]:
        """Single-worker pools, one job each at a time: a crash names its job."""
        queue = [i for chunk in chunks for i in chunk]
        queue.reverse()
        pools: list[ProcessPoolExecutor] = []
        busy: dict[Future[list[tuple[bool, Any]]], tuple[int, ProcessPoolExecutor]] = {}
        free: list[ProcessPoolExecutor] = []
        try:
            while queue or busy:
                while queue and (
                    free or len(pools) < min(self.workers or 1, len(queue) + len(busy))
                ):
                    if free:
                        pool = free.pop()
                    else:
                        pool = self._pool(shared, 1)
                        pools.append(pool)
                    i = queue.pop()
                    attempts[i] += 1
                    busy[pool.submit(_run_chunk_in_pool, fn, [specs[i]])] = (i, pool)
                done, _ = wait(list(busy), return_when=FIRST_COMPLETED)
                for fut in done:
                    i, pool = busy.pop(fut)
                    try:
                        ((ok, value),) = fut.result()
                        free.append(pool)
                    except BrokenProcessPool:
                        _stop(pool)
                        pools.remove(pool)
                        ok, value = False, "worker died (BrokenProcessPool)"
                    except Exception as err:  # the spec or result could not be pickled
                        free.append(pool)
                        ok, value = False, _one_line(err)
                    bar.update(1)
                    yield i, ok, value, attempts[i]
        finally:
            for pool in pools:
                _stop(pool)
        return []


def _stop(pool: ProcessPoolExecutor) -> None:
    """Shut a pool down now: queued jobs are cancelled, running ones end with their workers."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=5)


# ---------------------------------------------------------------------------- Ray
def _import_ray() -> Any:
    try:
        import ray
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
    if not host or not port.isdigit():
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
    and re-runs a task whose worker died up to ``retries`` times (``max_retries``).

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
        ray = self._ray
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
            "log_to_driver": True,
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

    def _run(
        self,
        fn: Callable[..., Any],
        specs: list[Any],
        shared: Any,
        chunksize: int,
        bar: _Progress,
    ) -> Iterator[tuple[int, bool, Any, int]]:
        ray = self._ray
        task = ray.remote(num_cpus=1, max_retries=self.retries)(_run_chunk)
        ref = ray.put(shared) if shared is not _NO_SHARED else _NO_SHARED
        fn_ref = ray.put(fn)
        chunks = _chunks(len(specs), chunksize)
        refs = {task.remote(fn_ref, ref, [specs[i] for i in chunk]): chunk for chunk in chunks}
        todo = list(refs)
        try:
            while todo:
                done, todo = ray.wait(todo, num_returns=1)
                for r in done:
                    chunk = refs[r]
                    try:
                        out = ray.get(r)
                    except ray.exceptions.RayError as err:
                        dead = isinstance(
                            err,
                            (
                                ray.exceptions.WorkerCrashedError,
                                ray.exceptions.NodeDiedError,
                                ray.exceptions.OutOfMemoryError,
                            ),
                        )
                        line = (
                            f"worker died ({type(err).__name__})"
                            if dead
                            else _one_line(getattr(err, "cause", None) or err)
                        )
                        out = [(False, line)] * len(chunk)
                        tries = self.retries + 1 if dead else 1
                    else:
                        tries = 1
                    bar.update(len(chunk))
                    for i, (ok, value) in zip(chunk, out, strict=True):
                        yield i, ok, value, tries
        finally:
            for r in todo:
                ray.cancel(r, force=True)

    def close(self) -> None:
        """Leave the Ray instance running (a later map reuses it); see :func:`shutdown_ray`."""


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


# ---------------------------------------------------------------------------- factory and CLI
def make_executor(
    name: str = "local",
    workers: int | None = None,
    *,
    ray_address: str | None = None,
    retries: int = 1,
) -> Executor:
    """An executor by name (``local``, ``process``, ``ray``).

    Args:
        name: Where jobs run.
        workers: Jobs at a time (process: default the CPU count; ray: the local instance's
            CPUs, ignored on a cluster).
        ray_address: ``ray`` only: join the cluster at this address (``HOST:PORT``,
            ``ray://HOST:PORT`` or ``auto``).
        retries: Re-runs of a job whose worker died.

    Raises:
        ConfigError: Unknown name, bad workers, a Ray address nothing answers at, or Ray
            not installed.

    Example:
        >>> make_executor("local").name
        'local'
    """
    if name not in EXECUTORS:
        raise ConfigError(
            f"unknown executor {name!r} (--executor); use one of: {', '.join(EXECUTORS)}"
        )
    if ray_address is not None and name != "ray":
        raise ConfigError(f"--ray-address applies to --executor ray, not {name}; leave it out")
    if name == "local":
        if workers is not None and workers != 1:
            raise ConfigError(
                f"--workers {workers} needs --executor process or ray (local runs one job at a time)"
            )
        return LocalExecutor(retries=retries)
    if name == "process":
        return ProcessExecutor(workers, retries)
    return RayExecutor(workers, retries, ray_address)


def add_executor_flags(p: Any, what: str) -> None:
    """Add ``--executor``, ``--workers`` and ``--ray-address`` to an argparse parser.

    Example:
        >>> import argparse
        >>> p = argparse.ArgumentParser()
        >>> add_executor_flags(p, "the jobs")
        >>> executor_from_args(p.parse_args(["--executor", "local"])).name
        'local'
    """
    p.add_argument(
        "--executor",
        choices=EXECUTORS,
        default=None,
        help=f"where {what} run: local (this process, one at a time), process (a pool of "
        "worker processes) or ray (Ray tasks; pip install 'orchestrace[ray]'); results are "
        "the same on every executor",
    )
    p.add_argument(
        "--workers",
        type=int,
        help="process: worker processes (default: CPU count); ray: CPUs of the local Ray "
        "instance (a cluster uses all of its own)",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="ray: join the cluster at ADDR (HOST:PORT as `ray start --head` prints it, or "
        "auto) instead of starting a local Ray instance",
    )


def executor_from_args(args: Any, default: str = "local") -> Executor:
    """The executor the ``--executor/--workers/--ray-address`` flags ask for.

    ``--ray-address`` alone means Ray; otherwise ``default`` where ``--executor`` is not given.

    Example:
        >>> import argparse
        >>> args = argparse.Namespace(executor=None, workers=2, ray_address=None)
        >>> ex = executor_from_args(args, default="process")
        >>> ex.name, ex.workers
        ('process', 2)
    """
    name = args.executor or ("ray" if args.ray_address else default)
    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {args.workers}")
    return make_executor(name, args.workers, ray_address=args.ray_address)
