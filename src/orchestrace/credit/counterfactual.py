"""Counterfactual credit by replay: what the outcome loses without a unit.

* :class:`LeaveOneOutCredit` (difference rewards, :mod:`orchestrace.credit.loo`):
  ``credit(i) = E[R | i plays] - E[R | i removed]`` for agents (silenced) or messages (dropped),
  from paired draws. Not efficient.
* :class:`CounterfactualMessageCredit`: for each message ``m``,
  ``credit(m) = E[R | m kept] - E[R | m intervened]``, both sides estimated from ``samples``
  forks of the recorded run, with a standard error and a 95% interval per message.

How a message's credit is estimated. Sample ``k`` (``k = 1..K``) makes two forks on the same
backend draw (paired draws, common random numbers): the *kept* arm keeps ``m`` and draws again
every LLM call that read it and every call after those (:class:`RedrawDownstream`); the
*intervened* arm draws the same calls and applies the intervention: ``drop`` (the message is
never sent), ``replace`` (its text and the data consumers read, see
:meth:`~orchestrace.runtime.replay.ReplaceMessage.parsed`) or ``resample`` (the sender's LLM
call that produced it is drawn again in the same context, C3-style, recommended for messages
written by a real LLM, for which a deleted message is an input off the policy's distribution).
Calls that did not depend on the message keep their recorded answers in both arms. On the
simulator sample ``k`` uses the recorded seed plus ``k`` in both arms, so calls with the same
inputs get the same answer and the difference measures the message alone; the estimate is a
deterministic function of the recorded seed. The credit is the mean of the ``K`` paired
differences; ``se`` their standard error, ``ci95`` the Student-t 95% interval, clipped to
``[-1, 1]`` with the default team reward (0 or 1), the range a difference of two rewards can
take (a custom ``reward_fn`` gets the unclipped interval).

A backend that answers deterministically (a transformers model without sampling, or any
backend the caller declares deterministic with ``assume_deterministic=True``,
``--assume-deterministic``) is forked once per message and the kept arm is the recorded run: the
table's ``stats`` say ``deterministic: true`` and every ``se`` is 0. A served model
(OpenAI-compatible) is never taken as deterministic on its own, not even at temperature 0:
hosted APIs answer the same prompt differently at temperature 0, so ``K`` samples are drawn.
``resample`` on a backend at temperature 0 would draw the recorded message again: the table's
``stats["warning"]`` says so (and the command line prints it) and suggests ``--temperature``. With ``samples=1`` on a
stochastic backend there is no error bar (``se`` and ``ci95`` are ``None``). A real backend
that samples (temperature above 0) draws each arm on its own: the estimate stays unbiased but
unpaired (``stats["paired"]`` is false), so its error bar is wider.

``stats`` reports the backend calls made (each row too), the naive cost (``samples`` full
re-runs per message plus ``samples`` for the kept side) and ``descendant_calls``: the LLM calls
reachable in the recorded dependency graph from each message (``resample``: from the sender's
call), for each arm and sample. That bounds from above what forks of an unchanged structure
draw again; a fork whose structure changes (more rounds, another agent) can make more, so
``descendant_calls`` and ``vs_descendants`` are not reported for ``spawn-one-more`` (its extra
worker's calls descend from nothing recorded) and ``resample`` (a new answer of the sender
reaches calls the recorded one did not).

Two interventions act on a turn (unit ``turn``, rows ``agent@step``) instead of a message, with
the same paired scheme (the kept arm redraws every LLM call reachable from the turn's first
event): ``stop-at`` makes the agent stop on entering the turn (the orchestrator ends the run
with its best answer so far; another agent returns its best answer), so a turn's credit is
what continuing from there gained; ``spawn-one-more`` gives the team-size decision taken in
the turn (``n_workers``; a topology takes it before its first event, so its row is the
orchestrator's first turn; a learning environment takes one per round) one more worker, so the
credit is what the recorded decision gained over one more worker (negative when one more
would have helped).

Changed calls reach the backend that recorded the trace (rebuilt from ``meta.backend``; see
:func:`orchestrace.runtime.replay.backend_for`) unless ``backend=`` names another; a trace whose
backend cannot be rebuilt is refused with an error naming ``--backend``.

Example:
    >>> from orchestrace.runtime import run
    >>> tr = run("debate", "arith", agents=3, seed=5, rounds=1, task_size=16).trace
    >>> t = CounterfactualMessageCredit(samples=4).assign(tr, "message")
    >>> len(t.rows) == sum(e.type == "message" for e in tr.events), t.stats["backend_calls"] > 0
    (True, True)
    >>> all(e["se"] >= 0 for e in t.estimates.values())
    True
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrace._safe import display
from orchestrace.credit._forks import ForkContext, _ok, missing_note, missing_rows, run_forks
from orchestrace.credit.base import CreditTable, check_unit, table
from orchestrace.credit.loo import LeaveOneOutCredit
from orchestrace.credit.target import RewardLike, counterfactual_reward, finite_reward
from orchestrace.errors import ConfigError, TraceError
from orchestrace.executors import Executor
from orchestrace.runtime.backends.base import backend_spec
from orchestrace.runtime.backends.openai import OpenAIBackend
from orchestrace.runtime.interventions import TraceIndex
from orchestrace.runtime.replay import (
    DropMessage,
    ForceDecision,
    ForceStop,
    RedrawDownstream,
    ReplaceMessage,
    ResampleMessage,
    backend_for,
    check_replayable,
    recorded_decisions,
)
from orchestrace.stats import t95
from orchestrace.trace.model import Trace

__all__ = [
    "INTERVENTIONS",
    "TURN_INTERVENTIONS",
    "CounterfactualMessageCredit",
    "CounterfactualTable",
    "LeaveOneOutCredit",
    "deterministic_backend",
    "llm_descendants",
]

#: What the intervened arm does: to a message (drop, replace, resample) or to a turn
#: (spawn-one-more, stop-at).
INTERVENTIONS = ("drop", "replace", "resample", "spawn-one-more", "stop-at")
#: The interventions on a turn (``--unit turn``).
TURN_INTERVENTIONS = ("spawn-one-more", "stop-at")


def llm_descendants(trace: Trace) -> dict[str, int]:
    """For each message id: how many LLM calls depend on it (directly or not)."""
    g = trace.graph
    n = g.n
    src, dst = g.dependency_edges()
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip(src.tolist(), dst.tolist(), strict=True):
        succ[u].append(v)
    is_llm = [e.type == "llm_call" for e in trace.events]
    out = {}
    for i, e in enumerate(trace.events):
        if e.type != "message":
            continue
        seen = {i}
        stack = [i]
        count = 0
        while stack:
            u = stack.pop()
            for v in succ[u]:
                if v not in seen:
                    seen.add(v)
                    count += is_llm[v]
                    stack.append(v)
        out[e.id] = count
    return out


def _reseedable(backend: Any) -> bool:
    """Whether sample ``k`` can be drawn by reseeding ``backend`` (then both arms are paired).

    The simulator, and an OpenAI-compatible backend that sends an integer ``seed`` with every
    call and samples (temperature > 0): servers that honour the seed answer a prompt the same way
    for the same seed.
    """
    if getattr(backend, "name", "") == "sim":
        return True

    return (
        isinstance(backend, OpenAIBackend)
        and isinstance(backend.seed, int)
        and not deterministic_backend(backend)
    )


class _Backends:
    """The backend of each sample, built once per trace (the recorded one by default).

    Sample 0 is the backend as recorded; sample ``k`` reseeds a reseedable backend with its
    seed plus ``k`` (see :func:`_reseedable`); any other backend answers every sample itself.
    """

    def __init__(self, backend: Any, options: Mapping[str, Any] | None) -> None:
        self.backend = backend
        self.options = dict(options or {})
        self._built: dict[tuple[str, int], Any] = {}

    def __call__(self, trace: Trace, k: int = 0) -> Any:
        first = self._built.get((trace.trace_id, 0))
        if first is None:
            first = backend_for(trace, self.backend, **self.options)
            self._built[(trace.trace_id, 0)] = first
        if k == 0 or not _reseedable(first):
            return first  # a backend without a seed draws its own samples
        key = (trace.trace_id, k)
        if key not in self._built:
            if getattr(first, "name", "") == "sim":
                self._built[key] = backend_for(
                    trace, self.backend, seed_offset=k, check=False, **self.options
                )
            else:
                seeded: Any = first
                self._built[key] = dataclasses.replace(
                    seeded, seed=seeded.seed + k, _client=None, _sem=None
                )
        return self._built[key]


@dataclass
class CounterfactualTable(CreditTable):
    """A credit table whose rows are estimates with an error bar.

    Attributes:
        estimates: Per message (or turn) id: ``se`` (standard error of the mean paired difference;
            ``None`` with one sample), ``ci95`` (``[low, high]``, Student-t; ``None`` with one
            sample), ``samples``, ``backend_calls`` (both arms), and the two arms' mean
            rewards ``kept`` and ``intervened``.
    """

    estimates: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_rows(self) -> list[dict[str, Any]]:
        """Rows as ``{unit, id, value, se, ci95, samples, backend_calls, kept, intervened}``."""
        rows = super().to_rows()
        for row in rows:
            row.update(self.estimates.get(row["id"], {}))
        return rows


def deterministic_backend(backend: Any, *, assume: bool = False) -> bool:
    """Whether ``backend`` answers the same request the same way every time.

    ``assume=True`` (the caller says so: ``--assume-deterministic``) makes any backend
    deterministic. Otherwise the simulator is stochastic across samples (each sample reseeds
    it), a transformers model without sampling is deterministic, and an OpenAI-compatible
    backend is stochastic at every temperature (a hosted model at temperature 0 still varies).
    A backend this cannot tell is taken as stochastic.

    Example:
        >>> from orchestrace.runtime.backends.openai import OpenAIBackend
        >>> deterministic_backend(OpenAIBackend(model="m", temperature=0.0))
        False
        >>> deterministic_backend(OpenAIBackend(model="m"), assume=True)
        True
    """
    if assume:
        return True
    name = getattr(backend, "name", "")
    try:
        spec = backend_spec(backend)
    except Exception:  # a custom backend without a spec
        return False
    options = spec.get("options") if isinstance(spec.get("options"), dict) else {}
    assert isinstance(options, dict)
    if name == "hf":
        return options.get("do_sample") is False
    return False


class CounterfactualMessageCredit:
    """Counterfactual credit of every message, with an error bar (see the module docstring).

    Args:
        samples: Paired samples per message (``K``); sample ``k`` of both arms draws on the
            simulator with the recorded seed plus ``k``.
        intervention: On messages: ``drop`` (default), ``replace`` (needs ``replace_with``)
            or ``resample`` (the sender's call drawn again; recommended for messages written by
            a real LLM). On turns (unit ``turn``): ``stop-at`` (the agent stops on entering the
            turn: the credit is what continuing from there gained) or ``spawn-one-more`` (the
            turn's team-size decision takes one more worker: the credit is what the recorded
            decision gained over one more worker).
        replace_with: The text of a ``replace`` intervention (its value replaces the data
            consumers read); passing it alone selects ``replace``.
        reward_fn: The reward (default: team reward).
        backend_factory: ``f(trace, k) -> backend`` for the k-th sample (default: ``backend``,
            the simulator reseeded with its seed plus ``k``).
        rerun_checks: Check answers the recorded verdict does not cover even where that runs
            them as code (sandboxed); without it such a fork raises ConfigError.
        backend: Answers changed calls: ``None`` (the backend the trace records), a backend
            name (``sim``, ``openai``, ``hf``) or a backend object.
        backend_options: Options of a backend given by name, or replacing recorded ones.
        executor: Where the forks run (:mod:`orchestrace.executors`; default: this
            process). The table is the same on every executor.
        assume_deterministic: Take the backend as deterministic (one draw, ``se`` 0), e.g. a
            local engine with greedy decoding and a fixed seed (``--assume-deterministic``). A
            served model is otherwise taken as stochastic, even at temperature 0.
    """

    name = "counterfactual"
    efficient = False

    def __init__(
        self,
        samples: int = 1,
        replace_with: str | None = None,
        reward_fn: RewardLike | None = None,
        backend_factory: Any = None,
        rerun_checks: bool = False,
        backend: Any = None,
        backend_options: Mapping[str, Any] | None = None,
        intervention: str | None = None,
        executor: Executor | None = None,
        assume_deterministic: bool = False,
    ) -> None:
        self.assume_deterministic = assume_deterministic
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise ConfigError(f"samples must be an integer >= 1 (--samples K), got {samples!r}")
        if backend_factory is not None and (backend is not None or backend_options):
            raise ConfigError("pass either backend_factory or backend (with backend_options)")
        if intervention is None:
            intervention = "drop" if replace_with is None else "replace"
        if intervention not in INTERVENTIONS:
            raise ConfigError(
                f"unknown intervention {intervention!r}; use one of: {', '.join(INTERVENTIONS)} "
                "(--intervention)"
            )
        if (intervention == "replace") != (replace_with is not None):
            raise ConfigError(
                "the replace intervention needs the new text (--replace-with TEXT, replace_with= "
                "in Python), and the new text applies only to it (--intervention replace)"
            )
        self.samples = samples
        self.intervention = intervention
        self.replace_with = replace_with
        self.reward_fn = reward_fn
        self.backend = backend
        self.backend_options = dict(backend_options or {})
        self.backend_factory = backend_factory
        self.rerun_checks = rerun_checks
        self.executor = executor

    def _reward(self, trace: Trace, forked: bool = True) -> float:
        return counterfactual_reward(
            trace, self.reward_fn, rerun_checks=self.rerun_checks, forked=forked
        )

    def _arms(
        self, trace: Trace, mid: str, ix: TraceIndex | None = None
    ) -> tuple[list[Any], list[Any]] | None:
        """The kept and intervened arms' interventions; ``None`` when nothing can change."""
        ix = ix or TraceIndex(trace)
        if not ix.readers(mid):
            return None  # nobody read it: neither arm can differ from the recorded run
        if self.intervention == "resample":
            iv: Any = ResampleMessage.of(trace, mid)
            kept = RedrawDownstream(mid, tuple(sorted(iv.downstream())))
            return [kept], [iv]
        kept = RedrawDownstream.of(trace, mid, ix)
        if self.intervention == "drop":
            iv = DropMessage.of(trace, mid, ix)
        else:
            assert self.replace_with is not None
            iv = ReplaceMessage.parsed(trace, mid, self.replace_with, ix)
        return [kept], [kept, iv]

    def _turn_arms(self, trace: Trace) -> dict[str, tuple[list[Any], list[Any]]]:
        """Kept and intervened arms of each turn a turn intervention applies to, by turn id."""
        firsts: dict[tuple[str, int], str] = {}
        for e in trace.events:
            if e.type != "tool_result" and e.step is not None:
                firsts.setdefault((e.agent, int(e.step)), e.id)
        out: dict[str, tuple[list[Any], list[Any]]] = {}
        if self.intervention == "stop-at":
            for (agent, step), eid in firsts.items():
                kept = RedrawDownstream.after(trace, eid)
                out[f"{agent}@{step}"] = [kept], [kept, ForceStop(step, agent, eid)]
            return out
        for agent, step, name, value in recorded_decisions(trace):
            if name != "n_workers" or isinstance(value, bool) or not isinstance(value, int):
                continue
            at = max(step, 0)  # a team size decided before the first event: the first turn
            first = firsts.get((agent, at))
            if first is None:
                continue
            kept = RedrawDownstream.after(trace, first)
            more = ForceDecision("n_workers", value + 1, agent, step if step >= 0 else None)
            out[f"{agent}@{at}"] = [kept], [kept, more]
        if not out:
            raise TraceError(
                f"trace {display(trace.trace_id, 80)} takes no team-size decision (n_workers), "
                "so spawn-one-more has nothing to change; use --intervention stop-at"
            )
        return out

    def assign(
        self, trace: Trace, unit: str = "message", reward: float | None = None
    ) -> CreditTable:
        """Credit table at ``message`` (message interventions) or ``turn`` (turn ones)."""
        check_replayable(trace)
        turns = self.intervention in TURN_INTERVENTIONS
        if check_unit(unit) != ("turn" if turns else "message"):
            raise ConfigError(
                f"counterfactual credit with --intervention {self.intervention} is defined for "
                f"{'turns (--unit turn)' if turns else 'messages (--unit message)'}; use shapley "
                "or loo for agents, discounted or uniform for other units"
            )
        base = self._reward(trace, forked=False) if reward is None else finite_reward(reward)
        llm_calls = sum(e.type == "llm_call" for e in trace.events)
        plans = self._turn_arms(trace) if turns else {}
        descendants = (
            {k: len(kept[0].redraws()) for k, (kept, _) in plans.items()}
            if turns
            else llm_descendants(trace)
        )
        factory = self.backend_factory or _Backends(self.backend, self.backend_options)
        deterministic = self.backend_factory is None and deterministic_backend(
            factory(trace, 0), assume=self.assume_deterministic
        )
        k_used = 1 if deterministic else self.samples
        values: dict[str, float] = {}
        estimates: dict[str, dict[str, Any]] = {}
        # the forks first (each one a job; kept arms of messages read by the same calls, and a
        # resample's forks for messages of one call, are shared), then the estimates in order
        jobs: list[tuple[list[Any], int]] = []
        job_of: dict[Any, int] = {}

        def want(key: Any, ivs: list[Any], k: int) -> int:
            if key not in job_of:
                job_of[key] = len(jobs)
                jobs.append((ivs, k))
            return job_of[key]

        plan: dict[str, list[tuple[int | None, int] | None]] = {}
        reach = 0  # LLM calls reachable from what each intervention changes
        ix = TraceIndex(trace)
        for mid in descendants:
            arms = plans[mid] if turns else self._arms(trace, mid, ix)
            if arms is not None and self.intervention == "resample":
                reach += len(arms[1][-1].redraws())
            else:
                reach += descendants[mid]
            plan[mid] = []
            for k in range(1, k_used + 1):
                if arms is None:
                    plan[mid].append(None)
                    continue
                kept, changed = arms
                kk = 0 if deterministic else k
                redrawn = frozenset(kept[0].redraws())
                kept_job = (
                    None  # nothing to draw again: the kept arm is the recorded run
                    if deterministic or not redrawn
                    else want(("kept", redrawn, k), kept, kk)
                )
                same = (
                    ("resample", frozenset(changed[-1].redraws()), k)
                    if self.intervention == "resample"
                    else ("changed", mid, k)
                )
                plan[mid].append((kept_job, want(same, changed, kk)))
        ctx = ForkContext(
            trace,
            self.backend,
            self.backend_options,
            self.reward_fn,
            self.rerun_checks,
            sampler="counterfactual",
        )
        if (
            self.backend_factory is not None
            and self.executor is not None
            and self.executor.name != "local"
        ):
            raise ConfigError(
                "backend_factory runs in this process only; give backend= (a name or a "
                "backend object) to fork on another executor, or use the local executor"
            )
        done = run_forks(ctx, jobs, self.executor, factory)
        missing = missing_rows(plan, done)
        charged: set[int] = set()
        calls = 0
        # a difference of two team rewards (0 or 1) lies in [-1, 1]: intervals are clipped to it
        limit = 1.0 if self.reward_fn is None and reward is None else None
        for mid, draws in plan.items():
            if mid in missing:  # a fork it needs failed: no value, listed under missing
                continue
            diffs: list[float] = []
            kept_rs: list[float] = []
            used = 0
            for entry in draws:
                if entry is None:
                    diffs.append(0.0)
                    kept_rs.append(base)
                    continue
                kept_job, changed_job = entry
                kept_r = base
                for j in (kept_job, changed_job):
                    if j is not None and j not in charged:
                        charged.add(j)
                        used += _ok(done[j])[0]
                if kept_job is not None:
                    kept_r = _ok(done[kept_job])[1]
                diffs.append(kept_r - _ok(done[changed_job])[1])
                kept_rs.append(kept_r)
            calls += used
            values[mid], estimates[mid] = _estimate(diffs, deterministic, used, limit)
            estimates[mid]["kept"] = sum(kept_rs) / len(kept_rs)
            estimates[mid]["intervened"] = estimates[mid]["kept"] - values[mid]
        arms_n = 1 if deterministic else 2
        naive = llm_calls * (len(descendants) * k_used + (0 if deterministic else k_used))
        upper = reach * k_used * arms_n
        stats: dict[str, Any] = {
            "intervention": self.intervention,
            "samples": k_used,
            "deterministic": deterministic,
            # draws are paired where sample k reseeds the backend (the simulator, a seeded
            # OpenAI-compatible backend); any other stochastic backend draws each arm on its own
            "paired": not deterministic and _reseedable(factory(trace, 0)),
            "backend_calls": calls,
            f"calls_per_{'turn' if turns else 'message'}": (
                calls / len(descendants) if descendants else 0.0
            ),
            "naive_calls": naive,
            "vs_naive": calls / naive if naive else 0.0,
        }
        if self.intervention not in _NOT_BOUNDED:
            stats["descendant_calls"] = upper
            stats["vs_descendants"] = calls / upper if upper else 0.0
        if deterministic and self.samples > 1:
            stats["note"] = (
                f"the backend answers deterministically: 1 sample per message, not {self.samples}"
            )
        elif k_used == 1:
            stats["note"] = "one sample per message: no error bar (pass --samples K >= 2)"
        if missing:
            stats["missing"] = missing
            stats["error"] = missing_note(missing, "turn" if turns else "message")
        greedy = _greedy(factory(trace, 0)) if self.intervention == "resample" else None
        if greedy is not None:
            stats["warning"] = greedy
        plain = table(
            "turn" if turns else "message", values, reward=base, method=self.name, efficient=False
        )
        return CounterfactualTable(plain.rows, base, self.name, False, stats, estimates=estimates)


#: Interventions whose forks draw calls that descend from nothing in the recorded graph (the
#: extra worker of spawn-one-more; the redrawn sender's call of resample and what its new
#: answer reaches): the recorded descendants bound none of them, so no bound is reported.
_NOT_BOUNDED = ("spawn-one-more", "resample")


def _greedy(backend: Any) -> str | None:
    """A one-line warning when ``backend`` decodes greedily (temperature 0), else ``None``."""
    try:
        spec = backend_spec(backend)
    except Exception:  # a custom backend without a spec
        return None
    options = spec.get("options") if isinstance(spec.get("options"), dict) else {}
    assert isinstance(options, dict)
    greedy = (spec.get("name") == "openai" and options.get("temperature") in (0, 0.0)) or (
        spec.get("name") == "hf" and options.get("do_sample") is False
    )
    if not greedy:
        return None
    return (
        "resampling at temperature 0 returns the same message: pass --temperature T > 0 "
        "(or a sampling backend option) so the sender's call is drawn again"
    )


def _estimate(
    diffs: list[float], deterministic: bool, calls: int, limit: float | None = None
) -> tuple[float, dict[str, Any]]:
    """Mean of paired differences, its standard error and 95% interval (clipped to ``limit``)."""
    n = len(diffs)
    mean = sum(diffs) / n
    if deterministic:
        se: float | None = 0.0
        ci: list[float] | None = [mean, mean]
    elif n < 2:
        se, ci = None, None
    else:
        var = sum((d - mean) ** 2 for d in diffs) / (n - 1)
        se = math.sqrt(var / n)
        half = t95(n - 1) * se
        ci = [mean - half, mean + half]
        if limit is not None:
            ci = [max(ci[0], -limit), min(ci[1], limit)]
    return mean, {"se": se, "ci95": ci, "samples": n, "backend_calls": calls}
