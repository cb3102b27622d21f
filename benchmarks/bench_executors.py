"""Parallel efficiency of the executors: the process pool and Ray at 1 and 2 workers against
the local executor, all measured in one run.

Workloads (fixed up front):

* **bench cells**: the ``sim-v2`` suite (6 topologies x 5 tasks, 4 runs per seed: clean and
  three fault kinds) with 5 seeds, no envelope: 600 runs (``--quick``: 2 seeds, 240 runs).
* **counterfactual credit**: every message of an 8-agent, 3-round debate
  (``arith-mapreduce-v0``, size 16, seed 0; 126 messages), ``drop``, K = 4 paired samples
  (``--quick``: K = 2).

For each executor, worker count and workload, the local executor runs the workload right
before the executor does (the machine is shared and its load drifts over minutes; a baseline
from the start of the run would carry that drift into the ratio). The figures: the wall time
of the whole call (a process pool starts its
workers inside the call, so that cost is counted; a Ray instance is started once per worker
count, and that start is reported on its own line), the speedup ``t_local / t`` and the
parallel efficiency ``speedup / workers``; the local executor runs once more at the end to show
how far the machine's load moved the baseline. Every output is checked byte for byte against the
local executor's (timings removed). The machine's load average is printed before and after:
on a shared machine other processes take cores, and the figures say so.

    python benchmarks/bench_executors.py [--quick] [--no-ray]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from typing import Any

from _common import check, report


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (1, 5, 15 min) on {os.cpu_count()} cores"


def _bench_cells(executor: Any, seeds: int) -> str:
    from orchestrace.bench.suite import run_suite

    rep = run_suite("sim-v2", seeds=seeds, executor=executor, progress=False, envelope=False)
    assert not rep["missing"]["runs"], rep["missing"]
    runs = [{k: v for k, v in r.items() if k != "cpu_s"} for r in rep["runs"]]
    cells = [{k: v for k, v in c.items() if k != "cpu_s"} for c in rep["cells"]]
    return json.dumps({"runs": runs, "cells": cells}, sort_keys=True)


def _credit(executor: Any, trace: Any, samples: int) -> str:
    from orchestrace.credit.counterfactual import CounterfactualMessageCredit

    table = CounterfactualMessageCredit(samples=samples, executor=executor).assign(trace, "message")
    return table.to_json() + json.dumps(table.stats, sort_keys=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-ray", action="store_true", help="process executor only")
    args = ap.parse_args()
    from orchestrace.executors import make_executor, shutdown_ray
    from orchestrace.runtime import run

    seeds, samples = (2, 2) if args.quick else (5, 4)
    trace = run("debate", "arith", agents=8, seed=0, rounds=3, task_size=16).trace
    messages = sum(e.type == "message" for e in trace.events)
    print(
        f"executors: sim-v2 x {seeds} seeds ({seeds * 120} runs, no envelope); counterfactual "
        f"credit of {messages} messages, K = {samples}; {platform.machine()}, "
        f"Python {platform.python_version()}",
        flush=True,
    )
    print(f"  load average before: {_load()}", flush=True)
    workloads = {
        "sim-v2 cells": lambda ex: _bench_cells(ex, seeds),
        "counterfactual credit": lambda ex: _credit(ex, trace, samples),
    }
    local = make_executor("local")
    _bench_cells(local, 1)  # warm-up: first imports and caches are not the executor's cost
    _credit(local, trace, 1)
    base: dict[str, tuple[float, str]] = {}
    for name, fn in workloads.items():
        t0 = time.perf_counter()
        out = fn(local)
        base[name] = (time.perf_counter() - t0, out)
        report(f"{name}: local executor", base[name][0], "s")
    for workers in (1, 2):
        t0 = time.perf_counter()
        make_executor("process", workers).map(abs, list(range(workers)))
        report(
            f"process: start a pool of {workers} and run a trivial job each",
            time.perf_counter() - t0,
            "s",
        )
    kinds = ["process"] + ([] if args.no_ray else ["ray"])
    for kind in kinds:
        for workers in (1, 2):
            if kind == "ray":
                shutdown_ray()
                t0 = time.perf_counter()
                ex = make_executor("ray", workers)
                report(
                    f"ray: start a local instance of {workers} CPUs", time.perf_counter() - t0, "s"
                )
            else:
                ex = make_executor(kind, workers)
            for name, fn in workloads.items():
                t0 = time.perf_counter()  # the local run right before: the load drifts
                fn(local)
                t_local = time.perf_counter() - t0
                t0 = time.perf_counter()
                out = fn(ex)
                wall = time.perf_counter() - t0
                speedup = t_local / wall
                report(
                    f"{name}: {kind} x{workers}",
                    wall,
                    "s",
                    baseline="local executor just before",
                    baseline_value=t_local,
                    note=f"speedup {speedup:.2f}x, parallel efficiency {speedup / workers:.2f}",
                )
                check(f"{name}: {kind} x{workers} output == local", out == base[name][1])
    shutdown_ray()
    for name, fn in workloads.items():  # the baseline again: how much the load moved
        t0 = time.perf_counter()
        fn(local)
        report(f"{name}: local executor again, at the end", time.perf_counter() - t0, "s")
    print(f"  load average after: {_load()}", flush=True)


if __name__ == "__main__":
    main()
