"""Credit figures: the cost of counterfactual credit for every message of a 300-agent swarm,
and Monte-Carlo Shapley error against sample count for 100 agents.

    python benchmarks/bench_credit.py [--quick]
"""

import argparse
import itertools
import math
import time

import numpy as np

from orchestrace.credit import CounterfactualMessageCredit, shapley_mc
from orchestrace.runtime import run

from _common import report


def bench_counterfactual(agents: int) -> None:
    res = run(
        "swarm", "wide-search", agents=agents, seed=1, task_size=4 * agents, chunks=4, gossip=0.5
    )
    tr = res.trace
    t0 = time.perf_counter()
    table = CounterfactualMessageCredit().assign(tr, "message")
    elapsed = time.perf_counter() - t0
    s = table.stats
    n_msgs = len(table.rows)
    report(
        f"counterfactual credit, every message of a {agents}-agent swarm "
        f"({tr.n_events:,} events, {n_msgs} messages): backend calls vs naive",
        s["vs_naive"] * 100,
        "%",
        target="<=10%",
        ok=s["vs_naive"] <= 0.10,
        note=f"{s['backend_calls']} calls vs {s['naive_calls']:,} for one full re-run per "
        f"message; {elapsed:.0f} s of CPU for {n_msgs} forks",
    )
    ratio = s["vs_descendants"] if s["descendant_calls"] else 0.0
    report(
        "counterfactual credit: backend calls vs sum of descendant LLM calls (lower bound)",
        ratio,
        "x",
        target="<=2x",
        ok=ratio <= 2.0,
        note=f"{s['backend_calls']} calls vs {s['descendant_calls']} descendant calls",
    )


def bench_counterfactual_debate() -> None:
    """Where every message feeds an LLM call: an 8-agent, 3-round debate."""
    tr = run("debate", "arith", agents=8, seed=2, rounds=3, task_size=32).trace
    s = CounterfactualMessageCredit().assign(tr, "message").stats
    report(
        f"counterfactual credit, every message of an 8-agent 3-round debate "
        f"({tr.n_events} events): backend calls vs naive",
        s["vs_naive"] * 100,
        "%",
        note=f"{s['backend_calls']} calls vs {s['naive_calls']:,} naive; vs descendant "
        f"calls {s['vs_descendants']:.2f}x ({s['descendant_calls']})",
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
    bench_counterfactual(100 if quick else 300)
    bench_counterfactual_debate()
    bench_shapley(repeats=3 if quick else 8)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    main(ap.parse_args().quick)
