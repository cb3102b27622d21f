"""Many orchestration episodes at once, interleaved on one event loop, for batched rollouts.

:class:`VectorEnv` holds ``n`` environments (:func:`~orchestrace.learn.env.make_env`) whose
runtimes share one virtual-time event loop: a step hands every environment its decision, then
drives the loop once until every episode has reached its next decision or its end, so the
workers of all ``n`` episodes run interleaved. Each episode's clock stands still while it waits
for its decision, so an episode gives the same observations, rewards and trace as on a loop of
its own (same seed, same actions): only the wall time changes.

The API follows Gymnasium's vector environments: observations stacked to ``(n, 20)``, rewards
and flags as arrays, one info dict per environment, and next-step autoreset (the step after an
episode ends resets that environment, with a seed drawn from its seeded generator, and ignores
its action). :meth:`VectorEnv.rollouts` runs one episode per seed with a policy, ``n`` at a time,
with the results of :func:`~orchestrace.learn.env.rollouts`.

Example:
    >>> from orchestrace.learn.policies.heuristic import FixedN
    >>> venv = VectorEnv(2, "stop-v0", task="arith")
    >>> obs, infos = venv.reset(seed=[0, 1])
    >>> obs.shape
    (2, 20)
    >>> out = venv.rollouts(FixedN(n=2), [0, 1, 2])
    >>> [r["info"]["answers"] for r in out]
    [2, 2, 2]
    >>> venv.close()
"""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from orchestrace._numbers import is_int
from orchestrace.errors import ConfigError, RuntimeError_
from orchestrace.learn._orchestration_env import _jsonable, _rewind
from orchestrace.learn.env import OrchestrationEnv, make_env
from orchestrace.runtime.clock import VirtualTimeLoop, _shutdown, outside_running_loop

__all__ = ["VectorEnv"]


#: Most environments one :class:`VectorEnv` steps (each holds a live run in memory).
MAX_ENVS = 65_536


class VectorEnv:
    """``n`` environments of one id and settings whose episodes share one event loop.

    Args:
        num_envs: How many episodes run at once (>= 1).
        env_id: A registered environment id (``stop-v0``, ``orchestrate-v1``...).
        **kw: :class:`~orchestrace.learn.env.EnvConfig` settings; the ``sim`` backend only.

    Raises:
        ConfigError: ``num_envs`` below 1, a backend other than ``sim``, or bad settings.

    Example:
        >>> venv = VectorEnv(3, "stop-v0", task="arith")
        >>> obs, _ = venv.reset(seed=5)
        >>> obs, rewards, terminated, truncated, infos = venv.step([1, 1, 1])
        >>> terminated.tolist(), [i["seed"] for i in infos]
        ([True, True, True], [5, 6, 7])
        >>> venv.close()
    """

    def __init__(self, num_envs: int, env_id: str = "stop-v0", **kw: Any) -> None:
        if not is_int(num_envs) or not 1 <= num_envs <= MAX_ENVS:
            raise ConfigError(
                f"num_envs must be an integer from 1 to {MAX_ENVS:,}, got {num_envs!r} "
                "(each holds a live run; use several VectorEnvs or worker processes for more)"
            )
        if kw.get("backend", "sim") != "sim":
            raise ConfigError(
                f"VectorEnv runs the sim backend only, got backend={kw['backend']!r}; "
                "use rollouts(..., executor=...) to run real backends in parallel"
            )
        self.loop = VirtualTimeLoop(watchdog_s=0.05)
        self.envs: list[OrchestrationEnv] = []
        for _ in range(num_envs):
            env = make_env(env_id, **kw)
            env._shared_loop = self.loop
            self.envs.append(env)
        self.num_envs = num_envs
        self.env_id = env_id
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self._done = [False] * num_envs

    # ------------------------------------------------------------------ gym-style API
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """Start an episode in every environment.

        Args:
            seed: ``None``, one seed (environment ``i`` gets ``seed + i``) or one per environment.
            options: Reset options of every episode (see ``OrchestrationEnv.reset``).

        Returns:
            Observations ``(n, 20)`` and one info dict per environment.

        Raises:
            ConfigError: ``seed`` is a list of the wrong length.
        """
        if seed is None or isinstance(seed, int | np.integer):
            seeds: list[int | None] = [
                None if seed is None else int(seed) + i for i in range(self.num_envs)
            ]
        else:
            seeds = [None if s is None else int(s) for s in seed]
            if len(seeds) != self.num_envs:
                raise ConfigError(
                    f"reset(seed=...) needs {self.num_envs} seeds, one per environment, "
                    f"got {len(seeds)}"
                )
        for env, s in zip(self.envs, seeds, strict=True):
            env._begin(s, options)
        obs = self._drive(self.envs)
        self._done = [False] * self.num_envs
        return np.stack([o for o in obs if o is not None]), [e._info() for e in self.envs]

    def step(
        self, actions: Sequence[Any] | np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """One decision per environment; every episode runs to its next decision or end.

        An environment whose episode ended at the previous step is reset instead (next-step
        autoreset: its action is ignored, its reward is 0).

        Raises:
            ConfigError: Not one action per environment, or an action outside the space.
        """
        if len(actions) != self.num_envs:
            raise ConfigError(
                f"step() needs {self.num_envs} actions, one per environment, got {len(actions)}"
            )
        for i, (env, act) in enumerate(zip(self.envs, actions, strict=True)):
            if self._done[i]:
                env._begin(None, None)
            else:
                env._give(act)
        obs = self._drive(self.envs)
        n = self.num_envs
        out_obs, rewards = [], np.zeros(n, dtype=np.float64)
        term, trunc = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        infos: list[dict[str, Any]] = []
        for i, (env, o) in enumerate(zip(self.envs, obs, strict=True)):
            if self._done[i]:
                assert o is not None
                self._done[i] = False
                out_obs.append(o)
                infos.append(env._info())
                continue
            o2, r, te, tr, info = env._outcome(o)
            out_obs.append(o2)
            rewards[i], term[i], trunc[i] = r, te, tr
            self._done[i] = te or tr
            infos.append(info)
        return np.stack(out_obs), rewards, term, trunc, infos

    def close(self) -> None:
        """End every episode and close the shared loop."""
        for env in self.envs:
            env.close()
        if not self.loop.is_closed():  # its tasks cancelled, the loop closed, as a run's
            outside_running_loop(functools.partial(_shutdown, self.loop))

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ batched rollouts
    def rollouts(
        self, policy: Any, seeds: Sequence[int], *, traces: bool = False
    ) -> list[dict[str, Any]]:
        """One episode per seed, ``num_envs`` at a time on the shared loop; results in seed order.

        Each episode's result equals that of :func:`~orchestrace.learn.env.rollouts` for its
        seed. ``policy.act(obs, info, env)`` is called per environment; a policy with state
        across steps needs one copy per environment, so a ``policy`` with ``reset()`` is
        copied for each episode (from the policy as given, so a state that ``reset()`` leaves,
        such as a random generator, starts each episode alike whatever ``num_envs`` is).

        Args:
            policy: Anything with ``act(obs, info, env)``.
            seeds: One episode per seed.
            traces: Also return each episode's trace.

        Returns:
            Per episode: ``seed``, ``return``, ``steps``, ``terminated``, ``truncated``,
            ``info`` (JSON-ready, without its trace) and, with ``traces``, ``trace``.
        """
        queue = [int(s) for s in seeds]
        results: dict[int, dict[str, Any]] = {}
        slots: list[dict[str, Any] | None] = [None] * self.num_envs
        stateful = hasattr(policy, "reset")
        nxt = 0

        def start(i: int) -> bool:
            nonlocal nxt
            if nxt >= len(queue):
                slots[i] = None
                return False
            pol = policy
            if stateful:
                pol = copy.deepcopy(policy)
                pol.reset()
            slots[i] = {"index": nxt, "seed": queue[nxt], "policy": pol, "total": 0.0, "n": 0}
            self.envs[i]._begin(queue[nxt], None)
            nxt += 1
            return True

        active = [i for i in range(self.num_envs) if start(i)]
        obs = self._drive([self.envs[i] for i in active])
        pending = {i: (o, self.envs[i]._info()) for i, o in zip(active, obs, strict=True)}
        while pending:
            for i, (o, info) in pending.items():
                slot = slots[i]
                assert slot is not None
                self.envs[i]._give(slot["policy"].act(o, info, self.envs[i]))
            order = list(pending)
            obs = self._drive([self.envs[i] for i in order])
            restart: list[int] = []
            pending = {}
            for i, o in zip(order, obs, strict=True):
                env, slot = self.envs[i], slots[i]
                assert slot is not None
                o2, r, te, tr, info = env._outcome(o)
                slot["total"] += float(r)
                slot["n"] += 1
                if not (te or tr):
                    pending[i] = (o2, info)
                    continue
                res: dict[str, Any] = {
                    "seed": slot["seed"],
                    "return": slot["total"],
                    "steps": slot["n"],
                    "terminated": bool(te),
                    "truncated": bool(tr),
                    "info": _jsonable({k: v for k, v in info.items() if k != "trace"}),
                }
                if traces:
                    res["trace"] = env.trace
                results[slot["index"]] = res
                if start(i):
                    restart.append(i)
            if restart:
                obs = self._drive([self.envs[i] for i in restart])
                for i, o in zip(restart, obs, strict=True):
                    pending[i] = (o, self.envs[i]._info())
        return [results[k] for k in range(len(queue))]

    # ------------------------------------------------------------------ internals
    def _rewind(self) -> None:
        """Between whole episodes: the shared clock back at 0.0, as on a new loop.

        Does nothing while an episode runs. The trainers call it before each batch, so the
        shared clock only ever spans one batch of episodes.
        """
        if any(env._loop is not None for env in self.envs):
            return
        if not _rewind(self.loop):
            self.loop = VirtualTimeLoop(watchdog_s=0.05)
            for env in self.envs:
                env._shared_loop = self.loop

    def _drive(self, envs: Sequence[OrchestrationEnv]) -> list[np.ndarray | None]:
        """Run the shared loop until each of ``envs`` wants a decision or has finished.

        Each environment's two waiters (decision requested, run finished) count it done;
        the loop stops from their done callbacks once every environment is, without a task
        per wait.
        """
        waiting = [w for w in (e._waiters() for e in envs) if not any(f.done() for f in w)]
        if waiting:
            left = [len(waiting)]
            loop = self.loop
            hooks: list[tuple[asyncio.Future[Any], Any]] = []

            def counter() -> Any:
                seen = [False]  # one environment: its first waiter done counts it

                def hit(_: object) -> None:
                    if not seen[0]:
                        seen[0] = True
                        left[0] -= 1
                        if not left[0]:
                            loop.stop()

                return hit

            for futures in waiting:
                hit = counter()
                for f in futures:
                    f.add_done_callback(hit)
                    hooks.append((f, hit))
            try:
                outside_running_loop(loop.run_forever)
            finally:
                for f, hit in hooks:
                    f.remove_done_callback(hit)
            if left[0]:
                raise RuntimeError_(
                    "the shared event loop stopped before every episode reached a decision "
                    "or its end; do not stop the loop from inside a run"
                )
        return [e._ready() for e in envs]
