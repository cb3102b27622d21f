"""Import figures: OTel (GenAI semconv) import throughput for a 100,000-span OTLP JSON file.

The file is generated once: an orchestrator that, round after round, plans (``chat``), runs eight
workers concurrently (``invoke_agent`` -> ``chat``, ``execute_tool``, ``chat``) and aggregates
(``chat``), with the attributes a GenAI instrumentation writes (model, tokens, tool call
arguments and results). Figures, each in a fresh process, medians of the repetitions (the two
sides interleaved; the spread is printed): spans per
second for ``import_path`` (read, parse, map, check-ready trace), its time against a plain
``json.load`` of the same file (the floor any importer pays), and the peak memory of each.

    python benchmarks/bench_import.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import textwrap

from _common import check, data_path, in_fresh_process, median, report, spread

WORKERS = 8
PER_ROUND = 2 + WORKERS * 4  # plan + aggregate chats, and per worker: agent, chat, tool, chat


def otlp_file(n_spans: int, seed: int = 5) -> str:
    """Write (once) an OTLP JSON file of about ``n_spans`` GenAI spans; return its path."""
    path = data_path(f"otlp-genai-{n_spans}.json")
    if path.exists():
        return str(path)
    rng = random.Random(seed)
    tid = f"{rng.getrandbits(128):032x}"
    t0 = 1_750_000_000 * 10**9
    spans: list[dict] = []
    counter = [0]

    def sid() -> str:
        counter[0] += 1
        return f"{counter[0]:016x}"

    def attr(k: str, v: object) -> dict:
        if isinstance(v, int):
            return {"key": k, "value": {"intValue": str(v)}}
        return {"key": k, "value": {"stringValue": str(v)}}

    def add(name: str, parent: str | None, start: int, end: int, **a: object) -> str:
        s = sid()
        span = {
            "traceId": tid,
            "spanId": s,
            "name": name,
            "kind": 1,
            "startTimeUnixNano": str(t0 + start),
            "endTimeUnixNano": str(t0 + end),
            "attributes": [attr(k.replace("__", "."), v) for k, v in a.items()],
            "status": {},
        }
        if parent:
            span["parentSpanId"] = parent
        spans.append(span)
        return s

    def chat(parent: str, start: int, model: str) -> int:
        dur = rng.randint(200, 2000) * 10**6
        add(
            f"chat {model}",
            parent,
            start,
            start + dur,
            gen_ai__operation__name="chat",
            gen_ai__provider__name="openai",
            gen_ai__request__model=model,
            gen_ai__response__model=model,
            gen_ai__usage__input_tokens=rng.randint(100, 4000),
            gen_ai__usage__output_tokens=rng.randint(10, 600),
            gen_ai__response__finish_reasons="stop",
        )
        return start + dur

    rounds = max(1, (n_spans - 1) // PER_ROUND)
    root_end = 10**18  # patched below
    root = add(
        "invoke_agent orchestrator",
        None,
        0,
        root_end,
        gen_ai__operation__name="invoke_agent",
        gen_ai__agent__name="orchestrator",
    )
    t = 0
    for r in range(rounds):
        t = chat(root, t, "gpt-4o")
        ends = []
        for w in range(WORKERS):
            a_start = t
            agent_span = add(
                f"invoke_agent worker{w}",
                root,
                a_start,
                0,
                gen_ai__operation__name="invoke_agent",
                gen_ai__agent__name=f"worker{w}",
            )
            u = chat(agent_span, a_start, "gpt-4o-mini")
            dur = rng.randint(50, 3000) * 10**6
            add(
                "execute_tool search",
                agent_span,
                u,
                u + dur,
                gen_ai__operation__name="execute_tool",
                gen_ai__tool__name="search",
                gen_ai__tool__call__id=f"call_{r}_{w}",
                gen_ai__tool__call__arguments=json.dumps({"q": f"round {r} part {w}"}),
                gen_ai__tool__call__result=f"result {r}.{w}",
            )
            u = chat(agent_span, u + dur, "gpt-4o-mini")
            next(s for s in reversed(spans) if s["spanId"] == agent_span)["endTimeUnixNano"] = str(
                t0 + u
            )
            ends.append(u)
        t = chat(root, max(ends), "gpt-4o")
    spans[0]["endTimeUnixNano"] = str(t0 + t)
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": [attr("service.name", "bench-app")]},
                "scopeSpans": [{"scope": {"name": "bench", "version": "1"}, "spans": spans}],
            }
        ]
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    tmp.replace(path)
    return str(path)


_STATUS = """
def status(key):  # VmHWM resets at exec, unlike ru_maxrss, which a child inherits
    for line in open('/proc/self/status'):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
"""


def bench_import(n_spans: int, repeat: int) -> None:
    path = otlp_file(n_spans)
    ours = _STATUS + textwrap.dedent(f"""
        import json, time
        from orchestrace.io import import_path
        from orchestrace.trace.check import check_trace
        base = status("VmRSS")
        t0, c0 = time.perf_counter(), time.process_time()
        res = import_path({path!r}, format="otel")
        s, cpu = time.perf_counter() - t0, time.process_time() - c0
        peak = status("VmHWM") - base
        tr = res.traces[0]
        errors = [p for p in check_trace(tr) if p.severity == "error"]
        print(json.dumps({{"s": s, "cpu": cpu, "peak": peak, "events": tr.n_events,
                           "edges": len(tr.edges),
                           "errors": len(errors), "problems": len(res.problems)}}))
    """)
    floor = _STATUS + textwrap.dedent(f"""
        import json, time
        base = status("VmRSS")
        t0, c0 = time.perf_counter(), time.process_time()
        with open({path!r}) as fh:
            doc = json.load(fh)
        s, cpu = time.perf_counter() - t0, time.process_time() - c0
        n = sum(len(ss["spans"]) for r in doc["resourceSpans"] for ss in r["scopeSpans"])
        print(json.dumps({{"s": s, "cpu": cpu, "peak": status("VmHWM") - base, "spans": n}}))
    """)
    runs, loads = [], []
    for _ in range(repeat):  # interleaved: a change of load falls on both sides alike
        runs.append(in_fresh_process(ours))
        loads.append(in_fresh_process(floor))
    best = {k: median([r[k] for r in runs]) for k in ("s", "cpu", "peak")}
    base = {k: median([r[k] for r in loads]) for k in ("s", "cpu", "peak")}
    best.update(events=runs[0]["events"], edges=runs[0]["edges"])
    spans = loads[0]["spans"]
    report(
        f"OTel import, {spans:,}-span OTLP JSON (GenAI semconv): throughput",
        spans / best["s"],
        "spans/s",
        note=f"{best['s']:.2f} s -> {best['events']:,} events, {best['edges']:,} edges; by CPU "
        f"time {spans / best['cpu']:,.0f} spans/s; medians of {repeat} fresh processes, wall "
        f"{spread([r['s'] for r in runs])} s",
    )
    report(
        f"OTel import, {spans:,} spans: time against json.load of the same file",
        best["s"],
        "s",
        baseline="json.load",
        baseline_value=base["s"],
        note=f"import takes {best['s'] / base['s']:.1f}x the json.load time; CPU "
        f"{best['cpu']:.2f} s vs {base['cpu']:.2f} s = {best['cpu'] / base['cpu']:.1f}x; "
        f"json.load wall {spread([r['s'] for r in loads])} s",
    )
    report(
        f"OTel import, {spans:,} spans: peak memory",
        best["peak"] / 2**20,
        "MiB",
        baseline="json.load",
        baseline_value=base["peak"] / 2**20,
        note=f"{best['peak'] / base['peak']:.2f}x json.load's peak",
    )
    check(
        "imported OTel trace passes check_trace",
        all(r["errors"] == 0 and r["problems"] == 0 for r in runs),
        note=f"{best['events']:,} events, 0 problems",
    )


def main(quick: bool = False) -> None:
    print("import (OTel)")
    bench_import(100_000, repeat=1 if quick else 3)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    main(ap.parse_args().quick)
