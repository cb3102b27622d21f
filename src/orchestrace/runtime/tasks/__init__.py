"""Built-in tasks, by versioned id.

Example:
    >>> sorted(TASKS)
    ['arith-mapreduce-v0', 'humaneval-v0', 'math-v0', 'multihop-v0', 'wide-search-v0']
    >>> make_task("arith", seed=1).name
    'arith-mapreduce-v0'
"""

from __future__ import annotations

from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.runtime.tasks.arithmetic import ArithmeticTask
from orchestrace.runtime.tasks.base import Subtask, Task, parse_answer
from orchestrace.runtime.tasks.humaneval import HumanEvalTask
from orchestrace.runtime.tasks.mathword import MathWordTask
from orchestrace.runtime.tasks.multihop import MultiHopTask
from orchestrace.runtime.tasks.search import WideSearchTask

__all__ = [
    "TASKS",
    "ArithmeticTask",
    "HumanEvalTask",
    "MathWordTask",
    "MultiHopTask",
    "Subtask",
    "Task",
    "WideSearchTask",
    "make_task",
    "parse_answer",
]

TASKS: dict[str, type[Task]] = {
    ArithmeticTask.name: ArithmeticTask,
    WideSearchTask.name: WideSearchTask,
    MultiHopTask.name: MultiHopTask,
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


def make_task(name: str, seed: int = 0, size: int | None = None, **kw: Any) -> Task:
    """Build a task instance by id (or short alias).

    Raises:
        ConfigError: Unknown task (the message lists the known ones).
    """
    key = _ALIASES.get(name, name)
    cls = TASKS.get(key)
    if cls is None:
        raise ConfigError(f"unknown task {name!r}; use one of: {', '.join(sorted(TASKS))}")
    return cls(seed=seed, **({"size": size} if size is not None else {}), **kw)
