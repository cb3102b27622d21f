"""Security figures: what signing and verifying every message costs, against unsigned messages
in the same run, and what the full set of defenses costs a swarm run.

    python benchmarks/bench_security.py [--quick]

The message figure runs the same message-heavy orchestration (workers each send messages to a
sink agent, which receives them all) with signing off and on, best of 5 each, and divides the
difference by the number of messages. The raw HMAC cost (sign + verify, no runtime) is printed
next to it. Checks: every message of the signed run verifies; the defended runs audit clean.
"""

import argparse
import time
from typing import Any

from orchestrace.runtime import RunConfig, Runtime, make_task, run
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.clock import run_virtual
from orchestrace.safety import Defenses, Keyring, audit_trace

from _common import best_of, check, report


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


def bench_signing(quick: bool) -> None:
    workers, per = (20, 50) if quick else (50, 100)
    n = workers * per
    plain_s = signed_s = float("inf")
    for _ in range(5):  # interleaved, so both sides see the same machine load
        t, plain = best_of(lambda: _messages(Defenses.none(), workers, per), 1)
        plain_s = min(plain_s, t)
        t, signed = best_of(lambda: _messages(Defenses(sign_messages=True), workers, per), 1)
        signed_s = min(signed_s, t)
    assert plain.meta["result"]["answer"] == signed.meta["result"]["answer"] == n
    report(f"per message, unsigned ({n} messages)", plain_s / n * 1e6, "us", note="best of 5")
    report(
        "per message, signed + verified",
        signed_s / n * 1e6,
        "us",
        baseline="unsigned",
        baseline_value=plain_s / n * 1e6,
        note=f"overhead {(signed_s - plain_s) / n * 1e6:.1f} us per message",
    )
    keys = Keyring.from_seed(0)
    text = "report 3.7: value 307"

    def raw() -> None:
        for i in range(n):
            mac = keys.sign("worker1", "sink", text, i)
            keys.verify("worker1", "sink", text, i, mac)

    raw_s, _ = best_of(raw, 5)
    report("HMAC-SHA256 sign + verify alone", raw_s / n * 1e6, "us", note="per message")
    msgs = [e for e in signed.events if e.type == "message"]
    seed_keys = Keyring.from_seed(0)
    check(
        "every signed message verifies",
        len(msgs) == n
        and all(
            seed_keys.verify(e.from_, e.to, e.content, e.step, (e.attrs or {}).get("mac"))
            for e in msgs
        ),
    )
    check("signed message run audits clean", audit_trace(signed) == [])


def bench_all_defenses(quick: bool) -> None:
    agents = 8 if quick else 32

    def one(d: Defenses) -> Any:
        return run("swarm", "wide-search-v0", agents=agents, seed=1, defenses=d)

    plain_s = all_s = float("inf")
    for _ in range(3):
        t, plain = best_of(lambda: one(Defenses.none()), 1)
        plain_s = min(plain_s, t)
        t, defended = best_of(lambda: one(Defenses.all()), 1)
        all_s = min(all_s, t)
    per_event = lambda s, r: s / len(r.trace.events) * 1e6  # noqa: E731
    report(
        f"swarm/wide-search, {agents} agents, per event, all defenses",
        per_event(all_s, defended),
        "us",
        baseline="no defenses",
        baseline_value=per_event(plain_s, plain),
        note=f"{len(defended.trace.events)} vs {len(plain.trace.events)} events; "
        f"success {defended.success} vs {plain.success}",
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
