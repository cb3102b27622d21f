"""Built-in tasks, by versioned id.

``wide-search-v2`` and ``multihop-v2`` show the tool results in the prompt, read them at a fixed
per-read error rate and have verifiers run the tools themselves; ``wide-search-v1`` and
``multihop-v1`` show the tool results in the prompt and the simulator
answers from them (use these with real models); the ``-v0`` versions, which the short names
``search`` and ``multihop`` still select, keep the earlier behaviour (tool results recorded but
not shown) so that earlier results stay reproducible.

Example:
    >>> sorted(TASKS)
    ['arith-mapreduce-v0', 'humaneval-v0', 'math-v0', 'multihop-v0', 'multihop-v1', 'multihop-v2', 'wide-search-v0', 'wide-search-v1', 'wide-search-v2']
    >>> make_task("arith", seed=1).name
    'arith-mapreduce-v0'
    >>> [name for name, cls in sorted(TASKS.items()) if cls.executes_code]
    ['humaneval-v0']
"""

from __future__ import annotations

from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.tasks.arithmetic import ArithmeticTask
from orchestrace.tasks.base import (
    Subtask,
    Task,
    Verdict,
    check_spec,
    parse_answer,
    unknown_verdict,
)
from orchestrace.tasks.humaneval import HumanEvalTask
from orchestrace.tasks.mathword import MathWordTask
from orchestrace.tasks.multihop import MultiHopTask, MultiHopTaskV1, MultiHopTaskV2
from orchestrace.tasks.search import WideSearchTask, WideSearchTaskV1, WideSearchTaskV2

__all__ = [
    "TASKS",
    "ArithmeticTask",
    "HumanEvalTask",
    "MathWordTask",
    "MultiHopTask",
    "MultiHopTaskV1",
    "MultiHopTaskV2",
    "Subtask",
    "Task",
    "Verdict",
    "WideSearchTask",
    "WideSearchTaskV1",
    "WideSearchTaskV2",
    "make_task",
    "parse_answer",
    "task_class",
    "unknown_verdict",
]

# The HumanEval checker runs the answer as a Python program.
HumanEvalTask.executes_code = True


TASKS: dict[str, type[Task]] = {
    ArithmeticTask.name: ArithmeticTask,
    WideSearchTask.name: WideSearchTask,
    MultiHopTask.name: MultiHopTask,
    WideSearchTaskV1.name: WideSearchTaskV1,
    WideSearchTaskV2.name: WideSearchTaskV2,
    MultiHopTaskV1.name: MultiHopTaskV1,
    MultiHopTaskV2.name: MultiHopTaskV2,
    MathWordTask.name: MathWordTask,
    HumanEvalTask.name: HumanEvalTask,
}
_ALIASES = {
    "arith": "arith-mapreduce-v0",
    "arithmetic": "arith-mapreduce-v0",
    "search": "wide-search-v0",
    "wide-search": "wide-search-v0",
    "multihop": "multihop-v0",
    "multi-hop": "multihop-v0",
    "math": "math-v0",
    "humaneval": "humaneval-v0",
    "code": "humaneval-v0",
}


def task_class(name: Any) -> type[Task] | None:
    """The task class of an id or alias (``None`` when unknown)."""
    if not isinstance(name, str):
        return None
    return TASKS.get(_ALIASES.get(name, name))


def make_task(
    name: str, seed: int = 0, size: int | None = None, *, source: str | None = None, **kw: Any
) -> Task:
    """Build a task instance by id (or short alias).

    Seed and size are checked before anything is built: the seed is an integer from 0 to
    2**63 - 1, the size an integer from 1 to the task's ``max_size``.

    Args:
        name: Task id or alias.
        seed: Instance seed.
        size: Instance size (``None``: the task's default).
        source: Where the spec came from, for messages, e.g. ``"trace t1: meta.task"``
            (default: the options ``--task``, ``--task-seed``, ``--task-size``).
        **kw: Further constructor arguments.

    Raises:
        ConfigError: Unknown task (the message lists the known ones), or a seed or size of
            the wrong type or out of range (the message names the option or field and the
            allowed range).
    """
    cls = task_class(name)
    if cls is None:
        where = f"{source}.name" if source else "--task"
        shown = name if isinstance(name, str) else type(name).__name__
        raise ConfigError(
            f"{where}: unknown task {shown[:60]!r}; use one of: {', '.join(sorted(TASKS))}"
        )
    check_spec(cls.name, seed, size, limit=cls.max_size, source=source)
    return cls(seed=seed, **({"size": size} if size is not None else {}), **kw)
