"""Rollout throughput of the hf backend: dynamic batching against the same run serialised.

Runs ``--episodes`` episodes of the ``centralized`` topology on ``arith`` with ``--agents``
workers, all calls answered by a tiny Llama built from a config (no download), once with
``max_batch=--batch`` and once with ``max_batch=1``. Prints tokens/s, episodes/min and the
ratio, measured in this run.

    python benchmarks/bench_rollout.py --episodes 4 --agents 8
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=8)
    args = ap.parse_args()

    from transformers.utils import logging as tl

    tl.set_verbosity_error()
    tl.disable_progress_bar()
    from orchestrace.learn.llm_policy import tiny_chat_lm
    from orchestrace.runtime import run
    from orchestrace.runtime.backends.hf import HFBackend

    model = str(tiny_chat_lm(tempfile.mkdtemp() + "/tiny"))
    out = {}
    for label, batch in (("batched", args.batch), ("serial", 1)):
        backend = HFBackend(model=model, max_new_tokens=args.max_new_tokens, max_batch=batch)
        backend.load()
        tokens = 0
        t0 = time.perf_counter()
        for ep in range(args.episodes):
            res = run(
                "centralized",
                "arith",
                agents=args.agents,
                task_size=args.agents,
                seed=ep,
                backend=backend,
            )
            tokens += sum(e.tokens_out for e in res.trace.events if e.type == "llm_call")
        dt = time.perf_counter() - t0
        out[label] = {
            "tokens_per_s": round(tokens / dt, 1),
            "episodes_per_min": round(args.episodes * 60 / dt, 2),
            "generate_calls": backend.generate_calls,
        }
    out["ratio_tokens_per_s"] = round(
        out["batched"]["tokens_per_s"] / max(out["serial"]["tokens_per_s"], 1e-9), 2
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
