"""Counterfactual message credit on an 8-agent, 3-round debate: cost and accuracy against K.

Simulator (``arith-mapreduce-v0``, size 16, seed 0):
(a) backend calls and CPU per message for paired counterfactual credit (``drop``) against the
naive method (one full re-run per message and sample, both arms) and against C3-style sibling
resampling with the same number of samples (``resample``), at K = 4.
(b) Spearman rank correlation of the per-message credit at K = 4, 16, 64 with a reference
estimate at K = 256 on disjoint simulator seeds (so the correlation is not inflated by shared
samples), for ``drop`` and ``resample``, with a bootstrap 95% interval over messages and, for
K = 4 and 16, the spread over 4 disjoint seed blocks. Also: the spread of the credit across
messages against the standard error at K (what limits the correlation), and the variance of
the paired estimate against unpaired draws (what common random numbers save).
``--quick``: drop only, reference K = 64, K = 64 itself skipped, 3 seed blocks.

Server variant: the same debate recorded through the OpenAI-compatible backend against a local
:class:`orchestrace.testing.ChatServer` (a seeded arithmetic model sampling at temperature 0.7);
credit rebuilds that backend from the trace. Calls are counted server-side, the simulator's by
instrumentation (must be 0). (a) at K = 4 (``--quick``: 2); full mode adds (b) for ``resample``
at K = 4, 16 against K = 64 (fewer than on the simulator: every draw is an HTTP round trip).

    python benchmarks/bench_counterfactual.py [--quick] [--only sim|sim-drop|sim-resample|server]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

import numpy as np

from orchestrace.credit import CounterfactualMessageCredit
from orchestrace.runtime import run
from orchestrace.runtime.replay import backend_for
from orchestrace.trace.model import Trace

from _common import check, median, report, spread

try:  # scipy is optional
    from scipy.stats import spearmanr as _scipy_spearmanr
except ImportError:  # pragma: no cover - depends on the environment
    _scipy_spearmanr = None

SEED = 0
#: A task size at which single messages can change the judged answer (at 32 none does).
TASK_SIZE = 16
#: Seed offset of the reference estimate: its samples never coincide with the estimates' ones.
REFERENCE_OFFSET = 100_000
#: Seed offset between the blocks of one K's replicates (the seed spread of the correlation).
SPREAD_OFFSET = 10_000


def _debate() -> Trace:
    return run(
        "debate",
        "arith-mapreduce-v0",
        agents=8,
        seed=SEED,
        rounds=3,
        debaters=8,
        task_size=TASK_SIZE,
    ).trace


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties sharing their average rank."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=float)
    xs = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and xs[j + 1] == xs[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman rank correlation (scipy when installed, else numpy with averaged ties)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if _scipy_spearmanr is not None:
        return float(_scipy_spearmanr(x, y).statistic)
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


class _Offset:
    """Backend factory: sample ``k`` draws on the simulator with the recorded seed + offset + k."""

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self._built: dict[int, Any] = {}

    def __call__(self, trace: Trace, k: int = 0) -> Any:
        key = 0 if k == 0 else self.offset + k
        if key not in self._built:
            self._built[key] = backend_for(trace, None, seed_offset=key, check=False)
        return self._built[key]


def _credit(
    trace: Trace, samples: int, intervention: str = "drop", offset: int = 0
) -> tuple[dict[str, float], dict[str, Any], float]:
    """Per-message credit, the table's stats and the CPU seconds it took."""
    method = CounterfactualMessageCredit(
        samples=samples, intervention=intervention, backend_factory=_Offset(offset)
    )
    t0 = time.process_time()
    table = method.assign(trace, "message")
    cpu = time.process_time() - t0
    return {r.id: float(r.value) for r in table.rows}, table.stats, cpu


def _credit_full(
    trace: Trace, samples: int, intervention: str, offset: int | None
) -> tuple[dict[str, float], dict[str, Any], float, dict[str, dict[str, Any]]]:
    """As :func:`_credit`, with the per-message estimates (se, arm means).

    ``offset=None``: the backend the trace records (a server that samples afresh).
    """
    method = CounterfactualMessageCredit(
        samples=samples,
        intervention=intervention,
        backend_factory=None if offset is None else _Offset(offset),
    )
    t0 = time.process_time()
    table = method.assign(trace, "message")
    cpu = time.process_time() - t0
    stats = dict(table.stats, reward=table.reward)
    estimates = getattr(table, "estimates", {})
    return {r.id: float(r.value) for r in table.rows}, stats, cpu, estimates


def bench_cost(trace: Trace, k: int) -> None:
    """(a) Calls and CPU per message: paired drop vs naive re-runs vs sibling resampling."""
    n_llm = sum(e.type == "llm_call" for e in trace.events)
    run_cpus = [_timed_run() for _ in range(9)]
    run_cpu = median(run_cpus)
    _, drop, drop_cpu = _credit(trace, k, "drop")
    _, res, res_cpu = _credit(trace, k, "resample")
    n_msgs = sum(e.type == "message" for e in trace.events)
    naive_runs = drop["naive_calls"] / n_llm  # K re-runs per message plus K for the kept side
    naive_cpu = naive_runs * run_cpu
    print(
        f"  {'method (K=' + str(k) + ')':<34} {'calls/message':>14} {'CPU ms/message':>15}\n"
        f"  {'naive (full re-runs, both arms)':<34} {drop['naive_calls'] / n_msgs:>14.1f} "
        f"{1000 * naive_cpu / n_msgs:>15.1f}\n"
        f"  {'paired counterfactual (drop)':<34} {drop['calls_per_message']:>14.1f} "
        f"{1000 * drop_cpu / n_msgs:>15.1f}\n"
        f"  {'sibling resampling (C3-style)':<34} {res['calls_per_message']:>14.1f} "
        f"{1000 * res_cpu / n_msgs:>15.1f}"
    )
    report(
        f"counterfactual credit (drop, K={k}), {n_msgs} debate messages: calls per message",
        drop["calls_per_message"],
        "calls",
        baseline="naive",
        baseline_value=drop["naive_calls"] / n_msgs,
        note=f"{drop['backend_calls']:,} calls vs {drop['naive_calls']:,}; naive = "
        f"{naive_runs:.0f} full re-runs of {n_llm} LLM calls",
    )
    report(
        f"counterfactual credit (drop, K={k}): CPU per message",
        1000 * drop_cpu / n_msgs,
        "ms",
        baseline="naive",
        baseline_value=1000 * naive_cpu / n_msgs,
        note=f"naive CPU = {naive_runs:.0f} re-runs x {1000 * run_cpu:.1f} ms per full run "
        f"(measured here: {spread([1000 * x for x in run_cpus])} ms)",
    )
    report(
        f"sibling resampling (C3-style, K={k}): calls per message",
        res["calls_per_message"],
        "calls",
        baseline="drop",
        baseline_value=drop["calls_per_message"],
        note=f"{res['backend_calls']:,} calls, {1000 * res_cpu / n_msgs:.1f} ms CPU per message "
        f"({res_cpu:.1f} s in all); the ratio is drop / resample",
    )
    for name, s in (("drop", drop), ("resample", res)):
        check(
            f"counterfactual credit ({name}, K={k}): calls <= naive",
            s["backend_calls"] <= s["naive_calls"],
            note=f"{s['backend_calls']:,} <= {s['naive_calls']:,}",
        )


def _timed_run() -> float:
    t0 = time.process_time()
    _debate()
    return time.process_time() - t0


def _clusters(trace: Trace, ids: list[str], intervention: str) -> list[int]:
    """Cluster of each message: messages whose estimates share forks are not independent.

    ``drop``: the kept arm is shared by the messages read by the same calls; ``resample``: both
    arms are shared by the messages of one sender call (a broadcast).
    """
    from orchestrace.runtime.replay import message_readers, sender_call

    keys: dict[Any, int] = {}
    out = []
    for mid in ids:
        key = (
            sender_call(trace, mid)
            if intervention == "resample"
            else tuple(message_readers(trace, mid))
        )
        out.append(keys.setdefault(key, len(keys)))
    return out


def _bootstrap(
    a: list[float], b: list[float], clusters: list[int], n: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """95% percentile bootstrap interval of the Spearman correlation.

    Resamples clusters of messages (see :func:`_clusters`) with replacement, all members of a
    drawn cluster together: messages that share forks are not counted as independent.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    members: dict[int, list[int]] = {}
    for i, c in enumerate(clusters):
        members.setdefault(c, []).append(i)
    groups = list(members.values())
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        picked = rng.integers(0, len(groups), len(groups))
        idx = np.concatenate([groups[g] for g in picked])
        rho = spearman(list(x[idx]), list(y[idx]))
        if not np.isnan(rho):
            out.append(rho)
    if not out:
        return float("nan"), float("nan")
    low, high = np.percentile(out, [2.5, 97.5])
    return float(low), float(high)


def _noise(stats_est: dict[str, dict[str, Any]], ids: list[str]) -> tuple[float, float]:
    """Mean squared standard error of the paired estimates, and of unpaired ones.

    The unpaired variance of one message is ``(p_kept (1 - p_kept) + p_int (1 - p_int)) / K``:
    exact for a 0/1 reward (what the benchmark checks it has), an upper bound for any reward
    in [0, 1].
    """
    paired, unpaired = [], []
    for i in ids:
        e = stats_est[i]
        k = e["samples"]
        paired.append((e["se"] or 0.0) ** 2)
        pk, pi = e["kept"], e["intervened"]
        unpaired.append((pk * (1 - pk) + pi * (1 - pi)) / k)
    return float(np.mean(paired)), float(np.mean(unpaired))


def bench_accuracy(
    trace: Trace,
    ks: list[int],
    k_ref: int,
    intervention: str = "drop",
    replicates: int = 1,
    recorded_backend: bool = False,
) -> None:
    """(b) Spearman correlation of per-message credit at K with a K_ref reference.

    Each K is estimated on seeds 1..K (``replicates`` > 1: also on disjoint seed blocks, for
    the spread of the correlation across seeds); the reference on seeds disjoint from all of
    them (``recorded_backend``: the trace's own backend, a server that draws afresh at every
    call, so all draws are distinct without seeds). The bootstrap interval resamples messages.
    Also reported: how large the credit is against the noise of one estimate: a spread across
    messages far below the standard error at K leaves nothing for the ranking to find.
    """
    label = f"{intervention}, server" if recorded_backend else intervention
    draws = "independent draws" if recorded_backend else "disjoint seeds"
    t0 = time.perf_counter()
    ref, ref_stats, ref_cpu, ref_est = _credit_full(
        trace, k_ref, intervention, None if recorded_backend else REFERENCE_OFFSET
    )
    ref_wall = time.perf_counter() - t0
    ids = sorted(ref)
    clusters = _clusters(trace, ids, intervention)
    base = float(ref_stats.get("reward", 1.0))
    nonzero = sum(ref[i] != 0 for i in ids)
    refv = np.array([ref[i] for i in ids])
    ref_se2, ref_unpaired = _noise(ref_est, ids)
    # spread of the true credit across messages: the reference's spread less its own noise
    signal = max(float(refv.var(ddof=1)) - ref_se2, 0.0)
    print(
        f"  [{label}] reference: K={k_ref}, {len(ids)} messages ({nonzero} with non-zero "
        f"credit), {ref_wall:.1f} s wall, {ref_cpu:.1f} s CPU, {ref_stats['backend_calls']:,} "
        "backend calls"
    )
    print(
        f"  [{label}] credit across messages: mean {refv.mean():+.4f}, sd {refv.std(ddof=1):.4f}, "
        f"|credit| > 2 se for {sum(abs(ref[i]) > 2 * (ref_est[i]['se'] or 0) for i in ids)} "
        f"of {len(ids)}; true spread (sd less reference noise) {signal**0.5:.4f}; "
        f"reward of the recorded run {base:g}; {len(set(clusters))} clusters of messages "
        "sharing forks (the bootstrap resamples clusters)"
    )
    if not recorded_backend:
        report(
            f"counterfactual credit ({label}): paired vs unpaired variance at K={k_ref}",
            ref_se2,
            "se^2",
            baseline="unpaired",
            baseline_value=ref_unpaired,
            note="mean over messages; unpaired = each arm drawn on its own seeds "
            "(p(1-p)/K per arm, the reward is 0/1); the ratio is what paired draws (common "
            "random numbers) save in samples",
        )
    print(
        f"  {'K':>5} {'Spearman vs ref':>16} {'bootstrap 95%':>17} {'seed spread':>14} "
        f"{'mean se':>8} {'CPU s':>8}"
    )
    for k in ks:
        rhos = []
        cpu_total = 0.0
        first: tuple[dict[str, float], dict[str, dict[str, Any]]] | None = None
        for r in range(replicates if k < k_ref // 4 else 1):
            est, _, cpu, est_e = _credit_full(
                trace, k, intervention, None if recorded_backend else r * SPREAD_OFFSET
            )
            cpu_total += cpu
            rhos.append(spearman([est[i] for i in ids], [ref[i] for i in ids]))
            if first is None:
                first = (est, est_e)
        assert first is not None
        est, est_e = first
        rho = rhos[0]
        low, high = _bootstrap([est[i] for i in ids], [ref[i] for i in ids], clusters)
        se2, _ = _noise(est_e, ids)
        # a block whose estimates are all equal has no rank correlation: left out, and said
        valid = [x for x in rhos if not np.isnan(x)]
        spread = (
            f"{np.mean(valid):+.3f}+-{np.std(valid, ddof=1):.3f}"
            + ("" if len(valid) == len(rhos) else f" ({len(valid)}/{len(rhos)})")
            if len(valid) > 1
            else "-"
        )
        print(
            f"  {k:>5} {rho:>16.3f}   [{low:+.3f}, {high:+.3f}] {spread:>14} {se2**0.5:>8.4f} "
            f"{cpu_total / len(rhos):>8.1f}"
        )
        report(
            f"counterfactual credit ({label}): Spearman of K={k} vs reference K={k_ref}",
            rho,
            "rho",
            note=f"{len(ids)} messages in {len(set(clusters))} clusters, {draws}, bootstrap 95% [{low:+.3f}, {high:+.3f}]"
            + (
                f", over {len(valid)} seed blocks {np.mean(valid):+.3f} +- "
                f"{np.std(valid, ddof=1):.3f}"
                + (
                    f" ({len(rhos) - len(valid)} all-equal left out)"
                    if len(valid) < len(rhos)
                    else ""
                )
                if len(rhos) > 1 and len(valid) > 1
                else ""
            )
            + f"; mean se {se2**0.5:.4f} against a credit spread of {signal**0.5:.4f}; "
            f"{cpu_total / len(rhos):.1f} s CPU",
        )
        check(
            f"Spearman K={k} vs K={k_ref} ({label}) is a correlation",
            bool(np.isnan(rho) or -1.0 - 1e-9 <= rho <= 1.0 + 1e-9),
        )


class _CountSim:
    """Counts every call the simulator answers, whoever built it (instrumentation)."""

    def __enter__(self) -> _CountSim:
        from orchestrace.runtime.backends.sim import SimBackend

        self.calls = 0
        self._cls = SimBackend
        self._orig = SimBackend.complete
        outer = self

        async def counted(backend: Any, request: Any) -> Any:
            outer.calls += 1
            return await outer._orig(backend, request)

        SimBackend.complete = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        self._cls.complete = self._orig  # type: ignore[method-assign]


def bench_server(quick: bool) -> None:
    """The same on a trace recorded through the OpenAI-compatible backend (a local server).

    The debate is recorded against :class:`orchestrace.testing.ChatServer` (a seeded model
    that does the arithmetic its prompts ask for, errs at a set rate, and samples afresh at
    temperature 0.7); counterfactual credit then rebuilds that backend from the trace. The
    server counts the calls it answers; the simulator's calls are counted by instrumentation
    and must be 0.
    """
    from orchestrace.testing import ChatServer

    k = 2 if quick else 4
    with ChatServer() as srv, _CountSim() as sim:

        def record() -> Any:
            return run(
                "debate",
                "arith-mapreduce-v0",
                agents=8,
                seed=SEED,
                rounds=3,
                debaters=8,
                task_size=TASK_SIZE,
                backend="openai",
                backend_options={"base_url": srv.url, "model": "local", "temperature": 0.7},
            )

        res = record()
        recorded = srv.calls
        run_cpus = []
        for _ in range(3):  # one full run's CPU (client and in-process server), median of 3
            t0 = time.process_time()
            record()
            run_cpus.append(time.process_time() - t0)
        run_cpu = median(run_cpus)
        trace = res.trace
        n_llm = sum(e.type == "llm_call" for e in trace.events)
        n_msgs = sum(e.type == "message" for e in trace.events)
        failed = [e.error for e in trace.events if e.error]
        if not n_llm or failed:
            raise RuntimeError(
                f"the run against the local server failed ({failed[:1] or 'no LLM call'}); "
                "nothing to credit"
            )
        print(
            f"  server variant: debate recorded through the openai backend at {srv.url}: "
            f"{n_llm} LLM calls ({recorded} answered by the server), {n_msgs} messages, "
            f"reward {trace.rewards.get('team')}, {1000 * run_cpu:.0f} ms CPU per run (median of 3, "
            f"{1000 * min(run_cpus):.0f}-{1000 * max(run_cpus):.0f})"
        )
        rows = {}
        for intervention in ("drop", "resample"):
            before = srv.calls
            method = CounterfactualMessageCredit(samples=k, intervention=intervention)
            t0, w0 = time.process_time(), time.perf_counter()
            table = method.assign(trace, "message")
            cpu, wall = time.process_time() - t0, time.perf_counter() - w0
            served = srv.calls - before
            stats = table.stats
            rows[intervention] = (stats, served, cpu, wall)
            check(
                f"server variant ({intervention}, K={k}): every backend call reached the server",
                served == stats["backend_calls"] and served > 0,
                note=f"{served:,} counted server-side = {stats['backend_calls']:,} reported",
            )
        if not quick:
            before = srv.calls
            bench_accuracy(trace, [4, 16], 64, "resample", replicates=3, recorded_backend=True)
            check(
                "server variant (resample, accuracy): every call reached the server",
                srv.calls > before,
                note=f"{srv.calls - before:,} server calls",
            )
        check(
            "server variant: the simulator answered no call",
            sim.calls == 0,
            note=f"{sim.calls} simulator calls (instrumented)",
        )
    drop, served_d, cpu_d, wall_d = rows["drop"]
    _, served_r, cpu_r, wall_r = rows["resample"]
    naive = drop["naive_calls"]
    print(
        f"  {'server variant (K=' + str(k) + ')':<34} {'calls/message':>14} {'CPU ms/message':>15} "
        f"{'wall ms/message':>16}\n"
        f"  {'naive (full re-runs, both arms)':<34} {naive / n_msgs:>14.1f} "
        f"{1000 * run_cpu * naive / n_llm / n_msgs:>15.1f} {'':>16}\n"
        f"  {'counterfactual (drop)':<34} {served_d / n_msgs:>14.1f} "
        f"{1000 * cpu_d / n_msgs:>15.1f} {1000 * wall_d / n_msgs:>16.1f}\n"
        f"  {'sibling resampling (C3-style)':<34} {served_r / n_msgs:>14.1f} "
        f"{1000 * cpu_r / n_msgs:>15.1f} {1000 * wall_r / n_msgs:>16.1f}"
    )
    print(
        f"  server variant: paired draws {drop['paired']} (the server samples afresh at "
        "temperature 0.7: a fixed request seed would answer the debaters' identical prompts "
        "identically, so it cannot serve as common random numbers), deterministic "
        f"{drop['deterministic']}"
    )
    report(
        f"server variant: counterfactual credit (drop, K={k}): server calls per message",
        served_d / n_msgs,
        "calls",
        baseline="naive",
        baseline_value=naive / n_msgs,
        note=f"{served_d:,} calls counted server-side vs {naive:,} naive; {wall_d:.1f} s wall",
    )
    report(
        f"server variant: sibling resampling (resample, K={k}): server calls per message",
        served_r / n_msgs,
        "calls",
        baseline="drop",
        baseline_value=served_d / n_msgs,
        note=f"{served_r:,} calls counted server-side; {wall_r:.1f} s wall",
    )


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main(quick: bool = False, only: str | None = None) -> None:
    """Run the simulator part, the server variant, or both (``only``)."""
    t0 = time.perf_counter()
    print(
        f"counterfactual credit, 8-agent 3-round debate{' (quick)' if quick else ''} [{_machine()}]"
    )
    if only in (None, "sim", "sim-drop", "sim-resample"):
        trace = _debate()
        print(
            f"  trace: {trace.n_events} events, "
            f"{sum(e.type == 'message' for e in trace.events)} msgs, reward {trace.rewards}"
        )
        check(
            "the debate's team reward is 0 or 1 (the unpaired variance is exact)",
            trace.rewards.get("team") in (0.0, 1.0),
        )
        bench_cost(trace, 4)
        if quick:
            bench_accuracy(trace, [4, 16], 64, replicates=3)
        else:
            if only != "sim-resample":
                bench_accuracy(trace, [4, 16, 64], 256, replicates=4)
            if only != "sim-drop":
                bench_accuracy(trace, [4, 16, 64], 256, intervention="resample", replicates=4)
    if only in (None, "server"):
        bench_server(quick)
    print(f"  total: {time.perf_counter() - t0:.1f} s wall")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--only",
        choices=("sim", "sim-drop", "sim-resample", "server"),
        help="only the simulator part (sim-drop, sim-resample: one intervention's accuracy) or "
        "the server variant",
    )
    args = ap.parse_args()
    main(args.quick, args.only)
