"""Trace core figures: decoder choice, load+validate vs jsonschema, critical path vs networkx
(and linearity), peak memory of a 1,000,000-event analysis vs its Arrow events table. Each
comparison gives both sides the same number of runs (``REPEAT``; two fresh processes each for
the full-size load+validate, whose baseline takes over a minute) in the same environment, the
runs of the two sides interleaved, and compares their medians (the spread is printed).

    python benchmarks/bench_trace.py            # full size (1,000,000 events; several minutes)
    python benchmarks/bench_trace.py --quick    # 100,000 events
"""

from __future__ import annotations

import argparse
import json
import textwrap

from _common import alternate, cached_trace_file, in_fresh_process, median, report, spread

#: Runs per side of every comparison: ours and the baseline get the same count.
REPEAT = 3


def bench_decoder(n: int) -> None:
    """msgspec (chosen) vs pydantic v2 decoding the same typed model from the same bytes."""
    from typing import Any, Literal

    import msgspec
    import pydantic

    from orchestrace.trace.model import Trace

    path = cached_trace_file(f"decoder-{n}.json", 200, n, 2)
    data = path.read_bytes()
    etype = Literal[
        "orchestrator_decision",
        "spawn",
        "despawn",
        "message",
        "tool_call",
        "tool_result",
        "return",
        "aggregate",
        "human_intervention",
        "safety_event",
        "llm_call",
    ]

    class PEvent(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
        id: str = pydantic.Field(min_length=1)
        t: float = pydantic.Field(ge=0)
        type: etype
        agent: str = pydantic.Field(min_length=1)
        dur: float = pydantic.Field(0.0, ge=0)
        role: str | None = None
        from_: str | None = pydantic.Field(None, alias="from")
        to: str | None = None
        tool: str | None = None
        decision: Literal["spawn", "delegate", "communicate", "aggregate", "stop"] | None = None
        step: int | None = pydantic.Field(None, ge=0)
        content: str | None = None
        content_ref: str | None = None
        trusted: bool | None = None
        tokens_in: int = pydantic.Field(0, ge=0)
        tokens_out: int = pydantic.Field(0, ge=0)
        cost: float = pydantic.Field(0.0, ge=0)
        error: str | None = None
        attrs: dict[str, Any] | None = None

    class PEdge(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid", frozen=True)
        src: str = pydantic.Field(min_length=1)
        dst: str = pydantic.Field(min_length=1)
        type: Literal[
            "temporal",
            "causal",
            "spawn",
            "message",
            "tool_dependency",
            "return",
            "aggregate",
            "safety_flow",
        ]

    class PTrace(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid", frozen=True)
        trace_id: str
        task_id: str
        events: tuple[PEvent, ...]
        edges: tuple[PEdge, ...] = ()
        rewards: dict[str, float] = {}
        costs: dict[str, float] = {}
        system: str | None = None
        topology: str | None = None
        metrics: dict[str, float] = {}
        schema_version: str = "1.0"
        meta: dict[str, Any] = {}

    dec = msgspec.json.Decoder(Trace)
    times, last = alternate(
        {"msgspec": lambda: dec.decode(data), "pydantic": lambda: PTrace.model_validate_json(data)},
        REPEAT,
    )
    assert len(last["pydantic"].events) == len(last["msgspec"].events) == n
    report(
        f"decode {n:,} events (msgspec, chosen)",
        median(times["msgspec"]),
        "s CPU",
        baseline="pydantic v2",
        baseline_value=median(times["pydantic"]),
        note=f"msgspec {spread(times['msgspec'])}; pydantic {spread(times['pydantic'])}; "
        "runs interleaved, same process",
    )


def bench_load_validate(n: int, *, with_jsonschema: bool = True, repeat: int = REPEAT) -> None:
    """orchestrace load + check_trace vs jsonschema on the same survey-schema file.

    Both sides run ``repeat`` times, each in a fresh process with the same environment, the two
    sides interleaved; the medians of their CPU times are compared (with the spread).
    orchestrace with malloc huge pages (what ``ORCHESTRACE_HUGE_PAGES=1`` gives the CLI) is
    reported in the note.
    """
    path = cached_trace_file(
        f"upstream-{n}.json", 1000 if n >= 100_000 else 100, n, 3, fmt="upstream", llm_events=False
    )
    ours_code = textwrap.dedent(f"""
        import json, time
        t0 = time.process_time()
        from orchestrace.io import load
        tr = load({str(path)!r})          # decode + check_trace (raises on any error)
        print(json.dumps({{"s": time.process_time() - t0, "n": tr.n_events}}))
    """)
    tuned = {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
    if with_jsonschema:
        schema = _reference_schema()
        base_code = textwrap.dedent(f"""
            import json, time, jsonschema
            schema = json.loads({json.dumps(schema)!r})
            t0 = time.process_time()
            doc = json.load(open({str(path)!r}))
            jsonschema.Draft202012Validator(schema).validate(doc)
            print(json.dumps({{"s": time.process_time() - t0}}))
        """)
    runs: dict[str, list[float]] = {"ours": [], "tuned": [], "base": []}
    for _ in range(repeat):  # interleaved: a change of load falls on every side alike
        runs["ours"].append(in_fresh_process(ours_code)["s"])
        runs["tuned"].append(in_fresh_process(ours_code, env=tuned)["s"])
        if with_jsonschema:
            runs["base"].append(in_fresh_process(base_code, timeout=3600)["s"])
    ours, with_thp = median(runs["ours"]), median(runs["tuned"])
    base = median(runs["base"]) if with_jsonschema else None
    cli = in_fresh_process(
        textwrap.dedent(f"""
        import json, subprocess, sys, time
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "orchestrace", "validate", {str(path)!r}],
                           capture_output=True)
        assert r.returncode == 0, r.stdout
        print(json.dumps({{"s": time.perf_counter() - t0}}))
    """)
    )["s"]
    report(
        f"load+validate {n:,} events (one core, fresh process)",
        ours,
        "s CPU",
        baseline="jsonschema" if base else None,
        baseline_value=base,
        target="<2 s and >=20x" if n >= 1_000_000 else ">=20x",
        ok=(base is None or base / ours >= 20) and (n < 1_000_000 or ours < 2.0),
        note=f"CPU time, medians of {repeat} fresh processes each, interleaved, same "
        f"environment: ours {spread(runs['ours'])}"
        + (f", jsonschema {spread(runs['base'])}" if base else "")
        + f"; orchestrace with THP malloc {with_thp:.2f} s; `orchestrace validate` CLI {cli:.2f} s "
        "wall (one run); jsonschema is the pure-Python reference validator",
    )


def _reference_schema() -> dict:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import reference_dir

    ref = reference_dir()
    if ref is None:
        raise SystemExit("the public schema (../shared/reference/trace_schema.json) is needed")
    return json.loads((ref / "trace_schema.json").read_text())


def bench_critical_path(n: int) -> None:
    """TraceGraph (compile + DP) vs networkx (build + dag_longest_path) on a loaded trace."""
    import networkx as nx

    from orchestrace import load
    from orchestrace.trace.graph import TraceGraph

    traces = {
        size: load(
            cached_trace_file(f"native-{size}.json", 1000 if size >= 100_000 else 100, size, 3)
        )
        for size in (n // 10, n)
    }
    tr = traces[n]

    def with_networkx():
        g = nx.DiGraph()
        dur = {e.id: e.dur for e in tr.events}
        g.add_nodes_from(dur)
        g.add_weighted_edges_from(
            (e.src, e.dst, dur[e.src])
            for e in tr.edges
            if e.type not in ("temporal", "safety_flow")
        )
        g.add_weighted_edges_from((k, "__sink__", d) for k, d in dur.items())
        path = nx.dag_longest_path(g)
        return nx.path_weight(g, path, "weight")

    def ours(size: int):
        return lambda: TraceGraph.from_trace(traces[size]).critical_path()

    runs, last = alternate(
        {"small": ours(n // 10), "ours": ours(n), "networkx": with_networkx}, REPEAT
    )
    cp, length = last["ours"], last["networkx"]
    assert abs(length - cp.length) < 1e-6 * max(1.0, length), (length, cp.length)
    times = {n // 10: median(runs["small"]), n: median(runs["ours"])}
    t_nx = median(runs["networkx"])
    report(
        f"critical path {n:,} events (compile + longest path)",
        times[n],
        "s CPU",
        baseline="networkx",
        baseline_value=t_nx,
        target=">=20x",
        ok=t_nx / times[n] >= 20,
        note=f"ours {spread(runs['ours'])}; networkx {spread(runs['networkx'])}; runs "
        "interleaved, same process",
    )
    growth = times[n] / times[n // 10]
    report(
        f"critical path time ratio {n:,} / {n // 10:,} events",
        growth,
        "x",
        target="<=11x",
        ok=growth <= 11,
        note=f"medians; {n // 10:,} events: {spread(runs['small'])} s",
    )


def bench_memory(n: int) -> None:
    """Peak memory of analysing a Parquet trace vs its events table in memory."""
    from orchestrace import dump, load

    pq_path = cached_trace_file(f"native-{n}.json", 1000 if n >= 100_000 else 100, n, 3)
    ds = pq_path.with_suffix(".parquet")
    if not ds.exists():
        dump(load(pq_path), ds)
    code = textwrap.dedent(f"""
        import json
        import pyarrow.parquet as pq
        from orchestrace.io import read_graph
        from orchestrace.trace.analyze import summarize
        from orchestrace.trace.check import check_graph
        def status(key):  # VmHWM resets at exec, unlike ru_maxrss, which a child inherits
            for line in open('/proc/self/status'):
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
        base = status("VmRSS")
        g, head = read_graph({str(ds)!r})
        problems = check_graph(g)
        s = summarize(g)
        peak = status("VmHWM")
        assert not [p for p in problems if p.severity == "error"]
        print(json.dumps({{"peak": peak - base, "events": s["events"]}}))
    """)
    table_code = textwrap.dedent(f"""
        import json, pyarrow.parquet as pq
        t = pq.read_table({str(ds / "events.parquet")!r})
        print(json.dumps({{"nbytes": t.nbytes}}))
    """)
    json_code = textwrap.dedent(f"""
        import json
        from orchestrace import load
        from orchestrace.trace.analyze import summarize
        def status(key):
            for line in open('/proc/self/status'):
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
        base = status("VmRSS")
        s = summarize(load({str(pq_path)!r}))
        print(json.dumps({{"peak": status("VmHWM") - base}}))
    """)
    peak = in_fresh_process(code)["peak"]
    table = in_fresh_process(table_code)["nbytes"]
    json_peak = in_fresh_process(json_code)["peak"]
    report(
        f"peak memory, analyze {n:,}-event Parquet trace",
        peak / 2**20,
        "MiB",
        target="<=2x events table",
        ok=peak <= 2 * table,
        note=f"events table {table / 2**20:.0f} MiB -> {peak / table:.2f}x; "
        f"JSON path (event objects) {json_peak / 2**20:.0f} MiB = {json_peak / table:.1f}x",
    )


def main(quick: bool = False) -> None:
    n = 100_000 if quick else 1_000_000
    print(f"trace core ({n:,} events)")
    bench_decoder(n // 5)
    bench_load_validate(n, repeat=REPEAT if quick else 2)
    bench_critical_path(n)
    bench_memory(n)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    main(ap.parse_args().quick)
