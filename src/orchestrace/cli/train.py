"""``orchestrace train --env NAME --algo ALGO --steps N``: train an orchestration policy."""

from __future__ import annotations

import argparse
import json
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.io._output import check_output, report_dir
from orchestrace.learn.algorithms import TrainConfig, make_trainer
from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig, train_llm
from orchestrace.learn.env import ENV_IDS


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "train",
        help="train an orchestration policy (needs the [learn] extra)",
        description="Train a policy on an orchestration environment with REINFORCE, GRPO or "
        "PPO. Writes train.csv, curve.png, policy.pt and config.json to --output.",
    )
    p.add_argument("--env", default="stop-v0", choices=ENV_IDS)
    p.add_argument("--task", default="arith-mapreduce-v0", help="task of the environment")
    p.add_argument("--algo", default="ppo", choices=["ppo", "grpo", "reinforce"])
    p.add_argument("--steps", type=int, default=20000, help="training episodes")
    p.add_argument("--batch", type=int, default=128, help="episodes per update")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    p.add_argument("--group", type=int, default=8, help="GRPO: episodes per task instance")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", default="runs/train", help="output directory")
    p.add_argument(
        "--force",
        action="store_true",
        help="write into OUTPUT even though an earlier `orchestrace train` wrote it "
        "(a directory holding anything else is never written into)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--policy",
        metavar="MODEL_DIR",
        help="train this local LLM (transformers directory with a chat-template tokenizer) as "
        "the orchestrator, online with --algo grpo|ppo; --steps counts iterations",
    )
    p.add_argument("--tasks", type=int, default=2, help="LLM: task instances per iteration")
    p.add_argument("--kl", type=float, default=0.0, help="LLM: weight of the KL to the start")
    p.add_argument("--lora", action="store_true", help="LLM: train LoRA adapters (needs peft)")
    p.add_argument("--device", default="cpu", help="LLM: where the model runs (cpu, cuda...)")
    p.add_argument(
        "--credit",
        default="uniform",
        choices=["uniform", "discounted", "turn", "message", "c3"],
        help="LLM: per-call credit combined with the advantage (see docs/learning-llm.md)",
    )
    p.add_argument(
        "--credit-samples",
        type=int,
        default=2,
        metavar="K",
        help="LLM: c3 sibling completions per call; message: paired forks per message",
    )
    p.add_argument(
        "--workers",
        default="sim",
        metavar="sim|self|frozen:PATH",
        help="LLM: who answers the workers' calls: the simulator, the policy itself with the "
        "workers' role prompts, or a frozen model directory that is never updated",
    )
    p.add_argument("--vf-coef", type=float, default=0.5, help="LLM PPO: value-loss weight")
    p.add_argument("--save-every", type=int, default=5, help="LLM: checkpoint every N iterations")
    p.set_defaults(func=run_cmd)


def run_cmd(args: argparse.Namespace) -> int:
    """Train and report."""
    check_output(args.output, force=args.force, kind="dir", report="train")  # before any work
    if args.policy is not None:
        return _train_llm(args)
    cfg = TrainConfig(
        env=args.env,
        task=args.task,
        episodes=args.steps,
        batch=args.batch,
        lr=args.lr,
        group=args.group,
        seed=args.seed,
        out=args.output,
    )
    trainer = make_trainer(args.algo, cfg)
    bar: Any = None
    if not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(total=cfg.episodes, unit="ep", desc=f"{args.algo} {args.env}")
    try:
        with report_dir(args.output, force=args.force, report="train"):
            result = trainer.train(progress=bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    last = result.log[-1]
    print(
        json.dumps(
            {
                "algo": args.algo,
                "env": args.env,
                "task": cfg.task,
                "episodes": trainer.episodes,
                "episodes_per_min": round(result.episodes_per_min),
                "final_reward": round(last["reward"], 4),
                "final_success": round(last["success"], 4),
                "output": str(result.out),
            }
        )
    )
    return 0


def _train_llm(args: argparse.Namespace) -> int:
    """Online GRPO/PPO of an LLM orchestrator (orchestrace.learn.algorithms.llm_grpo)."""
    if args.algo == "reinforce":
        raise ConfigError("--policy trains with --algo grpo or ppo, not reinforce")
    task = "arith" if args.task == "arith-mapreduce-v0" else args.task
    cfg = LLMTrainConfig(
        policy=args.policy,
        algo=args.algo,
        env=args.env,
        task=task,
        iterations=args.steps if args.steps != 20000 else 20,
        tasks=args.tasks,
        group=args.group,
        lr=args.lr if args.lr != 1e-3 else 1e-2,
        kl_coef=args.kl,
        credit=args.credit,
        credit_samples=args.credit_samples,
        workers=args.workers,
        vf_coef=args.vf_coef,
        save_every=args.save_every,
        lora=args.lora,
        device=args.device,
        seed=args.seed,
        out=args.output,
    )
    bar: Any = None
    if not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(total=cfg.iterations, unit="it", desc=f"{args.algo} LLM {args.env}")
    try:
        result = train_llm(cfg, progress=bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    first, last = result.log[0], result.log[-1]
    print(
        json.dumps(
            {
                "algo": args.algo,
                "env": args.env,
                "policy": args.policy,
                "iterations": len(result.log),
                "reward_first": round(first["reward"], 4),
                "reward_last": round(last["reward"], 4),
                "invalid_rate_last": round(last["invalid_rate"], 4),
                "output": str(result.out),
            }
        )
    )
    return 0
