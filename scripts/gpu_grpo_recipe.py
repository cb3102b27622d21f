r"""GRPO of a small instruct model as orchestrator, with vLLM rollouts, on one GPU.

The trainer (a ``transformers`` copy of the model, AdamW on all weights) and the rollout
engine (an in-process ``vllm.LLM``, :class:`orchestrace.runtime.backends.vllm.VLLMBackend`
in engine mode) share the GPU. Each iteration runs the rollouts of
:mod:`orchestrace.learn.algorithms.llm_grpo` through vLLM (token ids and behaviour
log-probabilities from the engine), computes group-normalised advantages, takes the clipped
policy-gradient step of that module, and copies the new weights into the engine
(``VLLMBackend.load_weights``). The mean reward over held-out task instances is printed before
the first and after the last update.

Usage (needs a CUDA GPU, ``pip install vllm`` and a local model directory)::

    VLLM_ENABLE_V1_MULTIPROCESSING=0 python scripts/gpu_grpo_recipe.py \\
        --model /models/Qwen2.5-0.5B-Instruct --iterations 20
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpu_grpo_recipe.py",
        description="GRPO of an LLM orchestrator with vLLM rollouts on one GPU; prints the "
        "mean held-out reward before and after training.",
    )
    p.add_argument(
        "--model",
        required=True,
        help="local directory of an instruct model with a chat template "
        "(e.g. Qwen2.5-0.5B-Instruct)",
    )
    p.add_argument("--env", default="stop-v0", help="environment id (default: stop-v0)")
    p.add_argument("--task", default="arith", help="task (default: arith)")
    p.add_argument("--iterations", type=int, default=20, help="updates (default: 20)")
    p.add_argument("--tasks", type=int, default=4, help="task instances per iteration")
    p.add_argument("--group", type=int, default=8, help="episodes per task instance")
    p.add_argument("--eval-tasks", type=int, default=8, help="held-out task instances")
    p.add_argument("--lr", type=float, default=1e-6, help="AdamW learning rate")
    p.add_argument("--max-new-tokens", type=int, default=8, help="tokens per action")
    p.add_argument("--kl-coef", type=float, default=0.0, help="KL weight to the initial model")
    p.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=0.3,
        help="share of GPU memory vLLM may take (the trainer needs the rest)",
    )
    p.add_argument("--dtype", default="bfloat16", help="vLLM weight dtype (default: bfloat16)")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> int:
    """Train and print the reward before and after (vLLM rollouts, one GPU)."""
    args = _parser().parse_args(argv)
    if not Path(args.model).is_dir():
        print(f"error: --model {args.model!r} is not a local model directory", file=sys.stderr)
        return 1
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # weights load in process
    from orchestrace.errors import OrchestraceError
    from orchestrace.learn.algorithms import llm_grpo as g
    from orchestrace.learn.env import make_env
    from orchestrace.learn.llm_policy import instructions
    from orchestrace.runtime.backends.hf import require_transformers
    from orchestrace.runtime.backends.vllm import VLLMBackend, require_vllm

    try:
        require_vllm()
        torch, transformers = require_transformers()
        if not torch.cuda.is_available():
            print("error: no CUDA GPU; this recipe needs one", file=sys.stderr)
            return 1
        cfg = g.LLMTrainConfig(
            policy=args.model,
            env=args.env,
            task=args.task,
            iterations=args.iterations,
            tasks=args.tasks,
            group=args.group,
            lr=args.lr,
            kl_coef=args.kl_coef,
            temperature=1.0,  # vLLM's logprobs are of the raw distribution: sample at T=1
            max_new_tokens=args.max_new_tokens,
            device="cuda",
            seed=args.seed,
        )
        torch.manual_seed(cfg.seed)
        t_start = time.perf_counter()
        rollout = VLLMBackend(
            mode="engine",
            model=args.model,
            gpu_memory_utilization=args.gpu_memory_utilization,
            dtype=args.dtype,
            max_model_len=4096,
            seed=cfg.seed,
            temperature=1.0,
            top_p=1.0,
        )
        rollout.engine()
        model = transformers.AutoModelForCausalLM.from_pretrained(
            args.model, torch_dtype=torch.float32
        ).to("cuda")
        ref = g._frozen_copy(model) if cfg.kl_coef > 0 else None
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr)
        n = cfg.tasks * cfg.group
        envs = [
            make_env(
                cfg.env,
                task=cfg.task,
                max_rounds=cfg.max_rounds,
                latency_weight=cfg.latency_weight,
            )
            for _ in range(max(n, args.eval_tasks * cfg.group))
        ]
        system = instructions(envs[0])
        eval_seeds = [10**9 + k for k in range(args.eval_tasks)]

        def evaluate() -> tuple[float, float]:
            eps = g._rollouts(
                envs[: args.eval_tasks * cfg.group], eval_seeds, cfg, rollout, system, 0
            )
            return (
                g._mean([e["reward"] for e in eps]),
                sum(e["invalid"] for e in eps) / max(1, sum(len(e["calls"]) for e in eps)),
            )

        before, inv_before = evaluate()
        print(f"reward before: {before:.4f} (invalid-action rate {inv_before:.3f})", flush=True)
        for it in range(cfg.iterations):
            t0 = time.perf_counter()
            seeds = [cfg.seed * 1_000_003 + it * cfg.tasks + k for k in range(cfg.tasks)]
            model.eval()
            eps = g._rollouts(envs[:n], seeds, cfg, rollout, system, it)
            rewards = [e["reward"] for e in eps]
            calls = []
            for e, adv in zip(eps, g._advantages(rewards, cfg), strict=True):
                for c in e["calls"]:
                    c.adv = adv
                    calls.append(c)
            model.train()
            stats = g._update(model, None, ref, opt, calls, cfg, 1, torch)
            rollout.load_weights(model)  # the next rollouts sample from the updated policy
            print(
                f"iteration {it}: reward {g._mean(rewards):.4f} loss {stats['loss']:.4f} "
                f"clip_frac {stats['clip_frac']:.3f} ({time.perf_counter() - t0:.1f} s)",
                flush=True,
            )
        model.eval()
        after, inv_after = evaluate()
        print(f"reward before: {before:.4f} (invalid-action rate {inv_before:.3f})")
        print(f"reward after:  {after:.4f} (invalid-action rate {inv_after:.3f})")
        print(f"wall time: {time.perf_counter() - t_start:.0f} s")
        for env in envs:
            env.close()
    except (OrchestraceError, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
