"""The task instance that checks answers of a spec, shared by every trace of that spec.

Scoring a run checks its answer with the task of its ``meta.task``; building a task can cost
milliseconds (a 1,200-item search: about 9 ms), more than scoring. Where one instance gives
every trace the verdict a fresh one gives, it is kept here and shared.
"""

from __future__ import annotations

import contextlib
from typing import Any

from orchestrace.tasks import Task, make_task, task_class

#: Tasks built to check answers, by (name, seed, size): only built-in tasks whose check
#: compares the answer with values of the task (it reads the instance and never changes it),
#: so one instance gives every trace of that spec the verdict a fresh one gives.
_CHECKING: dict[tuple[str, Any, Any], Task] = {}
_CHECKING_MAX = 16


def _kept(cls: type[Task]) -> bool:
    """Whether instances of ``cls`` are shared (a built-in task whose check runs no code)."""
    return not cls.executes_code and cls.__module__.startswith("orchestrace.tasks.")


def checking_task(cls: type[Task], spec: dict[str, Any], source: str) -> Task:
    """The task of ``spec`` (a trace's ``meta.task``) to check an answer with.

    One instance per spec where that is exact (see ``_CHECKING``); a fresh one otherwise.

    Raises:
        ConfigError: A bad seed or size (named with ``source``).
    """
    key = (cls.name, spec.get("seed", 0), spec.get("size"))
    pure = _kept(cls)
    try:
        task = _CHECKING.get(key) if pure else None
    except TypeError:  # an unhashable seed or size: make_task says what is wrong with it
        pure, task = False, None
    if task is None:
        task = make_task(key[0], seed=key[1], size=key[2], source=source)
        if pure:
            if len(_CHECKING) >= _CHECKING_MAX:
                _CHECKING.pop(next(iter(_CHECKING)))
            _CHECKING[key] = task
    return task


def prepare_checking(meta: Any, source: str) -> None:
    """Build the checking task of a trace's ``meta`` ahead of time (nothing when not kept).

    A process about to be copied for many forks of one run calls it once, so that the copies
    share the task instead of each building it again (building the task of a 1,200-item
    search takes about 9 ms). A bad spec says nothing here: scoring a run reports it.
    """
    spec = meta.get("task") if isinstance(meta, dict) else None
    cls = task_class(spec.get("name")) if isinstance(spec, dict) else None
    if isinstance(spec, dict) and cls is not None and _kept(cls):  # others: built when scored
        with contextlib.suppress(Exception):
            checking_task(cls, spec, source)
