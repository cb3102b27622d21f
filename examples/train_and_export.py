"""Train a stopping policy, compare it with rules, export its decisions for an LLM trainer.

    python examples/train_and_export.py [OUT_DIR] [--quick]

Small budgets so it runs in seconds; `orchestrace study stopping` is the full-size version.
``--quick`` trains one update (128 episodes) and compares on fewer episodes: a smoke run.
"""

import sys
from pathlib import Path

from orchestrace.learn.algorithms import TrainConfig, make_trainer
from orchestrace.learn.env import make_env
from orchestrace.learn.evaluate import compare, format_table
from orchestrace.learn.export import export
from orchestrace.learn.policies import ConfThreshold, FixedN, KAgree

args = [a for a in sys.argv[1:] if a != "--quick"]
quick = "--quick" in sys.argv[1:]
out = Path(args[0] if args else "runs/example")

# 1. train (PPO on the stopping decision; the full default is 20,000 episodes)
episodes = 128 if quick else 512
cfg = TrainConfig(env="stop-v0", task="multihop", episodes=episodes, seed=0, out=str(out / "ppo"))
result = make_trainer("ppo", cfg).train()
print(f"trained {cfg.episodes} episodes at {result.episodes_per_min:,.0f} episodes/min")

# 2. compare with rules on held-out instances
rows = compare(
    {
        "learned": result.policy,
        "fixed-3": FixedN(n=3),
        "agree-2": KAgree(k=2),
        "conf-0.8": ConfThreshold(tau=0.8),
    },
    "stop-v0",
    task="multihop",
    seeds=3,
    episodes=5 if quick else 20,
)
print(format_table(rows, f"stop-v0 on multihop (3 held-out seeds x {5 if quick else 20} episodes)"))

# 3. collect traces (4 runs per task instance) and export orchestrator turns for TRL
env = make_env("stop-v0", task="multihop")
traces = []
for seed in range(3):
    for _ in range(4):
        obs, info = env.reset(seed=seed)
        while True:
            obs, reward, terminated, truncated, info = env.step(
                result.policy.sample(obs)[0][0]
            )  # sample: different runs per instance
            if terminated or truncated:
                traces.append(info["trace"])
                break
n = export(traces, out / "turns.jsonl", to="trl")
print(f"exported {n} orchestrator turns to {out / 'turns.jsonl'}")
