"""Counterfactual message credit on an 8-agent, 3-round debate: cost and accuracy against K.

(a) Backend calls and CPU per message for paired counterfactual credit (``drop``) against the
naive method (one full re-run per message and sample, both arms) and against C3-style sibling
resampling with the same number of samples (``resample``). (b) Spearman rank correlation of the
per-message credit at K = 4, 16, 64 samples with a reference estimate at K = 256 (``--quick``:
reference K = 64, K = 64 skipped). The estimates and the reference draw on disjoint simulator
seeds, so the correlation is not inflated by shared samples.

    python benchmarks/bench_counterfactual.py [--quick]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from orchestrace.credit import CounterfactualMessageCredit
from orchestrace.runtime import run
from orchestrace.runtime.replay import backend_for
from orchestrace.trace.model import Trace

from _common import check, report

try:  # scipy is optional
    from scipy.stats import spearmanr as _scipy_spearmanr
except ImportError:  # pragma: no cover - depends on the environment
    _scipy_spearmanr = None

SEED = 0
#: A task size at which single messages can change the judged answer (at 32 none does).
TASK_SIZE = 16
#: Seed offset of the reference estimate: its samples never coincide with the estimates' ones.
REFERENCE_OFFSET = 100_000


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


def bench_cost(trace: Trace, k: int) -> None:
    """(a) Calls and CPU per message: paired drop vs naive re-runs vs sibling resampling."""
    n_llm = sum(e.type == "llm_call" for e in trace.events)
    run_cpu = min(_timed_run() for _ in range(3))
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
        "(measured here, best of 3)",
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


def bench_accuracy(trace: Trace, ks: list[int], k_ref: int) -> None:
    """(b) Spearman correlation of per-message credit at K with a K_ref reference."""
    t0 = time.perf_counter()
    ref, _, ref_cpu = _credit(trace, k_ref, "drop", offset=REFERENCE_OFFSET)
    ref_wall = time.perf_counter() - t0
    ids = sorted(ref)
    nonzero = sum(ref[i] != 0 for i in ids)
    print(
        f"  reference: K={k_ref}, {len(ids)} messages ({nonzero} with non-zero credit), "
        f"{ref_wall:.1f} s wall, {ref_cpu:.1f} s CPU"
    )
    print(f"  {'K':>5} {'Spearman vs ref':>16} {'CPU s':>8}")
    for k in ks:
        est, _, cpu = _credit(trace, k, "drop")
        rho = spearman([est[i] for i in ids], [ref[i] for i in ids])
        print(f"  {k:>5} {rho:>16.3f} {cpu:>8.1f}")
        report(
            f"counterfactual credit: Spearman of K={k} vs reference K={k_ref}",
            rho,
            "rho",
            note=f"{len(ids)} messages, disjoint seeds, {cpu:.1f} s CPU",
        )
        check(
            f"Spearman K={k} vs K={k_ref} is a correlation",
            bool(np.isnan(rho) or -1.0 - 1e-9 <= rho <= 1.0 + 1e-9),
        )


def main(quick: bool = False) -> None:
    t0 = time.perf_counter()
    print(f"counterfactual credit, 8-agent 3-round debate{' (quick)' if quick else ''}")
    trace = _debate()
    print(
        f"  trace: {trace.n_events} events, {sum(e.type == 'message' for e in trace.events)} msgs"
    )
    bench_cost(trace, 4)
    if quick:
        bench_accuracy(trace, [4, 16], 64)
    else:
        bench_accuracy(trace, [4, 16, 64], 256)
    print(f"  total: {time.perf_counter() - t0:.1f} s wall")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    main(ap.parse_args().quick)
