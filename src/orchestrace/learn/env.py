"""Gymnasium-style environments where the learner is the orchestrator.

The workers run on the orchestrace runtime (simulated backend, virtual time); every episode
records a full trace. At each decision point the orchestrator observes the state and takes the
five sub-decisions:

| decision | choices |
| --- | --- |
| O1 spawn: how many new workers this round | 0, 1, 2, 4, 8 |
| O2 delegate: to which role | novice (cheap, 0.75 skill), worker (0.9), expert (0.97, 2x tokens) |
| O3 communicate: what new workers hear | none, broadcast (all answers so far), p2p (one answer) |
| O4 aggregate: how to combine at the end | vote, trust (vote weighted by role), judge (an LLM picks), first |
| O5 stop: stop now or continue | continue, stop |

Communication is recorded: each new worker that hears answers gets one ``message`` event from
the orchestrator (``attrs.data.peers``), which its revision reads (a message edge). The
orchestrator and its workers run in :mod:`orchestrace.runtime.rounds`. Every episode's trace
records what re-runs it (``meta.runner``: the env id, task, seed, reset ``options``,
``train_step`` and the episode's limits; ``meta.backend``: the simulator with its options), so
``replay``, ``fork`` and counterfactual credit work on it as on a topology's trace: a fork
keeps the recorded decisions (open loop) and changes what the intervention changes.

Each worker answers the whole task (a task instance whose size, hence difficulty, varies per
episode); workers that hear answers revise theirs in a second call. The episode ends when the
orchestrator stops (``terminated``) or runs out of rounds, workers or Critical Steps
(``truncated``, then it aggregates with the method of its last decision; ``info["truncated_by"]``
says which limit: ``max_rounds``, ``max_workers`` or ``steps_budget``). The reward comes at the
end: by default PARL (:func:`~orchestrace.rewards.parl_reward`) with
``r_perf = success - token_cost * tokens / 1000``; any reward function over traces can replace
it. Latency is counted in PARL Critical Steps (the steps along the critical path of the run,
:func:`~orchestrace.trace.graph.critical_steps`): ``latency_weight`` subtracts
``latency_weight * critical_steps / latency_norm`` from the reward, and ``steps_budget``
truncates the episode once the Critical Steps so far reach it.

Environment ids (versioned; bump when results could change):

* ``orchestrate-v1``: all five decisions, ``MultiDiscrete([5, 3, 3, 4, 2])``; on the ``sim``
  backend the judge and revisers solve the whole task for themselves (at its hardness) and
  decide from that and what they are shown: they never read the ground truth.
* ``orchestrate-v0``: as ``orchestrate-v1`` but with oracle verifiers (``sim`` option
  ``oracle_verifiers=True``: the judge and revisers read the ground truth), kept so that
  earlier results stay reproducible.
* ``stop-v0``: the stopping decision alone (``Discrete(2)``): one worker per round, worker role,
  no communication, majority vote.

This module builds environments by id and runs episodes (:func:`rollouts`); the
environment class and its settings live in :mod:`orchestrace.learn._orchestration_env` and are
re-exported here.

Example:
    >>> env = make_env("stop-v0", task="arith")
    >>> obs, info = env.reset(seed=3)
    >>> obs.shape, env.action_space
    ((20,), Discrete(2))
    >>> obs, reward, terminated, truncated, info = env.step(0)  # continue: one more worker
    >>> obs, reward, terminated, truncated, info = env.step(1)  # stop: vote
    >>> terminated, info["answers"], info["truncated_by"], info["latency"]
    (True, 1, None, 0.0)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrace.errors import ConfigError, RuntimeError_
from orchestrace.executors import Executor, JobFailure, LocalExecutor, failures
from orchestrace.learn._orchestration_env import SIZE_RANGES, EnvConfig, OrchestrationEnv, _jsonable
from orchestrace.runtime.rounds import (
    AGGREGATES,
    COMMS,
    ROLES,
    SPAWNS,
)

__all__ = [
    "AGGREGATES",
    "COMMS",
    "ENV_IDS",
    "ROLES",
    "SIZE_RANGES",
    "SPAWNS",
    "EnvConfig",
    "OrchestrationEnv",
    "RolloutsFailed",
    "make_env",
    "rollouts",
]

#: Registered environment ids.
ENV_IDS = ("orchestrate-v0", "orchestrate-v1", "stop-v0")


def make_env(env_id: str, **kw: Any) -> OrchestrationEnv:
    """Build an environment by id with :class:`EnvConfig` settings.

    Raises:
        ConfigError: Unknown id or settings.
    """
    if env_id not in ("orchestrate-v0", "orchestrate-v1", "stop-v0"):
        raise ConfigError(f"unknown environment {env_id!r}; use one of: {', '.join(ENV_IDS)}")
    if env_id == "stop-v0":
        kw.setdefault("learn", ("O5",))
    known = {f.name for f in dataclasses.fields(EnvConfig)}
    unknown = sorted(set(kw) - known)
    if unknown:
        raise ConfigError(
            f"{env_id}: unknown settings {unknown}; EnvConfig takes: {', '.join(sorted(known))}"
        )
    return OrchestrationEnv(EnvConfig(**kw), env_id)


class RolloutsFailed(RuntimeError_):
    """Episodes of :func:`rollouts` that failed; the finished ones are kept.

    Attributes:
        results: Per seed, in seed order: the episode's result, or ``None`` where it failed.
        failures: Per failed episode: ``seed``, ``error``, ``attempts``, ``kind``
            (``raised`` or ``worker-died``).

    Example:
        >>> err = RolloutsFailed([{"seed": 0}, None], [{"seed": 1, "error": "ValueError: x",
        ...                       "attempts": 1, "kind": "raised"}])
        >>> str(err)
        '1 of 2 episodes failed (seed 1: ValueError: x); the other 1 finished'
    """

    def __init__(self, results: list[dict[str, Any] | None], failures: list[dict[str, Any]]):
        self.results = results
        self.failures = failures
        seeds = ", ".join(str(f["seed"]) for f in failures[:5])
        more = f" and {len(failures) - 5} more" if len(failures) > 5 else ""
        first = failures[0]
        tries = f" after {first['attempts']} attempts" if first["attempts"] > 1 else ""
        super().__init__(
            f"{len(failures)} of {len(results)} episodes failed (seed{'s' if len(failures) > 1 else ''} "
            f"{seeds}{more}: {first['error']}{tries}); the other "
            f"{len(results) - len(failures)} finished"
        )


def rollouts(
    policy: Any,
    seeds: Sequence[int],
    env_id: str = "stop-v0",
    *,
    env_options: Mapping[str, Any] | None = None,
    executor: Executor | None = None,
    traces: bool = False,
    on_error: str = "raise",
) -> list[dict[str, Any]]:
    """One episode per seed, as independent jobs on ``executor``; results in seed order.

    Each episode runs on a fresh environment (``make_env(env_id, **env_options)``) reset with
    its seed, so an episode's result depends on its seed alone and is the same on every
    executor (:mod:`orchestrace.executors`; default: this process). An episode that fails
    (it raised, or its worker died on every attempt) does not stop the others.

    Args:
        policy: Anything with ``act(obs, info, env)`` (a heuristic, a torch policy); its
            ``reset()`` is called before each episode. It must pickle to run elsewhere.
        seeds: One episode per seed.
        env_id: A registered environment id.
        env_options: :class:`EnvConfig` settings.
        executor: Where the episodes run.
        traces: Also return each episode's trace.
        on_error: ``raise`` (default): once every episode has run, raise
            :class:`RolloutsFailed` (it holds the finished episodes) if any failed;
            ``record``: a failed episode's place holds ``seed``, ``error``, ``attempts``
            and ``kind`` (and no ``return``).

    Returns:
        Per episode: ``seed``, ``return`` (sum of rewards), ``steps``, ``terminated``,
        ``truncated``, ``info`` (the last step's info, JSON-ready, without its trace) and,
        with ``traces``, ``trace``.

    Raises:
        RolloutsFailed: An episode failed (the message names its seed and error).

    Example:
        >>> from orchestrace.learn.policies.heuristic import FixedN
        >>> out = rollouts(FixedN(n=2), [0, 1], "stop-v0", env_options={"task": "arith"})
        >>> [r["seed"] for r in out], [r["info"]["answers"] for r in out]
        ([0, 1], [2, 2])
    """
    if on_error not in ("raise", "record"):
        raise ConfigError(f"on_error must be 'raise' or 'record', got {on_error!r}")
    make_env(env_id, **dict(env_options or {})).close()  # bad settings: refused here
    shared = (policy, env_id, dict(env_options or {}), traces)
    specs = [int(s) for s in seeds]
    out = (executor or LocalExecutor()).map(_rollout, specs, shared=shared, on_error="record")
    lost = [{"seed": specs[f.index], **f.to_dict()} for f in failures(out)]
    for f in lost:
        del f["index"]
    if not lost:
        return out
    if on_error == "raise":
        raise RolloutsFailed([None if isinstance(r, JobFailure) else r for r in out], lost)
    by_seed = iter(lost)
    return [next(by_seed) if isinstance(r, JobFailure) else r for r in out]


def _rollout(shared: tuple[Any, str, dict[str, Any], bool], seed: int) -> dict[str, Any]:
    """One episode of ``policy`` on a fresh environment."""
    policy, env_id, options, keep = shared
    with make_env(env_id, **options) as env:
        obs, info = env.reset(seed=seed)
        if hasattr(policy, "reset"):
            policy.reset()
        total, steps = 0.0, 0
        while True:
            obs, reward, term, trunc, info = env.step(policy.act(obs, info, env))
            total += float(reward)
            steps += 1
            if term or trunc:
                break
        out: dict[str, Any] = {
            "seed": seed,
            "return": total,
            "steps": steps,
            "terminated": bool(term),
            "truncated": bool(trunc),
            "info": _jsonable({k: v for k, v in info.items() if k != "trace"}),
        }
        if keep:
            out["trace"] = env.trace
    return out
