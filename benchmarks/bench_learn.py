"""Learning figures: episodes per minute of CPU for the stopping task (stop-v0).

Rates, each on the same task instances, in CPU time of this process (``time.process_time``;
pin it to one core: ``taskset -c 1``), median of ``--repeat`` runs with the baseline and the
environment alternated; wall times are printed beside them:

* baseline: the same orchestration (one worker per round until two answers agree) run as a
  plain runtime program on a fresh virtual-time loop, no environment protocol;
* the environment stepped by the k-agree heuristic (what evaluation costs): reset, one step per
  decision, observations, infos and the PARL reward of every episode;
* the same episodes through a ``VectorEnv`` of 32 (``VectorEnv.rollouts``: the episodes run
  interleaved on one event loop, one drive per step for all of them);
* diagnostic: the same stepping with the reward computation replaced by a constant, which
  splits the environment's cost into the step protocol and the reward;
* PPO training with the default config (``num_envs`` environments stepped together, one
  batched policy forward pass per step, plus the updates), and with ``num_envs=1`` (one policy
  call per decision) for comparison;
* PPO with ``--workers N`` worker processes (wall time: the work is spread over processes).

    taskset -c 1 python benchmarks/bench_learn.py [--quick] [--repeat 3] [--workers 2]
"""

import argparse
import statistics
import time
from collections import Counter

from orchestrace.learn import VectorEnv
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


def _timed(fn) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``fn()``."""
    c, w = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c, time.perf_counter() - w


def main(quick: bool = False, repeat: int = 3, workers: int = 0) -> None:
    import numpy as np

    n = 300 if quick else 1500
    lo, hi = SIZE_RANGES[TASK]
    # the task size the environment draws for an episode seed (checked below)
    sizes = [int(np.random.default_rng([i, 7]).integers(lo, hi + 1)) for i in range(n)]

    def bare() -> None:
        for i in range(n):
            _bare(i, sizes[i])

    def stepped(env) -> None:
        pol = KAgree(k=2)
        for i in range(n):
            obs, info = env.reset(seed=i)
            assert info["size"] == sizes[i]
            while True:
                obs, _r, term, trunc, info = env.step(pol.act(obs, info, env))
                if term or trunc:
                    break

    class NoReward(type(make_env("stop-v0", task=TASK))):
        def _reward(self, trace):  # diagnostic only: what the reward computation costs
            return 0.0, {}

    env = make_env("stop-v0", task=TASK)
    plain = NoReward(env.config, env.id)
    venv = VectorEnv(32, "stop-v0", task=TASK)
    runs: dict[str, list[tuple[float, float]]] = {
        "bare": [],
        "env": [],
        "vector": [],
        "no-reward": [],
    }
    for _ in range(repeat):
        runs["bare"].append(_timed(bare))
        runs["env"].append(_timed(lambda: stepped(env)))
        runs["vector"].append(_timed(lambda: venv.rollouts(KAgree(k=2), range(n))))
        runs["no-reward"].append(_timed(lambda: stepped(plain)))
    env.close()
    plain.close()
    venv.close()

    def rate(k: str, i: int = 0) -> float:
        return n / statistics.median(r[i] for r in runs[k]) * 60

    def spread(k: str) -> str:
        cpu = sorted(n / r[0] * 60 for r in runs[k])
        return f"CPU runs {cpu[0]:,.0f}-{cpu[-1]:,.0f}/min; wall median {rate(k, 1):,.0f}/min"

    bare_rate = rate("bare")
    print(f"  bare runtime: {bare_rate:,.0f} episodes/min CPU ({spread('bare')})")
    report(
        "stop-v0 stepped by agree-2 (evaluation rate), CPU",
        rate("env"),
        "episodes/min",
        baseline="bare runtime, same orchestration",
        baseline_value=bare_rate,
        target="<= 1.5x the bare runtime",
        ok=bare_rate / rate("env") <= 1.5,
        note=f"ratio = baseline / environment: the cost of env + reward; {spread('env')}",
    )
    report(
        "stop-v0 as a VectorEnv of 32, agree-2 (evaluation rate), CPU",
        rate("vector"),
        "episodes/min",
        baseline="bare runtime, same orchestration",
        baseline_value=bare_rate,
        target="<= 1.5x the bare runtime",
        ok=bare_rate / rate("vector") <= 1.5,
        note=f"env + reward, VectorEnv.rollouts; {spread('vector')}",
    )
    report(
        "  diagnostic: one env with the reward replaced by 0, CPU",
        rate("no-reward"),
        "episodes/min",
        baseline="bare runtime, same orchestration",
        baseline_value=bare_rate,
        note=f"the step protocol alone; {spread('no-reward')}",
    )

    try:
        import torch
    except ImportError:
        print("  (PPO throughput skipped: pip install 'orchestrace[learn]')")
        return
    torch.set_num_threads(1)
    from orchestrace.learn.algorithms import TrainConfig, make_trainer

    episodes = 1024 if quick else 4096

    def ppo(**kw) -> tuple[float, float]:
        trainer = make_trainer("ppo", TrainConfig(task=TASK, episodes=episodes, **kw))
        return _timed(trainer.train)

    default = TrainConfig().num_envs
    for label, kw in ((f"num_envs={default} (default)", {}), ("num_envs=1", {"num_envs": 1})):
        times = [ppo(**kw) for _ in range(repeat)]
        cpu = statistics.median(t[0] for t in times)
        wall = statistics.median(t[1] for t in times)
        report(
            f"PPO on stop-v0, {label}, one core, CPU",
            episodes / cpu * 60,
            "episodes/min",
            baseline="bare runtime, same orchestration",
            baseline_value=bare_rate,
            target=">= 20,000 episodes/min",
            ok=episodes / cpu * 60 >= 20000,
            note=f"rollouts + updates, {episodes} episodes; wall {episodes / wall * 60:,.0f}/min",
        )
    if workers:
        times = [ppo(num_workers=workers) for _ in range(repeat)]
        wall = statistics.median(t[1] for t in times)
        report(
            f"PPO on stop-v0, num_workers={workers}, wall",
            episodes / wall * 60,
            "episodes/min",
            note="wall time, worker start included; depends on free cores",
        )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=0, help="also time PPO with N worker processes")
    a = ap.parse_args()
    main(a.quick, a.repeat, a.workers)
