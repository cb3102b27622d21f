"""Many forks of one run from snapshots of it, each re-executing only its own suffix.

The forks of one trace share their prefix: up to the first point where one of a fork's
interventions acts (a message it drops or rewrites, a step it stops, a decision it forces, a
return it changes) or where a call it draws again is looked up, a fork executes exactly what
a run with no intervention executes. So this process runs the trace once with no
intervention, watching every such point; where a fork's first point comes, the process is
copied (``os.fork``): the copy applies the fork's interventions and redraws from there,
runs to the end, scores the new trace and sends the score back through a pipe, while the
original goes on to the next fork's point. Each fork costs its suffix alone, and its result
is the one a full re-execution gives (same trace, byte for byte), because the copy holds the
whole state of the run at that point: clock, queues, random draws, cache, counters.

Only what makes that exact is served: a trace on virtual time whose forks are answered by the
simulator (no connection, no thread, answers a pure function of the request), no defenses
(their keys and taint state are not covered), a topology's run (not a learning
environment's episode), interventions of the built-in kinds (whose hooks depend on their
arguments alone), a process with a single thread on a system with ``fork``. Everything else,
and any fork whose copy fails, is left to the caller's full re-execution.

A process with other threads (a notebook kernel, a Ray driver, a server) must not copy itself:
:func:`in_helper` runs the original run and its copies in a fresh single-threaded interpreter
instead, which receives the trace, the jobs and the report function pickled and sends the
reports back; when it cannot start or fails, a warning says so and the caller re-executes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import pickle
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrace._startup import child_signals
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.cache import CallKey, ReplayCache
from orchestrace.runtime.clock import VirtualTimeLoop, _shutdown
from orchestrace.runtime.core import Runtime
from orchestrace.runtime.interventions import (
    DropMessage,
    ForceDecision,
    ForceStop,
    Intervention,
    RedrawDownstream,
    ReplaceMessage,
    ResampleMessage,
    Silence,
)

__all__ = [
    "SnapJob",
    "available",
    "can_fork",
    "helper_is_cheaper",
    "in_helper",
    "last_stats",
    "resident_mib",
    "run_snapshots",
    "supported",
]

#: What the last :func:`run_snapshots` of this process measured (see :func:`last_stats`).
_LAST: dict[str, Any] = {}


def last_stats() -> dict[str, Any]:
    """CPU of the last :func:`run_snapshots` in this process, for measurements.

    ``original_cpu_s``: the execution that was copied (this process, forks included);
    ``copy_cpu_s``: each copy's CPU seconds, from the fork to its exit (the reaped child's
    resource use from ``os.wait4``, in microseconds); ``copies``: how many.
    """
    return dict(_LAST)


#: Interventions whose hooks depend on their arguments alone (exact types: a subclass may
#: override a hook with one that keeps state).
_KNOWN = (
    DropMessage,
    ReplaceMessage,
    ResampleMessage,
    RedrawDownstream,
    ForceStop,
    ForceDecision,
    Silence,
)


def can_fork() -> bool:
    """Whether processes can copy themselves on this system (POSIX ``fork``)."""
    return hasattr(os, "fork") and sys.platform != "win32"


def available() -> bool:
    """Whether this process can copy itself safely now (POSIX ``fork``, one thread)."""
    return can_fork() and threading.active_count() == 1


#: CPU seconds a copy costs per MiB this process holds, whatever the copy then does: the
#: page tables copied by ``fork`` and torn down at exit, and the pages written after it.
#: Measured on the 2-core VM with copies that exit at once: 4.1 ms at 92 MiB (the runtime
#: alone), 10.9 ms at 238 MiB (torch and transformers imported), 35 ms at 700 MiB.
COPY_S_PER_MIB = 45e-6

#: What a helper interpreter holds once it has imported the runtime (MiB); what starting it
#: and sending it the forks costs (CPU seconds: about 0.35 s measured, rounded up), and what
#: sending the trace costs per event (pickled here, unpickled there: 6.7 us measured).
HELPER_MIB = 100.0
HELPER_START_S = 0.5
HELPER_S_PER_EVENT = 7e-6


def resident_mib() -> float:
    """This process's resident memory in MiB (0.0 where ``/proc`` cannot tell)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            pages = int(fh.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def helper_is_cheaper(copies: int, events: int = 0) -> bool:
    """Whether ``copies`` copies of this process cost more than a helper making them.

    A copy costs in proportion to what the process holds (:data:`COPY_S_PER_MIB`): a
    notebook that has imported torch, or holds a model, pays more for each copy than a
    fresh interpreter (:data:`HELPER_MIB`) does, and enough copies repay starting one and
    sending it the trace of ``events`` events.

    Example:
        >>> helper_is_cheaper(0)
        False
    """
    extra = resident_mib() - HELPER_MIB
    start = HELPER_START_S + events * HELPER_S_PER_EVENT
    return copies > 0 and copies * extra * COPY_S_PER_MIB > start


#: The hooks through which an intervention acts on a running run (besides its redraws).
_HOOKS = ("message", "returned", "forces_stop", "decision", "decision_at")


def _redraws_only(iv: Any) -> bool:
    """Whether ``iv`` acts through its redraws alone (it overrides no hook of the run)."""
    cls = type(iv)
    return isinstance(iv, Intervention) and all(
        getattr(cls, h) is getattr(Intervention, h) for h in _HOOKS
    )


def supported(interventions: Sequence[Any]) -> bool:
    """Whether every intervention's first effect can be located.

    Those of the built-in kinds (whose hooks depend on their arguments alone), and any that
    acts through its redraws alone (its first effect is the first look-up of a redrawn call).
    """
    return all(type(iv) in _KNOWN or _redraws_only(iv) for iv in interventions)


@dataclass
class SnapJob:
    """One fork: its interventions and the ``meta.fork`` record of the forked trace."""

    interventions: list[Intervention]
    fork_of: dict[str, Any]
    described: list[dict[str, Any]]
    redraws: frozenset[str] = field(default_factory=frozenset)


class _Snap:
    """The jobs still waiting for their first point, indexed by where that point can be."""

    def __init__(self, jobs: Sequence[SnapJob], report: Callable[[Any], Any]) -> None:
        self.jobs = list(jobs)
        self.report = report
        self.pending: set[int] = set(range(len(jobs)))
        self.results: dict[int, tuple[str, Any]] = {}
        self.by_address: dict[tuple[str, int, int], list[int]] = {}
        self.by_agent: dict[str, list[int]] = {}  # Silence: messages and returns of the agent
        self.by_stop: dict[str, list[tuple[int, int]]] = {}
        self.by_decision: dict[tuple[str, str], list[tuple[int | None, int]]] = {}
        self.by_key: dict[str, list[int]] = {}
        for j, job in enumerate(self.jobs):
            for iv in job.interventions:
                if isinstance(iv, DropMessage | ReplaceMessage):
                    self.by_address.setdefault((iv.sender, iv.step, iv.index), []).append(j)
                elif isinstance(iv, Silence):
                    self.by_agent.setdefault(iv.agent, []).append(j)
                elif isinstance(iv, ForceStop):
                    self.by_stop.setdefault(iv.agent, []).append((iv.step, j))
                elif isinstance(iv, ForceDecision):
                    self.by_decision.setdefault((iv.agent, iv.name), []).append((iv.step, j))
            for key in job.redraws:
                self.by_key.setdefault(key, []).append(j)
        self.rt: _SnapRuntime | None = None
        self.loop: VirtualTimeLoop | None = None
        self.child: int | None = None  # the job this copy runs (None: the original)
        self.wfd = -1
        self.copy_cpu: dict[int, float] = {}  # CPU seconds of each job's copy (fork to exit)
        self.warned: list[tuple[str, Any, str, int]] = []  # in a copy: the warnings it gave
        self.shown: dict[Any, Any] = {}  # the warnings the copies gave, shown once here

    # ------------------------------------------------------------------ the original
    def split(self, found: Sequence[int]) -> bool:
        """Copy the process for each job in ``found`` still pending; ``True`` in a copy."""
        for j in sorted(set(found) & self.pending):
            self.pending.discard(j)
            if self._copy(j):
                return True
        if not self.pending and self.loop is not None:
            self.loop.stop()  # every fork has its copy: the rest of this run serves none
        return False

    def _copy(self, j: int) -> bool:
        rt = self.rt
        assert rt is not None
        r, w = os.pipe()
        _flush()  # what this process printed is written once, not again by the copy
        gc.freeze()  # the copy's collector leaves the shared objects (and their pages) alone
        try:
            pid = os.fork()
        except OSError as err:
            os.close(r)
            os.close(w)
            self.results[j] = ("err", f"fork failed: {err}")
            return False
        if pid == 0:  # the copy: this job's fork from here on
            child_signals()  # an interrupt ends the copy; the original reports it once
            os.close(r)
            # asyncio knows the running loop per process: this copy runs the same loop
            asyncio.events._set_running_loop(self.loop)
            self.wfd = w
            self.child = j
            self.pending.clear()
            job = self.jobs[j]
            rt.interventions = list(job.interventions)
            rt.meta["fork"] = job.fork_of
            rt.cache.redraw(job.redraws)
            # warnings are shown by the original, once for all copies, not once per copy
            self.warned = []
            warnings.showwarning = self._keep_warning
            return True
        os.close(w)
        chunks = []
        while True:
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        os.close(r)
        # the copy's own resource use, to the microsecond (``os.times`` counts 10 ms ticks)
        _, status, usage = os.wait4(pid, 0)
        self.copy_cpu[j] = usage.ru_utime + usage.ru_stime
        data = b"".join(chunks)
        got: tuple[str, Any]
        try:
            got = pickle.loads(data) if data else ("err", f"status {status}")
        except Exception as err:  # a truncated report: the caller re-executes the fork
            got = ("err", f"unreadable report: {err}")
        if got[0] == "ok":
            payload: Any = got[1]
            value, warned = payload
            for message, category, filename, lineno in warned:
                warnings.warn_explicit(message, category, filename, lineno, registry=self.shown)
            got = ("ok", value)
        self.results[j] = got
        return False

    def _keep_warning(
        self, message: Any, category: Any, filename: str, lineno: int, *_: Any, **__: Any
    ) -> None:
        self.warned.append((str(message), category, filename, lineno))

    # ------------------------------------------------------------------ a copy
    def finish_child(self, result: Any, error: BaseException | None) -> None:
        """Score the fork, send the score to the original and end this copy."""
        try:
            if error is not None:
                out: tuple[str, Any] = ("err", f"{type(error).__name__}: {error}")
            else:
                out = ("ok", (self.report(result), self.warned))
            data = pickle.dumps(out)
        except BaseException as err:
            data = pickle.dumps(("err", f"{type(err).__name__}: {err}"))
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.wfd, view) :]
            _flush()  # what the fork printed (a reward function's output) is written
        finally:
            os._exit(0)


def _own_cpu() -> float:
    """CPU seconds of this process so far, to the microsecond (``os.times`` counts ticks)."""
    import resource  # noqa: PLC0415  POSIX only, as copies are

    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or detached stream: nothing to write
            stream.flush()


class _Probe(Intervention):
    """The single intervention of the original run: it changes nothing and finds fork points.

    In a copy, the call it was asked at is answered by the fork's interventions, in order.
    """

    def __init__(self, snap: _Snap) -> None:
        self.snap = snap
        self.shown: Any = None

    def __str__(self) -> str:
        return str(self.shown)

    def _ivs(self) -> list[Any]:
        rt = self.snap.rt
        assert rt is not None
        return rt.interventions

    def message(
        self, sender: str, step: int, index: int, to: str, content: str, data: Any
    ) -> tuple[str, Any] | None:
        """Find the forks whose message (or silenced agent) this is."""
        s = self.snap
        found = s.by_address.get((sender, step, index), []) + s.by_agent.get(sender, [])
        if found and s.split(found):
            out: tuple[str, Any] | None = (content, data)
            for iv in self._ivs():
                out = iv.message(sender, step, index, to, content, data)
                if out is None:
                    return None
                content, data = out
            return out
        return content, data

    def returned(self, agent: str, value: Any) -> Any:
        """Find the forks that silence ``agent``."""
        s = self.snap
        found = s.by_agent.get(agent)
        if found and s.split(found):
            for iv in self._ivs():
                value = iv.returned(agent, value)
        return value

    def forces_stop(self, agent: str, step: int) -> bool:
        """Find the forks that stop ``agent`` at ``step``."""
        s = self.snap
        stops = s.by_stop.get(agent)
        if stops:
            found = [j for at, j in stops if step >= at]
            if found and s.split(found):
                for iv in self._ivs():
                    if iv.forces_stop(agent, step):
                        self.shown = iv
                        return True
        return False

    def decision_at(self, agent: str, step: int, name: str, value: Any) -> Any:
        """Find the forks that force this decision."""
        s = self.snap
        cands = s.by_decision.get((agent, name))
        if cands:
            found = [j for at, j in cands if at is None or at == step]
            if found and s.split(found):
                for iv in self._ivs():
                    at = getattr(iv, "decision_at", None)
                    value = at(agent, step, name, value) if at else iv.decision(agent, name, value)
        return value

    def describe(self) -> dict[str, Any]:
        """Kind only (the original's trace is not kept)."""
        return {"kind": "SnapshotProbe"}


class _ProbeCache(ReplayCache):
    """The replay cache of the original run: a look-up of a redrawn call is a fork point."""

    __slots__ = ("snap",)

    def __init__(self, snap: _Snap, template: ReplayCache) -> None:
        super().__init__()
        self.snap = snap
        copied = template.copy()
        self._entries = copied._entries
        self._release = copied._release

    def _look(self, key: object) -> None:
        s = self.snap
        if s.pending and isinstance(key, CallKey):
            found = s.by_key.get(key.id)
            if found:
                s.split(found)

    def __contains__(self, key: object) -> bool:
        self._look(key)
        return super().__contains__(key)

    def llm(self, key: CallKey) -> Any:
        """The recorded answer, after the forks that draw this call again have their copy."""
        self._look(key)
        return super().llm(key)


class _SnapRuntime(Runtime):
    """A runtime whose copies record the fork's own header, and whose end is a fork point."""

    snap: _Snap

    def _finish(self, header: Any) -> Any:
        s = self.snap
        if s.child is None and s.pending:
            s.split(sorted(s.pending))  # forks that never act: their copy starts here
        if s.child is not None:
            header = self.header()  # interventions, backend and meta.fork of this fork
        return super()._finish(header)


def run_snapshots(
    build: Callable[..., tuple[Runtime, Any]],
    backend: Any,
    template: ReplayCache,
    jobs: Sequence[SnapJob],
    report: Callable[[Any], Any],
    result: Callable[[Runtime, Any, SnapJob], Any],
) -> dict[int, tuple[str, Any]] | None:
    """Run every job from a snapshot: ``{job: ("ok", report) | ("err", why)}``.

    ``build(runtime_class, backend, interventions, cache)`` makes the runtime and root of the
    original run; ``result(rt, trace, job)`` is what ``report`` scores in a copy. ``None``
    when the run cannot be served this way (the caller re-executes every job in full).
    """
    if not jobs or not available() or type(backend) is not SimBackend:
        return None
    if not all(supported(job.interventions) for job in jobs):
        return None
    snap = _Snap(jobs, report)
    rt, root = build(_SnapRuntime, backend, [_Probe(snap)], _ProbeCache(snap, template))
    if rt.guard is not None:
        return None
    assert isinstance(rt, _SnapRuntime)
    rt.snap = snap
    snap.rt = rt
    before = _own_cpu()

    async def go() -> Any:
        try:
            trace = await rt.run(root)
        except BaseException as err:
            if snap.child is not None:
                snap.finish_child(None, err)
            raise
        if snap.child is not None:
            snap.finish_child(result(rt, trace, jobs[snap.child]), None)
        return trace

    loop = VirtualTimeLoop(0.5)
    snap.loop = loop
    try:
        loop.run_until_complete(go())
    except Exception:
        pass  # forks without a report are re-executed in full by the caller
    finally:
        if snap.child is not None:  # a copy never returns into the caller
            os._exit(3)
        gc.unfreeze()
        _shutdown(loop)
    after = _own_cpu()
    _LAST.clear()
    _LAST.update(
        original_cpu_s=after - before,
        copy_cpu_s=[snap.copy_cpu[j] for j in sorted(snap.copy_cpu)],
        copies=len(snap.copy_cpu),
    )
    return snap.results


# ---------------------------------------------------------------------- a helper process
#: The code a helper interpreter runs: read the request from stdin, answer through ``fd``.
_HELPER_CODE = "import sys; from orchestrace.runtime._snapshot import _helper_main; _helper_main()"


def in_helper(payload: dict[str, Any], *, quiet: bool = False) -> dict[int, Any] | None:
    """:func:`~orchestrace.runtime.replay.snapshot_forks` in a fresh single-threaded interpreter.

    For a process with other threads (a notebook kernel, a Ray driver, a server), which must
    not copy itself, or one that holds so much memory that its copies cost more than starting
    a helper (:func:`helper_is_cheaper`): a new interpreter (``sys.executable``, this
    process's ``sys.path``) receives ``payload`` pickled (the trace, the jobs, the report
    function), runs the original run and its copies, and sends back ``{job: report}``.
    ``None`` when the payload cannot be sent or the helper fails: the caller then re-executes
    every fork in full (a warning says why), or with ``quiet``, serves the forks itself (no
    warning). What the copies print goes to this process's standard output and error; the
    warnings they give are shown here, once.
    """
    import subprocess  # noqa: PLC0415  only a process that cannot copy itself cheaply starts a helper

    try:
        # the path first: the helper sets it before it unpickles what refers to modules
        data = pickle.dumps(list(sys.path)) + pickle.dumps(
            payload, protocol=pickle.HIGHEST_PROTOCOL
        )
    except Exception as err:
        _fallback(
            f"the forks cannot be sent to a helper process ({type(err).__name__}: {err})", quiet
        )
        return None
    r, w = os.pipe()
    _flush()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _HELPER_CODE, str(w)],
            stdin=subprocess.PIPE,
            pass_fds=(w,),
            close_fds=True,
        )
    except OSError as err:
        os.close(r)
        os.close(w)
        _fallback(f"a helper process cannot start ({err})", quiet)
        return None
    os.close(w)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)

    reader = threading.Thread(target=read, name="orchestrace-snapshot-helper", daemon=True)
    reader.start()
    try:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(data)
            proc.stdin.close()
        status = proc.wait()
    finally:
        reader.join()
        os.close(r)
    try:
        kind, got, warned = pickle.loads(b"".join(chunks))
    except Exception:
        _fallback(f"the helper process ended with status {status} and no results", quiet)
        return None
    if kind != "ok":
        _fallback(f"the helper process failed: {got}", quiet)
        return None
    for message, category, filename, lineno in warned:
        warnings.warn_explicit(message, category, filename, lineno)
    stats = got.pop(-1, None)
    if isinstance(stats, dict):
        _LAST.clear()
        _LAST.update(stats)
    if not got and payload.get("jobs"):
        _fallback(
            "the helper process served none of the forks (it could not copy itself: a module "
            "it imported may start a thread)",
            quiet,
        )
        return None
    return dict(got)


def _fallback(why: str, quiet: bool) -> None:
    if quiet:  # the caller serves the forks itself
        return
    warnings.warn(
        f"snapshot forks: {why}; every fork is re-executed in full in this process instead "
        "(same results, more time)",
        RuntimeWarning,
        stacklevel=4,
    )


def _helper_main() -> None:
    """The helper interpreter: run the request read from stdin, send the results to ``fd``."""
    fd = int(sys.argv[1])
    out: tuple[str, Any, list[tuple[str, Any, str, int]]]
    try:
        sys.path[:] = pickle.load(sys.stdin.buffer)
        payload = pickle.load(sys.stdin.buffer)
        from orchestrace.runtime import replay  # noqa: PLC0415  import cycle: replay imports this module

        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("default")
            got = replay._snapshot_forks_here(**payload)
        got[-1] = last_stats()
        shown = [(str(w.message), w.category, w.filename, w.lineno) for w in seen]
        out = ("ok", got, shown)
        data = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException as err:
        data = pickle.dumps(("err", f"{type(err).__name__}: {err}", []))
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    _flush()
    os._exit(0)
