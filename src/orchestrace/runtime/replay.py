"""Deterministic replay and counterfactual forks.

Every nondeterministic input of a run (LLM answers, tool outputs) is recorded in the trace under
a key of (agent, hash of the call's inputs, how many times the agent made that exact call): an
``llm_call`` event keeps the answer text, parsed answer, tokens, cost and latency (``dur``); a
``tool_call``/``tool_result`` pair keeps the output. :func:`replay` re-executes the run from the
trace alone and reproduces it exactly (same events, edges, ids) for runs on virtual time.

:func:`fork` re-executes with interventions: drop or replace a message, force a stop, force a
decision (spawn one more worker). Calls whose inputs did not change come from the cache; only
calls downstream of the change reach the backend, and :class:`ForkResult` says how many did.

Neither ever runs a recorded answer as code. A re-executed run whose final answer equals the
recorded one reuses the verdict recorded with it (``meta.result.verdict``). A new answer is
checked by the task's checker when that only compares values; for a task whose check runs
the answer as code (``humaneval-v0``) its verdict is unknown (``passed: None``, the reason says
why) unless ``rerun_checks=True``, which checks it in the task's sandbox.

Example:
    >>> from orchestrace.runtime import run
    >>> original = run("debate", "arith", agents=3, seed=1, task_size=16).trace
    >>> replay(original).trace == original
    True
    >>> msg = next(e for e in original.events if e.type == "message")
    >>> f = fork(original, [DropMessage.of(original, msg.id)])
    >>> 0 < f.backend_calls < f.cache_hits
    True
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from orchestrace.errors import ConfigError, TraceError
from orchestrace.runtime.backends.base import Backend, BackendError, LLMRequest, LLMResponse
from orchestrace.runtime.clock import run_virtual
from orchestrace.runtime.config import RunConfig
from orchestrace.runtime.core import ROOT, Runtime
from orchestrace.runtime.recorder import Recorder
from orchestrace.runtime.tasks import Task, Verdict, make_task, unknown_verdict
from orchestrace.runtime.topologies import get_topology
from orchestrace.trace.model import Trace

_ENC = msgspec.json.Encoder(order="deterministic")

__all__ = [
    "DropMessage",
    "ForceDecision",
    "ForceStop",
    "ForkResult",
    "Intervention",
    "ReplaceMessage",
    "Silence",
    "cache_from_trace",
    "fork",
    "replay",
    "spawn_one_more",
]


class Intervention:
    """A change to a run. Subclasses override the hooks they need."""

    def forces_stop(self, agent: str, step: int) -> bool:
        """Whether ``agent`` must stop on entering ``step``."""
        return False

    def decision(self, agent: str, name: str, value: Any) -> Any:
        """The value of decision ``name`` of ``agent`` (default: unchanged)."""
        return value

    def message(
        self, sender: str, step: int, index: int, to: str, content: str, data: Any
    ) -> tuple[str, Any] | None:
        """The message to send (``None`` drops it)."""
        return content, data

    def returned(self, agent: str, value: Any) -> Any:
        """The value ``agent`` returns (default: unchanged)."""
        return value

    def describe(self) -> dict[str, Any]:
        """JSON description (recorded in the forked trace's meta)."""
        return {"kind": type(self).__name__, **{k: v for k, v in vars(self).items()}}


def _message_address(trace: Trace, event_id: str) -> tuple[str, int, int]:
    try:
        ev = trace.event(event_id)
    except KeyError:
        raise TraceError(
            f"no event {event_id!r} in trace {trace.trace_id}; pick a message "
            "event id from the trace"
        ) from None
    if ev.type != "message":
        raise TraceError(f"event {event_id!r} is a {ev.type}, not a message")
    index = 0
    for e in trace.events:
        if e.id == event_id:
            break
        if e.type == "message" and e.agent == ev.agent and e.step == ev.step:
            index += 1
    return ev.agent, int(ev.step or 0), index


@dataclass
class DropMessage(Intervention):
    """The message never gets sent.

    Attributes:
        sender: Sending agent.
        step: The sender's step.
        index: Which message of that step (0-based).
    """

    sender: str
    step: int
    index: int

    @classmethod
    def of(cls, trace: Trace, event_id: str) -> DropMessage:
        """The intervention that drops message ``event_id`` of ``trace``."""
        return cls(*_message_address(trace, event_id))

    def message(
        self, sender: str, step: int, index: int, to: str, content: str, data: Any
    ) -> tuple[str, Any] | None:
        """Drop the targeted message, pass the others."""
        if (sender, step, index) == (self.sender, self.step, self.index):
            return None
        return content, data


@dataclass
class ReplaceMessage(Intervention):
    """The message is sent with other content (and, optionally, other data)."""

    sender: str
    step: int
    index: int
    content: str
    data: Any = None
    replace_data: bool = False

    @classmethod
    def of(
        cls, trace: Trace, event_id: str, content: str, data: Any = None, replace_data: bool = False
    ) -> ReplaceMessage:
        """The intervention that rewrites message ``event_id`` of ``trace``."""
        return cls(*_message_address(trace, event_id), content, data, replace_data)

    def message(
        self, sender: str, step: int, index: int, to: str, content: str, data: Any
    ) -> tuple[str, Any] | None:
        """Rewrite the targeted message, pass the others."""
        if (sender, step, index) == (self.sender, self.step, self.index):
            return self.content, (self.data if self.replace_data else data)
        return content, data


@dataclass
class ForceStop(Intervention):
    """The agent (by default the orchestrator) stops on entering ``step`` (O5 stop-now)."""

    step: int
    agent: str = ROOT

    def forces_stop(self, agent: str, step: int) -> bool:
        """True once the agent reaches the step."""
        return agent == self.agent and step >= self.step


@dataclass
class ForceDecision(Intervention):
    """Decision ``name`` of ``agent`` takes ``value`` (e.g. ``n_workers``: spawn one more)."""

    name: str
    value: Any
    agent: str = ROOT

    def decision(self, agent: str, name: str, value: Any) -> Any:
        """The forced value for the targeted decision."""
        return self.value if (agent, name) == (self.agent, self.name) else value


@dataclass
class Silence(Intervention):
    """The agent's work is lost: its messages are never sent and it returns nothing (``None``).

    Used for coalition values (Shapley) and leave-one-out credit: the team without the agent.
    """

    agent: str

    def message(
        self, sender: str, step: int, index: int, to: str, content: str, data: Any
    ) -> tuple[str, Any] | None:
        """Drop every message of the silenced agent."""
        return None if sender == self.agent else (content, data)

    def returned(self, agent: str, value: Any) -> Any:
        """The silenced agent returns ``None``."""
        return None if agent == self.agent else value


def spawn_one_more(trace: Trace) -> ForceDecision:
    """Force the orchestrator to use one more worker than the run did."""
    n = int(trace.meta.get("config", {}).get("agents", 1))
    return ForceDecision("n_workers", n + 1)


# ---------------------------------------------------------------------- cache and backends
def cache_from_trace(trace: Trace) -> dict[str, Any]:
    """Every recorded nondeterministic input of ``trace``, by replay key."""
    cache: dict[str, Any] = {}
    results: dict[str, Any] = {}
    for edge in trace.edges:
        if edge.type == "tool_dependency":
            results[edge.src] = edge.dst
    by_id = (
        {e.id: e for e in trace.events} if any(e.type == "tool_call" for e in trace.events) else {}
    )
    for e in trace.events:
        attrs = e.attrs or {}
        key = attrs.get("key")
        if not key:
            continue
        if e.type == "llm_call":
            cache[key] = LLMResponse(
                text=e.content or "",
                answer=attrs.get("answer"),
                tokens_in=e.tokens_in,
                tokens_out=e.tokens_out,
                latency=e.dur,
                cost=e.cost,
                model=e.tool or "",
                error=e.error,
                confidence=attrs.get("confidence"),
            )
        elif e.type == "tool_call":
            res = by_id.get(results.get(e.id, ""))
            if res is None:
                continue
            value = None
            if res.error is None and res.content is not None:
                try:
                    value = json.loads(res.content)
                except ValueError:
                    value = res.content
            cache["tool:" + key] = (value, res.error, e.dur)
    return cache


@dataclass
class _StrictReplay:
    """A backend that refuses every call: a replay must be answered from the cache."""

    name: str
    virtual: bool = True

    async def complete(self, request: LLMRequest) -> LLMResponse:
        raise BackendError(
            f"replay diverged: agent {request.agent!r} made a {request.kind!r} call that the "
            "trace does not hold; the run is not reproducible from this trace (was it recorded "
            "by another orchestrace version, or edited?)"
        )

    async def aclose(self) -> None:
        return None


@dataclass
class ForkResult:
    """A re-executed run.

    Attributes:
        trace: The new trace.
        backend_calls: Calls that reached the backend (inputs changed by the intervention).
        cache_hits: Calls answered from the original trace.
        interventions: What was changed.
    """

    trace: Trace
    backend_calls: int
    cache_hits: int
    interventions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def success(self) -> bool:
        """Whether the forked run solved the task (``False`` when unknown: see :attr:`verdict`)."""
        return bool(self.trace.metrics.get("task_success"))

    @property
    def verdict(self) -> dict[str, Any] | None:
        """The verdict on the re-executed run's answer (``passed`` is ``None`` when unknown)."""
        result = self.trace.meta.get("result")
        v = result.get("verdict") if isinstance(result, dict) else None
        return v if isinstance(v, dict) else None


def _encoded(value: Any) -> bytes | None:
    try:
        return _ENC.encode(value)
    except (TypeError, ValueError, msgspec.EncodeError):
        return None


def _recorded(trace: Trace) -> tuple[bool, Any, Verdict | None]:
    """Whether the trace records an answer; the answer; its recorded verdict."""
    from orchestrace.rewards.base import recorded_verdict

    result = trace.meta.get("result")
    if not isinstance(result, dict) or "answer" not in result:
        return False, None, None
    return True, result["answer"], recorded_verdict(trace)


def _judge(trace: Trace, task: Task, rerun_checks: bool) -> Any:
    """How a re-executed run's final answer is judged (see the module docstring)."""
    has_answer, answer, recorded = _recorded(trace)
    key = _encoded(answer) if has_answer else None

    def judge(new: Any) -> Verdict:
        same = key is not None and _encoded(new) == key
        if same and recorded is not None and recorded["passed"] is not None:
            if not rerun_checks and task.executes_code:
                return recorded
            now = task.verdict(new)
            return recorded if now["passed"] == recorded["passed"] else now
        if task.executes_code and not rerun_checks and new is not None:
            return unknown_verdict(
                task.name,
                "not checked: "
                + (
                    "the recorded run has no verdict"
                    if same
                    else "the answer differs from the recorded one"
                )
                + f" and {task.name} checks an answer by running it as code; re-run with "
                "--rerun-checks (rerun_checks=True) to check it in the sandbox",
            )
        return task.verdict(new)

    return judge


def _runtime(
    trace: Trace,
    backend: Backend,
    interventions: Sequence[Intervention],
    cache: dict[str, Any],
    rerun_checks: bool = False,
) -> tuple[Runtime, Any]:
    meta = trace.meta
    try:
        topo = get_topology(meta["runner"]["topology"])
        spec = meta["task"]
        name, seed, size = spec["name"], spec["seed"], spec["size"]
        config = RunConfig.from_dict(dict(meta["config"]))
    except (KeyError, TypeError) as err:
        raise TraceError(
            f"trace {trace.trace_id} does not say how to re-run it (missing meta {err}); only "
            "traces recorded by `orchestrace run` can be replayed"
        ) from None
    except ConfigError as err:
        raise TraceError(f"trace {trace.trace_id} holds an unusable run config: {err}") from None
    # a bad seed or size: the message names the trace and the meta.task field
    shown = trace.trace_id.encode("unicode_escape", "backslashreplace").decode("ascii")[:80]
    task = make_task(name, seed=seed, size=size, source=f"trace {shown}: meta.task")
    recorded_backend = meta.get("backend", {})
    rt = Runtime(
        task=task,
        backend=backend,
        config=config,
        recorder=Recorder(),
        interventions=interventions,
        cache=cache,
        topology=trace.topology,
        meta={"runner": meta["runner"]},
        judge=_judge(trace, task, rerun_checks),
    )
    # keep the recorded backend's identity so trace ids and meta match the original
    rt.run_meta = _patched_meta(rt, recorded_backend)  # type: ignore[method-assign]
    return rt, topo.root


def _patched_meta(rt: Runtime, backend_meta: dict[str, Any]) -> Any:
    original = Runtime.run_meta

    def run_meta() -> dict[str, Any]:
        out = original(rt)
        if backend_meta:
            out["backend"] = backend_meta
        return out

    return run_meta


def replay(trace: Trace, *, rerun_checks: bool = False) -> ForkResult:
    """Re-execute ``trace`` from its recorded inputs alone (no backend is called).

    Args:
        trace: A trace recorded by the runtime.
        rerun_checks: Check the final answer again even where that runs it as code (in the
            task's sandbox); by default the recorded verdict is reused.

    Raises:
        TraceError: The trace lacks the run description, or the re-execution asks for a call
            the trace does not hold (the message says which).
    """
    backend_name = str(trace.meta.get("backend", {}).get("name", "replay"))
    cache = cache_from_trace(trace)
    rt, root = _runtime(trace, _StrictReplay(backend_name), (), cache, rerun_checks)
    new = run_virtual(rt.run(root))
    if rt.backend_calls:
        raise TraceError(
            f"replay of {trace.trace_id} diverged: {rt.backend_calls} call(s) were not in the trace"
        )
    return ForkResult(new, rt.backend_calls, rt.cache_hits)


def fork(
    trace: Trace,
    interventions: Sequence[Intervention],
    backend: Backend | None = None,
    *,
    rerun_checks: bool = False,
) -> ForkResult:
    """Re-execute ``trace`` with ``interventions``; unchanged calls come from the cache.

    Args:
        trace: A trace recorded by the runtime.
        interventions: What to change.
        backend: Answers calls whose inputs changed (default: the simulator with the run's
            seed, as recorded).
        rerun_checks: Check a new final answer even where that runs it as code (in the task's
            sandbox); by default its verdict is then unknown.

    Raises:
        TraceError: The trace cannot be re-executed.
    """
    if backend is None:
        from orchestrace.runtime.backends.sim import SimBackend

        seed = int(trace.meta.get("config", {}).get("seed", 0))
        backend = SimBackend(seed=seed)
    cache = cache_from_trace(trace)
    rt, root = _runtime(trace, backend, interventions, cache, rerun_checks)
    new = run_virtual(rt.run(root))
    return ForkResult(new, rt.backend_calls, rt.cache_hits, [iv.describe() for iv in interventions])
