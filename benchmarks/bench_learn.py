"""Learning figures: episodes per minute on one core for the stopping task (stop-v0).

Three rates, each on the same task instances:

* baseline: the same orchestration (one worker per round until two answers agree) run as a
  plain runtime program, no environment protocol;
* the environment stepped by the k-agree heuristic (what evaluation costs);
* PPO training with the default config (rollouts with the torch policy, plus updates).

    python benchmarks/bench_learn.py [--quick]
"""

import argparse
import time
from collections import Counter

from orchestrace.learn.env import SIZE_RANGES, make_env
from orchestrace.learn.policies import KAgree
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.clock import VirtualTimeLoop
from orchestrace.runtime.config import RunConfig
from orchestrace.runtime.core import Runtime
from orchestrace.runtime.rounds import rounds_worker
from orchestrace.tasks import make_task

from _common import report

TASK = "arith-mapreduce-v0"


def _bare(seed: int, size: int) -> None:
    task = make_task(TASK, seed=seed, size=size)

    async def orchestrator(ctx):
        answers: list = []
        while len(answers) < 12:
            h = await ctx.spawn("worker", rounds_worker, hears=False, index=0)
            (r,) = await ctx.wait([h])
            if r.ok:
                answers.append(repr(r.value["answer"]))
            if answers and Counter(answers).most_common(1)[0][1] >= 2:
                break
        return await ctx.aggregate([], "first")

    rt = Runtime(
        task=task,
        backend=SimBackend(seed=seed, role_tokens={"expert": 2.0, "novice": 0.6}),
        config=RunConfig(agents=12, seed=seed, max_agents=16),
        topology="centralized",
    )
    loop = VirtualTimeLoop()
    try:
        loop.run_until_complete(rt.run(orchestrator))
    finally:
        loop.close()


def main(quick: bool = False) -> None:
    import numpy as np

    n = 300 if quick else 1500
    lo, hi = SIZE_RANGES[TASK]
    sizes = np.random.default_rng(0).integers(lo, hi + 1, size=n)
    t0 = time.perf_counter()
    for i in range(n):
        _bare(i, int(sizes[i]))
    bare = n / (time.perf_counter() - t0) * 60

    env = make_env("stop-v0", task=TASK)
    pol = KAgree(k=2)
    t0 = time.perf_counter()
    for i in range(n):
        obs, info = env.reset(seed=i, options={"size": int(sizes[i])})
        while True:
            obs, _r, term, trunc, info = env.step(pol.act(obs, info, env))
            if term or trunc:
                break
    stepped = n / (time.perf_counter() - t0) * 60
    report(
        "stop-v0 stepped by agree-2 (evaluation rate)",
        stepped,
        "episodes/min",
        baseline="bare runtime, same orchestration",
        baseline_value=bare,
        note="ratio = baseline / environment: the cost of the step protocol",
    )

    try:
        import torch
    except ImportError:
        print("  (PPO throughput skipped: pip install 'orchestrace[learn]')")
        return
    torch.set_num_threads(1)
    from orchestrace.learn.algorithms import TrainConfig, make_trainer

    cfg = TrainConfig(task=TASK, episodes=512 if quick else 2048)
    res = make_trainer("ppo", cfg).train()
    report(
        "PPO training on stop-v0, one core (rollouts + updates)",
        res.episodes_per_min,
        "episodes/min",
        baseline="bare runtime, same orchestration",
        baseline_value=bare,
        target=">=1000 episodes/min",
        ok=res.episodes_per_min >= 1000,
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    main(ap.parse_args().quick)
