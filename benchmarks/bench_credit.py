"""Credit figures: the cost of counterfactual credit for every message of an 8-agent, 3-round
debate (the headline: every message feeds an LLM call) and of a 300-agent swarm (the best case:
gossip rarely does), with the descendant upper bound as a check; Monte-Carlo Shapley error
against sample count for 100 agents.

    python benchmarks/bench_credit.py [--quick]
"""

import argparse
import itertools
import math
import time

import numpy as np

from orchestrace.credit import CounterfactualMessageCredit, shapley_mc
from orchestrace.runtime import run

from _common import check, report


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
    t0 = time.process_time()
    table = CounterfactualMessageCredit().assign(tr, "message")
    cpu = time.process_time() - t0
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
    t0 = time.process_time()
    table = CounterfactualMessageCredit().assign(tr, "message")
    cpu = time.process_time() - t0
    s = table.stats
    n_msgs = len(table.rows)
    report(
        f"counterfactual credit, every message of a {agents}-agent swarm, best case "
        f"({tr.n_events:,} events, {n_msgs} messages): backend calls vs naive",
        s["vs_naive"] * 100,
        "%",
        note=f"{s['backend_calls']:,} calls vs {s['naive_calls']:,} naive; few gossip "
        f"messages reach an LLM call, so this is a property of the workload; every fork still "
        f"re-executes the whole run: {cpu:.0f} s of CPU for {n_msgs} messages",
    )
    _upper_bound_check(f"{agents}-agent swarm", s)


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
    bench_shapley(repeats=3 if quick else 8)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    main(ap.parse_args().quick)
