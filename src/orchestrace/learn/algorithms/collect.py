"""Batched episode collection for the trainers: many environments, one policy call per step.

:func:`collect_batched` steps several environments together: at each step the observations of
every running episode go through the policy in one forward pass, and an environment whose
episode ends starts the next seed at once. :class:`WorkerPool` runs the same collection in
worker processes, each with its own environments and a copy of the policy weights sent with
every batch.

Random draws are keyed by episode: episode ``k`` of a training run (its index since the start)
draws its actions from its own stream, ``numpy.random.default_rng([seed, k])``, one uniform per
decision head and step, turned into an action by inverting the head's cumulative distribution
(:meth:`~orchestrace.learn.policies.torch_policy.MLPPolicy.sample_batch`). An episode's actions
therefore do not depend on how many environments or workers run beside it, nor on which
episodes share its forward pass, up to floating-point rounding: a batched forward pass rounds
the last bits of the probabilities differently for different batch compositions, which changes
an action only when its uniform lies within about 1e-7 of a boundary of the cumulative
distribution, and leaves the recorded log-probabilities and values equal to about 1e-7.

Example:
    >>> from orchestrace.learn.env import make_env
    >>> from orchestrace.learn.policies.torch_policy import MLPPolicy
    >>> envs = [make_env("stop-v0", task="arith") for _ in range(3)]
    >>> policy = MLPPolicy.for_env(envs[0], hidden=8, seed=0)
    >>> eps = collect_batched(envs, policy, seeds=[1, 2, 3, 4], keys=[0, 1, 2, 3], stream=0)
    >>> [e.info["seed"] for e in eps], all(len(e.obs) == len(e.acts) >= 1 for e in eps)
    ([1, 2, 3, 4], True)
"""

from __future__ import annotations

import itertools
import multiprocessing
import pickle
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrace.errors import ConfigError, RuntimeError_
from orchestrace.learn.env import OrchestrationEnv, make_env
from orchestrace.learn.policies.torch_policy import MLPPolicy

__all__ = ["Episode", "WorkerPool", "collect_batched"]


@dataclass
class Episode:
    """One episode: per-step observations, per-head actions, log-probs, values; the reward.

    Example:
        >>> ep = Episode([np.zeros(20, np.float32)], [[1]], [-0.69], [0.0], 1.0, {"seed": 3})
        >>> len(ep.obs), ep.reward
        (1, 1.0)
    """

    obs: list[np.ndarray]
    acts: list[list[int]]
    logps: list[float]
    values: list[float]
    reward: float
    info: dict[str, Any]


class _Slot:
    """A running episode: its environment, place in the batch, stream and steps so far."""

    __slots__ = ("env", "ep", "index", "obs", "rng")

    def __init__(self, env: OrchestrationEnv, index: int, rng: np.random.Generator) -> None:
        self.env, self.index, self.rng = env, index, rng
        self.ep = Episode([], [], [], [], 0.0, {})
        self.obs: np.ndarray | None = None


def collect_batched(
    envs: Sequence[OrchestrationEnv],
    policy: MLPPolicy,
    seeds: Sequence[int],
    keys: Sequence[int],
    *,
    stream: int,
    greedy: bool = False,
) -> list[Episode]:
    """One episode per seed, ``len(envs)`` at a time, one policy forward pass per step.

    Args:
        envs: The environments to step (one episode each at a time).
        policy: The policy; its actions for all running episodes come from one call of
            :meth:`~orchestrace.learn.policies.torch_policy.MLPPolicy.sample_batch`.
        seeds: Episode seeds (task instances), in batch order.
        keys: Per episode, the key of its random stream (its index in the training run).
        stream: The run's seed; episode ``k`` draws from ``default_rng([stream, k])``.
        greedy: Take the most likely actions instead of sampling.

    Returns:
        The episodes in the order of ``seeds``; each ``info`` is the last step's, without its
        trace.

    Raises:
        ConfigError: No environments, or ``seeds`` and ``keys`` of different lengths.
    """
    if not envs:
        raise ConfigError("collect_batched needs at least one environment")
    if len(seeds) != len(keys):
        raise ConfigError(f"one key per seed: got {len(seeds)} seeds and {len(keys)} keys")
    heads = len(policy.nvec)
    discrete = policy.discrete
    out: list[Episode | None] = [None] * len(seeds)
    nxt = 0

    def start(env: OrchestrationEnv) -> _Slot | None:
        nonlocal nxt
        if nxt >= len(seeds):
            return None
        slot = _Slot(env, nxt, np.random.default_rng([stream, int(keys[nxt])]))
        slot.obs, _ = env.reset(seed=int(seeds[nxt]))
        nxt += 1
        return slot

    active = [s for s in (start(env) for env in envs) if s is not None]
    while active:
        obs = np.stack([s.obs for s in active])  # type: ignore[misc]
        draws = None if greedy else np.stack([s.rng.random(heads) for s in active])
        acts, logps, values = policy.sample_batch(obs, draws)
        running: list[_Slot] = []
        for j, s in enumerate(active):
            a = acts[j].tolist()
            ep = s.ep
            ep.obs.append(s.obs)  # type: ignore[arg-type]
            ep.acts.append(a)
            ep.logps.append(float(logps[j]))
            ep.values.append(float(values[j]))
            s.obs, reward, term, trunc, info = s.env.step(a[0] if discrete else np.asarray(a))
            if not (term or trunc):
                running.append(s)
                continue
            info.pop("trace", None)
            ep.reward, ep.info = float(reward), info
            out[s.index] = ep
            nxt_slot = start(s.env)
            if nxt_slot is not None:
                running.append(nxt_slot)
        active = running
    return [e for e in out if e is not None]


# ---------------------------------------------------------------------- worker processes
_WORKER: dict[str, Any] = {}


def _init_worker(env_id: str, env_kw: dict[str, Any], shape: dict[str, Any], num_envs: int) -> None:
    """Set up a worker process: one torch thread, its environments, a policy to load into."""
    policy = MLPPolicy(**shape)
    policy.torch.set_num_threads(1)
    _WORKER["envs"] = [make_env(env_id, **env_kw) for _ in range(num_envs)]
    _WORKER["policy"] = policy


def _collect_in_worker(
    weights: dict[str, Any],
    seeds: list[int],
    keys: list[int],
    stream: int,
    train_step: int,
) -> list[Episode]:
    policy: MLPPolicy = _WORKER["policy"]
    policy.net.load_state_dict(weights)
    envs: list[OrchestrationEnv] = _WORKER["envs"]
    for env in envs:
        env.train_step = train_step
    return collect_batched(envs, policy, seeds, keys, stream=stream)


def _start_method() -> str:
    """``fork`` where the platform has it (fast, and a script needs no ``__main__`` guard),
    else ``spawn``."""
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


class WorkerPool:
    """Worker processes that collect episodes with a copy of the current policy weights.

    Each worker holds ``num_envs`` environments and steps them with :func:`collect_batched`.
    A batch is split into ``num_workers`` contiguous parts; the weights go to every worker
    with its part. Workers are forked where the platform can (Linux); elsewhere they start
    a fresh interpreter each (``spawn``, a few seconds once; a script must then start
    training under ``if __name__ == "__main__":``). Each worker runs torch on one thread.
    With ``spawn``, the environment settings must pickle.

    Args:
        num_workers: Worker processes (>= 1).
        num_envs: Environments per worker.
        env_id: Environment id.
        env_kw: :class:`~orchestrace.learn.env.EnvConfig` settings.
        policy: The policy whose shape the workers copy.

    Raises:
        ConfigError: With ``spawn``, settings that do not pickle (a lambda as ``reward_fn``...).

    Example:
        >>> from orchestrace.learn.env import make_env
        >>> policy = MLPPolicy.for_env(make_env("stop-v0"), hidden=8, seed=0)
        >>> with WorkerPool(1, 2, "stop-v0", {"task": "arith"}, policy) as pool:  # doctest: +SKIP
        ...     eps = pool.collect(policy, [5, 6, 7], [0, 1, 2], stream=0, train_step=0)
    """

    def __init__(
        self,
        num_workers: int,
        num_envs: int,
        env_id: str,
        env_kw: dict[str, Any],
        policy: MLPPolicy,
    ) -> None:
        shape = {
            "obs_dim": policy.obs_dim,
            "nvec": policy.nvec,
            "hidden": policy.hidden,
            "layers": policy.layers,
        }
        args = (env_id, dict(env_kw), shape, num_envs)
        method = _start_method()
        try:
            if method != "fork":  # a forked worker inherits them; a spawned one unpickles them
                pickle.dumps(args)
        except Exception as err:  # any pickling failure comes from the settings
            raise ConfigError(
                f"num_workers={num_workers}: the environment settings must pickle to reach "
                f"worker processes ({type(err).__name__}: {err}); use module-level functions "
                "(e.g. for reward_fn), or num_workers=0"
            ) from None
        self.num_workers = num_workers
        self._pool = ProcessPoolExecutor(
            num_workers,
            mp_context=multiprocessing.get_context(method),
            initializer=_init_worker,
            initargs=args,
        )

    def collect(
        self,
        policy: MLPPolicy,
        seeds: Sequence[int],
        keys: Sequence[int],
        *,
        stream: int,
        train_step: int,
    ) -> list[Episode]:
        """The episodes of ``seeds`` (in order), collected by the workers with ``policy``.

        Raises:
            RuntimeError_: A worker process died (the message says how to continue).
        """
        weights = {k: v.detach().clone() for k, v in policy.net.state_dict().items()}
        n, w = len(seeds), self.num_workers
        bounds = [n * i // w for i in range(w + 1)]
        futures: list[Future[list[Episode]]] = [
            self._pool.submit(
                _collect_in_worker,
                weights,
                [int(s) for s in seeds[lo:hi]],
                [int(k) for k in keys[lo:hi]],
                stream,
                train_step,
            )
            for lo, hi in itertools.pairwise(bounds)
            if hi > lo
        ]
        try:
            return [ep for f in futures for ep in f.result()]
        except BrokenProcessPool:
            self.close()
            raise RuntimeError_(
                "a collection worker process died or could not start (out of memory, "
                "killed, or an error printed above); rerun with fewer num_workers or "
                "num_envs, or num_workers=0"
            ) from None

    def close(self) -> None:
        """Stop the worker processes."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
