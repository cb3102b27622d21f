"""The orchestration runtime: run a topology on a task with a backend, recording the trace.

Example:
    >>> from orchestrace.runtime import run
    >>> res = run("swarm", "arith", agents=4, seed=1)
    >>> res.trace.topology, res.success, res.backend_calls > 0
    ('swarm', True, True)
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrace._collector import paused
from orchestrace.errors import ConfigError
from orchestrace.io._output import check_output
from orchestrace.io.parquet_stream import ParquetExporter
from orchestrace.runtime.backends import Backend, make_backend
from orchestrace.runtime.cache import ReplayCache
from orchestrace.runtime.clock import run_real, run_virtual
from orchestrace.runtime.config import RunConfig, check_seed
from orchestrace.runtime.core import (
    BudgetExceeded,
    Context,
    Handle,
    Message,
    Result,
    Runtime,
    ToolResult,
)
from orchestrace.runtime.export import Exporter, JsonlExporter
from orchestrace.runtime.recorder import Processor, ProgressBar, Recorder
from orchestrace.runtime.topologies import TOPOLOGIES, check_options, get_topology, team_use
from orchestrace.tasks import TASKS, Task, make_task
from orchestrace.trace.model import Trace

if TYPE_CHECKING:
    from orchestrace.io.parquet_stream import ParquetExporter

__all__ = [
    "TASKS",
    "TOPOLOGIES",
    "BudgetExceeded",
    "Context",
    "Handle",
    "Message",
    "Processor",
    "Recorder",
    "Result",
    "RunConfig",
    "RunResult",
    "Runtime",
    "ToolResult",
    "make_task",
    "run",
]


@dataclass
class RunResult:
    """What a run produced.

    Attributes:
        trace: The recorded trace.
        answer: The orchestrator's final answer.
        success: Whether the task's checker accepts it.
        backend_calls: Calls that reached the backend (cache misses).
        cache_hits: Calls answered from the replay cache.
        cpu_s: Process CPU seconds the run took.
        wall_s: Real seconds the run took.
        interrupted_by: ``"SIGINT"`` or ``"SIGTERM"`` when a signal stopped the run early
            (``run(..., stop_on_signals=True)``); the trace then ends with that stop.
        processor_failures: One line per recording processor that failed (it was kept and
            the run went on; the trace lists those that failed before it ended in
            ``meta.processor_failures``).
    """

    trace: Trace
    answer: Any
    success: bool
    backend_calls: int
    cache_hits: int
    cpu_s: float
    wall_s: float
    interrupted_by: str | None = None
    processor_failures: tuple[str, ...] = ()


def _check_parts(backend: Any, processors: Any, output: Any) -> None:
    """Refuse a backend, processors or output name the run cannot use, before any file exists."""
    if not isinstance(backend, str) and not isinstance(backend, Backend):
        raise ConfigError(
            f"backend is a {type(backend).__name__}: give a backend name (sim, openai, hf) or "
            "an object with the Backend methods (orchestrace.runtime.backends.Backend)"
        )
    if isinstance(processors, str | bytes) or not hasattr(processors, "__iter__"):
        raise ConfigError(
            f"processors is a {type(processors).__name__}: give a list of processors or exporters"
        )
    for i, p in enumerate(processors):
        if not any(callable(getattr(p, m, None)) for m in ("on_event", "export")):
            raise ConfigError(
                f"processors[{i}] is a {type(p).__name__}: give a Processor (on_event...) or an "
                "Exporter (export...), see orchestrace.runtime.recorder"
            )
    if output is not None:
        name = os.fspath(output) if isinstance(output, str | os.PathLike) else None
        if not isinstance(name, str) or not name.lower().endswith((".jsonl", ".parquet")):
            raise ConfigError(
                f"output {str(output)[:200]!r}: a run streams its trace to a .jsonl file or a "
                ".parquet dataset; name it so, or write result.trace with "
                "orchestrace.io.dump(result.trace, 'run.json') after the run"
            )


def run(
    topology: str = "swarm",
    task: str | Task = "arith-mapreduce-v0",
    *,
    agents: int = 8,
    seed: int = 0,
    task_seed: int | None = None,
    task_size: int | None = None,
    backend: str | Backend = "sim",
    backend_options: Mapping[str, Any] | None = None,
    config: RunConfig | None = None,
    output: str | Path | None = None,
    progress: bool = False,
    processors: Sequence[Processor | Exporter | ParquetExporter] = (),
    interventions: Sequence[Any] = (),
    cache: ReplayCache | None = None,
    overwrite: bool = False,
    stop_on_signals: bool = False,
    strict_agents: bool = False,
    **options: Any,
) -> RunResult:
    """Run ``topology`` on ``task`` and record the trace.

    Args:
        topology: One of :data:`TOPOLOGIES` (``swarm``, ``centralized``, ...).
        task: A task id (``arith-mapreduce-v0``, ...) or instance.
        agents: Team size hint (workers).
        seed: Seed of the simulator and policy draws.
        task_seed: Seed of the task instance (default: ``seed``).
        task_size: Size of the task instance (default: the task's).
        backend: ``sim``, ``openai``, ``hf``, or a backend object.
        backend_options: Options for the backend factory.
        config: Full configuration (overrides ``agents``/``seed``/``options``).
        output: Stream the trace to this ``.jsonl`` file (or ``.parquet`` dataset directory,
            written in row groups and put in place when the run ends) as it is recorded. It
            is checked and created before the run starts; if it cannot be written completely the run
            stops and raises :class:`~orchestrace.io.OutputError`.
        progress: Show a progress bar.
        processors: Extra recording processors, or exporters (each driven by a
            :class:`~orchestrace.runtime.recorder.SimpleProcessor`).
        interventions: Counterfactual interventions (see :mod:`orchestrace.runtime.replay`).
        cache: Replay cache to answer calls from (:meth:`ReplayCache.from_trace`).
        overwrite: Replace an existing ``output`` (otherwise an existing file is an error).
        stop_on_signals: SIGINT and SIGTERM stop the run cleanly (a recorded stop event, a
            footer; see ``RunResult.interrupted_by``) instead of raising mid-run; a second
            signal while it stops, more than a second after the first (sooner, it is the
            same interrupt delivered twice), raises ``KeyboardInterrupt`` (the recording is
            left without its footer). Only in the main thread.
        strict_agents: Refuse to run when the topology cannot use ``agents`` workers
            (:func:`~orchestrace.runtime.topologies.team_use`); otherwise the run uses what
            it can and records the difference in ``meta.team``.
        **options: :class:`RunConfig` fields (``max_steps``, ``tool_failure_rate``...) and
            topology options (``rounds``, ``managers``, ``gossip``, ``chunks``...).

    Raises:
        ConfigError: Unknown topology, task or backend, a bad option value, or (with
            ``strict_agents``) a team the topology cannot use.
        OutputError: ``output`` exists (without ``overwrite``), is being written by another
            process, cannot be created, or writing it failed during the run.
    """
    _check_parts(backend, processors, output)
    parquet = output is not None and str(output).lower().endswith(".parquet")
    if output is not None:
        check_output(output, force=overwrite, kind="dataset" if parquet else "file")
    spec = get_topology(topology)
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    given = {k: v for k, v in options.items() if k in fields}
    topo_options = {k: v for k, v in options.items() if k not in fields}
    cfg = config or RunConfig(agents=agents, seed=seed, options=topo_options, **given)
    cfg = dataclasses.replace(cfg, options=check_options(spec.name, cfg.options))
    if task_seed is not None:
        check_seed(task_seed, "task_seed")
    inst = (
        task
        if isinstance(task, Task)
        else make_task(task, seed=cfg.seed if task_seed is None else task_seed, size=task_size)
    )
    team = team_use(spec.name, inst.name, inst.size, cfg.agents, cfg.options)
    if team is not None and strict_agents:
        raise ConfigError(
            f"--agents {cfg.agents}: {str(team['note']).removeprefix('note: ')}; "
            "leave out --strict-agents to run with that team"
        )
    be = (
        backend
        if not isinstance(backend, str)
        else make_backend(
            backend,
            **({"seed": cfg.seed} if backend == "sim" else {}),
            **dict(backend_options or {}),
        )
    )
    procs = list(processors)
    if output is not None and parquet:
        exporter: Any = ParquetExporter(output, overwrite=overwrite)
        procs.insert(0, exporter)
    elif output is not None:
        procs.insert(0, JsonlExporter(output, overwrite=overwrite))
    if progress:
        procs.append(ProgressBar(desc=f"{spec.name}/{inst.name}", force=True))
    recorder = Recorder(procs)
    try:
        rt = Runtime(
            task=inst,
            backend=be,
            config=cfg,
            recorder=recorder,
            interventions=interventions,
            cache=cache,
            topology=spec.trace_topology,
            meta={"runner": {"topology": spec.name}, **({"team": team} if team else {})},
        )
    except BaseException:
        recorder.shutdown()  # refused before it started (a bad policy...): no file is left
        raise
    cpu0, wall0 = time.process_time(), time.perf_counter()
    recorder.on_fatal = rt.request_stop
    runner = run_virtual if be.virtual else run_real
    caught: list[str] = []
    try:
        # a simulated run allocates only objects that live until its end (events, agent
        # states): collections would free nothing while rescanning everything recorded so
        # far; runs against real backends are left alone
        with paused(be.virtual):
            trace = runner(_run_and_close(rt, be, spec.root, caught if stop_on_signals else None))
    except BaseException:
        recorder.shutdown()  # a run that never started still closes its outputs
        raise
    recorder.raise_error()
    return RunResult(
        trace,
        rt.answer,
        bool(trace.metrics.get("task_success")),
        rt.backend_calls,
        rt.cache_hits,
        time.process_time() - cpu0,
        time.perf_counter() - wall0,
        caught[0] if caught else None,
        tuple(recorder.failures),
    )


#: Signals this close to the first one that stops a run are the same interrupt.
_SAME_INTERRUPT_S = 1.0


def _catch_signals(rt: Runtime, caught: list[str]) -> list[tuple[int, Any]]:
    """Make SIGINT/SIGTERM stop ``rt`` cleanly; returns the handlers to put back.

    A signal the process ignores (``nohup``, a background job) stays ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        return []
    loop = asyncio.get_running_loop()
    first: list[float] = []

    def stop(name: str) -> None:
        if caught:
            # the same interrupt delivered twice (``timeout`` signals the process and its
            # group; a terminal's Ctrl-C reaches every process of the job): still one clean
            # stop. A second interrupt later than that gives up on a clean stop.
            if time.monotonic() - first[0] < _SAME_INTERRUPT_S:
                return
            raise KeyboardInterrupt
        first.append(time.monotonic())
        caught.append(name)
        rt.request_stop(f"interrupted by {name}")

    saved: list[tuple[int, Any]] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous = signal.getsignal(sig)
            if previous is signal.SIG_IGN:
                continue
            loop.add_signal_handler(sig, stop, sig.name)
        except (NotImplementedError, RuntimeError, ValueError, OSError):
            continue
        saved.append((sig, previous))
    return saved


async def _run_and_close(
    rt: Runtime, backend: Backend, root: Any, caught: list[str] | None = None
) -> Trace:
    saved = _catch_signals(rt, caught) if caught is not None else []
    try:
        return await rt.run(root)
    finally:
        try:
            await backend.aclose()
        finally:
            loop = asyncio.get_running_loop()
            for sig, previous in saved:
                loop.remove_signal_handler(sig)
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
