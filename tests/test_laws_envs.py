"""Law: every registered environment passes Gymnasium's checker and the project's own.

Every environment id (``orchestrace.learn.env.ENV_IDS``) on every task family it serves, and
every Gymnasium id (``orchestrace.learn.gym.GYM_IDS``, which must be exactly the ``orchestrace/``
ids in Gymnasium's registry):

* ``gymnasium.utils.env_checker.check_env`` passes with warnings turned into errors;
* ``check_orchestration_env`` (below) holds: the documented API (spaces, the five-tuple of
  ``step``, ``terminated`` versus ``truncated`` with ``info["truncated_by"]``), seeding (same
  seed, same episode and same recorded trace, bit for bit; ``reset()`` without a seed continues
  the seeded generator; other seeds give other episodes), a valid trace per episode, episodes
  that end under a policy that never stops, ``step`` refused once an episode ended, and
  ``close`` twice.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest

from orchestrace import dumps
from orchestrace.errors import ConfigError
from orchestrace.learn.env import ENV_IDS, OrchestrationEnv, make_env
from orchestrace.trace.check import check_trace

#: The task families the environments serve (one instance size range each).
FAMILIES = ("arith", "wide-search", "multihop")


def _action(env: Any, rng: np.random.Generator, stop: bool) -> Any:
    """A random action that stops (or continues) the episode."""
    space = env.action_space
    if hasattr(space, "nvec"):
        a = np.asarray([rng.integers(n) for n in space.nvec])
        a[-1] = int(stop)
        return a
    return int(stop)


def _episode(env: Any, seed: int | None, policy_seed: int, rounds: int) -> list[Any]:
    """Every observable of one episode: reset, then ``rounds`` continues and a stop."""
    rng = np.random.default_rng(policy_seed)
    obs, info = env.reset(seed=seed) if seed is not None else env.reset()
    assert env.observation_space.contains(obs), obs
    assert isinstance(info, dict)
    seen: list[Any] = [np.asarray(obs).tolist()]
    done, k = False, 0
    while not done:
        action = _action(env, rng, stop=k >= rounds)
        assert env.action_space.contains(action)
        out = env.step(action)
        assert isinstance(out, tuple) and len(out) == 5
        obs, reward, terminated, truncated, info = out
        assert env.observation_space.contains(obs), obs
        assert isinstance(reward, float) and math.isfinite(reward)
        assert isinstance(terminated, bool) and isinstance(truncated, bool)
        assert isinstance(info, dict)
        done, k = terminated or truncated, k + 1
        assert k <= 1_000, "the episode does not end"
        seen.append((np.asarray(obs).tolist(), reward, terminated, truncated))
    return seen


def _trace(env: Any) -> Any:
    """The trace of the last episode (a Gymnasium adapter holds the environment as ``env``)."""
    return env.trace if hasattr(env, "trace") else env.env.trace


def check_orchestration_env(make: Any) -> None:
    """The project's environment checks on a factory of fresh environments (raises on failure).

    Traces of same-seed episodes are compared byte for byte (episode and trace ids included).
    """
    env, other = make(), make()
    # same seed: same observations, rewards, flags and trace, on another instance too
    first = _episode(env, seed=5, policy_seed=0, rounds=2)
    trace = _trace(env)
    assert trace is not None and check_trace(trace) == []
    assert _episode(other, seed=5, policy_seed=0, rounds=2) == first
    assert dumps(_trace(other)) == dumps(trace)
    # reset() without a seed continues the seeded generator, on every instance alike
    follow = [_episode(e, seed=None, policy_seed=1, rounds=1) for e in (env, other)]
    assert follow[0] == follow[1]
    # other seeds: other episodes
    starts = {str(_episode(env, seed=s, policy_seed=0, rounds=1)) for s in range(4)}
    assert len(starts) > 1
    # a policy that never stops still ends: truncated by a limit that says which
    rng = np.random.default_rng(3)
    env.reset(seed=1)
    for _ in range(1_000):
        *_, terminated, truncated, info = env.step(_action(env, rng, stop=False))
        if terminated or truncated:
            break
    assert truncated and not terminated, "an episode that never stops ends by truncation"
    assert info["truncated_by"] in ("max_rounds", "max_workers", "steps_budget")
    assert check_trace(_trace(env)) == []
    # no step after the episode ended
    with pytest.raises(ConfigError, match="reset"):
        env.step(_action(env, rng, stop=True))
    env.close()
    env.close()
    other.close()


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_environment_passes_the_project_checker(env_id: str, family: str) -> None:
    check_orchestration_env(lambda: make_env(env_id, task=family))


def test_same_seed_same_trace_bit_for_bit() -> None:
    traces = []
    for _ in range(2):
        env = make_env("stop-v0", task="arith")
        _episode(env, seed=5, policy_seed=0, rounds=2)
        traces.append(dumps(_trace(env)))
    assert traces[0] == traces[1]


def test_the_checker_catches_a_nondeterministic_environment() -> None:
    class Drifting(OrchestrationEnv):  # observations depend on a call counter, not the seed
        calls = 0

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            obs, info = super().reset(seed=seed, options=options)
            Drifting.calls += 1
            obs = obs.copy()
            obs[0] = (Drifting.calls % 7) / 10
            return obs, info

    base = make_env("stop-v0", task="arith")

    def make() -> OrchestrationEnv:
        env = Drifting(base.config, env_id="stop-v0")
        return env

    with pytest.raises(AssertionError):
        check_orchestration_env(make)


def test_gymnasium_ids_are_the_registered_ones() -> None:
    gymnasium = pytest.importorskip("gymnasium")
    from orchestrace.learn.gym import GYM_IDS, register

    register()
    ours = {k for k in gymnasium.envs.registry if k.startswith("orchestrace/")}
    assert ours == set(GYM_IDS)
    assert set(GYM_IDS.values()) == set(ENV_IDS)


def _gym_make(gymnasium: Any, gid: str, family: str) -> Any:
    with warnings.catch_warnings():
        # Orchestrate-v0 is superseded by v1 (kept so that earlier results reproduce)
        warnings.filterwarnings("ignore", ".*is out of date", DeprecationWarning)
        return gymnasium.make(gid, task=family)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    "gid", ["orchestrace/Stop-v0", "orchestrace/Orchestrate-v1", "orchestrace/Orchestrate-v0"]
)
def test_every_gymnasium_id_passes_the_env_checker(gid: str, family: str) -> None:
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    from orchestrace.learn.gym import GYM_IDS

    assert gid in GYM_IDS
    env = _gym_make(gymnasium, gid, family)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)
    check_orchestration_env(lambda: _gym_make(gymnasium, gid, family).unwrapped)
