"""Security figures: what signing and verifying every message costs, against unsigned messages
in the same run, and what the full set of defenses costs a swarm run.

    python benchmarks/bench_security.py [--quick]

Times are CPU time of this process (time.process_time), so the load other processes put on a
shared machine does not count. The message figure runs the same message-heavy orchestration (workers each send messages to a
sink agent, which receives them all) with signing off and on, interleaved (unsigned, signed,
unsigned, ...) so both see the same machine load, 9 times each (5 with --quick). It reports the
median time per message of each, the spread (min-max and interquartile range over the
repeats), the median signed/unsigned ratio of the paired repeats, and the overhead in us per
message (median signed minus median unsigned). The raw HMAC cost (sign + verify, no runtime)
is printed next to it. Checks: every message of the signed run verifies with the keys its run
secret derives; the defended runs audit clean.
"""

import argparse
import statistics
import time
from typing import Any

from orchestrace.runtime import RunConfig, Runtime, make_task, run
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.clock import run_virtual
from orchestrace.safety import Defenses, RunSecret, audit_trace

from _common import check, report


def _messaging_root(workers: int, per_worker: int) -> Any:
    async def sink(ctx: Any, n: int) -> int:
        got = 0
        while got < n:
            if await ctx.receive() is not None:
                got += 1
        return got

    async def talker(ctx: Any, k: int) -> None:
        for i in range(per_worker):
            await ctx.send("sink", f"report {k}.{i}: value {k * per_worker + i}")

    async def root(ctx: Any) -> Any:
        s = await ctx.spawn("aggregator", sink, name="sink", n=workers * per_worker)
        kids = [await ctx.spawn("worker", talker, k=k) for k in range(workers)]
        results = await ctx.wait([s, *kids])
        return results[0].value

    return root


def _messages(defenses: Defenses, workers: int, per_worker: int) -> Any:
    rt = Runtime(
        task=make_task("arith", seed=0, size=4),
        backend=SimBackend(seed=0, latency_scale=0.0),
        config=RunConfig(agents=workers, seed=0, max_agents=workers + 2, defenses=defenses),
    )
    return run_virtual(rt.run(_messaging_root(workers, per_worker)))


def _cpu(fn: Any) -> tuple[float, Any]:
    """CPU seconds ``fn`` takes in this process, and its result.

    CPU time, not wall time: on a shared machine the wall clock also counts the time other
    processes hold the cores, which is not a cost of signing.
    """
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def _spread(xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) >= 2 else [xs[0]] * 3
    return f"min {min(xs):.2f}, IQR {q[0]:.2f}-{q[2]:.2f}, max {max(xs):.2f}"


def bench_signing(quick: bool) -> None:
    workers, per = (20, 50) if quick else (50, 100)
    repeats = 5 if quick else 9
    n = workers * per
    secret = RunSecret.new()
    signing = Defenses(sign_messages=True, secret=secret)
    plain_us: list[float] = []
    signed_us: list[float] = []
    ratios: list[float] = []
    for _ in range(repeats):  # interleaved, so both sides see the same machine load
        t, plain = _cpu(lambda: _messages(Defenses.none(), workers, per))
        plain_us.append(t / n * 1e6)
        t, signed = _cpu(lambda: _messages(signing, workers, per))
        signed_us.append(t / n * 1e6)
        ratios.append(signed_us[-1] / plain_us[-1])
    assert plain.meta["result"]["answer"] == signed.meta["result"]["answer"] == n
    p_med, s_med = statistics.median(plain_us), statistics.median(signed_us)
    report(
        f"per message, unsigned ({n} messages)",
        p_med,
        "us",
        note=f"median of {repeats}; {_spread(plain_us)}",
    )
    report(
        "per message, signed + verified",
        s_med,
        "us",
        note=f"median of {repeats}, {s_med / p_med:.1f}x the unsigned cost; {_spread(signed_us)}",
    )
    report(
        "signing overhead per message",
        s_med - p_med,
        "us",
        note=f"median signed - median unsigned; paired ratio signed/unsigned median "
        f"{statistics.median(ratios):.2f} ({_spread(ratios)})",
    )
    keys = secret.keyring(0)
    text = "report 3.7: value 307"

    def raw() -> None:
        for i in range(n):
            mac = keys.sign("worker1", "sink", text, i)
            keys.verify("worker1", "sink", text, i, mac)

    raw_us = [_cpu(raw)[0] / n * 1e6 for _ in range(repeats)]
    report(
        "HMAC-SHA256 sign + verify alone",
        statistics.median(raw_us),
        "us",
        note=f"per message, median of {repeats}; {_spread(raw_us)}",
    )
    msgs = [e for e in signed.events if e.type == "message"]
    check(
        "every signed message verifies with the run secret's keys",
        len(msgs) == n
        and all(
            keys.verify(e.from_, e.to, e.content, e.step, (e.attrs or {}).get("mac")) for e in msgs
        ),
    )
    check("signed message run audits clean", audit_trace(signed, secret=secret) == [])


def bench_all_defenses(quick: bool) -> None:
    agents = 8 if quick else 32

    def one(d: Defenses) -> Any:
        return run("swarm", "wide-search-v0", agents=agents, seed=1, defenses=d)

    plain_ts, all_ts = [], []
    for _ in range(5):  # interleaved
        t, plain = _cpu(lambda: one(Defenses.none()))
        plain_ts.append(t)
        t, defended = _cpu(lambda: one(Defenses.all()))
        all_ts.append(t)
    plain_s, all_s = statistics.median(plain_ts), statistics.median(all_ts)
    per_event = lambda s, r: s / len(r.trace.events) * 1e6  # noqa: E731
    base = per_event(plain_s, plain)
    report(
        f"swarm/wide-search, {agents} agents, per event, all defenses",
        per_event(all_s, defended),
        "us",
        note=f"no defenses {base:.2f} us, {per_event(all_s, defended) / base:.1f}x its cost; "
        f"medians of 5 interleaved runs, CPU time (all defenses "
        f"{_spread([per_event(t, defended) for t in all_ts])} us, none "
        f"{_spread([per_event(t, plain) for t in plain_ts])} us); {len(defended.trace.events)} vs {len(plain.trace.events)} "
        f"events; success {defended.success} vs {plain.success}",
    )
    check("defended swarm audits clean", audit_trace(defended.trace) == [])


def main(quick: bool = False) -> None:
    print("security")
    t0 = time.perf_counter()
    bench_signing(quick)
    bench_all_defenses(quick)
    print(f"  ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    main(quick=ap.parse_args().quick)
