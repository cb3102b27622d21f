"""Vector environment: episodes/s with n episodes interleaved on one loop vs one at a time.

Simulator, ``orchestrate-v1`` on ``arith`` with the ``KAgree(k=2)`` heuristic: the same seeds
run by :func:`orchestrace.learn.env.rollouts` (one episode at a time, a fresh loop each) and by
:meth:`orchestrace.learn.VectorEnv.rollouts` (``n`` at a time on one shared virtual-time loop).
The results are checked equal (returns, steps, last info) before the timings count. Medians of
3 wall times per arm (the arms interleaved, all in this one process, the spread printed); prints
episodes/s and the ratio.

    python benchmarks/bench_vector_env.py [--quick] [--episodes N] [--n 1,8,32]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
from typing import Any

from orchestrace.learn import VectorEnv
from orchestrace.learn.env import rollouts
from orchestrace.learn.policies.heuristic import KAgree

from _common import alternate, median, spread


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 episodes, 2 runs per arm")
    ap.add_argument("--episodes", type=int, default=400)
    ap.add_argument("--n", default="1,8,32,128", help="vector sizes, comma-separated")
    ap.add_argument("--env", default="orchestrate-v1")
    args = ap.parse_args()
    episodes, repeat = (100, 2) if args.quick else (args.episodes, 3)
    seeds = list(range(episodes))
    policy, opts = KAgree(k=2), {"task": "arith"}
    print(
        f"{args.env}, {episodes} episodes, KAgree(k=2); Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; medians of {repeat} interleaved runs per arm"
    )
    sizes = [int(x) for x in args.n.split(",")]
    with contextlib.ExitStack() as stack:
        arms: dict[str, Any] = {"one": lambda: rollouts(policy, seeds, args.env, env_options=opts)}
        for n in sizes:
            venv = stack.enter_context(VectorEnv(n, args.env, **opts))
            arms[f"n={n}"] = lambda v=venv: v.rollouts(policy, seeds)
        times, last = alternate(arms, repeat, clock="wall")
    ref = last["one"]
    t_one = median(times["one"])
    one = episodes / t_one
    print(f"one at a time: {spread(times['one'])} s  {one:.1f} episodes/s")
    for n in sizes:
        if last[f"n={n}"] != ref:
            raise SystemExit(f"vector n={n}: results differ from one at a time")
        t = median(times[f"n={n}"])
        eps = episodes / t
        print(
            f"vector n={n:<4d}: {spread(times[f'n={n}'])} s  {eps:.1f} episodes/s  "
            f"ratio {eps / one:.2f}x"
        )


if __name__ == "__main__":
    main()
