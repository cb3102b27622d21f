"""Credit figures: the cost of counterfactual credit for every message of an 8-agent, 3-round
debate (the headline: every message feeds an LLM call) and of a 300-agent swarm (the best case:
gossip rarely does), with the descendant upper bound as a check; Monte-Carlo Shapley error
against sample count for 100 agents.

    python benchmarks/bench_credit.py [--quick]
"""

import argparse
import itertools
import math
import resource
import statistics

import numpy as np

from orchestrace.credit import CounterfactualMessageCredit, shapley_mc
from orchestrace.runtime import run

from _common import check, report, spread


def _upper_bound_check(workload: str, s: dict) -> None:
    """Backend calls never exceed the descendant count: an invariant, checked, not a target."""
    check(
        f"counterfactual credit, {workload}: backend calls <= descendant upper bound",
        s["backend_calls"] <= s["descendant_calls"],
        note=f"{s['backend_calls']:,} calls, upper bound {s['descendant_calls']:,} (every LLM "
        "call downstream of each message, per arm and sample); a fork redraws only the calls "
        "whose inputs change",
    )


def bench_counterfactual_debate() -> None:
    """Headline: an 8-agent, 3-round debate, where every message feeds an LLM call."""
    tr = run("debate", "arith", agents=8, seed=2, rounds=3, task_size=32).trace
    t0 = _cpu()
    table = CounterfactualMessageCredit().assign(tr, "message")
    cpu = _cpu() - t0
    s = table.stats
    report(
        f"counterfactual credit, every message of an 8-agent 3-round debate "
        f"({tr.n_events} events, {len(table.rows)} messages): backend calls vs naive",
        s["vs_naive"] * 100,
        "%",
        note=f"{s['backend_calls']:,} calls vs {s['naive_calls']:,} for one full re-run per "
        f"message and sample; {s['vs_descendants']:.2f}x the descendant upper bound "
        f"({s['descendant_calls']:,}); {cpu:.1f} s CPU ({s['samples']} sample(s) per message)",
    )
    _upper_bound_check("8-agent debate", s)


def bench_counterfactual(agents: int) -> None:
    """Best case: a swarm whose gossip messages rarely feed an LLM call."""
    res = run(
        "swarm", "wide-search", agents=agents, seed=1, task_size=4 * agents, chunks=4, gossip=0.5
    )
    tr = res.trace
    t0 = _cpu()
    table = CounterfactualMessageCredit().assign(tr, "message")
    cpu = _cpu() - t0
    s = table.stats
    n_msgs = len(table.rows)
    report(
        f"counterfactual credit, every message of a {agents}-agent swarm, best case "
        f"({tr.n_events:,} events, {n_msgs} messages): backend calls vs naive",
        s["vs_naive"] * 100,
        "%",
        note=f"{s['backend_calls']:,} calls vs {s['naive_calls']:,} naive; few gossip "
        f"messages reach an LLM call, so this is a property of the workload; each fork "
        f"re-executes the run after its message (from a snapshot): {cpu:.1f} s of CPU, snapshot "
        f"copies included, for {n_msgs} messages",
    )
    _upper_bound_check(f"{agents}-agent swarm", s)


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (snapshot copies).

    ``getrusage`` gives microseconds (``os.times`` counts 10 ms ticks).
    """
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def bench_fork_cpu(agents: int, quick: bool = False) -> None:
    """CPU of a fork dropping one message: from a snapshot vs re-executing the whole run.

    Baseline: ``fork()`` of the same trace (a full re-execution, set-up included), measured
    in the same run on messages spread over the run; the snapshot figures are each copy's own
    CPU (fork to exit, the reward scored in it) over every message that some event reads. The
    check that the trace replays, made once per batch of forks on either side, is timed apart.
    """
    from orchestrace.credit.target import counterfactual_reward
    from orchestrace.runtime import _snapshot, replay
    from orchestrace.runtime.interventions import TraceIndex

    tr = run(
        "swarm", "wide-search", agents=agents, seed=1, task_size=4 * agents, chunks=4, gossip=0.5
    ).trace
    ix = TraceIndex(tr)
    read = [e.id for e in tr.events if e.type == "message" and ix.readers(e.id)]
    b = replay.backend_for(tr, seed_offset=1)
    setup = replay.ForkSetup(tr)

    def score(res: replay.ForkResult) -> tuple[int, float]:
        return res.backend_calls, counterfactual_reward(res.trace)

    # the check that the trace replays (``ForkSetup.verify``) runs once per batch of forks, on
    # either side: timed apart, and left out of both (the baseline is the re-execution itself)
    t0 = _cpu()
    setup.verify()
    verify_s = _cpu() - t0
    full, shared = [], []
    for m in read[:: max(1, len(read) // (5 if quick else 15))]:
        ivs = [replay.DropMessage.of(tr, m, ix)]
        t0 = _cpu()
        fresh = replay.ForkSetup(tr)  # what fork() builds per fork
        fresh._verified = True
        score(fresh.fork(ivs, b))
        t1 = _cpu()
        score(setup.fork(ivs, b))
        full.append(t1 - t0)
        shared.append(_cpu() - t1)
    full_s, shared_s = statistics.median(full), statistics.median(shared)
    report(
        f"fork dropping one message, {agents}-agent swarm: full re-execution with the set-up "
        "shared (cache, task)",
        shared_s * 1e3,
        "ms CPU",
        baseline="fork() (set-up rebuilt per fork)",
        baseline_value=full_s * 1e3,
        note=f"{shared_s / full_s:.2f}x; medians of {len(full)} messages, interleaved; the "
        f"check that the trace replays, once per batch, left out of both: {verify_s * 1e3:.0f} ms",
    )
    jobs = [([replay.DropMessage.of(tr, m, ix)], b) for m in read]
    t0 = _cpu()
    got = replay.snapshot_forks(setup, jobs, score)
    total = _cpu() - t0
    st = _snapshot.last_stats()
    copies = st["copy_cpu_s"]
    if len(got) != len(jobs) or not copies:
        check(f"{agents}-agent swarm: every fork served from a snapshot", False)
        return
    # each copy's CPU from os.wait4, to the microsecond; the mean is what a fork costs the
    # all-messages credit (late messages leave short runs: the distribution is skewed)
    per_copy = statistics.fmean(copies)
    full_mean = statistics.fmean(full)
    report(
        f"fork dropping one message, {agents}-agent swarm, from a snapshot: CPU of the fork "
        f"(its copy) vs a full re-execution",
        per_copy / full_mean * 100,
        "%",
        target="<= 10%",
        ok=per_copy / full_mean <= 0.10,
        note=f"means: {per_copy * 1e3:.1f} ms over {len(copies)} copies (each: the run after "
        f"the message, the trace, the reward) vs {full_mean * 1e3:.0f} ms over {len(full)} full "
        f"re-executions; medians {statistics.median(copies) * 1e3:.1f} ms (copies: "
        f"{spread([c * 1e3 for c in copies])} ms) vs {full_s * 1e3:.0f} ms (full: "
        f"{spread([f * 1e3 for f in full])} ms) = "
        f"{statistics.median(copies) / full_s * 100:.0f}%; with the execution they are copied "
        f"from ({st['original_cpu_s']:.2f} s) shared out: {total / len(jobs) * 1e3:.1f} ms = "
        f"{total / len(jobs) / full_mean * 100:.0f}% of the mean",
    )
    same = replay.fork_many(tr, jobs[:: max(1, len(jobs) // 10)], report=score, snapshots=False)
    check(
        f"{agents}-agent swarm: forks from snapshots = full re-executions (calls, reward)",
        same == [got[i] for i in range(0, len(jobs), max(1, len(jobs) // 10))],
        note=f"{len(same)} forks compared",
    )


def bench_credit_cpu(agents: int, quick: bool = False) -> None:
    """All-messages counterfactual credit of the swarm: CPU with snapshots, and without."""
    from orchestrace.runtime import replay

    tr = run(
        "swarm", "wide-search", agents=agents, seed=1, task_size=4 * agents, chunks=4, gossip=0.5
    ).trace
    t0 = _cpu()
    fast = CounterfactualMessageCredit().assign(tr, "message")
    cpu = _cpu() - t0
    base_note = ""
    base = None
    if not quick:
        real = replay.snapshot_forks
        replay.snapshot_forks = lambda *a, **k: {}  # type: ignore[assignment]
        try:
            t0 = _cpu()
            slow = CounterfactualMessageCredit().assign(tr, "message")
            base = _cpu() - t0
        finally:
            replay.snapshot_forks = real  # type: ignore[assignment]
        base_note = f"; {base / cpu:.1f}x less than every fork re-executed in full"
        check(
            f"{agents}-agent swarm credit: identical table with and without snapshots",
            fast.rows == slow.rows
            and fast.estimates == slow.estimates
            and fast.stats == slow.stats,
        )
    report(
        f"counterfactual credit, every message of a {agents}-agent swarm ({len(fast.rows)} "
        "messages): CPU, snapshot copies included",
        cpu,
        "s CPU",
        baseline="every fork re-executed in full (set-up shared)",
        baseline_value=base,
        target="< 10 s" if agents == 300 else None,
        ok=cpu < 10 if agents == 300 else None,
        note=f"{fast.stats['backend_calls']} backend calls{base_note}",
    )


def bench_credit_threaded(agents: int) -> None:
    """The same credit from a process with another thread: its forks come from a helper.

    Baseline: the same computation in this process with one thread (the copies made here),
    same run; the helper's start (a fresh interpreter importing the runtime) is measured
    alone as the CPU of one such interpreter.
    """
    import subprocess
    import sys
    import threading

    tr = run(
        "swarm", "wide-search", agents=agents, seed=1, task_size=4 * agents, chunks=4, gossip=0.5
    ).trace
    t0 = _cpu()
    here = CounterfactualMessageCredit().assign(tr, "message")
    one = _cpu() - t0
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="monitor")
    t.start()
    try:
        t0 = _cpu()
        helped = CounterfactualMessageCredit().assign(tr, "message")
        threaded = _cpu() - t0
    finally:
        stop.set()
        t.join()
    t0 = _cpu()
    subprocess.run(
        [sys.executable, "-c", "import orchestrace.runtime.replay, orchestrace.credit"],
        check=True,
    )
    start = _cpu() - t0
    check(
        f"{agents}-agent swarm credit from a threaded process: identical table",
        here.rows == helped.rows and here.stats == helped.stats,
    )
    report(
        f"counterfactual credit, every message of a {agents}-agent swarm, from a process with "
        "another thread (forks in a one-thread helper interpreter): CPU, helper included",
        threaded,
        "s CPU",
        baseline="the same from a one-thread process (copies made there)",
        baseline_value=one,
        note=f"starting a helper (fresh interpreter + imports): {start:.2f} s CPU",
    )


def bench_credit_big_process(agents: int, mib: int = 600) -> None:
    """The same credit from a process holding ``mib`` MiB more: copies made by a helper.

    A copy of a process costs about 45 us per MiB it holds (page tables copied and torn
    down, pages written after the copy). Baseline: the same computation with every copy made
    by this process (``helper_is_cheaper`` switched off), same run, same memory held.
    """
    from orchestrace.runtime import _snapshot

    tr = run(
        "swarm", "wide-search", agents=agents, seed=1, task_size=4 * agents, chunks=4, gossip=0.5
    ).trace
    ballast = [list(range(100)) for _ in range(mib * 2**20 // 900)]  # about mib MiB of objects
    held = _snapshot.resident_mib()
    real = _snapshot.helper_is_cheaper
    try:
        _snapshot.helper_is_cheaper = lambda copies, events=0: False  # type: ignore[assignment]
        t0 = _cpu()
        here = CounterfactualMessageCredit().assign(tr, "message")
        copied = _cpu() - t0
        _snapshot.helper_is_cheaper = real
        t0 = _cpu()
        helped = CounterfactualMessageCredit().assign(tr, "message")
        helper = _cpu() - t0
    finally:
        _snapshot.helper_is_cheaper = real
        del ballast
    check(
        f"{agents}-agent swarm credit from a large process: identical table either way",
        here.rows == helped.rows and here.stats == helped.stats,
    )
    report(
        f"counterfactual credit, every message of a {agents}-agent swarm, from a process "
        f"holding {held:,.0f} MiB (copies made by a helper interpreter): CPU, helper included",
        helper,
        "s CPU",
        baseline="the same with every copy made by this process",
        baseline_value=copied,
        note=f"{mib} MiB of Python objects held besides what this process held before",
    )


def bench_shapley(n: int = 100, repeats: int = 8) -> None:
    """A 100-agent game with known values: v(S) = sum of a_i over S + c * [|S| >= q]."""
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 1, n)
    c, q = 10.0, n // 2
    players = list(range(n))

    def v(s: frozenset) -> float:
        return float(sum(a[i] for i in s) + (c if len(s) >= q else 0.0))

    exact = {i: a[i] + c / n for i in players}  # additive part + the symmetric threshold share
    errors = []
    for m in (10, 100, 1000):
        rmse = []
        for r in range(repeats):
            est, _ = shapley_mc(players, v, samples=m, seed=r)
            rmse.append(math.sqrt(np.mean([(est[i] - exact[i]) ** 2 for i in players])))
        errors.append((m, float(np.mean(rmse))))
    for (m0, e0), (m1, e1) in itertools.pairwise(errors):
        report(
            f"Monte-Carlo Shapley, {n} agents: RMSE {m0} -> {m1} permutations",
            e0 / e1,
            "x less error",
            target="about sqrt(10) = 3.16",
            ok=2.2 <= e0 / e1 <= 4.5,
            note=f"RMSE {e0:.4f} -> {e1:.4f}",
        )


def main(quick: bool = False) -> None:
    print("credit")
    bench_counterfactual_debate()
    bench_counterfactual(100 if quick else 300)
    bench_fork_cpu(100 if quick else 300, quick)
    bench_credit_cpu(100 if quick else 300, quick)
    bench_credit_threaded(100 if quick else 300)
    bench_credit_big_process(100 if quick else 300)
    bench_shapley(repeats=3 if quick else 8)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    main(ap.parse_args().quick)
