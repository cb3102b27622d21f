"""Forks from snapshots are exact: the same trace (bytes), calls and reward as a full re-run.

Every intervention kind (drop, replace, resample, redraw downstream, stop-at, spawn-one-more,
silence) on every message, turn or agent of runs of several topologies and seeds, on two
sample backends; credit tables computed both ways are identical; what snapshots cannot serve
exactly is re-executed in full.
"""

import contextlib
import os
import subprocess
import sys
import threading
import warnings

import msgspec
import pytest

import orchestrace.runtime.replay as replay
from orchestrace import TraceError
from orchestrace.credit import CounterfactualMessageCredit, LeaveOneOutCredit
from orchestrace.credit._draws import redraw
from orchestrace.credit.target import counterfactual_reward
from orchestrace.runtime import _snapshot, run
from orchestrace.runtime._rerun import _StrictReplay
from orchestrace.runtime.interventions import TraceIndex
from orchestrace.runtime.replay import (
    DropMessage,
    ForceDecision,
    ForceStop,
    ForkSetup,
    Intervention,
    RedrawDownstream,
    ReplaceMessage,
    ResampleMessage,
    Silence,
    backend_for,
    fork_many,
    snapshot_forks,
)

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")


#: Set in the fresh interpreter that runs a test for a process that has other threads.
_CHILD = "ORCHESTRACE_SNAPSHOT_TEST_IN_CHILD"


#: This file's run in a fresh interpreter, made once per test process that needs it:
#: (exit status, output, node ids that passed).
_CHILD_RUN: dict[str, tuple[int, str, set[str]]] = {}


def _ran_in_fresh_interpreter(request) -> bool:
    """Whether the test ran (and passed) in a fresh interpreter instead of this process.

    The whole file runs there once per test process (not one interpreter per test), and each
    test here checks that it passed there; they are never skipped. Two reasons: snapshots
    are refused while other threads run (a shared Ray instance, a monitor, a server), and
    copying a process costs about 50 microseconds per MiB it holds (the page tables and the
    pages written after the copy): a test worker that has imported torch and run hundreds of
    tests holds about 700 MiB, which made this file's forks three times as costly as in a
    fresh interpreter (41 s of CPU against 13 s in one run of the suite).
    """
    if os.environ.get(_CHILD):
        if not _snapshot.available():
            names = sorted(
                t.name for t in threading.enumerate() if t is not threading.main_thread()
            )
            pytest.fail(f"a fresh interpreter has other threads, snapshots refused: {names[:5]}")
        return False
    names = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())
    path = request.node.nodeid.split("::", 1)[0]
    if path not in _CHILD_RUN:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE"))}
        env[_CHILD] = "1"
        cmd = [
            sys.executable,
            *("-m", "pytest", path, "-q", "-rA", "-p", "no:cacheprovider"),
            *("-p", "no:xdist", "-p", "no:randomly"),
        ]
        opt = request.config.option
        if getattr(opt, "markexpr", ""):  # the same selection as this session's
            cmd += ["-m", opt.markexpr]
        if getattr(opt, "keyword", ""):
            cmd += ["-k", opt.keyword]
        done = subprocess.run(
            cmd,
            cwd=request.config.rootpath,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        out = done.stdout + done.stderr
        passed = {
            line[len("PASSED ") :].strip()
            for line in out.splitlines()
            if line.startswith("PASSED ")
        }
        _CHILD_RUN[path] = (done.returncode, out, passed)
    code, out, passed = _CHILD_RUN[path]
    here = f"in a fresh interpreter (threads here: {names[:5]})"
    assert request.node.nodeid in passed, (
        f"{request.node.nodeid} did not pass {here}:\n{out[-6000:]}"
    )
    assert code == 0 and "skipped" not in out, f"{here}:\n{out[-6000:]}"
    return True


_ENC = msgspec.json.Encoder(order="deterministic")

RUNS = {
    "swarm-1": ("swarm", "wide-search", {"agents": 12, "seed": 1, "task_size": 48, "gossip": 0.5}),
    "swarm-4": ("swarm", "arith", {"agents": 6, "seed": 4, "task_size": 24, "gossip": 0.9}),
    "debate-2": ("debate", "arith", {"agents": 4, "seed": 2, "rounds": 2, "task_size": 16}),
    "debate-5": ("debate", "arith", {"agents": 3, "seed": 5, "rounds": 3, "task_size": 16}),
    "hierarchical-1": ("hierarchical", "arith", {"agents": 6, "seed": 1, "task_size": 24}),
    "hierarchical-3": ("hierarchical", "arith", {"agents": 4, "seed": 3, "task_size": 16}),
    "centralized-0": ("centralized", "arith", {"agents": 4, "seed": 0, "task_size": 16}),
    "centralized-7": ("centralized", "arith", {"agents": 5, "seed": 7, "task_size": 20}),
}


#: The quick runs; every other one is checked in the slow suite.
QUICK = ("swarm-4", "centralized-0")


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(name, marks=() if name in QUICK else pytest.mark.slow) for name in sorted(RUNS)
    ],
)
def trace(request):
    topology, task, kw = RUNS[request.param]
    return run(topology, task, **kw).trace


def _jobs(tr):
    """Every intervention kind the runtime has, on every unit it applies to."""
    ix = TraceIndex(tr)
    jobs = []
    for e in tr.events:
        if e.type == "message":
            drop = DropMessage.of(tr, e.id, ix)
            kept = RedrawDownstream.of(tr, e.id, ix)
            jobs += [
                [drop],
                [kept],
                [kept, drop],
                [kept, ReplaceMessage.parsed(tr, e.id, "ANSWER: 7", ix)],
                [ReplaceMessage.of(tr, e.id, "something else")],
                [redraw(kept.keys), drop],  # a redraw-only kind of the credit methods
            ]
            with contextlib.suppress(TraceError):  # no LLM call produced it: nothing to resample
                jobs.append([ResampleMessage.of(tr, e.id)])
    firsts = {}
    for e in tr.events:
        if e.type != "tool_result" and e.step is not None:
            firsts.setdefault((e.agent, int(e.step)), e.id)
    for (agent, step), eid in firsts.items():
        jobs.append([RedrawDownstream.after(tr, eid), ForceStop(step, agent, eid)])
        jobs.append([ForceStop(step, agent)])
    for agent, step, name, value in replay.recorded_decisions(tr):
        if name == "n_workers":
            jobs.append([ForceDecision(name, value + 1, agent, step if step >= 0 else None)])
            jobs.append([ForceDecision(name, max(1, value - 1), agent)])
    jobs += [[Silence(a)] for a in sorted({e.agent for e in tr.events})]
    jobs.append([])  # no intervention: the replay with a fork's header
    return jobs


def _report(res):
    return (
        res.backend_calls,
        res.cache_hits,
        _ENC.encode(res.trace),
        counterfactual_reward(res.trace),
    )


def _message_drops(name, first=None):
    """The run ``name`` and a fork dropping each of its messages (the first ``first``)."""
    topology, task, opts = RUNS[name]
    tr = run(topology, task, **opts).trace
    b = backend_for(tr, seed_offset=1)
    msgs = [e.id for e in tr.events if e.type == "message"][:first]
    return tr, [([DropMessage.of(tr, m)], b) for m in msgs]


def test_every_fork_from_a_snapshot_equals_its_full_re_execution(trace, request):
    if _ran_in_fresh_interpreter(request):
        return
    backends = [backend_for(trace, seed_offset=k) for k in (1, 2)]
    kinds = _jobs(trace)
    jobs = [(ivs, backends[i % 2]) for i, ivs in enumerate(kinds)]
    setup = ForkSetup(trace)
    served = snapshot_forks(setup, jobs, _report, min_events=0)
    assert sorted(served) == list(range(len(jobs)))  # every job came from a snapshot
    full = fork_many(trace, jobs, report=_report, setup=setup, snapshots=False)
    for i, want in enumerate(full):
        assert served[i] == want, (i, [iv.describe() for iv in jobs[i][0]])
    assert any(got[0] > 0 for got in served.values())  # some fork reached the backend


@pytest.mark.parametrize(
    "kw",
    [
        {"intervention": "drop"},
        pytest.param({"intervention": "drop", "samples": 2}, marks=pytest.mark.slow),
        pytest.param(
            {"intervention": "replace", "replace_with": "ANSWER: 3"}, marks=pytest.mark.slow
        ),
        pytest.param({"intervention": "resample", "samples": 2}, marks=pytest.mark.slow),
        pytest.param({"intervention": "stop-at"}, marks=pytest.mark.slow),
        {"intervention": "spawn-one-more"},
    ],
)
def test_credit_tables_are_identical_either_way(kw, monkeypatch, request):
    if _ran_in_fresh_interpreter(request):
        return
    topology, task, opts = RUNS["centralized-7" if "spawn" in kw["intervention"] else "debate-2"]
    tr = run(topology, task, **opts).trace
    unit = "turn" if kw["intervention"] in ("stop-at", "spawn-one-more") else "message"
    served = []
    real = replay.snapshot_forks

    def counted(*args, **kwargs):
        got = real(*args, **kwargs)
        served.append(len(got))
        return got

    monkeypatch.setattr(replay, "snapshot_forks", counted)
    monkeypatch.setattr(replay, "SNAPSHOT_MIN_EVENTS", 0)  # a short run: copy it all the same
    fast = CounterfactualMessageCredit(**kw).assign(tr, unit)
    assert served and served[0] > 1  # the forks came from snapshots
    monkeypatch.setattr(replay, "snapshot_forks", lambda *a, **k: {})
    slow = CounterfactualMessageCredit(**kw).assign(tr, unit)
    assert fast.rows == slow.rows
    assert fast.estimates == slow.estimates
    assert fast.stats == slow.stats


class _Counting(Intervention):
    """An intervention of a kind snapshots do not know: it keeps state across calls."""

    def __init__(self) -> None:
        self.seen = 0

    def message(self, sender, step, index, to, content, data):
        self.seen += 1
        return None if self.seen == 3 else (content, data)


def test_what_snapshots_cannot_prove_exact_is_re_executed_in_full(request):
    if _ran_in_fresh_interpreter(request):
        return
    topology, task, opts = RUNS["debate-2"]
    tr = run(topology, task, **opts).trace
    b = backend_for(tr, seed_offset=1)
    msg = next(e.id for e in tr.events if e.type == "message")
    jobs = [([_Counting()], b), ([DropMessage.of(tr, msg)], b)]
    assert (
        snapshot_forks(ForkSetup(tr), jobs, _report, min_events=0) == {}
    )  # an unknown kind: none served
    fast = fork_many(tr, [([_Counting()], b), ([DropMessage.of(tr, msg)], b)], report=_report)
    slow = fork_many(
        tr, [([_Counting()], b), ([DropMessage.of(tr, msg)], b)], report=_report, snapshots=False
    )
    assert fast == slow
    # a backend other than the simulator (here: the simulator wrapped) is not served either
    wrapped = _StrictReplay("sim", recorded={})
    assert (
        snapshot_forks(
            ForkSetup(tr), [([DropMessage.of(tr, msg)], wrapped)] * 2, _report, min_events=0
        )
        == {}
    )


def test_no_copy_is_made_while_another_thread_runs():
    tr, jobs = _message_drops("debate-2", 2)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert snapshot_forks(ForkSetup(tr), jobs, _report, min_events=0) == {}
        assert fork_many(tr, jobs, report=_report) == fork_many(
            tr, jobs, report=_report, snapshots=False
        )
    finally:
        stop.set()
        t.join()


def test_a_fork_whose_score_raises_raises_as_a_full_fork_does(request):
    if _ran_in_fresh_interpreter(request):
        return
    tr, jobs = _message_drops("debate-2", 3)

    def boom(res):
        raise ValueError("score failed")

    assert (
        snapshot_forks(ForkSetup(tr), jobs, boom, min_events=0) == {}
    )  # the copies report failures
    with pytest.raises(ValueError, match="score failed"):
        fork_many(tr, jobs, report=boom)


def test_a_short_run_is_re_executed_in_full():
    tr, jobs = _message_drops("debate-2")
    assert len(tr.events) < replay.SNAPSHOT_MIN_EVENTS
    assert snapshot_forks(ForkSetup(tr), jobs, _report) == {}


def test_a_warning_of_the_copies_is_shown_here_once(request):
    if _ran_in_fresh_interpreter(request):
        return
    tr, jobs = _message_drops("debate-2", 3)

    def noisy(res):
        warnings.warn("scored in a copy", UserWarning, stacklevel=1)
        return res.backend_calls

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        got = snapshot_forks(ForkSetup(tr), jobs, noisy, min_events=0)
    assert sorted(got) == [0, 1, 2]
    assert [str(w.message) for w in seen] == ["scored in a copy"]


@pytest.mark.parametrize(
    ("name", "make", "unit"),
    [
        ("hierarchical-3", lambda: LeaveOneOutCredit(samples=2), "agent"),
        pytest.param(
            "debate-2", lambda: LeaveOneOutCredit(samples=2), "message", marks=pytest.mark.slow
        ),
    ],
)
def test_leave_one_out_tables_are_identical_either_way(name, make, unit, monkeypatch, request):
    if _ran_in_fresh_interpreter(request):
        return
    topology, task, opts = RUNS[name]
    tr = run(topology, task, **opts).trace
    served = []
    real = replay.snapshot_forks

    def counted(*args, **kwargs):
        got = real(*args, **kwargs)
        served.append(len(got))
        return got

    monkeypatch.setattr(replay, "snapshot_forks", counted)
    monkeypatch.setattr(replay, "SNAPSHOT_MIN_EVENTS", 0)
    fast = make().assign(tr, unit)
    assert served and max(served) > 1  # the forks came from snapshots
    monkeypatch.setattr(replay, "snapshot_forks", lambda *a, **k: {})
    slow = make().assign(tr, unit)
    assert fast.rows == slow.rows
    assert fast.stats == slow.stats


def test_what_a_copy_prints_is_printed_once(capfd, request):
    if _ran_in_fresh_interpreter(request):
        return
    tr, jobs = _message_drops("debate-2", 2)
    print("before", end="")  # left in this process's buffer: written once, not by the copies

    def loud(res):
        print(f"[{res.backend_calls}]", end="")
        return res.backend_calls

    got = snapshot_forks(ForkSetup(tr), jobs, loud, min_events=0)
    out = capfd.readouterr().out
    assert sorted(got) == [0, 1]
    assert out.count("before") == 1
    assert out.count("[") == 2


@contextlib.contextmanager
def _another_thread():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="monitor")
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


def test_a_threaded_process_gets_its_forks_from_a_one_thread_helper(monkeypatch):
    topology, task, opts = RUNS["swarm-4"]
    tr = run(topology, task, **opts).trace
    backends = [backend_for(tr, seed_offset=k) for k in (1, 2)]
    jobs = [(ivs, backends[i % 2]) for i, ivs in enumerate(_jobs(tr))]
    helped = []
    real = _snapshot.in_helper
    monkeypatch.setattr(_snapshot, "in_helper", lambda p: helped.append(1) or real(p))
    with _another_thread(), warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: the helper served them
        assert not _snapshot.available()
        served = snapshot_forks(ForkSetup(tr), jobs, _report, min_events=0, helper_min_work=0)
        # a run shorter than the helper's threshold is not worth starting it for
        assert snapshot_forks(ForkSetup(tr), jobs, _report, min_events=0) == {}
    assert helped == [1]
    assert sorted(served) == list(range(len(jobs)))
    full = fork_many(tr, jobs, report=_report, snapshots=False)
    for i, want in enumerate(full):
        assert served[i] == want, (i, [iv.describe() for iv in jobs[i][0]])


def test_a_helper_that_dies_or_cannot_take_the_jobs_leaves_them_to_full_re_execution(
    monkeypatch,
):
    tr, jobs = _message_drops("debate-2", 3)
    monkeypatch.setattr(replay, "SNAPSHOT_MIN_EVENTS", 0)
    monkeypatch.setattr(replay, "HELPER_MIN_WORK", 0)
    with _another_thread():
        with pytest.warns(RuntimeWarning, match=r"cannot be sent to a helper process.*in full"):
            assert snapshot_forks(ForkSetup(tr), jobs, lambda r: r.backend_calls) == {}
        monkeypatch.setattr(_snapshot, "_HELPER_CODE", "import os; os._exit(5)")
        with pytest.warns(RuntimeWarning, match=r"ended with status 5 and no results.*in full"):
            got = fork_many(tr, jobs, report=_report)
        # a helper that has another thread cannot copy itself: it serves none of the forks
        threaded = (
            "import threading, time; threading.Thread(target=time.sleep, args=(60,), "
            "daemon=True).start(); from orchestrace.runtime._snapshot import _helper_main; "
            "_helper_main()"
        )
        monkeypatch.setattr(_snapshot, "_HELPER_CODE", threaded)
        with pytest.warns(RuntimeWarning, match=r"served none of the forks.*in full"):
            again = fork_many(tr, jobs, report=_report)
    assert got == again == fork_many(tr, jobs, report=_report, snapshots=False)


def test_credit_tables_from_a_threaded_process_are_identical_either_way(monkeypatch):
    topology, task, opts = RUNS["debate-2"]
    tr = run(topology, task, **opts).trace
    helped = []
    real = _snapshot.in_helper

    def counted(payload):
        got = real(payload)
        helped.append(0 if got is None else len(got))
        return got

    monkeypatch.setattr(_snapshot, "in_helper", counted)
    monkeypatch.setattr(replay, "SNAPSHOT_MIN_EVENTS", 0)
    monkeypatch.setattr(replay, "HELPER_MIN_WORK", 0)
    with _another_thread(), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fast = CounterfactualMessageCredit(intervention="drop").assign(tr, "message")
    assert helped and helped[0] > 1  # the forks came from the helper's snapshots
    monkeypatch.setattr(replay, "snapshot_forks", lambda *a, **k: {})
    slow = CounterfactualMessageCredit(intervention="drop").assign(tr, "message")
    assert fast.rows == slow.rows
    assert fast.estimates == slow.estimates
    assert fast.stats == slow.stats


def test_the_checking_task_is_built_once_before_the_copies(request):
    """Each copy scores its fork with the task the original built (a copy's own is lost)."""
    if _ran_in_fresh_interpreter(request):
        return
    from orchestrace.tasks import _checking, task_class

    tr = run("swarm", "wide-search", agents=4, seed=1, task_size=16).trace
    spec = tr.meta["task"]
    key = (task_class(spec["name"]).name, spec["seed"], spec["size"])
    m = next(e.id for e in tr.events if e.type == "message")
    _checking._CHECKING.clear()
    got = snapshot_forks(
        ForkSetup(tr),
        [([DropMessage.of(tr, m)], backend_for(tr, seed_offset=1))],
        lambda res: (os.getpid(), counterfactual_reward(res.trace)),
        min_events=0,
    )
    assert got[0][0] != os.getpid()  # scored in a copy
    assert key in _checking._CHECKING  # built here, before the copy


class _PortableReport:
    """A report whose result depends on the fork alone: a helper may compute it."""

    portable = True

    def __call__(self, res):
        return _report(res)


def test_a_process_holding_much_memory_has_a_helper_make_the_copies(monkeypatch, request):
    """Copies cost about 45 us per MiB held: a large process sends the forks to a helper."""
    if _ran_in_fresh_interpreter(request):
        return
    tr, jobs = _message_drops("swarm-4")
    helped = []
    real = _snapshot.in_helper
    monkeypatch.setattr(_snapshot, "in_helper", lambda p, **kw: helped.append(kw) or real(p, **kw))
    monkeypatch.setattr(_snapshot, "resident_mib", lambda: 20_000.0)
    assert _snapshot.helper_is_cheaper(len(jobs), tr.n_events)
    full = fork_many(tr, jobs, report=_report, snapshots=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the helper served them: no fallback warning
        served = snapshot_forks(ForkSetup(tr), jobs, _PortableReport(), min_events=0)
    assert helped == [{"quiet": True}]
    assert [served[i] for i in range(len(jobs))] == full

    # a report that may read this process's state (no ``portable``), or one that cannot be
    # sent (a closure), is served by copies of this process
    def unsendable(res):
        return _report(res)

    unsendable.portable = True
    helped.clear()
    for report in (_report, unsendable):
        got = snapshot_forks(ForkSetup(tr), jobs, report, min_events=0)
        assert helped == [] and [got[i] for i in range(len(jobs))] == full
    # a helper that fails, or serves none of the forks, leaves the copies to this process,
    # without a warning
    for broken in ("import os; os._exit(5)", None):
        if broken is None:
            monkeypatch.setattr(_snapshot, "in_helper", lambda p, **kw: helped.append(kw) or {})
        else:
            monkeypatch.setattr(_snapshot, "_HELPER_CODE", broken)
        helped.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = snapshot_forks(ForkSetup(tr), jobs, _PortableReport(), min_events=0)
        assert len(helped) == 1 and [got[i] for i in range(len(jobs))] == full
    # a small process copies itself
    monkeypatch.setattr(_snapshot, "resident_mib", lambda: 90.0)
    assert not _snapshot.helper_is_cheaper(len(jobs), tr.n_events)
    # nor does a large one whose trace costs more to send than its few copies save
    monkeypatch.setattr(_snapshot, "resident_mib", lambda: 300.0)
    assert not _snapshot.helper_is_cheaper(3, 1_000_000)
    assert _snapshot.helper_is_cheaper(3_000, 1_000_000)
