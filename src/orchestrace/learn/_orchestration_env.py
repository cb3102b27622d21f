"""The orchestration environment itself: its settings, reset/step, observations and reward.

:mod:`orchestrace.learn.env` describes the environment, builds it by id
(:func:`~orchestrace.learn.env.make_env`), runs episodes (:func:`~orchestrace.learn.env.rollouts`)
and re-exports :class:`EnvConfig`, :class:`OrchestrationEnv` and :data:`SIZE_RANGES`.

Example:
    >>> env = OrchestrationEnv(EnvConfig(task="arith"), "stop-v0")
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape == (OBS_DIM,)
    True
    >>> env.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
from typing import Any

import numpy as np

from orchestrace._numbers import is_int
from orchestrace.errors import ConfigError, RuntimeError_
from orchestrace.learn._env_config import SIZE_RANGES, EnvConfig, _check_latency
from orchestrace.learn.spaces import Box, Discrete, MultiDiscrete
from orchestrace.rewards.parl import Anneal, parl_components
from orchestrace.runtime.backends import make_backend
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.clock import VirtualTimeLoop, outside_running_loop
from orchestrace.runtime.config import RunConfig
from orchestrace.runtime.core import Runtime
from orchestrace.runtime.rounds import (
    AGGREGATES,
    COMMS,
    ROLES,
    SPAWNS,
    Rounds,
    RoundsSpec,
    top_counts,
)
from orchestrace.runtime.rounds import key_of as _key
from orchestrace.tasks import make_task
from orchestrace.trace.model import Trace

__all__ = ["OBS_DIM", "SIZE_RANGES", "EnvConfig", "OrchestrationEnv"]

_FAMILIES = ("arith-mapreduce-v0", "wide-search-v0", "multihop-v0")
#: Task size range per task (difficulty varies per episode).
OBS_DIM = 20


class OrchestrationEnv:
    """The orchestrator's decision problem over a live runtime (see the module docstring)."""

    def __init__(self, config: EnvConfig | None = None, env_id: str = "orchestrate-v0") -> None:
        self.config = config or EnvConfig()
        self.id = env_id
        self.task_name = make_task(self.config.task).name
        lo_hi = self.config.size_range or SIZE_RANGES.get(self.task_name, (8, 8))
        self.size_range = (int(lo_hi[0]), int(lo_hi[1]))
        self.observation_space = Box(0.0, 1.0, (OBS_DIM,))
        sizes = {
            "O1": len(SPAWNS),
            "O2": len(ROLES),
            "O3": len(COMMS),
            "O4": len(AGGREGATES),
            "O5": 2,
        }
        self.learned = [d for d in ("O1", "O2", "O3", "O4", "O5") if d in self.config.learn]
        nvec = [sizes[d] for d in self.learned]
        self.action_space: Discrete | MultiDiscrete = (
            Discrete(nvec[0]) if len(nvec) == 1 else MultiDiscrete(nvec)
        )
        self.train_step = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._real: tuple[asyncio.AbstractEventLoop, Any] | None = None  # loop, backend
        self._run: asyncio.Task[Trace] | None = None
        self._req: asyncio.Future[np.ndarray] | None = None
        self._act: asyncio.Future[dict[str, Any]] | None = None
        self.state: dict[str, Any] = {}
        self.trace: Trace | None = None
        self._latency_weight = self._latency_norm = 0.0
        #: Draws the episode seed of ``reset()`` without a seed; ``reset(seed=s)`` reseeds it.
        self.np_random = np.random.default_rng()
        #: Episodes this instance started (enters each episode's id).
        self.episodes = 0
        #: An event loop shared with other environments (:class:`~orchestrace.learn.vector.VectorEnv`).
        self._shared_loop: asyncio.AbstractEventLoop | None = None
        #: This env's own virtual-time loop, kept from one episode to the next.
        self._own_loop: VirtualTimeLoop | None = None
        self._family = [float(self.task_name == f) for f in _FAMILIES]
        self._asked_at = 0.0
        #: When the episode's run finished (loop time), once it has.
        self._ended: list[float] = []

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode on a fresh task instance (``seed`` picks instance and draws).

        ``options`` may set ``size`` (the task size of this episode), and ``latency_weight``,
        ``latency_norm`` or ``steps_budget`` for this episode (see :class:`EnvConfig`).

        Without ``seed``, the episode seed is drawn from :attr:`np_random`, the generator that
        the last ``reset(seed=s)`` seeded: ``reset(seed=s)`` then ``reset()`` twice gives the
        same three episodes on every instance.

        Raises:
            ConfigError: A bad latency option (the message names it and the fix).
        """
        self._begin(seed, options)
        obs = self._advance()
        assert obs is not None
        return obs, self._info()

    def _begin(self, seed: int | None, options: dict[str, Any] | None) -> None:
        """Set up an episode and start its run; the loop is not driven yet."""
        self._end_episode()
        opts = options or {}
        if not isinstance(opts, dict):
            raise ConfigError(
                f"reset options must be a dict such as {{'size': 8}}, got {type(opts).__name__}"
            )
        cfg = self.config
        latency = (
            opts.get("latency_weight", cfg.latency_weight),
            opts.get("latency_norm", cfg.latency_norm),
            opts.get("steps_budget", cfg.steps_budget),
        )
        _check_latency(*latency, "reset options")
        budget = latency[2] if latency[2] is not None else _declared_budget(cfg.reward_fn)
        norm = latency[1] or budget or 3 * cfg.max_rounds
        self._latency_weight, self._latency_norm = float(latency[0]), float(norm)
        if seed is None:
            seed = int(self.np_random.integers(2**31))
        else:
            seed = int(seed)
            self.np_random = np.random.default_rng(seed)
        rng = np.random.default_rng([seed, 7])
        unknown = sorted(set(opts) - {"size", "latency_weight", "latency_norm", "steps_budget"})
        if unknown:
            raise ConfigError(
                f"unknown reset options {unknown}; use size, latency_weight, latency_norm or "
                "steps_budget"
            )
        size = opts.get("size")
        if size is not None and (not is_int(size) or size < 1):
            raise ConfigError(f"reset option size must be an integer >= 1, got {size!r}")
        self.episodes += 1
        if size is None:
            size = int(rng.integers(self.size_range[0], self.size_range[1] + 1))
        task = make_task(self.task_name, seed=seed, size=int(size))
        self.seed = seed
        self.task = task
        spec = RoundsSpec(
            max_rounds=self.config.max_rounds,
            max_workers=self.config.max_workers,
            steps_budget=budget,
            learned=tuple(self.learned),
        )
        self.rounds = Rounds(spec, task, int(size), self._ask)
        self.state = self.rounds.state
        loop, backend = self._episode_loop(seed)
        self._loop = loop
        rt = Runtime(
            task=task,
            backend=backend,
            config=RunConfig(
                agents=self.config.max_workers, seed=seed, max_agents=self.config.max_workers + 4
            ),
            topology="centralized",
            meta={
                "runner": {
                    "env": self.id,
                    "task": self.task_name,
                    "episode": _episode_id(self.np_random, self.episodes),
                    "seed": seed,
                    "options": _jsonable(opts),
                    "train_step": self.train_step,
                    "rounds": spec.to_dict(),
                }
            },
        )
        self.rounds.runtime = rt
        self.runtime = rt
        self._req = loop.create_future()
        self._run = loop.create_task(rt.run(self.rounds.orchestrator))
        # a callback without a reference to the env, which would keep the episode in a cycle
        ended: list[float] = []
        self._ended = ended
        self._run.add_done_callback(lambda _: ended.append(loop.time()))

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Apply the decisions; run the workers until the next decision point."""
        self._give(action)
        return self._outcome(self._advance())

    def _give(self, action: Any) -> None:
        """Hand the decision to the waiting orchestrator; the loop is not driven yet."""
        if self._act is None or self._loop is None:
            raise ConfigError("call reset() before step(), and again after an episode ends")
        if not self.action_space.contains(action):
            raise ConfigError(f"action {action!r} is not in {self.action_space}")
        decision = self.decode(action)
        # the episode's clock stands still while it waits for a decision, as on a loop of its own
        self.runtime._t0 += self._loop.time() - self._asked_at
        self._req = self._loop.create_future()
        act, self._act = self._act, None
        act.set_result(decision)

    def _outcome(
        self, obs: np.ndarray | None
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """The step's result once the loop reached the next decision (``obs``) or the end."""
        if obs is not None:
            return obs, 0.0, False, False, self._info()
        if self._ended and self._loop is not None:
            # the final observation reads the clock as the run left it
            self.runtime._t0 += self._loop.time() - self._ended[0]
        trace = self._run.result() if self._run is not None else None
        assert trace is not None
        self.trace = trace
        reward, comps = self._reward(trace)
        truncated = self.state["truncated_by"] is not None
        info = self._info()
        info.update(
            comps,
            trace=trace,
            success=bool(trace.metrics.get("task_success")),
            tokens=int(trace.costs.get("tokens", 0)),
            truncated_by=self.state["truncated_by"],
        )
        final = self._observe()
        self._end_episode(keep_trace=True)
        return final, reward, not truncated, truncated, info

    def __enter__(self) -> OrchestrationEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # no module globals here: at interpreter exit they may be gone already
        try:
            self.close()
        except Exception:
            return

    def close(self) -> None:
        """End the current episode and release the backend (a real one's connections)."""
        self._end_episode()
        if self._own_loop is not None:
            self._own_loop.close()
            self._own_loop = None
        if self._real is not None:
            loop, backend = self._real
            self._real = None
            with contextlib.suppress(Exception):
                outside_running_loop(lambda: loop.run_until_complete(backend.aclose()))
            loop.close()

    def _episode_loop(self, seed: int) -> tuple[asyncio.AbstractEventLoop, Any]:
        """A fresh virtual-time loop and sim backend, or the env's real loop and backend."""
        cfg = self.config
        if cfg.backend == "sim":
            loop = self._shared_loop or self._fresh_loop()
            # the v0 environments keep the oracle verifiers they were published with
            oracle = self.id in _ORACLE_ENVS
            base = {"role_tokens": {"expert": 2.0, "novice": 0.6}, "oracle_verifiers": oracle}
            opts = {**base, **cfg.backend_options}
            return loop, SimBackend(seed=seed, **opts)
        if self._real is None:
            self._real = (
                asyncio.new_event_loop(),
                make_backend(cfg.backend, **cfg.backend_options),
            )
        return self._real

    def _fresh_loop(self) -> VirtualTimeLoop:
        """This env's virtual-time loop as a new episode finds it: idle, its clock at 0.0.

        The loop of the previous episode is kept when nothing of that episode is left on it
        (no callback, no timer): rewinding its clock to 0.0 then leaves it exactly as a new
        loop would be, without the cost of creating one (a selector and a socket pair).
        """
        loop = self._own_loop
        if loop is not None and _rewind(loop):
            return loop
        self._own_loop = VirtualTimeLoop(watchdog_s=0.05)
        return self._own_loop

    def _end_episode(self, keep_trace: bool = False) -> None:
        """Stop the current episode and its tasks; a real backend's loop stays open."""
        if self._loop is not None:
            loop = self._loop
            if self._run is not None and not self._run.done():
                self._run.cancel()
            # the run, then the agents it cancels, then their callbacks; the run's own tasks are
            # named too, since at interpreter exit asyncio's registry of tasks may be gone already
            runtime = getattr(self, "runtime", None)
            known = [self._run, *getattr(runtime, "_tasks", ())] if self._run is not None else []
            shared = loop is self._shared_loop
            for _ in range(5):
                # on a shared loop, only this episode's tasks are this environment's to cancel
                others = () if shared else asyncio.all_tasks(loop)
                pending = [t for t in {*known, *others} if not t.done()]
                if not pending:
                    break
                for t in pending:
                    t.cancel()
                with contextlib.suppress(RuntimeError):
                    gathered = asyncio.gather(*pending, return_exceptions=True)
                    outside_running_loop(functools.partial(loop.run_until_complete, gathered))
        self._loop = self._run = self._req = self._act = None
        if not keep_trace:
            self.trace = None

    # ------------------------------------------------------------------ decisions
    def decode(self, action: Any) -> dict[str, Any]:
        """The full decision (all five) for an action of this env."""
        parts = (
            [int(action)]
            if isinstance(self.action_space, Discrete)
            else [int(a) for a in np.asarray(action)]
        )
        got = dict(zip(self.learned, parts, strict=True))
        f = self.config.fixed
        spawn = SPAWNS[got["O1"]] if "O1" in got else int(f.get("O1") or 1)
        role = ROLES[got["O2"]] if "O2" in got else str(f.get("O2") or "worker")
        comm = COMMS[got["O3"]] if "O3" in got else str(f.get("O3") or "none")
        agg = AGGREGATES[got["O4"]] if "O4" in got else str(f.get("O4") or "vote")
        if "O5" in got:
            stop = bool(got["O5"])
        else:
            limit = f.get("O5")
            stop = limit is not None and len(self.state["answers"]) >= int(limit)
        return {"spawn": spawn, "role": role, "comm": comm, "aggregate": agg, "stop": stop}

    def encode(self, decision: dict[str, Any]) -> Any:
        """The action of this env that takes ``decision`` (its learned parts)."""
        idx = {
            "O1": SPAWNS.index(int(decision["spawn"])),
            "O2": ROLES.index(decision["role"]),
            "O3": COMMS.index(decision["comm"]),
            "O4": AGGREGATES.index(decision["aggregate"]),
            "O5": int(bool(decision["stop"])),
        }
        vals = [idx[d] for d in self.learned]
        return vals[0] if isinstance(self.action_space, Discrete) else np.asarray(vals)

    # ------------------------------------------------------------------ internals
    def _advance(self) -> np.ndarray | None:
        """Run the loop until a decision is requested (its observation) or the run ends."""
        assert self._loop is not None and self._run is not None and self._req is not None
        _run_until_any(self._loop, self._waiters())
        return self._ready()

    def _waiters(self) -> set[asyncio.Future[Any]]:
        """What ends this episode's wait: a decision requested or the run finished."""
        assert self._run is not None and self._req is not None
        return {self._req, self._run}

    def _ready(self) -> np.ndarray | None:
        """The observation of the requested decision, or ``None`` when the run ended."""
        assert self._req is not None
        if self._req.done():
            return self._req.result()
        return None

    async def _ask(self) -> dict[str, Any]:
        assert self._loop is not None and self._req is not None
        self._asked_at = self._loop.time()
        self._act = self._loop.create_future()
        self._req.set_result(self._observe())
        return await self._act

    def _observe(self) -> np.ndarray:
        st = self.state
        cfg = self.config
        keys = [_key(v) for v, _ in st["answers"]]
        distinct = len(set(keys))
        counts = top_counts(keys, 2)
        top = counts[0][1] if counts else 0
        second = counts[1][1] if len(counts) > 1 else 0
        n = len(keys)
        mw = cfg.max_workers
        lo, hi = self.size_range
        cp = self.runtime.now() if self._loop is not None else 0.0
        lead = counts[0][0] if counts else None
        last_agrees = float(n > 0 and keys[-1] == lead)
        confs = [c if c is not None else 0.5 for c in st["confidence"]]
        top_confs = [c for k, c in zip(keys, confs, strict=True) if k == lead]
        top_conf = max(top_confs, default=0.0)
        obs = [
            *self._family,
            (st["size"] - lo) / max(hi - lo, 1),
            n / mw,
            top / mw,
            second / mw,
            (distinct / n) if n else 0.0,
            (top / n) if n else 0.0,
            (top - second) / mw,
            min(st["tokens"] / 10000.0, 1.0),
            st["rounds"] / cfg.max_rounds,
            min(cp / 120.0, 1.0),
            (mw - n) / mw,
            last_agrees,
            top_conf,
            _mean(top_confs) if top_confs else 0.0,
            confs[-1] if confs else 0.0,
            _mean(confs) if confs else 0.0,
            1.0,
        ]
        st["top"], st["second"], st["top_conf"] = top, second, top_conf
        # clipped to the box; float32 rounding keeps 0 and 1, so clipping first is the same
        return np.array([0.0 if x < 0.0 else 1.0 if x > 1.0 else x for x in obs], dtype=np.float32)

    def prompt(self) -> str:
        """The current state as text: what an LLM orchestrator would read for this decision."""
        return self.rounds.prompt()

    def _info(self) -> dict[str, Any]:
        st = self.state
        return {
            "answers": len(st["answers"]),
            "top": st.get("top", 0),
            "second": st.get("second", 0),
            "top_conf": st.get("top_conf", 0.0),
            "rounds": st["rounds"],
            "tokens": st["tokens"],
            "size": st["size"],
            "seed": self.seed,
        }

    def _check(self, trace: Trace, answer: Any) -> bool:
        """The episode's task instance checking ``answer`` (what the trace's task would say)."""
        return bool(self.task.verdict(answer).get("passed"))

    def _reward(self, trace: Trace) -> tuple[float, dict[str, float]]:
        # the task instance is at hand: no rebuilding it from the trace to check the answer
        # (a task whose check runs code keeps the verdict recorded with the run)
        checker = None if self.task.executes_code else self._check
        c = parl_components(trace, checker=checker)
        tokens = float(trace.costs.get("tokens", 0.0))
        weight = self._latency_weight
        latency = weight * c["critical_steps"] / self._latency_norm if weight else 0.0
        r_perf = c["r_perf"] - self.config.token_cost * tokens / 1000.0 - latency
        comps = {
            "r_perf": r_perf,
            "r_parallel": c["r_parallel"],
            "r_finish": c["r_finish"],
            "critical_steps": c["critical_steps"],
            "latency": latency,
        }
        if self.config.reward_fn is not None:
            value = self.config.reward_fn([trace], step=self.train_step)[0]
            return (0.0 if value is None else float(value)) - latency, comps
        lam1, lam2 = (
            x(self.train_step) if isinstance(x, Anneal) else float(x)
            for x in (self.config.lambda1, self.config.lambda2)
        )
        return r_perf + lam1 * c["r_parallel"] + lam2 * c["r_finish"], comps


def _rewind(loop: VirtualTimeLoop) -> bool:
    """Set an idle virtual-time loop's clock back to 0.0, as a new loop's; else close it.

    Runs the callbacks that finished episodes left (their tasks' done callbacks) first. A loop
    with anything else left on it (a timer, a task) is closed instead, and ``False`` returned:
    the caller then makes a new one.
    """
    if loop.is_closed():
        return False
    for _ in range(5):
        if not loop._ready:  # type: ignore[attr-defined]
            break
        loop.call_soon(loop.stop)
        outside_running_loop(loop.run_forever)
    if (
        loop._ready  # type: ignore[attr-defined]
        or loop._scheduled
        or loop._timer_cancelled_count
        or asyncio.all_tasks(loop)
    ):
        loop.close()
        return False
    loop._vclock[0] = 0.0
    return True


def _run_until_any(loop: asyncio.AbstractEventLoop, futures: set[asyncio.Future[Any]]) -> None:
    """Run ``loop`` until one of ``futures`` is done (at once if one is already).

    Stops the loop from the futures' own done callbacks, as ``run_until_complete`` does for
    one future, without wrapping the wait in a task of its own.

    Raises:
        RuntimeError_: The loop stopped before any of them was done.
    """
    if any(f.done() for f in futures):
        return

    def stop(_: object) -> None:
        loop.stop()

    for f in futures:
        f.add_done_callback(stop)
    try:
        outside_running_loop(loop.run_forever)
    finally:
        for f in futures:
            f.remove_done_callback(stop)
    if not any(f.done() for f in futures):
        raise RuntimeError_(
            "the episode's event loop stopped before the run reached a decision or its end; "
            "do not stop the environment's loop from inside the run"
        )


def _fsum_like_numpy(values: list[float]) -> float:
    """The sum ``numpy.add.reduce`` gives for a float64 array of ``values`` (same rounding).

    NumPy sums a contiguous float64 array pairwise: fewer than 8 values in order, up to 128
    in eight interleaved partial sums combined as a tree, more by halving. Summing in the same
    order gives bit-identical results without building an array.

    Example:
        >>> xs = [0.1 * i for i in range(1, 20)]
        >>> _fsum_like_numpy(xs) == float(np.add.reduce(np.asarray(xs)))
        True
    """
    n = len(values)
    if n < 8:
        res = -0.0
        for x in values:
            res += x
        return res
    if n <= 128:
        r = values[:8]
        i = 8
        end = n - n % 8
        while i < end:
            for j in range(8):
                r[j] += values[i + j]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for k in range(i, n):
            res += values[k]
        return res
    half = n // 2
    half -= half % 8
    return _fsum_like_numpy(values[:half]) + _fsum_like_numpy(values[half:])


def _mean(values: list[Any]) -> float:
    """``float(np.mean(values))`` of non-empty ``values``, bit for bit, cheaper for floats."""
    if all(type(v) is float for v in values):
        return _fsum_like_numpy(values) / len(values)
    return float(np.mean(values))


def _declared_budget(fn: Any) -> int | None:
    """The smallest ``steps_budget`` a reward (or a composite's parts) was built with."""
    parts = [f for f, _ in fn.rewards.values()] if hasattr(fn, "rewards") else [fn]
    found = [
        b
        for f in parts
        if isinstance(b := getattr(f, "params", {}).get("steps_budget"), int)
        and not isinstance(b, bool)
        and b >= 1
    ]
    return min(found, default=None)


def _jsonable(options: dict[str, Any]) -> dict[str, Any]:
    """Reset options as recorded in the trace (numbers as numbers, anything else as text)."""
    out: dict[str, Any] = {}
    for k, v in options.items():
        if isinstance(v, bool | str) or v is None:
            out[str(k)] = v
        elif isinstance(v, int | np.integer):
            out[str(k)] = int(v)
        elif isinstance(v, float | np.floating):
            out[str(k)] = float(v)
        else:
            out[str(k)] = repr(v)
    return out


#: Environments whose simulated verifiers read the ground truth by default.
_ORACLE_ENVS = ("orchestrate-v0", "stop-v0")


def _episode_id(generator: np.random.Generator, ordinal: int) -> str:
    """An episode's id: a digest of the env's seeded generator and the episode's ordinal.

    Deterministic: two instances called alike (same seeds, same number of episodes before)
    give the same ids, so the same seed gives the same trace; the episodes of one instance
    get different ids even with the same seed (their traces differ by the actions taken,
    and datasets tell them apart by trace id). The generator is not advanced, so the
    episode seeds that ``reset()`` draws stay the same.

    Example:
        >>> a = _episode_id(np.random.default_rng(5), 1)
        >>> a == _episode_id(np.random.default_rng(5), 1), a == _episode_id(np.random.default_rng(5), 2)
        (True, False)
    """
    state = json.dumps([generator.bit_generator.state, ordinal], sort_keys=True, default=str)
    return hashlib.blake2b(state.encode(), digest_size=6).hexdigest()
