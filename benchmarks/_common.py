"""Helpers shared by the benchmarks: cached inputs, timing, peak memory in a fresh process."""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
DATA = ROOT / ".data"
RESULTS: list[dict[str, Any]] = []


def data_path(name: str) -> Path:
    DATA.mkdir(exist_ok=True)
    return DATA / name


def cached_trace_file(
    name: str,
    agents: int,
    steps: int,
    depth: int,
    *,
    fmt: str = "json",
    llm_events: bool = True,
    seed: int = 3,
) -> Path:
    """Generate (once per generator version) and return a trace file for the benchmarks."""
    from orchestrace import dump, generate_trace
    from orchestrace.trace.generate import GENERATOR_VERSION

    path = data_path(f"gen{GENERATOR_VERSION}-{name}")
    if not path.exists():
        tr = generate_trace(agents, steps, depth, seed, llm_events=llm_events)
        dump(tr, path, format=fmt)
    return path


def _num(x: float, digits: int) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.{digits}g}"


def spread(xs: Sequence[float], digits: int = 3) -> str:
    """``median M (IQR a-b, range c-d, n runs)`` of the samples ``xs``, to ``digits`` figures.

    Every benchmark reports the median of its runs with their spread, for each side alike;
    the interquartile range is left out below 4 runs, where it says nothing the range does not.
    """
    iqr = ""
    if len(xs) >= 4:
        q = statistics.quantiles(xs, n=4, method="inclusive")
        iqr = f"IQR {_num(q[0], digits)}-{_num(q[2], digits)}, "
    return (
        f"median {_num(statistics.median(xs), digits)} ({iqr}range {_num(min(xs), digits)}-"
        f"{_num(max(xs), digits)}, {len(xs)} run{'s' if len(xs) != 1 else ''})"
    )


def alternate(
    sides: dict[str, Callable[[], Any]], repeat: int = 3, *, clock: str = "cpu"
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Run every side ``repeat`` times, interleaved (one run of each in turn, in this process).

    Interleaving puts any change of load on the machine on every side alike, and the order of
    the sides is reversed every other round, so neither always runs first. Each run starts
    after a full garbage collection, with no other run's result alive (results are kept from
    the last round only). ``clock``: ``"cpu"`` (``time.process_time``, what the process itself
    spent) or ``"wall"``. Returns the times of each side and its last result.
    """
    timer = time.process_time if clock == "cpu" else time.perf_counter
    times: dict[str, list[float]] = {k: [] for k in sides}
    last: dict[str, Any] = {}
    names = list(sides)
    for r in range(repeat):
        for name in names if r % 2 == 0 else names[::-1]:
            if r == repeat - 1:
                last.pop(name, None)
            gc.collect()
            t0 = timer()
            out = sides[name]()
            times[name].append(timer() - t0)
            if r == repeat - 1:
                last[name] = out
            del out
    return times, last


def median(xs: Sequence[float]) -> float:
    """The median of ``xs`` (the figure every benchmark compares)."""
    return float(statistics.median(xs))


def in_fresh_process(
    code: str, *, env: dict[str, str] | None = None, timeout: int = 1800
) -> dict[str, Any]:
    """Run ``code`` in a new interpreter; it must print one JSON object as its last line."""
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        # the CLI never restarts itself with other malloc settings (ORCHESTRACE_HUGE_PAGES)
        env={**os.environ, "ORCHESTRACE_NO_REEXEC": "1", **(env or {})},
        timeout=timeout,
        check=False,
    )
    if r.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def report(
    name: str,
    value: float,
    unit: str,
    *,
    baseline: str | None = None,
    baseline_value: float | None = None,
    target: str | None = None,
    ok: bool | None = None,
    note: str = "",
) -> None:
    """Print one figure (and its ratio against a baseline measured in the same run).

    ``target`` is for performance figures that could come out either way. A property that holds
    by construction is not a target: state it with :func:`check`.
    """
    row = {
        "kind": "figure",
        "name": name,
        "value": value,
        "unit": unit,
        "baseline": baseline,
        "baseline_value": baseline_value,
        "target": target,
        "ok": ok,
        "note": note,
    }
    if baseline_value:
        row["ratio"] = baseline_value / value if value else float("inf")
    RESULTS.append(row)
    line = f"  {name:<58} {value:>12.4g} {unit}"
    if baseline_value is not None:
        ours = value / baseline_value if baseline_value else float("inf")
        line += (
            f"   {baseline}: {baseline_value:.4g} {unit} (ours / baseline {ours:.2f}x, "
            f"baseline / ours {row.get('ratio', float('inf')):.2f}x)"
        )
    if target:
        line += f"   [target {target}: {'met' if ok else 'NOT met'}]"
    if note:
        line += f"   ({note})"
    print(line, flush=True)


def check(name: str, passed: bool, note: str = "") -> None:
    """Record a correctness check (an invariant that must hold), printed as pass or FAIL.

    Checks are not performance figures: a failure means a bug, and ``run.py`` exits 1.
    """
    RESULTS.append({"kind": "check", "name": name, "passed": bool(passed), "note": note})
    line = f"  check: {name:<51} {'pass' if passed else 'FAIL'}"
    if note:
        line += f"   ({note})"
    print(line, flush=True)
