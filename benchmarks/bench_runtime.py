"""Runtime figures: recording overhead per event, cost per event across team sizes (swarm and
hierarchical, 300 to 3,000 agents, with the scaling exponent), the 300-agent swarm on virtual
time (CPU time, and the makespan = critical path invariant as a check), framework overhead
against LangGraph, and the cost of a counterfactual fork on a debate (representative) and a
swarm (best case).

    python benchmarks/bench_runtime.py [--quick]          # everything
    python benchmarks/bench_runtime.py --only overhead    # overhead and scaling only

Overhead and scaling are CPU time of this process (``time.process_time``), so other jobs on a
loaded machine slow them less than wall time; ours and the baseline are measured interleaved
(one run of each in turn) with the collector paused for both, and the load average is printed
with the figures.
"""

import argparse
import asyncio
import gc
import math
import operator
import os
import statistics
import time
from typing import Annotated, Any, TypedDict

from orchestrace.runtime import RunConfig, Runtime, make_task, run
from orchestrace.runtime.backends.base import LLMRequest
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.clock import run_virtual
from orchestrace.runtime.prompts import render
from orchestrace.runtime.topologies import get_topology
from orchestrace.trace.analyze import summarize

from _common import check, report


# ---------------------------------------------------------------------- overhead per event
def _bare_swarm(task: Any, backend: SimBackend, n: int) -> Any:
    """The swarm's work with plain asyncio: same backend calls, tools, queues; no recording."""

    async def worker(part: Any, i: int, inbox: asyncio.Queue[Any]) -> Any:
        task.tools()["search"]({k: part.data[k] for k in ("start", "end", "city")})
        payload = {"prompt": part.prompt, **part.payload(task)}
        r = await backend.complete(
            LLMRequest(
                f"worker{i + 1}", "worker", "solve", render("solve", payload, "worker"), payload
            )
        )
        await asyncio.sleep(r.latency)
        await inbox.put((part.index, r.answer))
        return r.answer

    async def aggregator(inbox: asyncio.Queue[Any], k: int) -> Any:
        got = {}
        while len(got) < k:
            i, v = await inbox.get()
            got[i] = v
        return task.combine([got[i] for i in range(k)])

    async def main() -> Any:
        payload = {"prompt": task.question, "suggest": n}
        r = await backend.complete(
            LLMRequest(
                "orchestrator",
                "orchestrator",
                "plan",
                render("plan", payload, "orchestrator"),
                payload,
            )
        )
        await asyncio.sleep(r.latency)
        parts = task.subtasks(n)
        inbox: asyncio.Queue[Any] = asyncio.Queue()
        agg = asyncio.create_task(aggregator(inbox, len(parts)))
        workers = [asyncio.create_task(worker(p, i, inbox)) for i, p in enumerate(parts)]
        answer = await agg
        await asyncio.gather(*workers)
        return answer

    return run_virtual(main())


def _load() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:  # not available on this platform
        return "load average unknown"
    return f"load average {one:.1f} (1 min) / {five:.1f} (5 min) on {os.cpu_count()} CPUs"


def _cpu(fn: Any, *, pause_gc: bool = True) -> tuple[float, Any]:
    """CPU seconds of ``fn()``, with the cyclic collector paused (as a simulated run does).

    ``pause_gc=False`` leaves the collector as it is: what the runtime does itself is measured.
    """
    was = gc.isenabled()
    if pause_gc:
        gc.disable()
    try:
        t0 = time.process_time()
        out = fn()
        return time.process_time() - t0, out
    finally:
        if was:
            gc.enable()


def _spread(xs: list[float]) -> str:
    """Median and the interquartile range of ``xs`` (microseconds)."""
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    return f"median {statistics.median(xs):.1f}, IQR {q[0]:.1f}-{q[2]:.1f}"


def bench_overhead(n: int, repeat: int = 41) -> None:
    """Runtime overhead per recorded event against a bare asyncio program doing the same awaits.

    The two are run interleaved ``repeat`` times; per repetition the overhead is our CPU time
    minus the baseline's, over our recorded events. Reported: medians and spread.
    """
    task = make_task("wide-search-v0", seed=1, size=4 * n)
    spec = get_topology("swarm")

    def ours() -> Any:
        rt = Runtime(
            task=task,
            backend=SimBackend(seed=1, latency_scale=0.0),
            config=RunConfig(agents=n, seed=1, tool_latency_s=0.0),
            topology="swarm",
        )
        return run_virtual(rt.run(spec.root))

    def bare() -> Any:
        return _bare_swarm(task, SimBackend(seed=1, latency_scale=0.0), n)

    events = ours().n_events  # warm up both
    bare()
    per_ours, per_bare, over, ratio = [], [], [], []
    for _ in range(repeat):
        t_ours, _ = _cpu(ours)
        t_bare, _ = _cpu(bare)
        per_ours.append(t_ours / events * 1e6)
        per_bare.append(t_bare / events * 1e6)
        over.append((t_ours - t_bare) / events * 1e6)
        ratio.append(t_ours / t_bare)
    med = statistics.median(over)
    report(
        f"runtime overhead per recorded event ({events:,} events, swarm of {n}, sim, zero latency)",
        med,
        "us",
        target="<=10 us over bare asyncio",
        ok=med <= 10,
        note=f"CPU per event: orchestrace {_spread(per_ours)} us, bare asyncio "
        f"{_spread(per_bare)} us; overhead {_spread(over)} us; ratio median "
        f"{statistics.median(ratio):.2f}x (min {min(ratio):.2f}, max {max(ratio):.2f}); "
        f"{repeat} interleaved repetitions, {_load()}",
    )


def _scaled_run(topology: str, n: int, options: dict[str, Any]) -> tuple[float, int]:
    task = make_task("wide-search-v0", seed=1, size=4 * n)
    rt = Runtime(
        task=task,
        backend=SimBackend(seed=1),
        config=RunConfig(agents=n, seed=1, max_agents=max(1000, 4 * n), options=options),
        topology=topology,
    )
    t, trace = _cpu(lambda: run_virtual(rt.run(get_topology(topology).root)), pause_gc=False)
    return t, trace.n_events


def bench_scaling(sizes: tuple[int, ...] = (300, 1000, 3000), repeat: int = 3) -> None:
    """Cost per recorded event across team sizes, and the exponent of CPU time in events.

    Sizes are interleaved (one run of each size in turn, ``repeat`` rounds), so load from
    other jobs falls on every size alike. The collector is left on: the virtual-time loop
    pauses it itself while it runs. An exponent of 1 is a flat cost per event.
    """
    for topology, options in (("swarm", {"gossip": 0.5, "chunks": 4}), ("hierarchical", {})):
        cpu: dict[int, list[float]] = {n: [] for n in sizes}
        events: dict[int, int] = {}
        for _ in range(repeat):
            for n in sizes:
                t, events[n] = _scaled_run(topology, n, options)
                cpu[n].append(t)
        per = {n: [t / events[n] * 1e6 for t in cpu[n]] for n in sizes}
        xs = [math.log(events[n]) for n in sizes]
        ys = [math.log(statistics.median(cpu[n])) for n in sizes]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
            (x - mx) ** 2 for x in xs
        )
        lo, hi = sizes[0], sizes[-1]
        growth = statistics.median(per[hi]) / statistics.median(per[lo])
        report(
            f"{topology} {lo:,} -> {hi:,} agents: exponent of CPU time in events",
            slope,
            "",
            target="<=1.05 (flat cost per event)",
            ok=slope <= 1.05,
            note="; ".join(
                f"{n:,} agents / {events[n]:,} events: {_spread(per[n])} us/event" for n in sizes
            )
            + f"; per-event cost x{growth:.2f} from {lo:,} to {hi:,}; {repeat} interleaved "
            f"rounds, CPU time, {_load()}",
        )


# ---------------------------------------------------------------------- scale
def bench_swarm_scale() -> None:
    res = run("swarm", "wide-search", agents=300, seed=1, task_size=1200, chunks=4, gossip=0.5)
    s = summarize(res.trace)
    # On virtual time every wait is a recorded dependency, so the makespan equals the critical
    # path by construction: a correctness check of the recorded edges, not a performance figure.
    gap = abs(s["makespan_s"] - s["critical_path_s"]) / s["critical_path_s"]
    check(
        f"swarm 300 agents / {s['events']:,} events: virtual makespan = critical path",
        gap <= 1e-9,
        note=f"makespan {s['makespan_s']:.2f} s, critical path {s['critical_path_s']:.2f} s "
        f"(virtual time); speedup work / critical path {s['speedup']:.0f}x",
    )
    report(
        f"swarm 300 agents / {s['events']:,} events: CPU time of the run",
        res.cpu_s,
        "s",
        target="<10 s",
        ok=res.cpu_s < 10,
    )


# ---------------------------------------------------------------------- LangGraph
def _langgraph_fanout(n: int, latency: float) -> float:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    class State(TypedDict):
        parts: list[int]
        results: Annotated[list[int], operator.add]
        answer: int

    async def model(x: int) -> int:
        await asyncio.sleep(latency)  # the fake model: fixed latency
        return x

    async def orchestrator(state: State) -> dict[str, Any]:
        await model(0)
        return {"parts": list(range(n))}

    def fan_out(state: State) -> list[Send]:
        return [Send("worker", {"part": p}) for p in state["parts"]]

    async def worker(state: dict[str, Any]) -> dict[str, Any]:
        return {"results": [await model(state["part"])]}

    def aggregate(state: State) -> dict[str, Any]:
        return {"answer": sum(state["results"])}

    g = StateGraph(State)
    g.add_node("orchestrator", orchestrator)
    g.add_node("worker", worker)
    g.add_node("aggregate", aggregate)
    g.add_edge(START, "orchestrator")
    g.add_conditional_edges("orchestrator", fan_out, ["worker"])
    g.add_edge("worker", "aggregate")
    g.add_edge("aggregate", END)
    app = g.compile()

    async def go() -> float:
        t0 = time.perf_counter()
        out = await app.ainvoke({"parts": [], "results": [], "answer": 0})
        assert out["answer"] == sum(range(n))
        return time.perf_counter() - t0

    return asyncio.run(go())


def _orchestrace_fanout(n: int, latency: float) -> float:
    from orchestrace.testing import MockModel

    task = make_task("arith-mapreduce-v0", seed=0, size=n)
    t0 = time.perf_counter()
    res = run(
        "centralized",
        task,
        agents=n,
        backend=MockModel(["ANSWER: 1"], latency=latency, virtual=False),
    )
    wall = time.perf_counter() - t0
    assert sum(e.type == "llm_call" for e in res.trace.events) == n + 1
    return wall


def bench_langgraph(n: int, latency: float = 0.05, repeat: int = 5) -> None:
    try:
        import langgraph  # noqa: F401
    except ImportError:
        print("  (langgraph not installed: pip install 'orchestrace[bench]' to compare)")
        return
    ideal = 2 * latency  # orchestrator call, then the workers' calls in parallel
    lg = statistics.median(_langgraph_fanout(n, latency) for _ in range(repeat)) - ideal
    ours = statistics.median(_orchestrace_fanout(n, latency) for _ in range(repeat)) - ideal
    report(
        f"fan-out/aggregate, 1 orchestrator + {n} workers, {latency * 1e3:.0f} ms model: "
        "framework overhead",
        ours * 1e3,
        "ms",
        baseline="LangGraph (Send fan-out)",
        baseline_value=lg * 1e3,
        note="overhead = wall time - 2 model latencies; orchestrace records the full trace "
        f"({3 * n + 3} events), LangGraph records nothing",
    )


# ---------------------------------------------------------------------- counterfactual fork
def _fork_calls(t: Any, messages: list[Any]) -> list[int]:
    from orchestrace.runtime.replay import DropMessage, fork

    return [fork(t, [DropMessage.of(t, m.id)]).backend_calls for m in messages]


def bench_fork_debate() -> None:
    """Representative: in a debate every message is read by an LLM call of the next round."""
    t = run("debate", "arith", agents=8, seed=2, rounds=3, task_size=32).trace
    consumed = {e.src for e in t.edges if e.type == "message"}
    msgs = [e for e in t.events if e.type == "message" and e.id in consumed]
    full = sum(e.type == "llm_call" for e in t.events)
    calls = _fork_calls(t, msgs)
    report(
        f"fork dropping one message, 8-agent 3-round debate ({len(msgs)} messages)",
        statistics.mean(calls) / full * 100,
        "% of full re-run calls (mean)",
        note=f"mean {statistics.mean(calls):.1f} / worst {max(calls)} backend calls vs {full} "
        "for a full re-run; the fork re-executes the whole run and only changed calls reach "
        "the backend",
    )


def bench_fork() -> None:
    """Best case: most swarm gossip is read by no LLM call, so a fork changes almost nothing."""
    res = run("swarm", "wide-search", agents=300, seed=1, task_size=1200, chunks=4, gossip=0.5)
    t = res.trace
    consumed = {e.src for e in t.edges if e.type == "message"}
    gossip = [
        e
        for e in t.events
        if e.type == "message"
        and e.id in consumed
        and "value" not in (e.attrs or {}).get("data", {})
    ]
    full = sum(e.type == "llm_call" for e in t.events)
    calls = _fork_calls(t, gossip)
    report(
        f"fork dropping one message, 300-agent swarm, best case ({len(gossip)} gossip messages)",
        statistics.mean(calls) / full * 100,
        "% of full re-run calls (mean)",
        note=f"mean {statistics.mean(calls):.1f} / worst {max(calls)} backend calls vs {full} "
        "for a full re-run; gossip rarely reaches an LLM call, so this is a property of the "
        "workload",
    )


def main(quick: bool = False, only: str | None = None) -> None:
    print("runtime")
    # a repetition pair costs about 0.05 s: many, so the median holds on a loaded machine
    bench_overhead(100 if quick else 300, repeat=11 if quick else 41)
    bench_scaling((100, 300, 1000) if quick else (300, 1000, 3000), repeat=2 if quick else 3)
    if only == "overhead":
        return
    bench_swarm_scale()
    bench_langgraph(100, repeat=3 if quick else 7)
    bench_fork_debate()
    bench_fork()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--only", choices=["overhead"], help="overhead: only the overhead and scaling figures"
    )
    args = ap.parse_args()
    main(args.quick, args.only)
