"""Scale envelope: events per CPU second and peak memory from 10^4 to 4x10^5 events.

Each point is a swarm on wide-search with 40 events per agent (250 x 10,000, 1,000 x 40,000,
10,000 x 400,000), recorded on virtual time, validated and analysed, each in its own process
(peak resident memory is that process's). Cost per event (CPU microseconds, recording +
validation + analysis) must stay flat: the 4x10^5-event point at most 1.5x the 10^4-event one,
both measured in this run. The industry configuration (staged three-level hierarchy, 360
sub-agents, 4,200 tool calls) is measured too, and its trace streamed to Parquet and read back.

    python benchmarks/bench_envelope.py [--quick]

``--quick`` stops at 4x10^4 events (the ratio is then 4x10^4 against 10^4).
"""

import argparse
import shutil
import tempfile

from orchestrace.masbench.envelope import measure_point

from _common import check, report

POINTS = ((250, 10_000), (1_000, 40_000), (10_000, 400_000))


def main(quick: bool = False) -> None:
    points = POINTS[:2] if quick else POINTS
    rows = []
    for agents, length in points:
        row = measure_point("swarm", agents=agents, length=length)
        assert row is not None
        rows.append(row)
        name = f"swarm {agents:,} agents x {row['events']:,} events"
        report(f"{name}: CPU", row["cpu_s"], "s", note="record + validate + analyse")
        report(f"{name}: events per CPU second", row["events_per_cpu_s"], "ev/s")
        report(f"{name}: peak memory", row["peak_rss_mb"], "MiB", note="own process")
        check(f"{name}: recorded trace is valid", row["valid"])
    first, last = rows[0], rows[-1]
    report(
        f"cost per event at {last['events']:,} events",
        last["cpu_us_per_event"],
        "us/event",
        note=f"{first['cpu_us_per_event']:.4g} us/event at {first['events']:,} events",
    )
    growth = last["cpu_us_per_event"] / first["cpu_us_per_event"]
    report(
        f"cost per event, {last['events']:,} vs {first['events']:,} events",
        growth,
        "x",
        target="<= 1.5x",
        ok=growth <= 1.5,
        note="cost per event at the largest point divided by that at the smallest",
    )
    tmp = tempfile.mkdtemp()
    try:
        ind = measure_point("industry", parquet=f"{tmp}/industry.parquet")
        assert ind is not None
        report("industry configuration: CPU", ind["cpu_s"], "s", note="streamed to Parquet")
        report("industry configuration: peak memory", ind["peak_rss_mb"], "MiB")
        check(
            "industry configuration: >= 300 sub-agents, depth >= 3, >= 2 stages, >= 4,000 tools",
            ind["sub_agents"] >= 300
            and ind["spawn_depth"] >= 3
            and ind["orchestrator_stages"] >= 2
            and ind["tool_calls"] >= 4000,
            f"{ind['sub_agents']} sub-agents, depth {ind['spawn_depth']}, "
            f"{ind['orchestrator_stages']} stages, {ind['tool_calls']:,} tool calls",
        )
        from orchestrace.io import read_parquet

        (back,) = read_parquet(f"{tmp}/industry.parquet")
        check("industry trace streamed to Parquet reads back whole", back.n_events == ind["events"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    main(quick=ap.parse_args().quick)
