"""Deterministic replay and counterfactual forks.

Every nondeterministic input of a run (LLM answers, tool outputs) is recorded in the trace under
a key of (agent, hash of the call's inputs, how many times the agent made that exact call): an
``llm_call`` event keeps the answer text, parsed answer, tokens, cost and latency (``dur``); a
``tool_call``/``tool_result`` pair keeps the output. :func:`replay` rebuilds the run's
:class:`~orchestrace.runtime.cache.ReplayCache` from the trace, re-executes the run (a
topology's, or a learning environment's episode with its recorded decisions) and reproduces it
exactly (same events, edges, ids) for runs on virtual time. On a trace recorded on
wall-clock time (a served model answering concurrent calls) every cached answer is released
at its recorded end time, so calls complete, and their events are numbered, in the recorded
order: the replay has the same events and ids, with timing of its own (:func:`reproduces`).

:func:`fork` re-executes with interventions (:mod:`orchestrace.runtime.interventions`, all
re-exported here): drop, replace or resample a message, stop an agent at a step or an event
(stop-at), force a decision (spawn one more worker). Calls whose inputs did not change come from the cache; only
calls downstream of the change reach the backend, and :class:`ForkResult` says how many did.
:func:`fork_many` runs many forks of one trace: on virtual time with the simulator answering,
each is copied from one execution of the run at its first point of effect and re-executes only
what follows (:func:`snapshot_forks`), with the result a full re-execution gives.
That backend is the one the trace records (``meta.backend``: name and the options that rebuild
it, never a secret), unless the caller names another (``backend=``; ``--backend`` on the command
line). A trace that does not record enough to rebuild its backend, or whose backend cannot answer
(server down, model missing), is refused with an error naming ``--backend``: the simulator never
stands in silently (:mod:`orchestrace.runtime.fork_backend`). The forked trace says who answered each changed call and what it is a fork of.

Neither ever runs a recorded answer as code. A re-executed run whose final answer equals the
recorded one reuses the verdict recorded with it (``meta.result.verdict``). A new answer is
checked by the task's checker when that only compares values; for a task whose check runs
the answer as code (``humaneval-v0``) its verdict is unknown (``passed: None``, the reason says
why) unless ``rerun_checks=True``, which checks it in the task's sandbox.

:func:`replay`, :func:`fork` and :func:`fork_many` build their runs through one ``_runtime``
(:mod:`orchestrace.runtime._rerun`, with the replay that checks a trace and
:class:`ForkResult`) and share :class:`ForkSetup`; ``snapshot_forks`` reads its thresholds
from here. The other parts stand apart: the recorded decisions and spawn-one-more in
:mod:`orchestrace.runtime._decisions`, copying a run from snapshots in
:mod:`orchestrace.runtime._snapshot`, the answering backend in
:mod:`orchestrace.runtime.fork_backend`, the interventions in
:mod:`orchestrace.runtime.interventions`.

Example:
    >>> from orchestrace.runtime import run
    >>> original = run("debate", "arith", agents=3, seed=1, task_size=16).trace
    >>> replay(original).trace == original
    True
    >>> msg = next(e for e in original.events if e.type == "message")
    >>> f = fork(original, [DropMessage.of(original, msg.id)])
    >>> 0 < f.backend_calls < f.cache_hits
    True
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from orchestrace._safe import display
from orchestrace.errors import ConfigError
from orchestrace.runtime import _snapshot
from orchestrace.runtime._decisions import _DecisionLog, recorded_decisions, spawn_one_more
from orchestrace.runtime._intervention_targets import check_targets, trace_agents
from orchestrace.runtime._rerun import (
    ForkResult,
    _replay,
    _runtime,
    check_replayable,
    reproduces,
    wall_clock,
)
from orchestrace.runtime.backends.base import (
    Backend,
    backend_spec,
)
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.cache import ReplayCache
from orchestrace.runtime.clock import run_virtual
from orchestrace.runtime.core import Runtime
from orchestrace.runtime.fork_backend import OnVirtualTime, backend_for, check_answered, how
from orchestrace.runtime.interventions import (
    DropMessage,
    ForceDecision,
    ForceStop,
    Intervention,
    RedrawDownstream,
    ReplaceMessage,
    ResampleMessage,
    Silence,
    TraceIndex,
    check_interventions,
    message_readers,
    sender_call,
    shown_trace,
)
from orchestrace.tasks import Task, _checking, make_task
from orchestrace.trace.model import Trace

_ENC = msgspec.json.Encoder(order="deterministic")

__all__ = [
    "HELPER_MIN_WORK",
    "SNAPSHOT_MIN_EVENTS",
    "DropMessage",
    "ForceDecision",
    "ForceStop",
    "ForkResult",
    "ForkSetup",
    "Intervention",
    "RedrawDownstream",
    "ReplaceMessage",
    "ReplayCache",
    "ResampleMessage",
    "Silence",
    "backend_for",
    "cache_from_trace",
    "check_replayable",
    "fork",
    "fork_many",
    "message_readers",
    "recorded_decisions",
    "replay",
    "reproduces",
    "sender_call",
    "snapshot_forks",
    "spawn_one_more",
]


# ---------------------------------------------------------------------- cache and backends
def cache_from_trace(trace: Trace) -> ReplayCache:
    """Every recorded nondeterministic input of ``trace``, by replay key.

    The same as :meth:`ReplayCache.from_trace`.
    """
    return ReplayCache.from_trace(trace)


def replay(trace: Trace, *, rerun_checks: bool = False) -> ForkResult:
    """Re-execute ``trace`` from its recorded inputs alone (no backend is called).

    The header of the replayed trace records the backend the trace records (none answers).

    Args:
        trace: A trace recorded by the runtime.
        rerun_checks: Check the final answer again even where that runs it as code (in the
            task's sandbox); by default the recorded verdict is reused.

    Raises:
        TraceError: The trace lacks the run description, or the re-execution asks for a call
            the trace does not hold (the message says which).
        ConfigError: ``trace`` is not a Trace.
    """
    check_replayable(trace)
    return _replay(trace, ReplayCache.from_trace(trace), rerun_checks)


class ForkSetup:
    """What every fork of one trace shares: the checked trace and its recorded answers.

    Built once per batch of forks (a credit computation); each fork copies the cache (its
    entries are immutable, so a copy is a dict copy) instead of rebuilding it from the trace.

    Example:
        >>> from orchestrace.runtime import run
        >>> tr = run("debate", "arith", agents=2, seed=1, task_size=8).trace
        >>> len(ForkSetup(tr).cache) == len(ReplayCache.from_trace(tr))
        True
    """

    def __init__(self, trace: Trace) -> None:
        check_replayable(trace)
        self.trace = trace
        self.cache = ReplayCache.from_trace(trace)
        self._task: Task | None = None
        self._agents: frozenset[Any] | None = None
        self._index: TraceIndex | None = None
        self._verified = False
        self._decisions: frozenset[tuple[str, int, str]] | None = None  # (agent, step, name)

    def verify(self) -> None:
        """Check, once, that the trace replays exactly from its recorded calls.

        A fork takes the recorded answer of every call its interventions leave unchanged. In
        a trace that does not replay (edited, or recorded by another version), some of those
        calls would be answered afresh, as if the interventions had changed them, and the
        fork's result would be credited to them.

        Raises:
            TraceError: The replay diverged (the message counts the calls not in the trace).
        """
        if not self._verified:
            log = _DecisionLog()
            _replay(self.trace, self.cache.copy(), False, self, exact=True, watch=[log])
            self._decisions = frozenset((a, s, n) for a, s, n, _ in log.seen)
            self._verified = True

    def decided(self, agent: str, name: str, step: int | None) -> bool:
        """Whether the recorded run took decision ``name`` of ``agent`` (in ``step``, if given).

        Known once the trace is verified (:meth:`verify`); ``True`` before.
        """
        if self._decisions is None:
            return True
        return any(
            a == agent and n == name and (step is None or s == step) for a, s, n in self._decisions
        )

    def index(self) -> TraceIndex:
        """Look-ups of the trace's messages (built once)."""
        if self._index is None:
            self._index = TraceIndex(self.trace)
        return self._index

    def agents(self) -> frozenset[Any]:
        """The trace's agents (found once): what an intervention may name."""
        if self._agents is None:
            self._agents = trace_agents(self.trace)
        return self._agents

    def task(self) -> Task:
        """A fresh instance of the trace's task: a copy of one built once (as built, unused)."""
        if self._task is None:
            spec = self.trace.meta["task"]
            self._task = make_task(
                spec["name"],
                seed=spec["seed"],
                size=spec["size"],
                source=f"trace {shown_trace(self.trace)}: meta.task",
            )
        return copy.deepcopy(self._task)

    def fork(
        self, interventions: Sequence[Intervention], backend: Backend, rerun_checks: bool = False
    ) -> ForkResult:
        """:func:`fork` of the trace with ``backend`` (an object) answering changed calls."""
        return _fork_with(self, interventions, backend, rerun_checks)


def _check_decision(interventions: Sequence[Intervention], setup: ForkSetup) -> None:
    """Refuse a fork whose only intervention forces a decision the recorded run never took.

    (With other interventions that decision might be taken in the fork.)
    """
    if len(interventions) != 1 or not isinstance(interventions[0], ForceDecision):
        return
    iv = interventions[0]
    if not setup.decided(iv.agent, iv.name, iv.step):
        at = "" if iv.step is None else f" in step {iv.step}"
        raise ConfigError(
            f"ForceDecision {iv.name!r} of {display(iv.agent, 60)!r}{at}: the recorded run of "
            f"trace {shown_trace(setup.trace)} never takes that decision, so the fork would "
            "change nothing; recorded_decisions(trace) lists the ones it takes"
        )


def _jobs(jobs: Any) -> list[tuple[list[Intervention], Any]]:
    """``jobs`` checked: each an ``(interventions, backend)`` pair (a ConfigError names which)."""
    if isinstance(jobs, str | bytes) or not hasattr(jobs, "__iter__"):
        raise ConfigError(
            f"jobs must be a list of (interventions, backend), got {type(jobs).__name__}"
        )
    out = []
    for i, job in enumerate(jobs):
        if not (isinstance(job, tuple | list) and len(job) == 2):
            raise ConfigError(
                f"jobs[{i}] must be an (interventions, backend) pair, got {job!r:.80}"
            )
        if not isinstance(job[1], Backend):
            raise ConfigError(
                f"jobs[{i}]: the backend is a {type(job[1]).__name__}, not a backend object"
            )
        out.append((check_interventions(job[0], duck_typed=False), job[1]))
    return out


def _fork_of(
    trace: Trace, interventions: Sequence[Intervention], answering: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    described = [iv.describe() for iv in interventions]
    recorded = trace.meta.get("backend") if isinstance(trace.meta, dict) else None
    return described, {
        "of": trace.trace_id,
        "interventions": described,
        "backend": backend_spec(answering),
        "recorded_backend": recorded if isinstance(recorded, dict) else None,
    }


def _fork_with(
    setup: ForkSetup,
    interventions: Sequence[Intervention],
    answering: Backend,
    rerun_checks: bool,
) -> ForkResult:
    """One fork, re-executed in full (the cache copied from ``setup``)."""
    interventions = check_interventions(interventions, duck_typed=False)
    trace = setup.trace
    check_targets(interventions, trace, setup.agents(), setup.index())
    setup.verify()
    _check_decision(interventions, setup)
    cache = setup.cache.copy()
    for iv in interventions:
        cache.redraw(iv.redraws())
    described, fork_of = _fork_of(trace, interventions, answering)
    # a fork runs on virtual time whatever answers it: waits for a dropped message end at
    # once; a real backend answers each changed call while the virtual clock stands still
    runner: Any = (
        answering if answering.virtual else OnVirtualTime(answering, how(trace, answering))
    )
    rt, root = _runtime(trace, runner, interventions, cache, rerun_checks, fork_of, setup=setup)

    async def go() -> Trace:
        try:
            return await rt.run(root)
        finally:
            await runner.aclose()

    new = run_virtual(go())
    if isinstance(runner, OnVirtualTime) and runner.failure is not None:
        raise runner.failure
    if not answering.virtual:
        check_answered(trace, new, answering)
    return ForkResult(new, rt.backend_calls, rt.cache_hits, described)


def fork(
    trace: Trace,
    interventions: Sequence[Intervention],
    backend: Backend | str | None = None,
    *,
    backend_options: Mapping[str, Any] | None = None,
    rerun_checks: bool = False,
) -> ForkResult:
    """Re-execute ``trace`` with ``interventions``; unchanged calls come from the cache.

    Calls whose inputs changed reach the backend the trace records (``meta.backend``, rebuilt
    with :func:`backend_for`) unless ``backend`` says otherwise; the simulator is never used in
    its place. The forked trace records who answered each changed call
    (``llm_call`` ``attrs.answered_by``), the backend that answered in ``meta.backend``, and
    what it is a fork of in ``meta.fork`` (``of``: the original trace id, ``interventions``,
    ``backend``, ``recorded_backend``).

    Args:
        trace: A trace recorded by the runtime.
        interventions: What to change.
        backend: Answers calls whose inputs changed: ``None`` (the recorded backend), a
            backend name (``sim``, ``openai``, ``hf``), or a backend object.
        backend_options: Options of a backend given by name (or replacing recorded ones),
            e.g. ``{"base_url": ..., "model": ...}``.
        rerun_checks: Check a new final answer even where that runs it as code (in the task's
            sandbox); by default its verdict is then unknown.

    Raises:
        TraceError: The trace cannot be re-executed.
        ConfigError: The recorded backend cannot be rebuilt or cannot answer (the message
            names ``--backend``), or a real backend answered none of the changed calls.
    """
    answering = backend_for(trace, backend, **dict(backend_options or {}))
    return _fork_with(ForkSetup(trace), interventions, answering, rerun_checks)


def fork_many(
    trace: Trace,
    jobs: Sequence[tuple[Sequence[Intervention], Backend]],
    *,
    rerun_checks: bool = False,
    report: Callable[[ForkResult], Any] | None = None,
    setup: ForkSetup | None = None,
    snapshots: bool = True,
) -> list[Any]:
    """Many forks of one trace: ``report(result)`` of each job ``(interventions, backend)``.

    The result of each fork is the one :func:`fork` gives (the same trace, byte for byte),
    but forks are not all re-executed from the start: on virtual time with the simulator
    answering, the run is executed once and copied (a POSIX process fork) at the first point
    where each fork's interventions act or its redrawn calls are looked up, so each fork costs
    the part of the run after that point (:mod:`orchestrace.runtime._snapshot`). Where that
    cannot be shown exact (a real backend, a trace on wall-clock time, defenses, a learning
    environment's episode, an intervention of another kind, threads in this process), or a
    copy fails, the fork is re-executed in full, so the results never depend on the path.

    Args:
        trace: A trace recorded by the runtime.
        jobs: Each fork's interventions and the backend object answering its changed calls.
        rerun_checks: As for :func:`fork`.
        report: What to keep of each fork (default: the :class:`ForkResult`); it must return
            something picklable. It runs where the fork ran: for a fork served from a
            snapshot, in that snapshot's copy of this process (what it records there stays
            there). An exception it raises there sends the fork to a full re-execution here,
            so it is raised here, as in a loop of :func:`fork` calls. A ``report`` with a
            ``prepare(trace)`` method has it called once before the copies are made (to
            build what scoring needs once, not once per copy).
        setup: The shared set-up of ``trace`` (default: built here).
        snapshots: ``False`` re-executes every fork in full (the reference path); by
            default forks of a trace of at least :data:`SNAPSHOT_MIN_EVENTS` events are
            copied from snapshots where that is exact.

    Example:
        >>> from orchestrace.runtime import run
        >>> tr = run("debate", "arith", agents=3, seed=1, rounds=1, task_size=16).trace
        >>> b = backend_for(tr, seed_offset=1)
        >>> msgs = [e.id for e in tr.events if e.type == "message"][:3]
        >>> jobs = [([DropMessage.of(tr, m)], b) for m in msgs]
        >>> fast = fork_many(tr, jobs, report=lambda r: _ENC.encode(r.trace))
        >>> fast == fork_many(tr, jobs, report=lambda r: _ENC.encode(r.trace), snapshots=False)
        True
    """
    setup = setup if setup is not None else ForkSetup(trace)
    jobs = _jobs(jobs)
    for todo, _ in jobs:
        check_targets(todo, setup.trace, setup.agents(), setup.index())
    if jobs:
        setup.verify()  # (a snapshot's original run then never meets a call the trace lacks)
    for todo, _ in jobs:
        _check_decision(todo, setup)
    keep: Callable[[ForkResult], Any] = report if report is not None else _whole
    served = snapshot_forks(setup, jobs, keep, rerun_checks=rerun_checks) if snapshots else {}
    return [
        served[i] if i in served else keep(_fork_with(setup, todo, b, rerun_checks))
        for i, (todo, b) in enumerate(jobs)
    ]


def _whole(res: ForkResult) -> ForkResult:
    """A fork's whole result (module-level: a helper interpreter receives it pickled)."""
    return res


#: Fewest events of a trace whose forks :func:`fork_many` copies from snapshots. Measured on
#: the simulator: copying the process costs about 5 ms of CPU, as much as re-running a run of
#: a few hundred events; a 4,654-event swarm re-runs in about 120 ms.
SNAPSHOT_MIN_EVENTS = 1000


def snapshot_forks(
    setup: ForkSetup,
    jobs: Sequence[tuple[Sequence[Intervention], Backend]],
    report: Callable[[ForkResult], Any],
    *,
    rerun_checks: bool = False,
    min_events: int | None = None,
    helper_min_work: int | None = None,
) -> dict[int, Any]:
    """``report(result)`` of the jobs that snapshots serve exactly, by job index.

    The part of :func:`fork_many` that forks from snapshots; a job left out (not servable, or
    its copy failed, or ``report`` raised in it) is for the caller to re-execute in full. A
    trace with fewer than ``min_events`` events (default :data:`SNAPSHOT_MIN_EVENTS`) is
    left to full re-execution: copying a process costs more than re-running a short run.

    A process with other threads (a notebook kernel, a Ray driver, a server) must not copy
    itself: when the servable forks times the trace's events reach ``helper_min_work``
    (default :data:`HELPER_MIN_WORK`), the original run and its copies then run in a fresh
    single-threaded interpreter, which receives the trace, the jobs and ``report`` pickled
    (``report`` must be importable by reference, e.g. a module-level function) and sends back
    the reports; if it cannot start or fails, a warning says so and every fork is left to
    full re-execution here. A process that can copy itself but holds much memory (torch
    imported, a model loaded) has the same helper make the copies when there are enough of
    them to repay starting it (:func:`~orchestrace.runtime._snapshot.helper_is_cheaper`: a
    copy costs about 45 us per MiB the process holds) and ``report`` says its result depends
    on its arguments alone (an attribute ``portable = True``, as the credit methods' scorer
    of the default reward has); it makes them itself otherwise, or when the helper serves
    none of them.

    Example:
        >>> from orchestrace.runtime import run
        >>> tr = run("swarm", "arith", agents=3, seed=1, task_size=8).trace
        >>> m = next(e.id for e in tr.events if e.type == "message")
        >>> jobs = [([DropMessage.of(tr, m)], backend_for(tr))]
        >>> got = snapshot_forks(ForkSetup(tr), jobs, len, min_events=0)
        >>> list(got) in ([0], [])  # [] where this process cannot copy itself
        True
    """
    trace = setup.trace
    least = SNAPSHOT_MIN_EVENTS if min_events is None else min_events
    if wall_clock(trace) or _episode(trace) or len(trace.events) < least:
        return {}
    servable = [
        i for i, (ivs, b) in enumerate(jobs) if type(b) is SimBackend and _snapshot.supported(ivs)
    ]
    if _snapshot.available():
        # a copy costs in proportion to what this process holds: a large one (torch
        # imported, a model loaded) has a fresh interpreter make the copies when enough
        # copies repay starting it, for a report whose result depends on its arguments alone
        # (``portable``: a fresh interpreter computes what this process would; a caller's
        # own function may read state of this process), and makes them itself if that helper
        # serves none of them
        if (
            getattr(report, "portable", False) is True
            and _snapshot.helper_is_cheaper(len(servable), len(trace.events))
            and _by_reference(report)
        ):
            got = _snapshot.in_helper(
                _helper_payload(trace, jobs, servable, report, rerun_checks), quiet=True
            )
            if got:
                return {servable[n]: v for n, v in got.items()}
        return _snapshot_forks_here(setup, jobs, report, rerun_checks)
    if not _snapshot.can_fork():
        return _snapshot_forks_here(setup, jobs, report, rerun_checks)
    # other threads run here: this process must not copy itself; a fresh one-thread
    # interpreter serves the forks when they re-execute enough to repay starting it
    helper_least = HELPER_MIN_WORK if helper_min_work is None else helper_min_work
    if len(servable) < 2 or len(servable) * len(trace.events) < helper_least:
        return {}
    got = _snapshot.in_helper(_helper_payload(trace, jobs, servable, report, rerun_checks))
    return {} if got is None else {servable[n]: v for n, v in got.items()}


def _helper_payload(
    trace: Trace,
    jobs: Sequence[tuple[Sequence[Intervention], Backend]],
    servable: Sequence[int],
    report: Callable[[ForkResult], Any],
    rerun_checks: bool,
) -> dict[str, Any]:
    """What a helper interpreter needs to serve the ``servable`` jobs."""
    return {
        "setup": trace,
        "jobs": [jobs[i] for i in servable],
        "report": report,
        "rerun_checks": rerun_checks,
    }


def _by_reference(report: Any) -> bool:
    """Whether ``report`` can be sent to another interpreter (pickled, e.g. a module function)."""
    try:
        pickle.dumps(report)
    except Exception:
        return False
    return True


#: Least work (servable forks times events of the trace) for which :func:`snapshot_forks`
#: starts a helper interpreter when this process has other threads. Measured on the
#: simulator (all-message credit of swarms, 2-core VM): starting the interpreter and
#: importing the runtime costs about 0.33 s of CPU; 61 forks of 626 events (38,000) lost
#: (0.75 s vs 0.64 s re-executing each in full), 91 forks of 936 events (85,000) gained
#: (1.07 s vs 1.35 s).
HELPER_MIN_WORK = 60_000


def _snapshot_forks_here(
    setup: ForkSetup | Trace,
    jobs: Sequence[tuple[Sequence[Intervention], Backend]],
    report: Callable[[ForkResult], Any],
    rerun_checks: bool,
) -> dict[int, Any]:
    """:func:`snapshot_forks` in this process (which must be able to copy itself)."""
    if not isinstance(setup, ForkSetup):
        setup = ForkSetup(setup)
    trace = setup.trace
    # what every copy's report needs, built once before the copies (when there will be
    # copies): the checking task that scores a run, whatever ``report`` is, and what
    # ``report.prepare`` names
    if _snapshot.available() and any(type(b) is SimBackend for _, b in jobs):
        _checking.prepare_checking(trace.meta, f"trace {display(trace.trace_id, 60)}: meta.task")
        prepare = getattr(report, "prepare", None)
        if callable(prepare):
            prepare(trace)
    out: dict[int, Any] = {}
    groups: dict[int, list[int]] = {}
    for i, (_, b) in enumerate(jobs):
        groups.setdefault(id(b), []).append(i)
    for idx in groups.values():
        answering = jobs[idx[0]][1]
        snap_jobs = []
        for i in idx:
            ivs = list(jobs[i][0])
            described, fork_of = _fork_of(trace, ivs, answering)
            redraws = frozenset().union(*(iv.redraws() for iv in ivs))
            snap_jobs.append(_snapshot.SnapJob(ivs, fork_of, described, redraws))

        def build(
            cls: type[Runtime], backend: Any, ivs: Sequence[Any], cache: ReplayCache
        ) -> tuple[Runtime, Any]:
            return _runtime(
                trace, backend, ivs, cache, rerun_checks, {}, runtime_class=cls, setup=setup
            )

        def result(rt: Runtime, new: Trace, job: _snapshot.SnapJob) -> ForkResult:
            return ForkResult(new, rt.backend_calls, rt.cache_hits, job.described)

        served = _snapshot.run_snapshots(build, answering, setup.cache, snap_jobs, report, result)
        if served is None:
            continue
        for n, i in enumerate(idx):
            got = served.get(n)
            if got is not None and got[0] == "ok":
                out[i] = got[1]
    return out


def _episode(trace: Trace) -> bool:
    """Whether ``trace`` is a learning environment's episode (its runner names an env)."""
    runner = trace.meta.get("runner") if isinstance(trace.meta, dict) else None
    return not isinstance(runner, dict) or "env" in runner
