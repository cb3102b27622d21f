"""Vector environment: episodes/s with n episodes interleaved on one loop vs one at a time.

Simulator, ``orchestrate-v1`` on ``arith`` with the ``KAgree(k=2)`` heuristic: the same seeds
run by :func:`orchestrace.learn.env.rollouts` (one episode at a time, a fresh loop each) and by
:meth:`orchestrace.learn.VectorEnv.rollouts` (``n`` at a time on one shared virtual-time loop).
The results are checked equal (returns, steps, last info) before the timings count. Best of 3
wall times per arm, both arms in this one process; prints episodes/s and the ratio.

    python benchmarks/bench_vector_env.py [--quick] [--episodes N] [--n 1,8,32]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

from orchestrace.learn import VectorEnv
from orchestrace.learn.env import rollouts
from orchestrace.learn.policies.heuristic import KAgree


def _best(fn: Any, repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 episodes, best of 2")
    ap.add_argument("--episodes", type=int, default=400)
    ap.add_argument("--n", default="1,8,32,128", help="vector sizes, comma-separated")
    ap.add_argument("--env", default="orchestrate-v1")
    args = ap.parse_args()
    episodes, repeat = (100, 2) if args.quick else (args.episodes, 3)
    seeds = list(range(episodes))
    policy, opts = KAgree(k=2), {"task": "arith"}
    print(
        f"{args.env}, {episodes} episodes, KAgree(k=2); Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; best of {repeat}"
    )
    t_one, ref = _best(lambda: rollouts(policy, seeds, args.env, env_options=opts), repeat)
    one = episodes / t_one
    print(f"one at a time: {t_one:.2f} s  {one:.1f} episodes/s")
    for n in (int(x) for x in args.n.split(",")):
        with VectorEnv(n, args.env, **opts) as venv:
            t, got = _best(lambda v=venv: v.rollouts(policy, seeds), repeat)
        if got != ref:
            raise SystemExit(f"vector n={n}: results differ from one at a time")
        eps = episodes / t
        print(f"vector n={n:<4d}: {t:.2f} s  {eps:.1f} episodes/s  ratio {eps / one:.2f}x")


if __name__ == "__main__":
    main()
