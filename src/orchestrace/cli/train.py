"""``orchestrace train --env NAME --algo ALGO --steps N``: train an orchestration policy."""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import Any

from orchestrace.cli._json import JsonLines
from orchestrace.errors import ConfigError
from orchestrace.io._output import check_output, report_dir
from orchestrace.learn.algorithms import TrainConfig, make_trainer
from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig, resume_config, train_llm
from orchestrace.learn.env import ENV_IDS

#: Options of the MLP trainers only, and of the LLM trainer (``--policy``) only.
_MLP_ONLY = {"batch": "--batch", "num_envs": "--num-envs", "num_workers": "--num-workers"}
_LLM_ONLY = {
    "tasks": "--tasks",
    "kl": "--kl",
    "lora": "--lora",
    "device": "--device",
    "credit": "--credit",
    "credit_samples": "--credit-samples",
    "workers": "--workers",
    "vf_coef": "--vf-coef",
    "save_every": "--save-every",
    "resume": "--resume",
}


#: TrainConfig's fields as this command's options, where an error message names one.
_FLAGS = {
    "episodes": "--steps",
    "batch": "--batch",
    "group": "--group",
    "lr": "--lr",
    "num_envs": "--num-envs",
    "num_workers": "--num-workers",
    "task": "--task",
}
_FIELD = re.compile(r"\b(" + "|".join(_FLAGS) + r")(?=( must| \(|=| is))")


def add_parser(sub: Any) -> None:
    """Register the command."""
    p = sub.add_parser(
        "train",
        help="train an orchestration policy (needs the [learn] extra)",
        description="Train a policy on an orchestration environment. Without --policy: a small "
        "MLP policy with REINFORCE, GRPO or PPO (default ppo, 20000 episodes, batch 128, lr "
        "1e-3, task arith-mapreduce-v0); writes train.csv, curve.png, policy.pt and "
        "config.json to --output. With --policy MODEL_DIR (or --resume DIR): an LLM "
        "orchestrator online with GRPO or PPO (default grpo, 20 iterations, lr 1e-2, task "
        "arith); writes train.csv, train.png, train-config.json, trainer-state.pt, the model "
        "files (the directory loads with from_pretrained) and, for PPO, value_head.pt.",
    )
    p.add_argument("--env", default="stop-v0", choices=ENV_IDS)
    p.add_argument("--task", default=None, help="task of the environment")
    p.add_argument(
        "--algo",
        default=None,
        choices=["ppo", "grpo", "reinforce"],
        help="default: ppo (MLP), grpo (LLM)",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="MLP: training episodes (default 20000); LLM: iterations in all (default 20)",
    )
    p.add_argument("--batch", type=int, default=None, help="MLP: episodes per update (128)")
    p.add_argument(
        "--num-envs",
        type=int,
        default=None,
        help="MLP: environments stepped together, one policy forward pass per step (32)",
    )
    p.add_argument(
        "--num-workers",
        type=int,
        default=None,
        help="MLP: worker processes collecting episodes (default 0: in this process)",
    )
    p.add_argument("--lr", type=float, default=None, help="learning rate (MLP 1e-3, LLM 1e-2)")
    p.add_argument(
        "--group", type=int, default=None, help="GRPO: episodes per task instance (MLP 8, LLM 6)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", default=None, help="output directory (default runs/train)")
    p.add_argument(
        "--force",
        action="store_true",
        help="write into OUTPUT even though an earlier `orchestrace train` wrote it "
        "(a directory holding anything else is never written into; an LLM run's train.csv "
        "is never replaced: continue it with --resume)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--policy",
        metavar="MODEL_DIR",
        help="train this local LLM (transformers directory with a chat-template tokenizer) as "
        "the orchestrator, online with --algo grpo|ppo; --steps counts iterations",
    )
    p.add_argument(
        "--resume",
        metavar="DIR",
        help="LLM: continue the run whose output is DIR (model, value head, optimiser, "
        "iteration, seeds); its settings apply, --steps sets the total; writes to DIR "
        "(appending to its train.csv) unless -o names a new directory",
    )
    p.add_argument("--tasks", type=int, default=None, help="LLM: task instances per iteration")
    p.add_argument("--kl", type=float, default=None, help="LLM: weight of the KL to the start")
    p.add_argument(
        "--lora", action="store_true", default=None, help="LLM: train LoRA adapters (needs peft)"
    )
    p.add_argument("--device", default=None, help="LLM: where the model runs (cpu, cuda...)")
    p.add_argument(
        "--credit",
        default=None,
        choices=["uniform", "discounted", "turn", "message", "c3"],
        help="LLM: per-call credit combined with the advantage (see docs/learning-llm.md)",
    )
    p.add_argument(
        "--credit-samples",
        type=int,
        default=None,
        metavar="K",
        help="LLM: c3 sibling completions per call; message: paired forks per message",
    )
    p.add_argument(
        "--workers",
        default=None,
        metavar="sim|self|frozen:PATH",
        help="LLM: who answers the workers' calls: the simulator, the policy itself with the "
        "workers' role prompts, or a frozen model directory that is never updated",
    )
    p.add_argument("--vf-coef", type=float, default=None, help="LLM PPO: value-loss weight")
    p.add_argument(
        "--save-every", type=int, default=None, help="LLM: checkpoint every N iterations (5)"
    )
    p.set_defaults(func=run_cmd)


def _output_dir(path: str) -> str:
    """Refuse an ``-o`` that exists and is not a directory, saying what it is."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        kind = (
            "a FIFO"
            if p.is_fifo()
            else "a device"
            if p.is_char_device() or p.is_block_device()
            else "a socket"
            if p.is_socket()
            else "a file"
        )
        raise ConfigError(f"-o {path}: is {kind}, not a directory; give a new or empty directory")
    return path


def _given(args: argparse.Namespace, names: dict[str, str]) -> list[str]:
    return [flag for name, flag in names.items() if getattr(args, name, None) is not None]


def run_cmd(args: argparse.Namespace) -> int:
    """Train and report."""
    if args.policy is not None or args.resume is not None:
        wrong = _given(args, _MLP_ONLY)
        if wrong:
            raise ConfigError(
                f"{wrong[0]} does not apply to an LLM policy (--policy/--resume): each "
                "iteration is --tasks x --group episodes; drop it"
            )
        return _train_llm(args)
    wrong = _given(args, _LLM_ONLY)
    if wrong:
        raise ConfigError(
            f"{wrong[0]} applies to an LLM policy only: add --policy MODEL_DIR, or drop it"
        )
    args.output = _output_dir(args.output or "runs/train")
    check_output(args.output, force=args.force, kind="dir", report="train")  # before any work
    algo = args.algo or "ppo"
    given = {
        "task": args.task,
        "episodes": args.steps,
        "batch": args.batch,
        "lr": args.lr,
        "group": args.group,
        "num_envs": args.num_envs,
        "num_workers": args.num_workers,
    }
    try:
        cfg = TrainConfig(
            env=args.env,
            seed=args.seed,
            out=args.output,
            **{k: v for k, v in given.items() if v is not None},
        )
        trainer = make_trainer(algo, cfg)
    except ConfigError as err:  # the settings' names are the options' here
        raise ConfigError(_FIELD.sub(lambda m: _FLAGS[m[1]], str(err))) from None
    bar: Any = None
    if not args.no_progress:
        from tqdm import tqdm  # noqa: PLC0415  tqdm is heavy: loaded on first use

        bar = tqdm(total=cfg.episodes, unit="ep", desc=f"{algo} {args.env}")
    try:
        with report_dir(args.output, force=args.force, report="train"):
            result = trainer.train(progress=bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    last = result.log[-1]
    lines = JsonLines("train")
    print(
        lines.dumps(
            {
                "algo": algo,
                "env": args.env,
                "task": cfg.task,
                "episodes": trainer.episodes,
                "episodes_per_min": _whole(result.episodes_per_min),
                "final_reward": round(last["reward"], 4),
                "final_success": round(last["success"], 4),
                "output": str(result.out),
            }
        )
    )
    lines.finish()
    return 0


def _train_llm(args: argparse.Namespace) -> int:
    """Online GRPO/PPO of an LLM orchestrator (orchestrace.learn.algorithms.llm_grpo)."""
    if args.algo == "reinforce":
        raise ConfigError("--policy trains with --algo grpo or ppo, not reinforce")
    fields = {
        "algo": args.algo,
        "task": args.task,
        "iterations": args.steps,
        "tasks": args.tasks,
        "group": args.group,
        "lr": args.lr,
        "kl_coef": args.kl,
        "credit": args.credit,
        "credit_samples": args.credit_samples,
        "workers": args.workers,
        "vf_coef": args.vf_coef,
        "save_every": args.save_every,
        "lora": args.lora,
        "device": args.device,
    }
    given = {k: v for k, v in fields.items() if v is not None}
    if args.resume is not None:
        if args.policy is not None:
            raise ConfigError(
                "--resume continues the model in its directory; drop --policy (or drop "
                "--resume to start a new run from --policy)"
            )
        out = _output_dir(args.output) if args.output else None
        cfg = resume_config(args.resume, out=out, **given)
    else:
        cfg = LLMTrainConfig(
            policy=args.policy,
            env=args.env,
            seed=args.seed,
            out=_output_dir(args.output or "runs/train"),
            **given,
        )
    assert cfg.out is not None
    if cfg.resume is None or Path(cfg.out).resolve() != Path(cfg.resume).resolve():
        check_output(cfg.out, force=args.force, kind="dir", report="train")  # before any work
        if (Path(cfg.out) / "train.csv").exists():
            raise ConfigError(
                f"-o {cfg.out}: holds the train.csv of an earlier run; continue it with "
                f"--resume {cfg.out}, or choose a new -o"
            )
    bar: Any = None
    if not args.no_progress:
        from tqdm import tqdm  # noqa: PLC0415  tqdm is heavy: loaded on first use

        bar = tqdm(
            total=cfg.iterations, initial=cfg.start, unit="it", desc=f"{cfg.algo} LLM {cfg.env}"
        )
    try:
        result = train_llm(cfg, progress=bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    first, last = result.log[0], result.log[-1]
    lines = JsonLines("train")
    print(
        lines.dumps(
            {
                "algo": cfg.algo,
                "env": cfg.env,
                "policy": cfg.policy,
                "iterations": len(result.log),
                "reward_first": round(first["reward"], 4),
                "reward_last": round(last["reward"], 4),
                "invalid_rate_last": round(last["invalid_rate"], 4),
                "output": str(result.out),
            }
        )
    )
    lines.finish()
    return 0


def _whole(x: float) -> float | int:
    """``x`` rounded to a whole number (a NaN or infinity as it is: JSON writes it as null)."""
    return round(x) if math.isfinite(x) else x
