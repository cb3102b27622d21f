"""Parallel efficiency of the executors: process and Ray at 1 and 2 workers against local.

Workloads (fixed up front):

* **sim-v2 cells**: the ``sim-v2`` suite (6 topologies x 5 tasks, clean and three fault kinds
  per seed), no envelope: ``--seeds`` seeds (default 2: 240 runs).
* **credit, 126 messages**: counterfactual credit of every message of an 8-agent, 3-round debate
  (``arith-mapreduce-v0``, size 16, seed 0), ``drop``, K = 2.
* **rollouts, 120 sub-agents**: 8 ``stop-v0`` episodes (``search``) of a fixed-N policy that
  spawns 120 workers (``max_workers=128``, ``max_rounds=130``) under a Critical-Steps budget
  of 300 (``steps_budget``; an episode takes 241): the episodes a training run of an
  orchestration policy collects (the update itself runs in the trainer's process).
* **credit, 303-agent swarm** (``--workloads big``): counterfactual credit of every message
  of a swarm of 300 workers on ``wide-search-v0`` of size 300 (300 messages), ``drop``, K = 1.

Measurement. Configurations are **interleaved**: each of ``--rounds`` rounds (default 3)
runs every workload on local, process x1, process x2, ray x1 and ray x2 in turn (a process
pool is started once per configuration and round and reused across the workloads; a Ray
instance is started when the worker count changes, and that start is not counted). For each
configuration the figures are the **median** wall time over rounds and its spread (min-max);
speedup = median local / median executor, efficiency = speedup / workers. The 1-minute load
average is sampled before every measurement; its median and range are printed with the
figures. Where the load average exceeds the machine's cores during the measurement, or the
local baseline's own spread exceeds 25 % of its median, the speedups are printed but marked
**unmeasurable**: other processes take the cores a worker would use. Every output is checked
byte for byte against the local executor's (timings removed). Results go to
``benchmarks/results/executors.json``.

    python benchmarks/bench_executors.py [--rounds 3] [--seeds 2] [--no-ray]
    python benchmarks/bench_executors.py --workloads big,rollouts --configs local:1,ray:1,ray:2 \
        --out executors-scale.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from _common import check

CONFIGS = (("local", 1), ("process", 1), ("process", 2), ("ray", 1), ("ray", 2))


def _bench_cells(executor: Any, seeds: int) -> str:
    from orchestrace.masbench.suite import run_suite

    rep = run_suite("sim-v2", seeds=seeds, executor=executor, progress=False, envelope=False)
    assert not rep["missing"]["runs"], rep["missing"]
    runs = [{k: v for k, v in r.items() if k != "cpu_s"} for r in rep["runs"]]
    cells = [{k: v for k, v in c.items() if k != "cpu_s"} for c in rep["cells"]]
    return json.dumps({"runs": runs, "cells": cells}, sort_keys=True)


def _credit(executor: Any, trace: Any, samples: int) -> str:
    from orchestrace.credit.counterfactual import CounterfactualMessageCredit

    table = CounterfactualMessageCredit(samples=samples, executor=executor).assign(trace, "message")
    assert "missing" not in table.stats, table.stats["error"]
    return table.to_json() + json.dumps(table.stats, sort_keys=True)


def _rollouts(executor: Any, episodes: int) -> str:
    from orchestrace.learn.env import rollouts
    from orchestrace.learn.policies.heuristic import FixedN

    out = rollouts(
        FixedN(n=120),
        range(episodes),
        "stop-v0",
        env_options={"task": "search", "max_workers": 128, "max_rounds": 130, "steps_budget": 300},
        executor=executor,
    )
    return json.dumps(out, sort_keys=True, default=str)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--no-ray", action="store_true", help="process executor only")
    ap.add_argument(
        "--workloads",
        default="cells,credit,rollouts",
        help="comma-separated: cells, credit, rollouts, big (credit of a 300-agent run)",
    )
    ap.add_argument(
        "--configs",
        default=",".join(f"{k}:{w}" for k, w in CONFIGS),
        help="comma-separated EXECUTOR:WORKERS, local:1 first (the baseline)",
    )
    ap.add_argument("--out", default="executors.json", help="file name under benchmarks/results")
    args = ap.parse_args()
    from orchestrace.executors import make_executor, shutdown_ray
    from orchestrace.runtime import run

    wanted = {w.strip() for w in args.workloads.split(",")}
    workloads: dict[str, Any] = {}
    if "cells" in wanted:
        workloads["sim-v2 cells"] = lambda ex: _bench_cells(ex, args.seeds)
    if "credit" in wanted:
        debate = run("debate", "arith", agents=8, seed=0, rounds=3, task_size=16).trace
        workloads["credit, 126 messages"] = lambda ex: _credit(ex, debate, 2)
    if "rollouts" in wanted:
        workloads["rollouts, 120 sub-agents"] = lambda ex: _rollouts(ex, args.episodes)
    if "big" in wanted:
        big = run("swarm", "search", agents=300, seed=0, task_size=300).trace
        n = sum(e.type == "message" for e in big.events)
        agents = len({e.agent for e in big.events})
        workloads[f"credit, {agents}-agent swarm ({n} messages)"] = lambda ex: _credit(ex, big, 1)
    configs = [(k, int(w)) for k, w in (c.split(":") for c in args.configs.split(",") if c.strip())]
    configs = [c for c in configs if not (args.no_ray and c[0] == "ray")]
    assert configs[0] == ("local", 1), "the first configuration is the baseline, local:1"
    cores = os.cpu_count() or 1
    print(
        f"executors: {', '.join(workloads)}; {args.rounds} interleaved rounds; "
        f"{platform.machine()}, Python {platform.python_version()}, {cores} cores",
        flush=True,
    )
    local = make_executor("local")
    for fn in workloads.values():  # warm-up: first imports and caches are no one's cost
        fn(local)
    times: dict[tuple[str, str, int], list[float]] = {}
    loads: list[float] = []
    outputs: dict[str, str] = {}
    ray_workers = None
    t_start = time.time()
    for rnd in range(args.rounds):
        for kind, workers in configs:
            if kind == "ray" and ray_workers != workers:
                shutdown_ray()
                ray_workers = workers
            ex = make_executor(kind, None if kind == "local" else workers)
            with ex:
                for name, fn in workloads.items():
                    loads.append(os.getloadavg()[0])
                    t0 = time.perf_counter()
                    out = fn(ex)
                    wall = time.perf_counter() - t0
                    times.setdefault((name, kind, workers), []).append(wall)
                    outputs.setdefault(name, out)
                    check(
                        f"round {rnd + 1}: {name}: {kind} x{workers} output == local",
                        out == outputs[name],
                    )
            print(f"  round {rnd + 1}: {kind} x{workers} done (load {loads[-1]:.2f})", flush=True)
    shutdown_ray()
    load_med = statistics.median(loads)
    rows: list[dict[str, Any]] = []
    print(
        f"load average (1 min) during the measurement: median {load_med:.2f}, range "
        f"{min(loads):.2f}-{max(loads):.2f} on {cores} cores",
        flush=True,
    )
    for name in workloads:
        base = times[(name, "local", 1)]
        b_med = statistics.median(base)
        noisy = load_med > cores or (max(base) - min(base)) > 0.25 * b_med
        for kind, workers in configs:
            ts = times[(name, kind, workers)]
            med = statistics.median(ts)
            speedup = b_med / med
            row = {
                "workload": name,
                "executor": kind,
                "workers": workers,
                "median_s": round(med, 3),
                "min_s": round(min(ts), 3),
                "max_s": round(max(ts), 3),
                "speedup": round(speedup, 3),
                "efficiency": round(speedup / workers, 3),
                "measurable": not noisy,
            }
            rows.append(row)
            print(
                f"  {name}: {kind} x{workers}: median {med:.2f} s ({min(ts):.2f}-{max(ts):.2f}); "
                f"speedup {speedup:.2f}x, efficiency {speedup / workers:.2f}"
                + (" [unmeasurable: machine loaded]" if noisy and kind != "local" else ""),
                flush=True,
            )
    result = {
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)),
        "rounds": args.rounds,
        "cores": cores,
        "load_1min": {"median": load_med, "min": min(loads), "max": max(loads)},
        "rows": rows,
    }
    out = Path(__file__).resolve().parent / "results" / args.out
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"results: {out}")


if __name__ == "__main__":
    main()
