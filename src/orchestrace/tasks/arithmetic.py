"""``arith-mapreduce-v0``: a multi-step arithmetic map-reduce.

Compute ``sum((a * x + b) % m for x in xs)`` over ``size`` numbers. Parts are contiguous chunks
(map); the final answer is the sum of the part sums (reduce).

Example:
    >>> t = ArithmeticTask(seed=1, size=12)
    >>> parts = t.subtasks(3)
    >>> t.combine([p.truth for p in parts]) == t.answer, [p.size for p in parts]
    (True, [4, 4, 4])
"""

from __future__ import annotations

import ast
import operator
from typing import Any

from orchestrace.tasks.base import Subtask, Task

__all__ = ["ArithmeticTask", "safe_eval"]

_OPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Mod: operator.mod,
    ast.FloorDiv: operator.floordiv,
    ast.USub: operator.neg,
}


def safe_eval(expr: str) -> int:
    """Evaluate an integer arithmetic expression (+ - * % // and parentheses only).

    Raises:
        ValueError: Anything else, or a number too large.
    """
    if len(expr) > 2000:
        raise ValueError("expression too long (max 2000 characters)")

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = ev(node.left), ev(node.right)
            if type(node.op) is ast.Mult and abs(left) * abs(right) > 10**18:
                raise ValueError("number too large")
            return int(_OPS[type(node.op)](left, right))
        if isinstance(node, ast.UnaryOp) and type(node.op) is ast.USub:
            return -ev(node.operand)
        raise ValueError(f"unsupported syntax: {type(node).__name__}")

    try:
        return ev(ast.parse(expr, mode="eval"))
    except (SyntaxError, ZeroDivisionError, RecursionError) as err:
        raise ValueError(f"cannot evaluate {expr[:60]!r}: {err}") from None


class ArithmeticTask(Task):
    """Sum of ``(a*x + b) mod m`` over generated numbers."""

    name = "arith-mapreduce-v0"

    def __init__(self, seed: int = 0, size: int = 64) -> None:
        super().__init__(seed, size)
        self.a, self.b, self.m = (int(v) for v in self.rng.integers([3, 1, 97], [30, 50, 1000]))
        self.xs = [int(v) for v in self.rng.integers(10, 1000, size)]
        self.answer = self._sum(self.xs)
        self.question = (
            f"Compute the sum of ({self.a}*x + {self.b}) mod {self.m} over these {size} "
            f"numbers: {self.xs}. Reply with ANSWER: <integer>."
        )

    def _sum(self, xs: list[int]) -> int:
        return int(sum((self.a * x + self.b) % self.m for x in xs))

    def _part(self, index: int, xs: list[int], lo: int = 0) -> Subtask:
        prompt = (
            f"Compute the sum of ({self.a}*x + {self.b}) mod {self.m} for x in {xs}. "
            "Reply with ANSWER: <integer>."
        )
        return Subtask(
            index, prompt, self._sum(xs), len(xs), {"xs": xs, "lo": lo, "hi": lo + len(xs)}
        )

    def whole(self) -> Subtask:
        """The task as a single part."""
        return self._part(0, self.xs)

    def split(self, part: Subtask, k: int) -> list[Subtask]:
        """Split ``part`` into ``k`` contiguous parts."""
        xs, lo = part.data["xs"], part.data["lo"]
        b = self.bounds(len(xs), k)
        return [self._part(i, xs[b[i] : b[i + 1]], lo + b[i]) for i in range(len(b) - 1)]

    def span_truth(self, lo: int, hi: int) -> Any:
        """Sum over numbers ``lo..hi-1``."""
        return self._sum(self.xs[lo:hi])

    def combine(self, parts: list[Any]) -> Any:
        """Put part answers together (in part order)."""
        try:
            return int(sum(int(p) for p in parts))
        except (TypeError, ValueError):
            return None

    def tools(self) -> dict[str, Any]:
        """Tools bound to this instance."""
        return {"calc": lambda args: safe_eval(str(args.get("expression", "")))}
