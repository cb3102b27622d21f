"""Batched episode collection for the trainers: many environments, one policy call per step.

:func:`collect_batched` steps several environments together: at each step the observations of
every running episode go through the policy in one forward pass, and an environment whose
episode ends starts the next seed at once. On the ``sim`` backend the environments are a
:class:`~orchestrace.learn.vector.VectorEnv`: their episodes run interleaved on one
virtual-time loop, driven once per step for all of them, and each gives what it gives on a
loop of its own (the shared clock starts again at 0.0 before every batch).
:class:`WorkerPool` runs the same collection in worker processes, each with its own
environments and a copy of the policy weights sent with every batch.

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
    >>> from orchestrace.learn.policies.torch_policy import MLPPolicy
    >>> envs = make_envs(3, "stop-v0", {"task": "arith"})
    >>> policy = MLPPolicy.for_env(envs.envs[0], hidden=8, seed=0)
    >>> eps = collect_batched(envs, policy, seeds=[1, 2, 3, 4], keys=[0, 1, 2, 3], stream=0)
    >>> [e.info["seed"] for e in eps], all(len(e.obs) == len(e.acts) >= 1 for e in eps)
    ([1, 2, 3, 4], True)
    >>> envs.close()
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

from orchestrace._pools import guard_breakage, stop_pool
from orchestrace._startup import child_signals
from orchestrace.errors import ConfigError, RuntimeError_
from orchestrace.learn.env import OrchestrationEnv, make_env
from orchestrace.learn.policies.torch_policy import MLPPolicy
from orchestrace.learn.vector import VectorEnv

__all__ = ["Episode", "WorkerPool", "collect_batched", "make_envs"]


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
    envs: VectorEnv | Sequence[OrchestrationEnv],
    policy: MLPPolicy,
    seeds: Sequence[int],
    keys: Sequence[int],
    *,
    stream: int,
    greedy: bool = False,
) -> list[Episode]:
    """One episode per seed, one per environment at a time, one policy forward pass per step.

    With a :class:`~orchestrace.learn.vector.VectorEnv` the running episodes share its event
    loop, driven once per step for all of them; with a list of environments (any backend) each
    runs on its own loop. Either way an episode gives what ``reset(seed=)`` and ``step`` of a
    single environment give for its actions.

    Args:
        envs: The environments to step.
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
    if isinstance(envs, VectorEnv):
        envs._rewind()
        pool, drive = envs.envs, envs._drive
    else:
        pool, drive = list(envs), _drive_each
    if not pool:
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
        env._begin(int(seeds[nxt]), None)
        nxt += 1
        return slot

    def first_decisions(slots: list[_Slot]) -> None:
        for s, o in zip(slots, drive([s.env for s in slots]), strict=True):
            assert o is not None  # an episode starts with a decision
            s.obs = o

    active = [s for s in (start(env) for env in pool) if s is not None]
    first_decisions(active)
    while active:
        obs = np.stack([s.obs for s in active])  # type: ignore[misc]
        draws = None if greedy else np.stack([s.rng.random(heads) for s in active])
        acts, logps, values = policy.sample_batch(obs, draws)
        for j, s in enumerate(active):
            a = acts[j].tolist()
            ep = s.ep
            ep.obs.append(s.obs)  # type: ignore[arg-type]
            ep.acts.append(a)
            ep.logps.append(float(logps[j]))
            ep.values.append(float(values[j]))
            s.env._give(a[0] if discrete else np.asarray(a))
        running: list[_Slot] = []
        restarted: list[_Slot] = []
        for s, o in zip(active, drive([s.env for s in active]), strict=True):
            s.obs, reward, term, trunc, info = s.env._outcome(o)
            if not (term or trunc):
                running.append(s)
                continue
            info.pop("trace", None)
            s.ep.reward, s.ep.info = float(reward), info
            out[s.index] = s.ep
            again = start(s.env)
            if again is not None:
                restarted.append(again)
        if restarted:
            first_decisions(restarted)
        active = running + restarted
    return [e for e in out if e is not None]


def _drive_each(envs: Sequence[OrchestrationEnv]) -> list[np.ndarray | None]:
    """Run each environment's own loop to its next decision or its end."""
    return [env._advance() for env in envs]


def make_envs(
    num_envs: int, env_id: str, env_kw: dict[str, Any]
) -> VectorEnv | list[OrchestrationEnv]:
    """Environments to collect with: one vector on ``sim``, else separate ones.

    A :class:`~orchestrace.learn.vector.VectorEnv` of ``num_envs`` on the ``sim`` backend,
    else ``num_envs`` environments on loops of their own.

    Example:
        >>> type(make_envs(2, "stop-v0", {"task": "arith"})).__name__
        'VectorEnv'
    """
    if env_kw.get("backend", "sim") == "sim":
        return VectorEnv(num_envs, env_id, **env_kw)
    return [make_env(env_id, **env_kw) for _ in range(num_envs)]


# ---------------------------------------------------------------------- worker processes
_WORKER: dict[str, Any] = {}


def _init_worker(env_id: str, env_kw: dict[str, Any], shape: dict[str, Any], num_envs: int) -> None:
    """Set up a worker process: one torch thread, its environments, a policy to load into."""
    child_signals()  # a Ctrl-C or SIGTERM to the group ends it quietly; the trainer reports it
    policy = MLPPolicy(**shape)
    policy.torch.set_num_threads(1)
    _WORKER["envs"] = make_envs(num_envs, env_id, env_kw)
    _WORKER["policy"] = policy


def _collect_in_worker(
    weights: dict[str, Any],
    seeds: list[int],
    keys: list[int],
    stream: int,
    train_step: int,
) -> list[Episode]:
    policy: MLPPolicy = _WORKER["policy"]
    torch = policy.torch
    policy.net.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    envs: VectorEnv | list[OrchestrationEnv] = _WORKER["envs"]
    for env in envs.envs if isinstance(envs, VectorEnv) else envs:
        env.train_step = train_step
    return collect_batched(envs, policy, seeds, keys, stream=stream)


def _start_method() -> str:
    """``fork`` where the platform has it (fast; no ``__main__`` guard needed), else ``spawn``."""
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
        self._pool = guard_breakage(
            ProcessPoolExecutor(
                num_workers,
                mp_context=multiprocessing.get_context(method),
                initializer=_init_worker,
                initargs=args,
            )
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
        # numpy arrays travel by value; torch tensors would go through shared-memory file
        # descriptors and a server thread in this process that a dying worker can break
        weights = {k: v.detach().cpu().numpy().copy() for k, v in policy.net.state_dict().items()}
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
        """Stop the worker processes, once their running jobs are done."""
        stop_pool(self._pool, wait=True)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
