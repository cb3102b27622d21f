"""The orchestrator of the learning environments: rounds of five-part decisions.

Each round the orchestrator takes one decision ``{spawn, role, comm, aggregate, stop}``
(O1..O5): it records it (an ``orchestrator_decision`` whose ``attrs.completion`` is the decision
as JSON), then either stops and aggregates the answers so far, or spawns ``spawn`` workers of
``role`` that answer the whole task. Workers hear earlier answers by message: with ``comm =
broadcast`` the orchestrator sends each new worker one message holding every answer so far,
with ``p2p`` one holding one answer drawn at random (one ``message`` event per recipient in
both cases, decision O3, ``attrs.data = {"peers": [...]}``). A worker that hears answers
revises its own in a second call, which reads the message (a message edge); a worker whose
message was dropped answers alone.

Where the decisions come from is the caller's: a learning environment asks its policy
(:mod:`orchestrace.learn.env`); :func:`recorded_root` replays the decisions a trace records, so
environment traces replay exactly and fork like topology traces (open loop: a fork keeps the
recorded decisions whatever it changes; one that asks for more decisions than were recorded
stops there, aggregating as its last decision said). The team size of a round is the named
decision ``n_workers`` (``spawn_one_more(trace, event_id)`` changes one round's).

Example:
    >>> from orchestrace.runtime.backends.sim import SimBackend
    >>> from orchestrace.runtime.clock import run_virtual
    >>> from orchestrace.runtime.core import Runtime
    >>> from orchestrace.tasks import make_task
    >>> plan = iter([
    ...     {"spawn": 2, "role": "worker", "comm": "none", "aggregate": "vote", "stop": False},
    ...     {"spawn": 1, "role": "expert", "comm": "broadcast", "aggregate": "vote", "stop": False},
    ...     {"spawn": 0, "role": "worker", "comm": "none", "aggregate": "vote", "stop": True},
    ... ])
    >>> async def decide():
    ...     return next(plan)
    >>> task = make_task("arith", seed=1, size=8)
    >>> rounds = Rounds(RoundsSpec(max_rounds=5, max_workers=6), task, 8, decide)
    >>> rt = rounds.runtime = Runtime(task=task, backend=SimBackend(seed=1))
    >>> trace = run_virtual(rt.run(rounds.orchestrator))
    >>> [(e.from_, e.to, len(e.attrs["data"]["peers"])) for e in trace.events if e.type == "message"]
    [('orchestrator', 'expert1', 2)]
    >>> rounds.state["rounds"], len(rounds.state["answers"])
    (2, 3)
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from orchestrace._safe import display
from orchestrace.errors import TraceError
from orchestrace.runtime.context import Context, Result
from orchestrace.runtime.topologies.common import verify_request
from orchestrace.tasks.base import Task
from orchestrace.trace.model import Trace

if TYPE_CHECKING:
    from orchestrace.runtime.core import Runtime

__all__ = [
    "AGGREGATES",
    "COMMS",
    "ROLES",
    "SPAWNS",
    "Rounds",
    "RoundsSpec",
    "recorded_decisions_of_rounds",
    "recorded_root",
]

SPAWNS = (0, 1, 2, 4, 8)
ROLES = ("novice", "worker", "expert")
COMMS = ("none", "broadcast", "p2p")
AGGREGATES = ("vote", "trust", "judge", "first")
#: Vote weight per role of ``trust`` aggregation.
TRUST = {"novice": 1.0, "worker": 2.0, "expert": 3.0}

#: ``decide() -> {spawn, role, comm, aggregate, stop}``.
Decide = Callable[[], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class RoundsSpec:
    """The limits of an episode (recorded in ``meta.runner.rounds``).

    Attributes:
        max_rounds: Decision rounds before truncation.
        max_workers: Workers before truncation.
        steps_budget: Critical-Steps budget (``None``: none).
        learned: The decisions the learner takes (recorded with each decision).
    """

    max_rounds: int
    max_workers: int
    steps_budget: int | None = None
    learned: tuple[str, ...] = ("O1", "O2", "O3", "O4", "O5")

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "max_rounds": self.max_rounds,
            "max_workers": self.max_workers,
            "steps_budget": self.steps_budget,
            "learned": list(self.learned),
        }

    @classmethod
    def from_dict(cls, d: Any) -> RoundsSpec:
        """Read the JSON form (a ``TypeError``/``ValueError`` when it is not one)."""
        if not isinstance(d, dict):
            raise TypeError(f"meta.runner.rounds is {type(d).__name__}, not an object")
        ints = [d.get("max_rounds"), d.get("max_workers")]
        budget = d.get("steps_budget")
        if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in ints):
            raise ValueError(f"max_rounds and max_workers must be integers >= 1, got {ints}")
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool)):
            raise ValueError(f"steps_budget must be an integer or null, got {budget!r}")
        learned = d.get("learned", ["O1", "O2", "O3", "O4", "O5"])
        if not isinstance(learned, list) or not all(isinstance(x, str) for x in learned):
            raise ValueError(f"learned must be a list of decision names, got {learned!r}")
        return cls(int(ints[0]), int(ints[1]), budget, tuple(learned))  # type: ignore[arg-type]


class Rounds:
    """One episode's state and its orchestrator (see the module docstring).

    Args:
        spec: The episode's limits.
        task: The task instance.
        size: The task size (shown in the prompt).
        decide: Gives the next decision.

    Attributes:
        state: ``answers`` ((value, agent) of each successful worker), ``confidence``,
            ``rounds``, ``tokens``, ``size``, ``truncated_by``, and ``top``, ``second`` and
            ``top_conf`` (:meth:`tally`).
        runtime: The runtime running the episode (set before it starts).
    """

    def __init__(self, spec: RoundsSpec, task: Task, size: int, decide: Decide) -> None:
        self.spec = spec
        self.task = task
        self.decide = decide
        self.runtime: Runtime | None = None
        self.state: dict[str, Any] = {
            "answers": [],
            "confidence": [],
            "rounds": 0,
            "tokens": 0,
            "size": int(size),
            "truncated_by": None,
        }

    def tally(self) -> None:
        """Count the answers so far: ``top``, ``second`` and ``top_conf`` of :attr:`state`."""
        st = self.state
        keys = [key_of(v) for v, _ in st["answers"]]
        counts = top_counts(keys, 2)
        confs = [c if c is not None else 0.5 for c in st["confidence"]]
        lead = counts[0][0] if counts else None
        top_confs = [c for k, c in zip(keys, confs, strict=True) if k == lead]
        st["top"] = counts[0][1] if counts else 0
        st["second"] = counts[1][1] if len(counts) > 1 else 0
        st["top_conf"] = max(top_confs, default=0.0)

    def prompt(self) -> str:
        """The current state as text: what an LLM orchestrator would read for this decision."""
        st = self.state
        values = [v for v, _ in st["answers"]]
        counts = top_counts([key_of(v) for v in values], 3)
        tally = ", ".join(f"{k} x{c}" for k, c in counts) or "none yet"
        return (
            f"Task ({self.task.name}, size {st['size']}): {self.task.question}\n"
            f"Answers so far: {len(values)} of at most {self.spec.max_workers} workers; "
            f"top answers: {tally}; leading confidence {st.get('top_conf', 0.0):.2f}.\n"
            f"Budget used: {st['tokens']} tokens, round {st['rounds']} of "
            f"{self.spec.max_rounds}.\n"
            "Decide as JSON: spawn (0, 1, 2, 4 or 8 workers), role (novice, worker, expert), "
            "comm (none, broadcast, p2p), aggregate (vote, trust, judge, first), stop (true or "
            "false)."
        )

    async def orchestrator(self, ctx: Context) -> Any:
        """The root agent: a decision per round until it stops or a limit ends the episode."""
        st = self.state
        spec = self.spec
        results: list[Result] = []
        while True:
            self.tally()
            d = await self.decide()
            ctx.record_decision(
                "stop" if d["stop"] else "spawn",
                attrs={
                    "turn": st["rounds"],
                    "prompt": self.prompt(),
                    "completion": json.dumps(d, sort_keys=True),
                    "learned": list(spec.learned),
                },
            )
            room = spec.max_workers - len(results)
            limit = (
                "max_workers"
                if room <= 0
                else "max_rounds"
                if st["rounds"] >= spec.max_rounds
                else "steps_budget"
                if self.over_budget()
                else None
            )
            if d["stop"] or limit is not None:
                if not d["stop"]:
                    st["truncated_by"] = limit
                return await self._finish(ctx, results, d["aggregate"])
            k = min(int(ctx.decide("n_workers", int(d["spawn"]))), room)
            st["rounds"] += 1
            if k <= 0:
                continue
            heard = [r.value for r in results if r.ok]
            hs = []
            for j in range(k):
                peers: list[Any] = []
                if d["comm"] == "broadcast":
                    peers = list(heard)
                elif d["comm"] == "p2p" and heard:
                    peers = [heard[int(ctx.random() * len(heard))]]
                h = await ctx.spawn(d["role"], rounds_worker, hears=bool(peers), index=j)
                if peers:
                    await ctx.send(h.name, peers_text(peers), data={"peers": peers})
                hs.append(h)
            for r in await ctx.wait(hs):
                out = r.value if isinstance(r.value, dict) else {"answer": None}
                r = Result(r.agent, out.get("answer"), r.ok, r.error, r.event_id)
                results.append(r)
                if r.ok:
                    st["answers"].append((r.value, r.agent))
                    st["confidence"].append(out.get("confidence"))
            assert self.runtime is not None
            st["tokens"] = self.runtime.tokens
            ctx.remember(vote([r.value for r in results if r.ok]))

    async def _finish(self, ctx: Context, results: list[Result], method: str) -> Any:
        ok = [r for r in results if r.ok]
        if not ok:
            return None
        if method == "trust":
            assert self.runtime is not None
            roles = {a.name: a.role for a in self.runtime.agents.values()}
            weights = [TRUST.get(roles.get(r.agent, "worker"), 1.0) for r in ok]
            return await ctx.aggregate(ok, "trust", weights=weights)
        if method == "judge":
            return await ctx.aggregate(ok, "judge", payload=await verify_request(ctx))
        return await ctx.aggregate(ok, method)

    def over_budget(self) -> bool:
        """Whether the Critical Steps so far (this decision included) reach the budget."""
        budget = self.spec.steps_budget
        if budget is None:
            return False
        rt = self.runtime
        assert rt is not None
        so_far = Trace(
            trace_id="so-far", task_id="so-far", events=tuple(rt.events), edges=tuple(rt.edges)
        )
        return bool(so_far.graph.critical_steps() >= budget)


async def rounds_worker(ctx: Context, hears: bool, index: int) -> Any:
    """Answer the whole task (with a confidence); revise after hearing others' answers."""
    task = ctx.task
    r = await ctx.generate("solve", ctx.payload(task.whole(), attempt=index))
    answer, confidence = r.answer, r.confidence
    peers: list[Any] = []
    if hears:  # the orchestrator's message, unless an intervention dropped it
        for m in ctx.poll():
            peers.extend(_peers(m.data))
    if peers:
        r2 = await ctx.generate("revise", await verify_request(ctx, own=answer, peers=peers))
        answer, confidence = r2.answer, r2.confidence
    return {"answer": answer, "confidence": confidence}


def _peers(data: Any) -> list[Any]:
    """The answers a message carries (its ``data.peers``)."""
    peers = data.get("peers") if isinstance(data, dict) else None
    return list(peers) if isinstance(peers, list) else []


def peers_text(peers: Sequence[Any]) -> str:
    """A message's text: the answers it carries."""
    return "answers so far: " + ", ".join(key_of(p) for p in peers)


def key_of(v: Any) -> str:
    """How answers are told apart (their repr)."""
    return repr(v)


def top_counts(keys: Sequence[str], n: int) -> list[tuple[str, int]]:
    """The ``n`` most common keys with their counts, equal counts in the order first seen.

    What ``Counter(keys).most_common(n)`` gives, with one sort of a few items instead of a heap.

    Example:
        >>> top_counts(["b", "a", "a", "b", "c"], 2)
        [('b', 2), ('a', 2)]
    """
    counts: dict[str, int] = {}
    for k in keys:
        counts[k] = counts.get(k, 0) + 1
    return sorted(counts.items(), key=itemgetter(1), reverse=True)[:n]


def vote(values: Sequence[Any]) -> Any:
    """The most common value (the first of equal counts); ``None`` for no values."""
    if not values:
        return None
    counts = Counter(key_of(v) for v in values)
    best = max(counts.values())
    return next(v for v in values if counts[key_of(v)] == best)


# ---------------------------------------------------------------------- replaying an episode
def recorded_decisions_of_rounds(trace: Trace) -> list[dict[str, Any]]:
    """The decisions an episode's trace records, in order (from ``attrs.completion``).

    Raises:
        TraceError: A decision that is not one of the environments' (the message names the
            event).
    """
    out = []
    shown = display(trace.trace_id, 80)
    for e in trace.events:
        if e.type != "orchestrator_decision" or "completion" not in (e.attrs or {}):
            continue
        raw = (e.attrs or {})["completion"]
        try:
            d = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            d = None
        if not _is_decision(d):
            raise TraceError(
                f"event {display(e.id, 60)!r} of trace {shown} records {display(repr(raw), 80)} "
                "as its decision, which is not a decision of the learning environments "
                "({spawn, role, comm, aggregate, stop}); record the episode again"
            )
        out.append(d)
    return out  # type: ignore[return-value]


def _is_decision(d: Any) -> bool:
    if not isinstance(d, dict):
        return False
    spawn = d.get("spawn")
    return (
        isinstance(spawn, int)
        and not isinstance(spawn, bool)
        and spawn >= 0
        and d.get("role") in ROLES
        and d.get("comm") in COMMS
        and d.get("aggregate") in AGGREGATES
        and isinstance(d.get("stop"), bool)
    )


def recorded_root(trace: Trace, runtime: Runtime, task: Task) -> Callable[..., Awaitable[Any]]:
    """The orchestrator of an environment episode that takes the decisions ``trace`` records.

    Raises:
        TraceError: The trace does not record the episode's limits (``meta.runner.rounds``)
            or records a decision that is not one.
    """
    runner = trace.meta.get("runner") if isinstance(trace.meta, dict) else None
    try:
        assert isinstance(runner, dict)
        spec = RoundsSpec.from_dict(runner.get("rounds"))
    except (AssertionError, TypeError, ValueError) as err:
        raise TraceError(
            f"trace {display(trace.trace_id, 80)} is an environment episode that does not "
            f"record its limits (meta.runner.rounds: {err or 'missing'}); record the episode "
            "again with this version"
        ) from None
    decisions = recorded_decisions_of_rounds(trace)
    it = iter(decisions)
    last = decisions[-1] if decisions else None

    async def decide() -> dict[str, Any]:
        d = next(it, None)
        if d is not None:
            return d
        agg = last["aggregate"] if last is not None else "vote"
        return {"spawn": 0, "role": "worker", "comm": "none", "aggregate": agg, "stop": True}

    rounds = Rounds(spec, task, task.size, decide)
    rounds.runtime = runtime
    return rounds.orchestrator
