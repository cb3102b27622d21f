"""The attacks by name, and :func:`run_attacked`: one run under an attack and defenses.

Example:
    >>> make_attack("collusion").agents
    2
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.runtime import RunResult
from orchestrace.runtime.backends import make_backend
from orchestrace.runtime.clock import run_real, run_virtual
from orchestrace.runtime.config import RunConfig
from orchestrace.runtime.core import Runtime
from orchestrace.runtime.replay import Intervention
from orchestrace.runtime.topologies import check_options, get_topology
from orchestrace.safety.attacks.agents import (
    AggregationManipulation,
    Collusion,
    Escalation,
    LookAlike,
    Spoofing,
)
from orchestrace.safety.attacks.base import Attack, _Hooks
from orchestrace.safety.attacks.injection import (
    Byzantine,
    DirectInjection,
    IndirectInjection,
    Replication,
)
from orchestrace.tasks import make_task
from orchestrace.tasks.base import Task
from orchestrace.trace.model import Trace

#: The attacks by name.
ATTACKS: dict[str, type[Attack]] = {
    a.name: a
    for a in (
        DirectInjection,
        IndirectInjection,
        Spoofing,
        Escalation,
        AggregationManipulation,
        Byzantine,
        Collusion,
        LookAlike,
        Replication,
    )
}


def make_attack(name: str, **options: Any) -> Attack:
    """An attack by name with options.

    Raises:
        ConfigError: Unknown name or option.

    Example:
        >>> make_attack("byzantine", susceptibility=0.5).susceptibility
        0.5
    """
    cls = ATTACKS.get(name)
    if cls is None:
        raise ConfigError(f"unknown attack {name!r}; use one of: {', '.join(ATTACKS)}")
    known = {f.name for f in dataclasses.fields(cls)}
    bad = sorted(set(options) - known)
    if bad:
        raise ConfigError(
            f"unknown option {bad[0]!r} for attack {name!r}; its options: {', '.join(sorted(known))}"
        )
    return cls(**options)


def run_attacked(
    topology: str,
    task: str | Task,
    attack: Attack | None,
    *,
    defenses: Any = None,
    agents: int = 4,
    seed: int = 0,
    task_size: int | None = None,
    backend: str | Any = "sim",
    backend_options: Mapping[str, Any] | None = None,
    config: RunConfig | None = None,
    **options: Any,
) -> Any:
    """Run ``topology`` on ``task`` under ``attack`` (``None``: no attack) and ``defenses``.

    Args:
        topology: Topology name.
        task: Task id or instance.
        attack: The attack (``None``: a benign run of the same setting).
        defenses: A :class:`~orchestrace.safety.Defenses` (``None``: none).
        agents: Team size.
        seed: Seed of the run, the task instance and the attack's draws.
        task_size: Size of the task instance (default: the task's).
        backend: ``sim``, ``openai``, ``hf`` or a backend object.
        backend_options: Options of the backend factory.
        config: A full run configuration (budgets, ...); its ``agents``, ``seed``,
            ``defenses`` and ``options`` replace the arguments of the same names.
        **options: Topology options.

    Returns:
        The :class:`~orchestrace.runtime.RunResult`.

    Raises:
        ConfigError: The attack does not apply to this topology and task (the message says
            why), or a bad option.
    """
    if config is not None:
        agents, seed, options = config.agents, config.seed, {**config.options, **options}
        if defenses is None:
            defenses = config.defenses
    spec = get_topology(topology)
    checked = check_options(spec.name, options)
    if attack is not None:
        why = attack.applies_to(spec.name, task, checked) or attack.applies_to_team(
            spec.name, agents
        )
        if why is not None:
            raise ConfigError(f"attack {attack.name!r} cannot apply: {why}")
    inst = task if isinstance(task, Task) else make_task(task, seed=seed, size=task_size)
    be = (
        make_backend(
            backend, **({"seed": seed} if backend == "sim" else {}), **dict(backend_options or {})
        )
        if isinstance(backend, str)
        else backend
    )
    kw: dict[str, Any] = {}
    if defenses is not None:
        kw["defenses"] = defenses
    cfg = (
        RunConfig(agents=agents, seed=seed, options=checked, **kw)
        if config is None
        else dataclasses.replace(config, options=checked, **kw)
    )
    interventions: list[Intervention] = []
    hooks: _Hooks | None = None
    if attack is not None:
        armed = attack.arm(inst, be, seed=seed)
        inst, be, interventions = armed.task, armed.backend, armed.interventions
        hooks = next(iv for iv in interventions if isinstance(iv, _Hooks))

    class _Attacked(Runtime):
        """The runtime, with the attacker's say over the functions spawned agents run."""

        def spawn(
            self,
            a: Any,
            role: str,
            fn: Any,
            name: str | None,
            content: str | None,
            inputs: dict[str, Any],
        ) -> Any:
            if hooks is not None:
                fn = _late_wrap(hooks, fn)
            return super().spawn(a, role, fn, name, content, inputs)

    rt = _Attacked(
        task=inst,
        backend=be,
        config=cfg,
        interventions=interventions,
        topology=spec.trace_topology,
        meta={"runner": {"topology": spec.name}},
    )

    async def go() -> Trace:
        try:
            return await rt.run(spec.root)
        finally:
            await be.aclose()

    cpu0, wall0 = time.process_time(), time.perf_counter()
    trace = (run_virtual if be.virtual else run_real)(go())
    return RunResult(
        trace,
        rt.answer,
        bool(trace.metrics.get("task_success")),
        rt.backend_calls,
        rt.cache_hits,
        time.process_time() - cpu0,
        time.perf_counter() - wall0,
    )


def _late_wrap(hooks: _Hooks, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` for a spawned agent, replaced by the attacker's once its name and role are known."""

    async def agent(ctx: Any, **inputs: Any) -> Any:
        return await hooks.wrap_agent(ctx.name, ctx.role, fn)(ctx, **inputs)

    return agent
