"""Checkpoints of the LLM-orchestrator trainer: CSV, plot, settings, model files, value head.

The output directory is itself a loadable model directory (``from_pretrained(out)``). Writing
holds a Ctrl-C until every file is complete, so an interrupted run always leaves a loadable
checkpoint and the CSV of the iterations it finished.

Example:
    >>> with sigint_held():
    ...     pass
"""

from __future__ import annotations

import contextlib
import copy
import csv
import io
import json
import signal
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrace.io._output import report_dir, report_file

if TYPE_CHECKING:
    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig

__all__ = ["LOG_FIELDS", "sigint_held", "write_checkpoint"]

#: The columns of ``train.csv``.
LOG_FIELDS = (
    "iteration",
    "episodes",
    "reward",
    "success",
    "tokens",
    "critical_steps",
    "invalid_rate",
    "stop_rate",
    "loss",
    "kl",
    "approx_kl",
    "clip_frac",
    "value_loss",
    "seconds",
)


def write_checkpoint(
    cfg: LLMTrainConfig, log: list[dict[str, float]], backend: Any, model: Any, head: Any
) -> Path:
    """CSV, plot, settings, checkpoint (flat model files) and value head into ``cfg.out``.

    A Ctrl-C while they are written is held until they are complete, then raised.
    """
    with sigint_held():
        return _write_now(cfg, log, backend, model, head)


@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """Hold SIGINT (main thread only) until the block ends, then raise KeyboardInterrupt.

    Outside the main thread (where no signal handler can be set) the block runs as is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if got:
        raise KeyboardInterrupt


def _write_now(
    cfg: LLMTrainConfig, log: list[dict[str, float]], backend: Any, model: Any, head: Any
) -> Path:
    out = Path(str(cfg.out))
    with report_dir(out, force=True, report="train"):
        with report_file(out / "train.csv", "w") as fh:
            w = csv.DictWriter(fh, fieldnames=list(LOG_FIELDS))
            w.writeheader()
            for row in log:
                w.writerow({k: row.get(k, "") for k in LOG_FIELDS})
        settings = {k: v for k, v in asdict(cfg).items() if k != "reward_fn"}
        with report_file(out / "train-config.json", "w") as fh:
            json.dump(settings, fh, indent=2, sort_keys=True, default=str)
        with tempfile.TemporaryDirectory() as tmp:
            save = (
                copy.deepcopy(model).merge_and_unload()  # the adapters keep training
                if cfg.lora and hasattr(model, "merge_and_unload")
                else model
            )
            save.save_pretrained(tmp)
            backend.tokenizer.save_pretrained(tmp)
            for f in sorted(Path(tmp).iterdir()):
                if f.is_file():
                    with report_file(out / f.name) as fh:
                        fh.write(f.read_bytes())
        if head is not None:
            import torch

            buf = io.BytesIO()
            torch.save(head.state_dict(), buf)
            with report_file(out / "value_head.pt") as fh:
                fh.write(buf.getvalue())
        _plot(log, out / "train.png", f"{cfg.algo} LLM orchestrator on {cfg.env} ({cfg.task})")
    return out


def _plot(log: list[dict[str, float]], path: Path, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return

    keys = ("reward", "success", "tokens", "critical_steps", "kl", "invalid_rate")
    fig, axes = plt.subplots(2, 3, figsize=(11, 6))
    x = [r["iteration"] for r in log]
    for ax, k in zip(axes.flat, keys, strict=True):
        ax.plot(x, [r[k] for r in log])
        ax.set_title(k)
        ax.set_xlabel("iteration")
    fig.suptitle(title)
    fig.tight_layout()
    with report_file(path) as fh:
        fig.savefig(fh, format="png", dpi=100)
    plt.close(fig)
