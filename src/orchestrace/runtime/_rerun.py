"""How a recorded run is re-executed: its runtime rebuilt from the trace, and an exact replay.

What :func:`~orchestrace.runtime.replay.replay`, :func:`~orchestrace.runtime.replay.fork`,
:func:`~orchestrace.runtime.replay.fork_many` and the snapshot copies share: the runtime of a
recorded run (``_runtime``: its topology or recorded episode, task, settings and the judge
of its final answer), the backend that refuses every call (``_StrictReplay``), the replay
that must answer every call from the trace (``_replay``) and :class:`ForkResult`.

Example:
    >>> from orchestrace.runtime import run
    >>> from orchestrace.runtime.cache import ReplayCache
    >>> tr = run("debate", "arith", agents=2, seed=1, task_size=8).trace
    >>> _replay(tr, ReplayCache.from_trace(tr), False).trace == tr
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from orchestrace.errors import ConfigError, TraceError
from orchestrace.runtime.backends.base import Backend, LLMRequest, LLMResponse
from orchestrace.runtime.cache import ReplayCache
from orchestrace.runtime.clock import run_virtual
from orchestrace.runtime.config import RunConfig
from orchestrace.runtime.core import Runtime
from orchestrace.runtime.interventions import Intervention, shown_trace
from orchestrace.runtime.recorder import Recorder
from orchestrace.runtime.rounds import recorded_root
from orchestrace.runtime.topologies import get_topology
from orchestrace.tasks import Task, Verdict, make_task, unknown_verdict
from orchestrace.tasks.base import recorded_verdict
from orchestrace.trace.model import Trace

__all__ = ["ForkResult", "check_replayable", "reproduces", "wall_clock"]

_ENC = msgspec.json.Encoder(order="deterministic")
#: How long a call the trace lacks takes in a replay (virtual seconds): past any run's end.
_NEVER = 1e9
#: Why a replay may diverge, named without guessing which.
_WHY = (
    " (the trace was edited, recorded by another orchestrace version, or ran something a "
    "replay does not reproduce)"
)


class _Setup(Protocol):
    """What a run's runtime takes from a batch's shared set-up: a fresh task instance."""

    def task(self) -> Task: ...


@dataclass
class _StrictReplay:
    """A backend that answers no call: a replay must be answered from the cache.

    Its spec is the recorded one, so a replay's header (and trace id) matches the original.
    A call the trace lacks never ends (on the replay's virtual time): a run that stopped
    while such a call was under way (a budget, ``on_error="stop"``) recorded no answer for
    it, and its replay is cancelled there too; a run that needs the answer waits past any
    recorded time, and its replay comes back different.
    """

    name: str
    virtual: bool = True
    recorded: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, trace: Trace) -> _StrictReplay:
        """The strict backend of a replay of ``trace``, recording the backend it records."""
        recorded = trace.meta.get("backend") if isinstance(trace.meta, dict) else None
        recorded = dict(recorded) if isinstance(recorded, dict) else {}
        return cls(str(recorded.get("name", "replay")), recorded=recorded)

    def spec(self) -> dict[str, Any]:
        """The backend the replayed trace records."""
        return dict(self.recorded)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return LLMResponse(
            "",
            error=f"replay: agent {request.agent!r} made a {request.kind!r} call the trace "
            "does not hold",
            latency=_NEVER,
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


def check_replayable(trace: Trace) -> None:
    """Refuse a trace that does not say how to re-run it (an imported or hand-made trace).

    Every re-executing operation (replay, fork, counterfactual, leave-one-out and Shapley
    credit) calls it first, so each refuses such a trace with the same message.

    A trace that records interventions (an attack it ran under, or a fork's own changes) is
    refused too: a re-execution does not apply them again, so it would not reproduce the
    trace, and a fork of it would be a counterfactual of another run.

    Raises:
        TraceError: The trace's meta lacks ``runner``, ``task`` or ``config``, or records
            interventions.

    Example:
        >>> from orchestrace.runtime import run
        >>> check_replayable(run("debate", "arith", agents=2, seed=1, task_size=8).trace)
    """
    if not isinstance(trace, Trace):
        raise ConfigError(
            f"re-executing takes a Trace recorded by the runtime, not a {type(trace).__name__}; "
            "read one with orchestrace.io.load"
        )
    meta = trace.meta if isinstance(trace.meta, dict) else {}
    for name in ("runner", "task", "config"):
        if name not in meta:
            raise TraceError(
                f"trace {shown_trace(trace)} does not say how to re-run it (missing meta "
                f"{name!r}); only traces recorded by `orchestrace run` or a learning "
                "environment can be replayed"
            )
    recorded = meta.get("interventions")
    if recorded:
        kinds = sorted(
            {
                str(iv.get("attack") or iv.get("kind")) if isinstance(iv, dict) else "?"
                for iv in (recorded if isinstance(recorded, list) else [recorded])
            }
        )
        raise TraceError(
            f"trace {shown_trace(trace)} records interventions ({', '.join(kinds)[:120]}), which "
            "a re-execution does not apply again: it would not reproduce the trace, and a fork "
            "of it would be a counterfactual of another run; replay or fork the run recorded "
            "without them"
        )


def _runtime(
    trace: Trace,
    backend: Backend,
    interventions: Sequence[Intervention],
    cache: ReplayCache,
    rerun_checks: bool = False,
    fork_of: dict[str, Any] | None = None,
    runtime_class: type[Runtime] = Runtime,
    setup: _Setup | None = None,
) -> tuple[Runtime, Any]:
    check_replayable(trace)
    meta = trace.meta
    try:
        runner = meta["runner"]
        episode = isinstance(runner, dict) and "env" in runner  # a learning environment's
        topo = None if episode else get_topology(runner["topology"])
        spec = meta["task"]
        name, seed, size = spec["name"], spec["seed"], spec["size"]
        if not isinstance(meta["config"], dict):
            raise ConfigError(
                f"meta.config is {type(meta['config']).__name__}, not an object of run settings"
            )
        config = RunConfig.from_dict(dict(meta["config"]))
    except ConfigError as err:
        raise TraceError(
            f"trace {shown_trace(trace)} holds an unusable run config: {err}; record the run again"
        ) from None
    except KeyError as err:
        raise TraceError(
            f"trace {shown_trace(trace)} does not say how to re-run it (missing meta {err}); only "
            "traces recorded by `orchestrace run` or a learning environment can be replayed"
        ) from None
    except (TypeError, ValueError, AttributeError) as err:
        raise TraceError(
            f"trace {shown_trace(trace)} holds an unusable run config ({type(err).__name__}: "
            f"{str(err)[:200]}); record the run again"
        ) from None
    # a bad seed or size: the message names the trace and the meta.task field
    task = (
        setup.task()
        if setup is not None
        else make_task(name, seed=seed, size=size, source=f"trace {shown_trace(trace)}: meta.task")
    )
    extra: dict[str, Any] = {"runner": meta["runner"]}
    if "team" in meta:  # what the topology did with --agents: part of the run's identity
        extra["team"] = meta["team"]
    if fork_of is not None:
        extra["fork"] = fork_of
    rt = runtime_class(
        task=task,
        backend=backend,
        config=config,
        recorder=Recorder(),
        interventions=interventions,
        cache=cache,
        topology=trace.topology,
        meta=extra,
        judge=_judge(trace, task, rerun_checks),
        label_answers=fork_of is not None,
    )
    if rt.guard is not None:  # keys from os.urandom are not recorded: re-use the MACs
        rt.guard.reuse_macs(trace.events)
    if topo is None:
        return rt, recorded_root(trace, rt, task)
    return rt, topo.root


def _replay(
    trace: Trace,
    cache: ReplayCache,
    rerun_checks: bool,
    setup: _Setup | None = None,
    *,
    exact: bool = False,
    watch: Sequence[Intervention] = (),
) -> ForkResult:
    """:func:`replay` with ``cache`` (the trace's own): every call must come from it.

    ``exact``: also refuse a replay that differs from the trace with every call answered
    (a trace edited where no call reads it); :func:`replay` returns that one, to be compared.
    ``watch``: interventions that change nothing and note what the run does.
    """
    rt, root = _runtime(trace, _StrictReplay.of(trace), watch, cache, rerun_checks, setup=setup)
    new = run_virtual(rt.run(root))
    # calls the trace lacks are allowed only where they change nothing: under way when the
    # recorded run stopped (the replay stops there too, with the same events)
    missed = rt.backend_calls or rt.tool_runs
    if (missed or exact) and not _same_run(trace, new):
        if not missed:
            raise TraceError(
                f"replay of {shown_trace(trace)} diverged: its re-execution, every call "
                f"answered from the trace, differs from it{_WHY}; record the run again"
            )
        calls = f"{rt.backend_calls} LLM call(s)" + (
            f" and {rt.tool_runs} tool call(s)" if rt.tool_runs else ""
        )
        raise TraceError(
            f"replay of {shown_trace(trace)} diverged: {calls} were not in the trace{_WHY}; "
            "record the run again"
        )
    return ForkResult(new, rt.backend_calls, rt.cache_hits)


def wall_clock(trace: Trace) -> bool:
    """Whether ``trace`` was recorded on wall-clock time (its backend is not virtual)."""
    backend = trace.meta.get("backend") if isinstance(trace.meta, dict) else None
    return isinstance(backend, dict) and backend.get("virtual") is False


def _untimed(trace: Trace) -> Trace:
    """``trace`` without its timing (event start and duration, the wall-clock cost)."""
    return trace.replace(
        events=tuple(msgspec.structs.replace(e, t=0.0, dur=0.0) for e in trace.events),
        costs={k: v for k, v in trace.costs.items() if k != "wall_clock_s"},
    )


def reproduces(original: Trace, replayed: Trace) -> bool:
    """Whether ``replayed`` is an exact reproduction of ``original``.

    A run on virtual time (the simulator) must come back value for value (byte for byte
    when both are written: a copy that went through pickle spells its zeros out, so values
    are compared too). A run on wall-clock time (a served model) must come back with the same
    events (ids, agents, steps, contents, attributes), edges, metrics and meta; only its
    timing (event ``t`` and ``dur``, the ``wall_clock_s`` cost) is the replay's own, since a
    replay does not wait for a server.

    Example:
        >>> from orchestrace.runtime import run
        >>> original = run("debate", "arith", agents=3, seed=1, task_size=16).trace
        >>> reproduces(original, _replay(original, ReplayCache.from_trace(original), False).trace)
        True
    """
    if _ENC.encode(original) == _ENC.encode(replayed) or original == replayed:
        return True
    return wall_clock(original) and _untimed(original) == _untimed(replayed)


def _same_run(original: Trace, replayed: Trace) -> bool:
    """Whether a replay ran as the recorded run did: the same events and edges, by value.

    What a run did is compared, not what was noted on it: the header and the events'
    ``attrs`` are the replay's own (what it records of its backend and result; a learning
    environment notes on its decision events what the policy said, which a replay of the
    recorded decisions does not say again). A trace that went through pickle (a worker's
    copy) holds its zeros as other objects than the defaults, which the writer then spells
    out, so bytes are not compared. On wall-clock time the events' timing is the replay's
    own too (:func:`reproduces`).
    """
    if original.edges != replayed.edges or len(original.events) != len(replayed.events):
        return False
    timed = not wall_clock(original)

    def done(tr: Trace) -> tuple[Any, ...]:
        if timed:
            return tuple(msgspec.structs.replace(e, attrs=None) for e in tr.events)
        return tuple(msgspec.structs.replace(e, t=0.0, dur=0.0, attrs=None) for e in tr.events)

    return original.events == replayed.events or done(original) == done(replayed)
