"""Shared pieces of the trainers: configs, rollouts, logging, plots, checkpoints."""

from __future__ import annotations

import csv
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from orchestrace._safe import redact
from orchestrace.errors import ConfigError
from orchestrace.io._output import report_dir, report_file
from orchestrace.learn.algorithms.collect import Episode, WorkerPool, collect_batched, make_envs
from orchestrace.learn.env import OrchestrationEnv, make_env
from orchestrace.learn.policies.torch_policy import MLPPolicy
from orchestrace.learn.vector import VectorEnv

__all__ = ["Episode", "TrainConfig", "TrainResult", "Trainer", "rollout"]


@dataclass
class TrainConfig:
    """Settings shared by the trainers (each field's help is in ``metadata``)."""

    env: str = field(default="stop-v0", metadata={"help": "environment id"})
    task: str = field(default="arith-mapreduce-v0", metadata={"help": "task of the environment"})
    episodes: int = field(default=20000, metadata={"help": "training episodes"})
    batch: int = field(default=128, metadata={"help": "episodes per update"})
    group: int = field(default=8, metadata={"help": "GRPO: episodes per task instance"})
    lr: float = field(default=1e-3, metadata={"help": "Adam learning rate"})
    entropy: float = field(default=0.01, metadata={"help": "entropy bonus"})
    hidden: int = field(default=64, metadata={"help": "policy hidden width"})
    layers: int = field(default=2, metadata={"help": "policy hidden layers"})
    epochs: int = field(default=4, metadata={"help": "PPO: passes over each batch"})
    clip: float = field(default=0.2, metadata={"help": "PPO: ratio clip"})
    gae_lambda: float = field(default=0.95, metadata={"help": "PPO: GAE lambda"})
    value_coef: float = field(default=0.5, metadata={"help": "value loss weight"})
    seed: int = field(default=0, metadata={"help": "seed of weights, sampling and episodes"})
    out: str | None = field(default=None, metadata={"help": "directory for CSV, PNG, checkpoint"})
    env_options: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "EnvConfig settings"}
    )
    num_envs: int = field(
        default=32,
        metadata={
            "help": "environments stepped together, one policy forward pass per step (at most "
            "batch are made: more would never be stepped)"
        },
    )
    num_workers: int = field(
        default=0,
        metadata={"help": "worker processes collecting episodes (0: in this process)"},
    )

    def __post_init__(self) -> None:
        for name in ("num_envs", "num_workers"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ConfigError(f"{name} must be an integer, got {v!r}")
        if self.num_workers < 0:
            raise ConfigError(
                f"num_workers must be >= 0 (got {self.num_workers}): "
                f"{self.__dataclass_fields__['num_workers'].metadata['help']}"
            )
        for name in ("episodes", "batch", "group", "hidden", "layers", "epochs", "num_envs"):
            if getattr(self, name) < 1:
                raise ConfigError(
                    f"{name} must be >= 1 (got {getattr(self, name)}): "
                    f"{self.__dataclass_fields__[name].metadata['help']}"
                )
        if self.num_workers > self.batch:
            raise ConfigError(
                f"num_workers ({self.num_workers}) must be at most batch ({self.batch}): each "
                "worker process collects part of every batch"
            )
        if self.batch % self.group and self.group > 1:
            raise ConfigError(f"batch ({self.batch}) must be a multiple of group ({self.group})")
        if not 0 < self.lr < 1:
            raise ConfigError(f"lr must be in (0, 1), got {self.lr}")


def rollout(env: OrchestrationEnv, policy: MLPPolicy, seed: int, greedy: bool = False) -> Episode:
    """Play one episode, one policy call per step (:func:`collect_batched` batches many)."""
    obs, info = env.reset(seed=seed)
    ep = Episode([], [], [], [], 0.0, {})
    while True:
        acts, logp, value = policy.sample(obs, greedy=greedy)
        ep.obs.append(obs)
        ep.acts.append(acts)
        ep.logps.append(logp)
        ep.values.append(value)
        obs, reward, term, trunc, info = env.step(policy.to_action(acts))
        if term or trunc:
            info.pop("trace", None)
            ep.reward = float(reward)
            ep.info = info
            return ep


@dataclass
class TrainResult:
    """What a training run produced."""

    policy: MLPPolicy
    log: list[dict[str, float]]
    out: Path | None
    episodes_per_min: float


class Trainer:
    """The loop around an algorithm's ``update``: rollouts, logging, plots, checkpoints.

    Episodes are collected ``num_envs`` at a time with one policy forward pass per step
    (:func:`~orchestrace.learn.algorithms.collect.collect_batched`), in this process or, with
    ``num_workers``, in worker processes. Episode ``k`` of the run draws its actions from its
    own random stream, and the update reads log-probs and values scored again over the whole
    batch (:meth:`rescore`), so the training is the same whatever ``num_envs`` and
    ``num_workers`` are; the one exception, an action whose uniform draw lies within float32
    rounding (about 1e-7) of a boundary of its distribution, is too rare to meet in practice
    (see :mod:`~orchestrace.learn.algorithms.collect`). Compared with one policy call per
    decision on the global torch generator (:func:`rollout`), the random draws differ, so a
    seed trains differently than it did then.
    """

    algo = "base"

    def __init__(self, config: TrainConfig) -> None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        most = 4 * (cpus or 1)
        if config.num_workers > most:
            raise ConfigError(
                f"num_workers={config.num_workers} is more than 4 worker processes per CPU of "
                f"this machine ({cpus} CPUs); each holds its own copy of the policy and "
                f"environments: use at most {most} (about one per CPU is fastest)"
            )
        self.cfg = config
        self.env = make_env(config.env, task=config.task, **config.env_options)
        self.policy = MLPPolicy.for_env(
            self.env, hidden=config.hidden, layers=config.layers, seed=config.seed
        )
        torch = self.policy.torch
        self.opt = torch.optim.Adam(self.policy.net.parameters(), lr=config.lr)
        self.log: list[dict[str, float]] = []
        self.episodes = 0
        self._envs: VectorEnv | list[OrchestrationEnv] | None = None
        self._pool: WorkerPool | None = None
        self._seed = config.seed * 10_000_019  # training instances never meet held-out seeds

    def next_seeds(self, n: int, group: int = 1) -> list[int]:
        """Seeds for ``n`` episodes, ``group`` per task instance."""
        out = []
        for _ in range(n // group):
            self._seed += 1
            out += [self._seed] * group
        return out

    def collect(self, group: int = 1) -> list[Episode]:
        """One batch of episodes (``group`` per task instance)."""
        cfg = self.cfg
        seeds = self.next_seeds(cfg.batch, group)
        keys = range(self.episodes, self.episodes + len(seeds))
        if cfg.num_workers:
            if self._pool is None:
                kw = {"task": cfg.task, **cfg.env_options}
                per_worker = -(-cfg.batch // cfg.num_workers)  # the most one worker collects
                self._pool = WorkerPool(
                    cfg.num_workers, min(cfg.num_envs, per_worker), cfg.env, kw, self.policy
                )
            eps = self._pool.collect(
                self.policy, seeds, keys, stream=cfg.seed, train_step=self.episodes
            )
        else:
            if self._envs is None:
                kw = {"task": cfg.task, **cfg.env_options}
                self._envs = make_envs(min(cfg.num_envs, cfg.batch), cfg.env, kw)
            envs = self._envs
            for env in envs.envs if isinstance(envs, VectorEnv) else envs:
                env.train_step = self.episodes
            eps = collect_batched(envs, self.policy, seeds, keys, stream=cfg.seed)
        self.episodes += len(eps)
        self.rescore(eps)
        return eps

    def rescore(self, episodes: list[Episode]) -> None:
        """Log-probs and values of a batch again, in one forward pass over the whole batch.

        The collection's forward passes round the last bits differently for different batch
        compositions (how many environments or workers ran together); scoring the batch
        once, in batch order, makes what the update reads independent of them.
        """
        torch = self.policy.torch
        obs = np.concatenate([np.stack(e.obs) for e in episodes])
        acts = torch.as_tensor(np.concatenate([np.asarray(e.acts) for e in episodes]))
        with torch.no_grad():
            logp, _, values = log_prob_entropy(self.policy, obs, acts)
        logps, vals = logp.tolist(), values.tolist()
        i = 0
        for e in episodes:
            k = len(e.obs)
            e.logps, e.values = logps[i : i + k], vals[i : i + k]
            i += k

    def close(self) -> None:
        """Stop the worker processes and close the collection environments (ends training)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._envs is not None:
            for env in self._envs.envs if isinstance(self._envs, VectorEnv) else self._envs:
                env.close()
            if isinstance(self._envs, VectorEnv):
                self._envs.close()
            self._envs = None

    def update(self, episodes: list[Episode]) -> dict[str, float]:
        """One optimisation step on a batch; returns losses to log."""
        raise NotImplementedError

    def train(self, progress: Callable[[int], None] | None = None) -> TrainResult:
        """Run to ``episodes``; write ``train.csv``, ``curve.png`` and ``policy.pt``."""
        cfg = self.cfg
        t0 = time.perf_counter()
        try:
            while self.episodes < cfg.episodes:
                t_batch = time.perf_counter()
                eps = self.collect()
                stats = self.update(eps)
                row = {
                    "episodes": float(self.episodes),
                    "reward": float(np.mean([e.reward for e in eps])),
                    "r_perf": float(np.mean([e.info.get("r_perf", e.reward) for e in eps])),
                    "success": float(np.mean([e.info.get("success", 0.0) for e in eps])),
                    "tokens": float(np.mean([e.info.get("tokens", 0) for e in eps])),
                    "episodes_per_s": len(eps) / (time.perf_counter() - t_batch),
                    **stats,
                }
                self.log.append(row)
                if progress is not None:
                    progress(len(eps))
        finally:
            self.close()
        minutes = (time.perf_counter() - t0) / 60
        out = None
        if cfg.out:
            # an explicit output replaces an earlier training report, never anything else
            with report_dir(cfg.out, force=True, report="train"):
                out = self.write()
        return TrainResult(self.policy, self.log, out, self.episodes / max(minutes, 1e-9))

    def write(self, out: str | Path | None = None, suffix: str = "") -> Path:
        """``train.csv``, ``curve.png``, ``policy.pt`` and ``config.json`` into ``out``.

        ``out`` defaults to the config's; ``suffix`` goes before each extension
        (``train-arith.csv``...), so several runs can share a directory.
        """
        out = Path(out or self.cfg.out or ".")
        with report_file(out / f"train{suffix}.csv", "w") as fh:
            w = csv.DictWriter(fh, fieldnames=list(self.log[0]))
            w.writeheader()
            w.writerows(self.log)
        # the config may carry backend options (a base URL with credentials, an API key):
        # what is written is redacted
        config = json.loads(redact(json.dumps(asdict(self.cfg), default=str)))
        self.policy.save(out / f"policy{suffix}.pt", extra={"algo": self.algo, "config": config})
        with report_file(out / f"config{suffix}.json", "w") as fh:
            fh.write(json.dumps({"algo": self.algo, **config}, indent=2))
        plot_curve(
            self.log, out / f"curve{suffix}.png", f"{self.algo} on {self.cfg.env} ({self.cfg.task})"
        )
        return out


def plot_curve(log: list[dict[str, float]], path: Path, title: str) -> None:
    """Learning curve (reward and success against episodes); skipped without matplotlib."""
    try:
        import matplotlib  # noqa: PLC0415  optional extra [learn]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415  optional extra [learn]
    except ImportError:
        return
    x = [r["episodes"] for r in log]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(x, [r["r_perf"] for r in log], label="r_perf (success - token cost)")
    ax.plot(x, [r["success"] for r in log], label="success", alpha=0.6)
    ax.set_xlabel("episodes")
    ax.set_title(title)
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()

    try:
        with report_file(path) as fh:
            fig.savefig(fh, format="png", dpi=110)
    finally:
        plt.close(fig)


def flatten(episodes: list[Episode], advantages: list[list[float]] | None = None) -> dict[str, Any]:
    """Batch tensors: obs, actions (per head), old log-probs, values, returns, advantages."""
    import torch  # noqa: PLC0415  optional extra [learn] or [hf]

    obs = np.concatenate([np.stack(e.obs) for e in episodes])
    acts = np.concatenate([np.asarray(e.acts) for e in episodes])
    out = {
        "obs": torch.as_tensor(obs, dtype=torch.float32),
        "acts": torch.as_tensor(acts, dtype=torch.int64),
        "logp": torch.as_tensor(np.concatenate([e.logps for e in episodes]), dtype=torch.float32),
        "values": torch.as_tensor(
            np.concatenate([e.values for e in episodes]), dtype=torch.float32
        ),
        "returns": torch.as_tensor(
            np.concatenate([[e.reward] * len(e.obs) for e in episodes]), dtype=torch.float32
        ),
    }
    if advantages is not None:
        out["adv"] = torch.as_tensor(np.concatenate(advantages), dtype=torch.float32)
    return out


def log_prob_entropy(policy: MLPPolicy, obs: Any, acts: Any) -> tuple[Any, Any, Any]:
    """Joint log-prob of the taken actions, mean entropy, and values."""
    dists, values = policy.distribution(obs)
    logp = sum(d.log_prob(acts[:, i]) for i, d in enumerate(dists))
    ent = sum(d.entropy() for d in dists).mean()
    return logp, ent, values
