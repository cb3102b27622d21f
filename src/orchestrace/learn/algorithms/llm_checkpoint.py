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

from orchestrace.errors import ConfigError
from orchestrace.io._output import report_dir, report_file

if TYPE_CHECKING:
    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig

__all__ = [
    "LOG_FIELDS",
    "check_device",
    "local_model",
    "read_state",
    "restore",
    "resume_config",
    "sigint_held",
    "write_checkpoint",
]

#: The trainer's own state in a checkpoint: optimiser, random generators, sampling counters.
STATE_FILE = "trainer-state.pt"
#: Settings a resume may change; every other one is the resumed run's.
RESUMABLE = {"iterations": "--steps", "save_every": "--save-every", "device": "--device"}

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
    cfg: LLMTrainConfig,
    log: list[dict[str, float]],
    backend: Any,
    model: Any,
    head: Any,
    state: dict[str, Any] | None = None,
) -> Path:
    """CSV, plot, settings, model files, value head and trainer state into ``cfg.out``.

    ``log`` holds every iteration of the run (a resumed run's earlier ones too), so the CSV
    is complete. A Ctrl-C while they are written is held until they are complete, then raised.
    """
    with sigint_held():
        return _write_now(cfg, log, backend, model, head, state)


def check_device(device: str, torch: Any) -> None:
    """Refuse a device this torch cannot use, naming ``--device`` and what is available.

    Example:
        >>> import torch
        >>> check_device("cpu", torch)
    """
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        dev = None
    cuda = torch.cuda.is_available()
    mps = getattr(torch.backends, "mps", None)
    has_mps = bool(mps is not None and mps.is_available())
    avail = ["cpu"]
    avail += [f"cuda:{i}" for i in range(torch.cuda.device_count())] if cuda else []
    avail += ["mps"] if has_mps else []
    where = f"available here: {', '.join(avail)}"
    if dev is None or dev.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"--device {device!r} is not a device name; {where}")
    if dev.type == "cuda" and not cuda:
        why = "this torch has no CUDA build" if torch.version.cuda is None else "no GPU is visible"
        raise ConfigError(f"--device {device}: {why}; {where}")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ConfigError(f"--device {device}: no such GPU; {where}")
    if dev.type == "mps" and not has_mps:
        raise ConfigError(f"--device {device}: MPS is not available; {where}")


def local_model(path: str, flag: str = "--policy") -> Path:
    """``path`` as a local model directory (holding ``config.json``), never a hub lookup.

    Example:
        >>> local_model("/nonexistent/model")
        Traceback (most recent call last):
        ...
        orchestrace.errors.ConfigError: --policy /nonexistent/model: no such directory; give a local model directory (config.json, weights, tokenizer)
    """
    p = Path(path).expanduser()
    hint = "give a local model directory (config.json, weights, tokenizer)"
    where = f"{flag}{path}" if flag.endswith(":") else f"{flag} {path}"
    if not p.exists():
        raise ConfigError(f"{where}: no such directory; {hint}")
    if not p.is_dir():
        raise ConfigError(f"{where}: not a directory; {hint}")
    if not (p / "config.json").is_file():
        raise ConfigError(f"{where}: has no config.json; {hint}")
    return p


def read_state(run: str) -> dict[str, Any]:
    """The trainer state and CSV rows of the run whose output directory is ``run``.

    Raises:
        ConfigError: ``run`` holds no trainer state, or it cannot be read.

    Example:
        >>> read_state("/nonexistent/run")
        Traceback (most recent call last):
        ...
        orchestrace.errors.ConfigError: --resume /nonexistent/run: no trainer-state.pt; ...
    """
    import torch  # noqa: PLC0415  optional extra [learn] or [hf]

    d = Path(run)
    f = d / STATE_FILE
    if not f.is_file():
        raise ConfigError(
            f"--resume {run}: no {STATE_FILE}; only an output directory of "
            "`orchestrace train --policy` can be resumed"
        )
    try:
        state = dict(torch.load(f, map_location="cpu", weights_only=True))
        with open(d / "train.csv", newline="") as fh:
            rows = [{k: float(v) for k, v in r.items() if v != ""} for r in csv.DictReader(fh)]
    except (OSError, ValueError, KeyError, RuntimeError) as err:
        raise ConfigError(f"--resume {run}: cannot read its state: {str(err)[:200]}") from None
    for r in rows:
        for k in ("iteration", "episodes"):
            r[k] = int(r[k])
    state["log"] = rows[: int(state.get("iteration", len(rows)))]
    return state


def resume_config(run: str, *, out: str | None = None, **given: Any) -> LLMTrainConfig:
    """The settings that continue the run in ``run`` (its ``train-config.json``).

    ``given`` may set ``iterations`` (the total), ``save_every`` and ``device``; any other
    setting that differs from the run's is refused. The result writes to ``out`` (default:
    ``run`` itself, appending to its CSV).

    Raises:
        ConfigError: ``run`` is not an output directory of this trainer, or a setting differs.

    Example (a run's output directory ``runs/llm``)::

        cfg = resume_config("runs/llm", iterations=40)
        train_llm(cfg)  # iterations cfg.start .. 39, appended to runs/llm/train.csv
    """
    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig  # noqa: PLC0415  import cycle: orchestrace.learn.algorithms.llm_grpo imports this module

    state = read_state(run)
    try:
        settings = json.loads((Path(run) / "train-config.json").read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"--resume {run}: cannot read train-config.json: {err}") from None
    for k in ("resume", "start", "out"):
        settings.pop(k, None)
    for k, v in given.items():
        if k not in RESUMABLE and settings.get(k) != v:
            raise ConfigError(
                f"{k} is {settings.get(k)!r} in the run in {run}, not {v!r}: a resume keeps "
                f"its settings (it may change {', '.join(RESUMABLE.values())})"
            )
    settings.update({k: v for k, v in given.items() if k in RESUMABLE})
    return LLMTrainConfig(
        **settings, resume=str(run), start=int(state["iteration"]), out=out or str(run)
    )


def restore(
    state: dict[str, Any],
    cfg: LLMTrainConfig,
    *,
    opt: Any,
    head: Any,
    rng: Any,
    backend: Any,
    torch: Any,
) -> list[dict[str, float]]:
    """Load the value head, optimiser, generators and sampling counters; return the CSV rows.

    With LoRA the checkpoint holds merged weights: new adapters train on them and the
    optimiser starts afresh.

    Example (inside :func:`~orchestrace.learn.algorithms.llm_grpo.train_llm`)::

        log = restore(read_state(cfg.resume), cfg, opt=opt, head=head, rng=rng,
                      backend=backend, torch=torch)
    """
    if head is not None:
        f = Path(str(cfg.resume)) / "value_head.pt"
        if not f.is_file():
            raise ConfigError(f"--resume {cfg.resume}: no value_head.pt for PPO")
        head.load_state_dict(torch.load(f, map_location="cpu", weights_only=True))
    if not cfg.lora:
        opt.load_state_dict(state["optimizer"])
        for group in opt.param_groups:
            group["lr"] = cfg.lr
    rng.setstate(_tuples(state["rng"]))
    torch.set_rng_state(state["torch_rng"])
    backend._batch_sizes[:] = list(state["policy_calls"])
    return list(state["log"])


def _tuples(x: Any) -> Any:
    return tuple(_tuples(v) for v in x) if isinstance(x, (list, tuple)) else x


@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """Hold SIGINT (main thread only) until the block ends, then raise KeyboardInterrupt.

    Outside the main thread (where no signal handler can be set), and when SIGINT is ignored
    (``nohup``, a background job), the block runs as is.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    ):
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
    cfg: LLMTrainConfig,
    log: list[dict[str, float]],
    backend: Any,
    model: Any,
    head: Any,
    state: dict[str, Any] | None,
) -> Path:
    out = Path(str(cfg.out))
    with report_dir(out, force=True, report="train"):
        with report_file(out / "train.csv", "w") as fh:
            w = csv.DictWriter(fh, fieldnames=list(LOG_FIELDS))
            w.writeheader()
            for row in log:
                w.writerow({k: row.get(k, "") for k in LOG_FIELDS})
        settings = {k: v for k, v in asdict(cfg).items() if k not in ("reward_fn", "start")}
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
            import torch  # noqa: PLC0415  optional extra [learn] or [hf]

            buf = io.BytesIO()
            torch.save(head.state_dict(), buf)
            with report_file(out / "value_head.pt") as fh:
                fh.write(buf.getvalue())
        if state is not None:
            import torch  # noqa: PLC0415  optional extra [learn] or [hf]

            buf = io.BytesIO()
            torch.save({**state, "iteration": len(log)}, buf)
            with report_file(out / STATE_FILE) as fh:
                fh.write(buf.getvalue())
        _plot(log, out / "train.png", f"{cfg.algo} LLM orchestrator on {cfg.env} ({cfg.task})")
    return out


def _plot(log: list[dict[str, float]], path: Path, title: str) -> None:
    """The training curves, redrawn at every checkpoint.

    A ``Figure`` of its own (no ``pyplot`` state) with fixed margins: the panels' titles and
    labels are fixed words, so ``tight_layout`` (a third of the drawing's CPU) would place them
    the same way every time.
    """
    try:
        from matplotlib.figure import Figure  # noqa: PLC0415  optional extra [learn]
    except ImportError:
        return

    keys = ("reward", "success", "tokens", "critical_steps", "kl", "invalid_rate")
    fig = Figure(figsize=(11, 6))
    axes = fig.subplots(2, 3)
    x = [r["iteration"] for r in log]
    for ax, k in zip(axes.flat, keys, strict=True):
        ax.plot(x, [r[k] for r in log])
        ax.set_title(k)
        ax.set_xlabel("iteration")
    fig.suptitle(title)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.08, top=0.89, wspace=0.3, hspace=0.4)
    with report_file(path) as fh:
        fig.savefig(fh, format="png", dpi=100)
