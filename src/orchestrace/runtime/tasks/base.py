"""Tasks with ground truth that need decomposition, so success is measurable.

A :class:`Task` instance is generated from a seed. It splits into :class:`Subtask` parts whose
answers :meth:`Task.combine` puts together; :meth:`Task.check` grades a final answer. Each part
carries its ground truth and a difficulty: real models see only the prompt, the simulator uses
the truth to answer correctly with a probability that falls as the part grows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from orchestrace.errors import ConfigError

__all__ = ["Subtask", "Task", "parse_answer"]

_ANSWER = re.compile(r"ANSWER:\s*(.+?)\s*$", re.S | re.M)


_CODE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)


def parse_answer(text: str) -> Any:
    """The value after the last ``ANSWER:`` in ``text`` (JSON if it parses).

    Without one, the last fenced code block (answers to coding tasks); else ``None``.
    """
    found = _ANSWER.findall(text or "")
    if not found:
        code = _CODE.findall(text or "")
        return code[-1] if code else None
    raw = found[-1].strip().rstrip(".")
    try:
        return json.loads(raw)
    except ValueError:
        return raw.strip("\"'")


@dataclass(frozen=True)
class Subtask:
    """One part of a task.

    Attributes:
        index: Position among the parts.
        prompt: What a model is asked (no ground truth in it).
        truth: The correct answer of this part.
        size: How much work the part is (items, documents, hops).
        data: Structured inputs (JSON-serialisable).
    """

    index: int
    prompt: str
    truth: Any
    size: int
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def span(self) -> tuple[int, int]:
        """The items ``[lo, hi)`` of the whole task this part covers."""
        return int(self.data.get("lo", 0)), int(self.data.get("hi", self.size))

    def payload(self, task: Task) -> dict[str, Any]:
        """What the simulator needs: truth, error rate, and how to be wrong."""
        return {
            "task": task.name,
            "index": self.index,
            "truth": self.truth,
            "size": self.size,
            "hardness": task.hardness(self.size),
            "wrong": task.wrong_kind,
            "choices": task.choices,
        }


class Task:
    """A generated task instance.

    Attributes:
        name: Versioned id, e.g. ``arith-mapreduce-v0`` (bumped when results could change).
        seed: Instance seed.
        question: The full question.
        answer: Its ground truth.
    """

    name: ClassVar[str] = "task-v0"
    #: How wrong answers look: "int" (off by a little), "choice" (another of ``choices``).
    wrong_kind: ClassVar[str] = "int"
    #: Size at which a part's error rate equals (1 - skill) (the simulator's scale).
    unit: ClassVar[float] = 8.0
    #: Whether parts can run in parallel (False: each needs the previous part's answer).
    parallel: ClassVar[bool] = True

    def __init__(self, seed: int = 0, size: int = 64) -> None:
        if not isinstance(seed, int) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"{self.name}: seed must be an int and size an int >= 1")
        self.seed = seed
        self.size = size
        self.rng = np.random.default_rng([seed, sum(map(ord, self.name))])
        self.choices: list[Any] = []
        self.question = ""
        self.answer: Any = None

    # -- to implement: _span (tasks whose parts are item ranges), or whole and split ----
    def _span(self, index: int, lo: int, hi: int) -> Subtask:
        """The part covering items ``[lo, hi)``; its ``data`` holds ``lo`` and ``hi``."""
        raise NotImplementedError

    def whole(self) -> Subtask:
        """The task as a single part."""
        return self._span(0, 0, self.size)

    def split(self, part: Subtask, k: int) -> list[Subtask]:
        """Split ``part`` into ``k`` contiguous parts (fewer when it holds less work)."""
        lo, hi = part.data["lo"], part.data["hi"]
        b = self.bounds(hi - lo, k)
        return [self._span(i, lo + b[i], lo + b[i + 1]) for i in range(len(b) - 1)]

    def combine(self, parts: list[Any]) -> Any:
        """Put part answers (in part order) together into a final answer."""
        raise NotImplementedError

    def tools(self) -> dict[str, Any]:
        """Tools bound to this instance: name -> ``fn(args: dict) -> result``."""
        return {}

    # -- shared ---------------------------------------------------------------------
    def subtasks(self, k: int) -> list[Subtask]:
        """Split the whole task into ``k`` parts (fewer when there is less work than ``k``)."""
        return self.split(self.whole(), k)

    @staticmethod
    def bounds(n: int, k: int) -> list[int]:
        """Boundaries of ``k`` near-equal contiguous chunks of ``n`` items."""
        k = max(1, min(int(k), n)) if n else 1
        return [round(i * n / k) for i in range(k + 1)]

    def hardness(self, size: int) -> float:
        """Error-rate multiplier of a part of ``size``: grows quadratically with size."""
        return float((size / self.unit) ** 2)

    def span_truth(self, lo: int, hi: int) -> Any:
        """Ground truth of the part covering items ``[lo, hi)`` of the whole task."""
        raise NotImplementedError

    def check(self, answer: Any) -> bool:
        """Whether ``answer`` is the correct final answer."""
        return bool(answer == self.answer)

    def spec(self) -> dict[str, Any]:
        """How to regenerate this instance (recorded in trace meta)."""
        return {"name": self.name, "seed": self.seed, "size": self.size}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed}, size={self.size})"
