"""Rollout throughput of the hf backend: dynamic batching against the same run serialised.

Runs ``--episodes`` episodes of the ``centralized`` topology on ``arith`` with ``--agents``
workers, all calls answered by a tiny Llama built from a config (no download), with
``max_batch=--batch`` and with ``max_batch=1``, ``--repeat`` times each, the two alternated.
Prints the medians of tokens/s and episodes/min with their spread, and the ratio of the
medians, measured in this run.

    python benchmarks/bench_rollout.py --episodes 4 --agents 8 [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3, help="runs per side (medians reported)")
    args = ap.parse_args()

    from transformers.utils import logging as tl

    tl.set_verbosity_error()
    tl.disable_progress_bar()
    from orchestrace.learn.llm_policy import tiny_chat_lm
    from orchestrace.runtime import run
    from orchestrace.runtime.backends.hf import HFBackend

    model = str(tiny_chat_lm(tempfile.mkdtemp() + "/tiny"))
    backends = {}
    for label, batch in (("batched", args.batch), ("serial", 1)):
        backends[label] = HFBackend(
            model=model, max_new_tokens=args.max_new_tokens, max_batch=batch
        )
        backends[label].load()
    runs: dict[str, list[tuple[int, float]]] = {label: [] for label in backends}
    for _ in range(args.repeat):  # alternated: a change of load falls on both alike
        for label, backend in backends.items():
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
            runs[label].append((tokens, time.perf_counter() - t0))
    out: dict[str, Any] = {}
    for label, got in runs.items():
        rates = [tok / dt for tok, dt in got]
        out[label] = {
            "tokens_per_s": round(statistics.median(rates), 1),
            "tokens_per_s_range": [round(min(rates), 1), round(max(rates), 1)],
            "episodes_per_min": round(
                statistics.median(args.episodes * 60 / dt for _, dt in got), 2
            ),
            "runs": len(got),
            "generate_calls_per_run": backends[label].generate_calls / len(got),
        }
    out["ratio_tokens_per_s"] = round(
        out["batched"]["tokens_per_s"] / max(out["serial"]["tokens_per_s"], 1e-9), 2
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
