"""``math-v0``: multi-step word problems with exact integer answers.

A quantity starts at a value and goes through ``size`` operations stated in words (buys,
gives away, doubles, shares out...). Each step needs the previous value, so parts run in
sequence. With the sim backend the task is skill-modelled like the others; with a real LLM the
question is ordinary text and the checker compares integers exactly.

Example:
    >>> t = MathWordTask(seed=1, size=3)
    >>> parts = t.subtasks(3)
    >>> [p.size for p in parts], parts[-1].truth == t.answer, isinstance(t.answer, int)
    ([1, 1, 1], True, True)
    >>> t.check(t.answer), t.check(str(t.answer)), t.check(t.answer + 1)
    (True, True, False)
"""

from __future__ import annotations

from typing import Any

from orchestrace.tasks.base import Subtask, Task

__all__ = ["MathWordTask"]

_ITEMS = ["apples", "marbles", "coins", "stamps", "books", "shells", "cards", "beads"]
_NAMES = ["Ada", "Ben", "Chen", "Dara", "Eli", "Farah", "Gus", "Hana"]


class MathWordTask(Task):
    """``value_k`` after ``k`` worded operations on a starting amount."""

    name = "math-v0"
    wrong_kind = "int"
    unit = 3.0
    parallel = False
    max_size = 10_000

    def __init__(self, seed: int = 0, size: int = 4) -> None:
        super().__init__(seed, size)
        r = self.rng
        self.who = _NAMES[int(r.integers(len(_NAMES)))]
        self.item = _ITEMS[int(r.integers(len(_ITEMS)))]
        value = int(r.integers(10, 60))
        self.start = value
        self.values = [value]
        self.steps: list[str] = []
        for _ in range(size):
            kind = int(r.integers(5))
            if kind == 0:
                n = int(r.integers(2, 40))
                value, text = value + n, f"buys {n} more {self.item}"
            elif kind == 1 and value > 2:
                n = int(r.integers(1, value))
                value, text = value - n, f"gives {n} {self.item} to a friend"
            elif kind == 2:
                n = int(r.integers(2, 4))
                value, text = value * n, f"ends up with {n} times as many {self.item}"
            elif kind == 3:
                n = int(r.integers(2, 6))
                boxes = int(r.integers(2, 7))
                value, text = value + n * boxes, f"gets {boxes} boxes of {n} {self.item} each"
            else:
                n = int(r.integers(2, 5))
                keep = value // n
                value, text = (
                    keep,
                    (
                        f"shares the {self.item} equally among {n} people "
                        "(including themselves, dropping any remainder) and keeps "
                        "one share"
                    ),
                )
            self.values.append(value)
            self.steps.append(text)
        self.answer = value
        story = f". Then {self.who} ".join(self.steps)
        self.question = (
            f"{self.who} has {self.start} {self.item}. Then {self.who} {story}. "
            f"How many {self.item} does {self.who} have now? "
            "Reply with ANSWER: <integer>."
        )

    def _span(self, index: int, lo: int, hi: int) -> Subtask:
        story = f". Then {self.who} ".join(self.steps[lo:hi])
        prompt = (
            f"{self.who} has {self.values[lo]} {self.item}. Then {self.who} {story}. How many "
            f"{self.item} now? Reply with ANSWER: <integer>."
        )
        return Subtask(
            index, prompt, self.values[hi], hi - lo, {"lo": lo, "hi": hi, "start": self.values[lo]}
        )

    def span_truth(self, lo: int, hi: int) -> Any:
        """The amount after step ``hi``."""
        return self.values[hi]

    def combine(self, parts: list[Any]) -> Any:
        """The last part's amount."""
        return parts[-1] if parts else None

    def check(self, answer: Any) -> bool:
        """Exact integer match (``"42"`` and ``42.0`` count as 42)."""
        try:
            value = float(str(answer).strip().replace(",", ""))
        except ValueError:
            return False
        return bool(value == self.answer)
