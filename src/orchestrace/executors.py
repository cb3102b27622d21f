"""Executors: run many independent jobs in this process, in worker processes, or on Ray.

A *job* is a pure function of a picklable spec (seeds, a config, trace bytes) that returns a
picklable result. :meth:`Executor.map` runs ``fn(spec)`` for every spec (``fn(shared, spec)``
when ``shared`` is given: one object every job reads, sent to each worker once) and returns
the results **in job order**, so a caller's output does not depend on the executor: the same
seeds give the same results on every executor, byte for byte where the job is deterministic.

* ``local``: one after another in this process (no pickling at all).
* ``process``: ``workers`` worker processes started with ``forkserver`` (``spawn`` where that
  is missing), never ``fork``: a worker never inherits this process's threads or event loop.
  The workers start with the first :meth:`~Executor.map` and serve every later one until
  :meth:`~Executor.close` (or the end of a ``with`` block); each is a single-process
  :class:`concurrent.futures.ProcessPoolExecutor`, so a worker that dies takes only its own
  jobs with it.
* ``ray``: Ray tasks (``pip install 'orchestrace[ray]'``). With ``ray_address`` they run on an
  existing cluster (``ray start --head`` prints its address; an address that does not answer,
  or where no cluster lets a driver join within ``RAY_JOIN_TIMEOUT_S``, is refused);
  without, on a local Ray instance with ``workers`` CPUs. Ray schedules the tasks, moves the
  shared object through its object store (``ray.put`` once) and re-runs a task whose worker
  died (``max_retries``).

Failures are handled the same way on every executor. A job that **raises** is not re-run (a
pure function raises again on the same spec); with ``on_error="raise"`` (the default) the map
stops and raises :class:`~orchestrace.errors.RuntimeError_` naming the job and the error; with
``on_error="record"`` the job's place in the result list holds a :class:`JobFailure` and the
other jobs complete. A **worker that dies** (killed, out of memory, a crash in native code)
takes the jobs it was running with it: a chunk of several jobs is re-run job by job, so the
one that kills its worker is named and the others complete; a single job is re-run until it
was started ``retries + 1`` times (Ray re-runs a task itself, ``max_retries=retries``, before
the chunk comes back as dead); a job whose worker died on every attempt is a
:class:`JobFailure` of kind ``worker-died`` (or the error, with ``on_error="raise"``).

At about 670 lines the module stays whole (how process pools start and stop is in
``orchestrace._pools``): :meth:`Executor.map` holds the one failure and
retry path every executor shares, and the local and process executors are subclasses
that supply only how chunks are submitted, waited for and cancelled (the Ray one is in
``_ray_executor``, loaded only with the extra).

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

import itertools
import os
import pickle
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from orchestrace._pools import guard_breakage, mp_context, stop_pool
from orchestrace._startup import child_signals
from orchestrace.errors import ConfigError, RuntimeError_

if TYPE_CHECKING:
    from orchestrace._ray_executor import RayExecutor

__all__ = [
    "EXECUTORS",
    "Executor",
    "JobFailure",
    "LocalExecutor",
    "ProcessExecutor",
    "RayExecutor",
    "Retry",
    "add_executor_flags",
    "executor_from_args",
    "failures",
    "make_executor",
    "owned",
    "shutdown_ray",
]

#: Executor names, as ``--executor`` takes them.
EXECUTORS = ("local", "process", "ray")


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

    Example:
        >>> str(JobFailure(3, "worker died (BrokenProcessPool)", 2, "worker-died"))
        'job 3: worker died (BrokenProcessPool) (2 attempts)'
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


@dataclass(frozen=True)
class Retry:
    """A job started again because its worker died: which job, which attempt died, and how.

    Attributes:
        index: The job's position in the spec list.
        attempt: The attempt that ended with its worker (1: the first start).
        reason: How the worker died, and what happened next.

    Example:
        >>> str(Retry(3, 1, "worker died (BrokenProcessPool)"))
        'job 3: attempt 1: worker died (BrokenProcessPool)'
    """

    index: int
    attempt: int
    reason: str

    def __str__(self) -> str:
        return f"job {self.index}: attempt {self.attempt}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        """The retry as a JSON-ready dict."""
        return {"index": self.index, "attempt": self.attempt, "reason": self.reason}


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


def _short(spec: Any) -> str:
    text = repr(spec)
    return text if len(text) <= 200 else text[:197] + "..."


# ---------------------------------------------------------------------------- job running
def _run_chunk(fn: Callable[..., Any], shared: Any, chunk: Sequence[Any]) -> list[tuple[bool, Any]]:
    """Run a chunk of jobs; each entry is ``(True, result)`` or ``(False, one-line error)``."""
    out: list[tuple[bool, Any]] = []
    for spec in chunk:
        try:
            out.append((True, fn(spec) if shared is _NO_SHARED else fn(shared, spec)))
        except Exception as err:  # recorded per job: the chunk's other jobs still run
            out.append((False, _one_line(err)))
    return out


@dataclass(frozen=True)
class _Died:
    """A chunk whose worker died (how, in a word: the exception that said so)."""

    how: str


#: A chunk's outcome: its jobs' ``(ok, value)``, a dead worker, or why it could not be sent back.
_Outcome = list[tuple[bool, Any]] | _Died | str


class _Progress:
    """A tqdm bar over jobs (or nothing)."""

    def __init__(self, total: int, desc: str | None) -> None:
        self.bar: Any = None
        if desc is not None:
            from tqdm import tqdm  # noqa: PLC0415  tqdm is heavy: loaded on first use

            self.bar = tqdm(total=total, unit="job", desc=desc)

    def update(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Executor:
    """Runs independent jobs and returns their results in job order (see the module docstring).

    One scheduling and failure path (:meth:`map`); executors supply how chunks run.

    Attributes:
        name: ``local``, ``process`` or ``ray``.
        workers: Jobs run at the same time (``None`` on a Ray cluster: as many as it has CPUs).
        retries: Re-runs of a job whose worker died.
        retried: The :class:`Retry` records of the last :meth:`map` (empty when no worker
            died).

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
        self._fn: Any = None
        self._shared: Any = None
        self.retried: list[Retry] = []

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
        starts = [0] * len(specs)
        queue = deque(
            list(range(i, min(i + chunksize, len(specs)))) for i in range(0, len(specs), chunksize)
        )
        running: dict[Any, tuple[list[int], bool]] = {}
        solo_queue: deque[list[int]] = deque()  # jobs of a chunk that kept dying, one by one
        self.retried = retried = []
        bar = _Progress(len(specs), progress)
        self._open(fn, shared)
        try:
            while queue or solo_queue or running:
                while (queue or solo_queue) and len(running) < self._capacity():
                    solo = bool(solo_queue)
                    chunk = (solo_queue or queue).popleft()
                    for i in chunk:
                        starts[i] += 1
                    running[self._submit([specs[i] for i in chunk], solo)] = (chunk, solo)
                for handle, outcome in self._wait(list(running)):
                    chunk, solo = running.pop(handle)
                    kind: Literal["raised", "worker-died"] = "raised"
                    died = isinstance(outcome, _Died)
                    how = f"worker died ({outcome.how})" if isinstance(outcome, _Died) else ""
                    for i in chunk:  # attempts the executor re-ran by itself (Ray)
                        for _ in range(self._reran(handle, died, solo)):
                            retried.append(Retry(i, starts[i], how or "worker died"))
                            starts[i] += 1
                    if isinstance(outcome, _Died):
                        if not solo and starts[chunk[0]] < self.retries + 1:
                            retried.extend(Retry(i, starts[i], how) for i in chunk)
                            queue.append(chunk)
                            continue
                        if not solo and len(chunk) > 1:  # one by one: the culprit is named
                            retried.extend(Retry(i, starts[i], how + "; run alone") for i in chunk)
                            solo_queue.extend([i] for i in chunk)
                            continue
                        outcome, kind = [(False, how)], "worker-died"
                    elif isinstance(outcome, str):
                        outcome = [(False, outcome)] * len(chunk)
                    bar.update(len(chunk))
                    for i, (ok, value) in zip(chunk, outcome, strict=True):
                        if ok:
                            results[i] = value
                            continue
                        failure = JobFailure(i, value, starts[i], kind)
                        if on_error == "raise":
                            raise RuntimeError_(
                                f"{self.name} executor: {failure}; the job's spec is "
                                f"{_short(specs[i])}"
                            )
                        results[i] = failure
        finally:
            if running:  # stopped early (a failure raised, Ctrl-C): the rest is not needed
                self._cancel(list(running))
            self._release()
            bar.close()
            if retried:
                _note_retries(self.name, retried)
        return results

    # what an executor supplies ---------------------------------------------------------
    def _open(self, fn: Callable[..., Any], shared: Any) -> None:
        """Get ready to run chunks of ``fn`` (with ``shared``)."""
        self._fn, self._shared = fn, shared

    def _capacity(self) -> int:
        """Chunks submitted at a time."""
        return 1

    def _submit(self, chunk: list[Any], solo: bool = False) -> Any:
        """Start a chunk (``solo``: one job, started once); a handle for :meth:`_wait`."""
        raise NotImplementedError

    def _reran(self, handle: Any, died: bool, solo: bool) -> int:
        """Attempts of a chunk that died and were re-run by the executor itself (Ray)."""
        return 0

    def _wait(self, handles: list[Any]) -> list[tuple[Any, _Outcome]]:
        """Wait for at least one chunk; its handle and outcome."""
        raise NotImplementedError

    def _cancel(self, handles: list[Any]) -> None:
        """Stop the chunks still running (their results are not needed)."""

    def _release(self) -> None:
        """Drop what :meth:`_open` kept."""
        self._fn, self._shared = None, None

    def close(self) -> None:
        """Release workers (the local executor has none)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalExecutor(Executor):
    """Every job in this process, one after another (today's behaviour of every command).

    Example:
        >>> LocalExecutor().map(str, [1, 2])
        ['1', '2']
    """

    name = "local"

    def __init__(self, workers: int | None = 1, retries: int = 0) -> None:
        super().__init__(1, retries)
        self._done: dict[int, _Outcome] = {}
        self._ids = itertools.count()

    def _submit(self, chunk: list[Any], solo: bool = False) -> Any:
        handle = next(self._ids)
        self._done[handle] = _run_chunk(self._fn, self._shared, chunk)
        return handle

    def _wait(self, handles: list[Any]) -> list[tuple[Any, _Outcome]]:
        return [(h, self._done.pop(h)) for h in handles]

    def _cancel(self, handles: list[Any]) -> None:
        for h in handles:
            self._done.pop(h, None)


def _note_retries(name: str, retried: list[Retry]) -> None:
    """One stderr line: which jobs were started again after their worker died."""
    jobs = sorted({r.index for r in retried})
    shown = ", ".join(str(r) for r in retried[:5])
    more = f", and {len(retried) - 5} more" if len(retried) > 5 else ""
    print(
        f"note: {name} executor: {len(jobs)} job(s) started again after their worker died "
        f"({shown}{more})",
        file=sys.stderr,
    )


# ---------------------------------------------------------------------------- processes
#: The shared object a process worker holds: ``(token, object)`` (set by the first chunk of
#: a map that reaches the worker).
_HELD: dict[str, Any] = {"token": None, "shared": _NO_SHARED}


def _run_in_worker(
    fn: Callable[..., Any], token: int | None, blob: bytes | None, chunk: Sequence[Any]
) -> list[tuple[bool, Any]]:
    """A chunk in a process worker; ``blob`` (the pickled shared object) comes once per map."""
    if token is None:
        return _run_chunk(fn, _NO_SHARED, chunk)
    if blob is not None:
        _HELD["token"], _HELD["shared"] = token, pickle.loads(blob)
    if _HELD["token"] != token:  # cannot happen: the parent sends the object first
        raise RuntimeError(f"worker holds shared object {_HELD['token']}, not {token}")
    return _run_chunk(fn, _HELD["shared"], chunk)


class ProcessExecutor(Executor):
    """Jobs in ``workers`` worker processes (``forkserver``, else ``spawn``), kept until closed.

    The workers start with the first :meth:`map` and serve every later one; :meth:`close`
    (or the end of a ``with`` block) stops them. ``shared`` is pickled once per map and sent
    to each worker with the first chunk it runs.

    Example:
        >>> with ProcessExecutor(workers=2) as ex:  # doctest: +SKIP
        ...     ex.map(abs, [-1, -2]), ex.map(abs, [-3])  # the same two workers
        ([1, 2], [3])
    """

    name = "process"

    def __init__(self, workers: int | None = None, retries: int = 1) -> None:
        super().__init__((os.cpu_count() or 1) if workers is None else workers, retries)
        n = self.workers or 1
        self._slots: list[ProcessPoolExecutor | None] = [None] * n
        self._holds: list[int | None] = [None] * n  # the shared-object token each one has
        self._busy: dict[Future[list[tuple[bool, Any]]], int] = {}
        self._tokens = itertools.count(1)
        self._token: int | None = None
        self._blob: bytes | None = None

    def _open(self, fn: Callable[..., Any], shared: Any) -> None:
        super()._open(fn, None)
        self._token, self._blob = None, None
        if shared is not _NO_SHARED:
            try:
                self._blob = pickle.dumps(shared, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as err:
                raise ConfigError(
                    f"process executor: the object every job reads cannot be sent to worker "
                    f"processes ({_one_line(err)}); use --executor local"
                ) from None
            self._token = next(self._tokens)

    def _capacity(self) -> int:
        return len(self._slots)

    def _submit(self, chunk: list[Any], solo: bool = False) -> Any:
        slot = next(s for s in range(len(self._slots)) if s not in self._busy.values())
        pool = self._slots[slot]
        if pool is None:
            pool = self._slots[slot] = guard_breakage(
                ProcessPoolExecutor(1, mp_context=mp_context(), initializer=child_signals)
            )
        first = self._token is not None and self._holds[slot] != self._token
        fut = pool.submit(
            _run_in_worker, self._fn, self._token, self._blob if first else None, chunk
        )
        self._holds[slot] = self._token if self._token is not None else self._holds[slot]
        self._busy[fut] = slot
        return fut

    def _wait(self, handles: list[Any]) -> list[tuple[Any, _Outcome]]:
        done, _ = wait(handles, return_when=FIRST_COMPLETED)
        out: list[tuple[Any, _Outcome]] = []
        for fut in done:
            slot = self._busy.pop(fut)
            try:
                outcome: _Outcome = fut.result()
            except BrokenProcessPool:
                self._drop(slot)
                outcome = _Died("BrokenProcessPool")
            except Exception as err:  # the spec or result could not be pickled
                outcome = _one_line(err)
            out.append((fut, outcome))
        return out

    def _cancel(self, handles: list[Any]) -> None:
        for fut in handles:
            # a job that finished in the same wait as a failure that stopped the map is no
            # longer busy: its worker is idle and stays
            slot = self._busy.pop(fut, None)
            if slot is not None:
                self._drop(slot)

    def _release(self) -> None:
        super()._release()
        self._blob = None

    def _drop(self, slot: int) -> None:
        pool, self._slots[slot], self._holds[slot] = self._slots[slot], None, None
        if pool is not None:
            stop_pool(pool)

    def close(self) -> None:
        """Stop the worker processes (a later :meth:`map` starts new ones)."""
        for slot in range(len(self._slots)):
            pool, self._slots[slot], self._holds[slot] = self._slots[slot], None, None
            if pool is not None:
                stop_pool(pool, wait=True)
        self._busy.clear()


# ---------------------------------------------------------------------------- factory and CLI
def __getattr__(name: str) -> Any:
    if name == "RayExecutor":  # defined with the Ray plumbing, which imports this module
        from orchestrace._ray_executor import RayExecutor  # noqa: PLC0415  import cycle: orchestrace._ray_executor imports this module

        return RayExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def shutdown_ray() -> None:
    """Stop the Ray instance this process runs (nothing when Ray is not running).

    Example:
        >>> shutdown_ray()  # nothing to stop here
    """
    from orchestrace._ray_executor import shutdown_ray as stop  # noqa: PLC0415  import cycle: orchestrace._ray_executor imports this module

    stop()


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
    from orchestrace._ray_executor import RayExecutor  # noqa: PLC0415  import cycle: orchestrace._ray_executor imports this module

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


@contextmanager
def owned(executor: Executor | None) -> Iterator[Executor | None]:
    """Close ``executor`` at the end of the block, however it ends; stop Ray if it started Ray.

    Example:
        >>> with owned(make_executor("local")) as ex:
        ...     ex.map(abs, [-1])
        [1]
    """
    try:
        yield executor
    finally:
        if executor is not None:
            executor.close()
            if executor.name == "ray" and getattr(executor, "_started", False):
                shutdown_ray()


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
