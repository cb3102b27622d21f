"""Train a stopping policy, compare it with rules, export its decisions for an LLM trainer.

    python examples/train_and_export.py [OUT_DIR]

Small budgets so it runs in seconds; `orchestrace study stopping` is the full-size version.
"""

import sys
from pathlib import Path

from orchestrace.learn.algorithms import TrainConfig, make_trainer
from orchestrace.learn.env import make_env
from orchestrace.learn.evaluate import compare, format_table
from orchestrace.learn.export import export
from orchestrace.learn.policies import ConfThreshold, FixedN, KAgree

out = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/example")

# 1. train (PPO on the stopping decision; the full default is 20,000 episodes)
cfg = TrainConfig(env="stop-v0", task="multihop", episodes=512, seed=0, out=str(out / "ppo"))
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
    episodes=20,
)
print(format_table(rows, "stop-v0 on multihop (3 held-out seeds x 20 episodes)"))

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
