"""Runtime figures: recording overhead per event, the 300-agent swarm on virtual time (CPU time,
and the makespan = critical path invariant as a check), framework overhead against LangGraph,
and the cost of a counterfactual fork on a debate (representative) and a swarm (best case).

    python benchmarks/bench_runtime.py [--quick]
"""

import argparse
import asyncio
import operator
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

from _common import best_of, check, report


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


def bench_overhead(n: int) -> None:
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

    t_bare, _ = best_of(lambda: _bare_swarm(task, SimBackend(seed=1, latency_scale=0.0), n), 5)
    t_ours, trace = best_of(ours, 5)
    per_event = (t_ours - t_bare) / trace.n_events * 1e6
    report(
        f"runtime overhead per recorded event ({trace.n_events:,} events, sim, zero latency)",
        per_event,
        "us",
        target="<=20 us",
        ok=per_event <= 20,
        note=f"orchestrace {t_ours * 1e3:.0f} ms vs bare asyncio {t_bare * 1e3:.0f} ms "
        "doing the same calls",
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


def main(quick: bool = False) -> None:
    print("runtime")
    bench_overhead(100 if quick else 300)
    bench_swarm_scale()
    bench_langgraph(100, repeat=3 if quick else 7)
    bench_fork_debate()
    bench_fork()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    main(ap.parse_args().quick)
