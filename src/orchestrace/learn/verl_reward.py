"""Reward function for verl on datasets written by ``orchestrace export --to verl``.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` for each
rollout. This one reads the final answer from the completion (the value after the last
``ANSWER:``, see :func:`orchestrace.tasks.base.parse_answer`) and scores it against
``ground_truth`` with the task's own checker: 1.0 when accepted, 0.0 otherwise. Tasks whose
checker runs the answer as a program (``humaneval-v0``) are never run here: they score 0.0,
with the reason in :func:`score_details` and a warning.

verl configuration::

    custom_reward_function:
      path: <site-packages>/orchestrace/learn/verl_reward.py   # python -c "import
      name: compute_score                                    # orchestrace.learn.verl_reward
                                                             # as m; print(m.__file__)"

Example:
    >>> compute_score("orchestrace/arith-mapreduce-v0", "I add them up. ANSWER: 42", "42")
    1.0
    >>> score_details("orchestrace/arith-mapreduce-v0", "no idea", "42")
    (0.0, 'no ANSWER: in the completion')
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import warnings
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.tasks import TASKS, make_task
from orchestrace.tasks.base import parse_answer

__all__ = ["DATA_SOURCE_PREFIX", "compute_score", "data_sources", "score_details"]

#: ``data_source`` of exported rows: this prefix and the task's name.
DATA_SOURCE_PREFIX = "orchestrace/"


def data_sources() -> list[str]:
    """Every ``data_source`` :func:`compute_score` handles (one per registered task).

    Example:
        >>> "orchestrace/multihop-v0" in data_sources()
        True
    """
    return [DATA_SOURCE_PREFIX + name for name in sorted(TASKS)]


@functools.lru_cache(maxsize=64)
def _task(name: str, seed: int | None, size: int | None) -> Any:
    if seed is None:
        seed = 0
    return make_task(name, seed, size)


def _spec(extra_info: Any) -> tuple[int | None, int | None]:
    spec = extra_info.get("task") if isinstance(extra_info, dict) else None
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except ValueError:
            spec = None
    if not isinstance(spec, dict):
        return None, None
    seed, size = spec.get("seed"), spec.get("size")
    return (
        int(seed) if isinstance(seed, int) else None,
        int(size) if isinstance(size, int) else None,
    )


def score_details(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None
) -> tuple[float, str]:
    """The score of :func:`compute_score` and the reason for it.

    Raises:
        ConfigError: ``data_source`` is not one of :func:`data_sources`.

    Example:
        >>> score_details("orchestrace/math-v0", "ANSWER: 7", "8")
        (0.0, 'rejected by the math-v0 checker')
    """
    name = (
        data_source[len(DATA_SOURCE_PREFIX) :] if data_source.startswith(DATA_SOURCE_PREFIX) else ""
    )
    if name not in TASKS:
        raise ConfigError(
            f"data_source {data_source!r} is not an orchestrace task; expected one of: "
            f"{', '.join(data_sources())}"
        )
    if TASKS[name].executes_code:
        return 0.0, (
            f"{name} checks answers by running them as code; not run inside the reward "
            "function (score the rollouts with the task's sandboxed checker instead)"
        )
    answer = parse_answer(solution_str or "")
    if answer is None:
        return 0.0, "no ANSWER: in the completion"
    truth = ground_truth
    if isinstance(truth, str):
        with contextlib.suppress(ValueError):
            truth = json.loads(truth)
    task = copy.copy(_task(name, *_spec(extra_info)))
    task.answer = truth
    passed = bool(task.check(answer))
    return (1.0 if passed else 0.0), f"{'accepted' if passed else 'rejected'} by the {name} checker"


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None
) -> float:
    """Score one verl rollout: 1.0 when the completion's answer passes the task's checker, else 0.0.

    Args:
        data_source: ``orchestrace/<task>`` as written by the verl export.
        solution_str: The decoded completion.
        ground_truth: ``reward_model.ground_truth`` (the task's truth as JSON).
        extra_info: The row's ``extra_info`` (its ``task`` spec picks the instance).

    Raises:
        ConfigError: ``data_source`` is not one of :func:`data_sources`.

    Example:
        >>> compute_score("orchestrace/multihop-v0", 'ANSWER: "entity_3"', '"entity_3"')
        1.0
    """
    score, reason = score_details(data_source, solution_str, ground_truth, extra_info)
    if reason.startswith(data_source[len(DATA_SOURCE_PREFIX) :] + " checks answers"):
        warnings.warn(reason, stacklevel=2)
    return score
