"""The scale envelope: from academic settings to the industry envelope, measured per point.

Academic settings (2-5 agents, under 100 events) and production settings (hundreds to ten
thousand agents, thousands to hundreds of thousands of events) are points of one sweep. Each
point is **recorded** (a run on the simulator, virtual time), **validated** (``check_trace``)
and **analysed** (critical path, speedup, E1-E3 metrics), and reports the CPU seconds of each
phase, events per CPU second, CPU microseconds per event and, when measured in its own process
(``isolate=True``), the peak resident memory.

Two kinds of point:

* :func:`envelope_point` -- a swarm of ``agents`` workers on ``wide-search-v0`` sized to about
  ``length`` events: each worker takes ``chunks`` search-and-read turns over its slice of the
  corpus (one document per turn), so the corpus grows with the team;
* :func:`industry_point` -- the industry configuration: a staged, three-level hierarchy on
  ``wide-search-v1`` (answers rest on the search results), by default 3 orchestrator stages x
  (4 managers x 4 sub-managers) over 300 workers at spawn depth 3 -- 360 sub-agents -- and
  4,200 search calls. The corpus scales with the team (14 documents per worker), every
  document is read by exactly one worker and the answer is the exact count over the whole
  corpus, so success still depends on every worker's work: on the default simulator about
  four runs in ten succeed (each of the 4,200 reads is wrong with a small probability), and
  injected tool failures lower it.

A trace can stream to a Parquet dataset while it is recorded (``parquet=``): events and edges
go out in row groups as they happen (:mod:`orchestrace.io.parquet_stream`).

Example:
    >>> row = envelope_point(10, 100)
    >>> row["agents"], 50 <= row["events"] <= 200, row["setting"], row["valid"]
    (10, True, 'between', True)
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from orchestrace.errors import ConfigError, RuntimeError_
from orchestrace.io.parquet_stream import ParquetExporter
from orchestrace.masbench.metrics import run_metrics
from orchestrace.runtime import run
from orchestrace.trace.check import check_trace

__all__ = ["ENVELOPE_POINTS", "INDUSTRY", "envelope_point", "industry_point", "measure_point"]

#: The industry configuration of :func:`industry_point` (``run`` keyword arguments).
INDUSTRY: dict[str, Any] = {
    "topology": "hierarchical",
    "task": "wide-search-v1",
    "agents": 300,
    "task_size": 4200,
    "depth": 2,
    "branching": 4,
    "managers": 4,
    "stages": 3,
    "chunks": 15,
}

#: Points of the extended envelope beyond the grid: (agents, target events).
ENVELOPE_POINTS: tuple[tuple[int, int], ...] = ((300, 4000), (1000, 40_000), (10_000, 400_000))


def _peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024


def _setting(agents: int, events: int) -> str:
    if agents <= 5 and events < 100:
        return "academic"
    return "production" if agents >= 100 and events >= 1000 else "between"


def _finish(
    res: Any,
    cpu_run: float,
    base: dict[str, Any],
    parquet: str | os.PathLike[str] | None,
) -> dict[str, Any]:
    """Validate and analyse a recorded run; the point's row."""
    tr = res.trace
    t0 = time.process_time()
    problems = check_trace(tr)
    cpu_check = time.process_time() - t0
    t0 = time.process_time()
    m = run_metrics(tr, credit_unit="agent")
    cpu_analyse = time.process_time() - t0
    types = Counter(e.type for e in tr.events)
    n = tr.n_events
    cpu = cpu_run + cpu_check + cpu_analyse
    agents = sum(1 for e in tr.events if e.type == "spawn")
    row = {
        **base,
        "events": n,
        "sub_agents": agents,
        "tool_calls": types.get("tool_call", 0),
        "llm_calls": types.get("llm_call", 0),
        "orchestrator_stages": sum(
            1
            for e in tr.events
            if e.type == "llm_call"
            and e.agent == "orchestrator"
            and (e.attrs or {}).get("kind") == "plan"
        ),
        "spawn_depth": int(m["shape"]["depth"]),
        "valid": not [p for p in problems if p.severity == "error"],
        "cpu_s": cpu,
        "cpu_run_s": cpu_run,
        "cpu_check_s": cpu_check,
        "cpu_analyse_s": cpu_analyse,
        "events_per_cpu_s": n / cpu if cpu > 0 else math.inf,
        "cpu_us_per_event": 1e6 * cpu / n if n else 0.0,
        "virtual_s": m["critical_path_s"],
        "speedup": m["speedup"],
        "efficiency": m["efficiency"],
        "tokens": m["tokens"],
        "success": m["success"],
        "messages": m["messages"],
        "shape": m["shape"],
        "setting": _setting(int(base["agents"]), n),
    }
    if parquet is not None:
        row["parquet"] = str(parquet)
    return row


def _processors(parquet: str | os.PathLike[str] | None, overwrite: bool) -> list[Any]:
    if parquet is None:
        return []

    return [ParquetExporter(parquet, overwrite=overwrite)]


def envelope_point(
    agents: int,
    length: int,
    seed: int = 0,
    *,
    parquet: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> dict[str, Any] | None:
    """A swarm of ``agents`` sized to about ``length`` events, recorded, validated, analysed.

    Args:
        agents: Workers.
        length: Target number of events.
        seed: Run and task seed.
        parquet: Stream the trace to this Parquet dataset directory while it runs.
        overwrite: Replace an existing dataset at ``parquet``.

    Returns:
        The point's row, or ``None`` when the run cannot be that short (every agent needs a
        few events).

    Raises:
        ConfigError: ``agents`` or ``length`` is not an integer >= 1.
    """
    for name, value in (("agents", agents), ("length", length)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
    per_agent = length / agents
    if per_agent < 4:
        return None
    chunks = max(1, math.ceil((per_agent - 4) / 3))
    procs = _processors(parquet, overwrite)
    t0 = time.process_time()
    res = run(
        "swarm",
        "wide-search-v0",
        agents=agents,
        seed=seed,
        task_size=max(agents * chunks, 4),
        chunks=chunks,
        max_agents=agents + 2,
        max_steps=max(100_000, 4 * length),
        patience=1e6,  # long runs: the aggregator waits for every report
        processors=procs,
    )
    cpu_run = time.process_time() - t0
    base = {"kind": "swarm", "agents": agents, "target_length": length, "seed": seed}
    return _finish(res, cpu_run, base, parquet)


def industry_point(
    seed: int = 0,
    *,
    parquet: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    **changes: Any,
) -> dict[str, Any]:
    """The industry configuration (:data:`INDUSTRY`), recorded, validated and analysed.

    Args:
        seed: Run and task seed.
        parquet: Stream the trace to this Parquet dataset directory while it runs.
        overwrite: Replace an existing dataset at ``parquet``.
        **changes: Overrides of :data:`INDUSTRY` (``agents``, ``stages``, ``tool_failure_rate``...).
    """
    cfg = {**INDUSTRY, **changes}
    topology, task = cfg.pop("topology"), cfg.pop("task")
    procs = _processors(parquet, overwrite)
    t0 = time.process_time()
    res = run(topology, task, seed=seed, processors=procs, **cfg)
    cpu_run = time.process_time() - t0
    base = {
        "kind": "industry",
        "agents": int(cfg["agents"]),
        "target_length": None,
        "seed": seed,
        "config": {"topology": topology, "task": task, **cfg},
    }
    return _finish(res, cpu_run, base, parquet)


def _child(kind: str, args: Mapping[str, Any]) -> dict[str, Any] | None:
    base = _peak_rss_mb()
    if kind == "industry":
        row: dict[str, Any] | None = industry_point(**args)
    else:
        row = envelope_point(**args)
    if row is not None:
        row["peak_rss_mb"] = _peak_rss_mb()
        row["base_rss_mb"] = base
    return row


def measure_point(kind: str, *, isolate: bool = True, **args: Any) -> dict[str, Any] | None:
    """One envelope point, in a fresh process so that its peak memory is its own.

    Args:
        kind: ``swarm`` (:func:`envelope_point`; give ``agents`` and ``length``) or
            ``industry`` (:func:`industry_point`).
        isolate: Run in a fresh Python process and report ``peak_rss_mb`` (peak resident
            memory of that process, interpreter and imports included) and ``base_rss_mb``
            (its resident memory before the run). Without it the point runs here and the
            memory columns are ``None``.
        **args: Arguments of the point function.

    Raises:
        ConfigError: Unknown ``kind``.
        RuntimeError_: The point's process failed (the message ends with its last line).
    """
    if kind not in ("swarm", "industry"):
        raise ConfigError(f"unknown envelope point kind {kind!r}; use 'swarm' or 'industry'")
    if not isolate:
        row = industry_point(**args) if kind == "industry" else envelope_point(**args)
        if row is not None:
            row["peak_rss_mb"] = row["base_rss_mb"] = None
        return row

    code = "from orchestrace.masbench.envelope import _child_main; _child_main()"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps({"kind": kind, "args": args}, default=str),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError_(
            f"envelope point {kind} {dict(args)} failed in its process (exit "
            f"{proc.returncode}): {last[:300]}; run it with isolate=False to see the traceback"
        )
    out: dict[str, Any] | None = json.loads(proc.stdout)
    return out


def _child_main() -> None:
    """Entry point of the process :func:`measure_point` starts (JSON in, JSON out)."""
    job = json.loads(sys.stdin.read())
    row = _child(job["kind"], job["args"])
    sys.stdout.write(json.dumps(row, default=str))


#: The survey's two regions of the scale gap: (agents low, high), (steps low, high), label.
#: Academic work evaluates 2-5 agents on traces under 100 steps; Kimi K2.5/K2.6 run 100-300
#: sub-agents and 1,500-4,000+ tool calls per task. The paper pool gives no per-paper team
#: sizes or trace lengths, so the regions are the survey's stated ranges.
SCALE_GAP: tuple[tuple[tuple[float, float], tuple[float, float], str], ...] = (
    ((2, 5), (10, 100), "academia (survey): 2-5 agents, < 100 steps"),
    (
        (100, 300),
        (1500, 4000),
        "industry (survey, Kimi K2.5/K2.6): 100-300 sub-agents,\n1,500-4,000+ tool calls",
    ),
)


def envelope_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The report's scale-envelope table (one line per point).

    Example:
        >>> envelope_markdown([])[0]
        '| kind | sub-agents | target events | events | tool calls | depth | stages | valid | CPU s | us/event | peak MiB | virtual s | speedup | success | setting |'
    """

    def num(x: Any, fmt: str) -> str:
        return "n/a" if x is None else format(x, fmt)

    out = [
        "| kind | sub-agents | target events | events | tool calls | depth | stages | valid | CPU s "
        "| us/event | peak MiB | virtual s | speedup | success | setting |",
        "| --- " * 15 + "|",
    ]
    for r in rows:
        out.append(
            f"| {r.get('kind', 'swarm')} | {r.get('sub_agents', r['agents']):,} | "
            f"{num(r.get('target_length'), ',')} | {r['events']:,} | "
            f"{num(r.get('tool_calls'), ',')} | {num(r.get('spawn_depth'), 'd')} | "
            f"{num(r.get('orchestrator_stages'), 'd')} | {r.get('valid', 'n/a')} | "
            f"{r['cpu_s']:.3f} | {num(r.get('cpu_us_per_event'), '.1f')} | "
            f"{num(r.get('peak_rss_mb'), '.0f')} | {r['virtual_s']:.1f} | {r['speedup']:.1f} | "
            f"{r['success']:.0f} | {r['setting']} |"
        )
    return out


def scale_gap_figure(rows: list[dict[str, Any]]) -> Any:
    """The scale-gap figure: the survey's academia and industry regions and the envelope points.

    x: agents in the run (sub-agents), y: events per task (tool calls drawn too for the
    industry configuration). Needs matplotlib (``pip install 'orchestrace[learn]'``).
    """
    try:
        import matplotlib  # noqa: PLC0415  optional extra [learn]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415  optional extra [learn]
    except ImportError:  # pragma: no cover - the report skips plots without matplotlib
        raise ImportError(
            "the scale-gap figure needs matplotlib: pip install 'orchestrace[learn]'"
        ) from None
    from matplotlib.patches import Rectangle  # noqa: PLC0415  optional extra [learn]

    fig, ax = plt.subplots(figsize=(7, 5))
    for (x0, x1), (y0, y1), label in SCALE_GAP:
        color = "tab:gray" if x1 <= 5 else "tab:orange"
        ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, color=color, alpha=0.25, label=label))
    swarm = [r for r in rows if r.get("kind", "swarm") == "swarm"]
    ind = [r for r in rows if r.get("kind") == "industry"]
    if swarm:
        ax.scatter(
            [r.get("sub_agents", r["agents"]) for r in swarm],
            [r["events"] for r in swarm],
            s=18,
            color="tab:blue",
            label=f"orchestrace envelope: swarm ({len(swarm)} points, events)",
        )
    for r in ind:
        ax.scatter(
            [r["sub_agents"]],
            [r["events"]],
            marker="*",
            s=160,
            color="tab:red",
            label="orchestrace industry configuration (events)",
        )
        ax.scatter(
            [r["sub_agents"]],
            [r["tool_calls"]],
            marker="P",
            s=90,
            color="tab:red",
            label="orchestrace industry configuration (tool calls)",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1, 2e4)
    ax.set_ylim(5, 1e6)
    ax.set_xlabel("agents per task (sub-agents)")
    ax.set_ylabel("events (steps, tool calls) per task")
    ax.set_title("Scale gap: survey regions and the measured envelope")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig
