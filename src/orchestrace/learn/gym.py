"""Gymnasium registration of the orchestration environments (``gymnasium.make`` ids).

The ids ``orchestrace/Orchestrate-v1``, ``orchestrace/Orchestrate-v0`` and
``orchestrace/Stop-v0`` build a ``gymnasium.Env`` (:func:`env_class`) around
:func:`~orchestrace.learn.env.make_env`, with Gymnasium spaces, so Gymnasium's tooling
(``check_env``, wrappers, vector envs) applies. Gymnasium is optional and never imported by
``import orchestrace``. The ids are registered

* when this module is imported, so ``gymnasium.make("orchestrace.learn.gym:orchestrace/Stop-v0")``
  works with nothing imported beforehand (Gymnasium imports the module named before ``:``);
* on ``import orchestrace.learn`` (or any module under it): at once when Gymnasium is already
  imported, else at the moment Gymnasium is imported (a one-shot import hook; Gymnasium itself is
  not imported), so ``gymnasium.make("orchestrace/Stop-v0")`` works in either import order;
* by :func:`register`, explicitly.

Example:
    >>> import importlib.util
    >>> if importlib.util.find_spec("gymnasium"):
    ...     import gymnasium
    ...     _ = register()
    ...     env = gymnasium.make("orchestrace/Orchestrate-v1", task="arith")
    ...     obs, info = env.reset(seed=0)
    ...     print(obs.shape)
    ... else:
    ...     print((20,))
    (20,)
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any, ClassVar

import numpy as np

from orchestrace.errors import ConfigError
from orchestrace.learn.env import OrchestrationEnv, make_env
from orchestrace.learn.spaces import Discrete, MultiDiscrete

__all__ = ["GYM_IDS", "env_class", "gym_env", "register"]

#: Gymnasium id -> orchestrace environment id.
GYM_IDS = {
    "orchestrace/Orchestrate-v0": "orchestrate-v0",
    "orchestrace/Orchestrate-v1": "orchestrate-v1",
    "orchestrace/Stop-v0": "stop-v0",
}


def _gymnasium() -> Any:
    try:
        import gymnasium  # noqa: PLC0415  optional extra [learn]
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ConfigError(
            "the Gymnasium adapter needs gymnasium; install it with: pip install gymnasium"
        ) from e
    return gymnasium


def gym_env(env_id: str = "orchestrate-v1", **kw: Any) -> Any:
    """A ``gymnasium.Env`` around :func:`~orchestrace.learn.env.make_env` (same id and settings).

    The class (:func:`env_class`) subclasses ``gymnasium.Env``; its spaces are
    ``gymnasium.spaces`` (``Box`` of float32 observations, ``Discrete`` or ``MultiDiscrete``
    actions). ``reset(seed=s)`` seeds ``np_random`` (Gymnasium's seeding); ``reset()`` without a
    seed draws the episode seed from it, so seeded instances give the same episodes.

    Raises:
        ConfigError: Gymnasium is not installed, or an unknown id or setting.

    Example:
        >>> import importlib.util
        >>> if importlib.util.find_spec("gymnasium"):
        ...     print(gym_env("stop-v0", task="arith").action_space)
        ... else:
        ...     print("Discrete(2)")
        Discrete(2)
    """
    cls = env_class()
    task = kw.get("task")
    if isinstance(task, str):  # named as the keyword the caller passed, not a CLI option
        from orchestrace.tasks import TASKS, task_class  # noqa: PLC0415

        if task_class(task) is None:
            raise ConfigError(
                f"task={task[:60]!r} is not a task; use one of: {', '.join(sorted(TASKS))}"
            )
    return cls(make_env(GYM_IDS.get(env_id, env_id), **kw))


@functools.cache
def env_class() -> type:
    """The ``gymnasium.Env`` subclass that wraps an ``OrchestrationEnv`` (built once).

    Raises:
        ConfigError: Gymnasium is not installed.

    Example:
        >>> import importlib.util
        >>> if importlib.util.find_spec("gymnasium"):
        ...     import gymnasium
        ...     print(issubclass(env_class(), gymnasium.Env))
        ... else:
        ...     print(True)
        True
    """
    gymnasium = _gymnasium()

    spaces = gymnasium.spaces

    class OrchestraceGymEnv(gymnasium.Env):  # type: ignore[misc,name-defined]
        """The orchestration environment as a ``gymnasium.Env``."""

        metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

        def __init__(self, env: OrchestrationEnv) -> None:
            self.env = env
            box = env.observation_space
            self.observation_space = spaces.Box(
                box.low, box.high, shape=box.shape, dtype=np.float32
            )
            act = env.action_space
            if isinstance(act, Discrete):
                self.action_space = spaces.Discrete(act.n)
            else:
                assert isinstance(act, MultiDiscrete)
                self.action_space = spaces.MultiDiscrete(act.nvec)

        def reset(
            self, *, seed: int | None = None, options: dict[str, Any] | None = None
        ) -> tuple[Any, dict[str, Any]]:
            super().reset(seed=seed)
            if seed is None:
                seed = int(self.np_random.integers(2**31))
            obs, info = self.env.reset(seed=seed, options=options)
            return np.asarray(obs, dtype=np.float32), info

        def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
            if isinstance(self.action_space, spaces.Discrete):
                arr = np.asarray(action) if action is not None else None
                ok = (
                    arr is not None
                    and arr.shape == ()
                    and np.issubdtype(arr.dtype, np.integer)
                    and 0 <= int(arr) < int(self.action_space.n)
                )
                if not ok:
                    raise ConfigError(
                        f"action {action!r} is not in {self.action_space}: give one integer "
                        f"from 0 to {int(self.action_space.n) - 1}"
                    )
                action = int(arr)  # type: ignore[arg-type]
            else:
                arr = np.asarray(action)
                if arr.shape != self.action_space.shape or not self.action_space.contains(
                    arr.astype(self.action_space.dtype, copy=False)
                ):
                    raise ConfigError(
                        f"action {arr.tolist()!r} is not in {self.action_space}: give "
                        f"{len(self.action_space.nvec)} integers, each below its bound"
                    )
                action = [int(a) for a in arr]
            obs, reward, term, trunc, info = self.env.step(action)
            return np.asarray(obs, dtype=np.float32), float(reward), term, trunc, info

        def close(self) -> None:
            self.env.close()

    OrchestraceGymEnv.__module__ = __name__
    return OrchestraceGymEnv


def register() -> list[str]:
    """Register the environments with Gymnasium; returns the ids (``orchestrace/...``).

    Raises:
        ConfigError: Gymnasium is not installed.

    Example:
        >>> import importlib.util
        >>> sorted(GYM_IDS)[1]
        'orchestrace/Orchestrate-v1'
    """
    gymnasium = _gymnasium()
    for gid, eid in GYM_IDS.items():
        if gid not in gymnasium.registry:
            gymnasium.register(
                gid, entry_point="orchestrace.learn.gym:gym_env", kwargs={"env_id": eid}
            )
    return list(GYM_IDS)


if importlib.util.find_spec("gymnasium") is not None:
    # importing this module registers the ids: gymnasium.make("orchestrace.learn.gym:<id>")
    register()
