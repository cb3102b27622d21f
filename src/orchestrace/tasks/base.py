"""Tasks with ground truth that need decomposition, so success is measurable.

A :class:`Task` instance is generated from a seed. It splits into :class:`Subtask` parts whose
answers :meth:`Task.combine` puts together; :meth:`Task.check` grades a final answer and
:meth:`Task.verdict` describes that grade as recorded with a run (``meta.result.verdict``).
Each part carries its ground truth and a difficulty: real models see only the prompt, the
simulator uses the truth to answer correctly with a probability that falls as the part grows.

Sizes and seeds are bounded (:data:`MAX_SEED`, :attr:`Task.max_size`) so that a hostile or
mistaken size fails at once with a :class:`~orchestrace.errors.ConfigError` instead of building
a task for minutes.

Example:
    >>> check_spec("arith-mapreduce-v0", 1, 10**8, limit=100_000)
    Traceback (most recent call last):
    ...
    orchestrace.errors.ConfigError: --task-size: task size 100000000 is too large for arith-mapreduce-v0 (the limit is 100000); use a size from 1 to 100000
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from orchestrace.errors import ConfigError

__all__ = [
    "MAX_SEED",
    "Subtask",
    "Task",
    "Verdict",
    "answer_digest",
    "check_spec",
    "parse_answer",
    "recorded_verdict",
    "unknown_verdict",
]

#: Largest task seed (seeds are 64-bit).
MAX_SEED = 2**63 - 1
#: Largest task size unless a task sets its own :attr:`Task.max_size`.
DEFAULT_MAX_SIZE = 100_000


#: The checker's verdict on a run's final answer, recorded as ``meta.result.verdict``. Keys:
#:
#: * ``passed``: ``True``/``False``; ``None`` when the answer was not checked (``reason`` says
#:   why, e.g. checking it would run code the user did not ask to run);
#: * ``checker``: the task (versioned id) whose checker gave the verdict;
#: * ``reason``: why, in words;
#: * ``isolation``: how the checker isolated the answer it ran (``None`` or ``""``: the check
#:   only compares values and runs nothing).
#:
#: A checker may add keys of its own (time taken, calls made...); they are recorded as given.
Verdict = dict[str, Any]


def answer_digest(answer: Any) -> str:
    """SHA-256 of ``answer`` in canonical JSON: ties a recorded verdict to the answer it judged.

    Example:
        >>> answer_digest(42) == answer_digest(42), answer_digest(42) == answer_digest("42")
        (True, False)
    """
    text = json.dumps(answer, sort_keys=True, default=repr, ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def unknown_verdict(checker: str, reason: str) -> Verdict:
    """A verdict for an answer that was not checked (``passed`` is ``None``)."""
    return {"passed": None, "checker": checker, "reason": reason, "isolation": None}


def recorded_verdict(trace: Any) -> Verdict | None:
    """The checker's verdict recorded with a run (``meta.result.verdict``), as recorded.

    ``trace`` is anything with a ``meta`` mapping (a :class:`~orchestrace.trace.model.Trace`).
    ``None`` when there is none, or when it is malformed (not an object, or ``passed`` is not
    ``true``, ``false`` or ``null``). See :data:`Verdict`.

    Example:
        >>> from types import SimpleNamespace
        >>> recorded_verdict(SimpleNamespace(meta={"result": {"verdict": {"passed": True}}}))
        {'passed': True}
        >>> recorded_verdict(SimpleNamespace(meta={"result": {"verdict": {"passed": "yes"}}}))
    """
    meta = getattr(trace, "meta", None)
    result = meta.get("result") if isinstance(meta, dict) else None
    raw = result.get("verdict") if isinstance(result, dict) else None
    if not isinstance(raw, dict) or "passed" not in raw:
        return None
    passed = raw["passed"]
    if passed is not None and not isinstance(passed, bool):
        return None
    return dict(raw)


def check_spec(
    name: str, seed: Any, size: Any, *, limit: int = DEFAULT_MAX_SIZE, source: str | None = None
) -> None:
    """Validate a task seed and size before anything is built.

    Args:
        name: The task id (for messages).
        seed: The instance seed: an integer from 0 to :data:`MAX_SEED`.
        size: The instance size: an integer from 1 to ``limit`` (``None``: the task's default).
        limit: The task's largest size.
        source: Where seed and size came from, e.g. ``"trace t1: meta.task"`` (the messages
            then name ``meta.task.seed``/``meta.task.size``); default: the options
            ``--task-seed`` and ``--task-size``.

    Raises:
        ConfigError: A seed or size of the wrong type or out of range (the message names the
            place and the allowed range).
    """
    seed_at = f"{source}.seed" if source else "--task-seed"
    size_at = f"{source}.size" if source else "--task-size"
    if type(seed) is not int:
        raise ConfigError(
            f"{seed_at}: the task seed must be an integer, got {_show(seed)}; "
            f"use an integer from 0 to {MAX_SEED}"
        )
    if not 0 <= seed <= MAX_SEED:
        raise ConfigError(
            f"{seed_at}: task seed {_show(seed)} is out of range; "
            f"use an integer from 0 to {MAX_SEED}"
        )
    if size is None:
        return
    if type(size) is not int:
        raise ConfigError(
            f"{size_at}: the task size must be an integer, got {_show(size)}; "
            f"use a size from 1 to {limit}"
        )
    if size < 1:
        raise ConfigError(
            f"{size_at}: task size {_show(size)} is too small for {name}; "
            f"use a size from 1 to {limit}"
        )
    if size > limit:
        raise ConfigError(
            f"{size_at}: task size {_show(size)} is too large for {name} (the limit is "
            f"{limit}); use a size from 1 to {limit}"
        )


def _show(value: Any, limit: int = 40) -> str:
    """A short, single-line rendering of a possibly hostile value."""
    if type(value) is int:
        text = str(value) if value.bit_length() <= 256 else f"with {value.bit_length()} bits"
    elif isinstance(value, str | float | bool):
        text = f"{type(value).__name__} {value!r}"
    else:
        text = f"a {type(value).__name__}"
    text = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
    #: Largest instance size (building a task is at most linear in its size).
    max_size: ClassVar[int] = DEFAULT_MAX_SIZE
    #: Whether :meth:`check` runs the answer as a program. Such a check is never repeated on an
    #: answer read from a trace unless the user asks for it explicitly (and then only in the
    #: sandbox); scoring a recorded run uses the verdict recorded with it.
    executes_code: ClassVar[bool] = False

    def __init__(self, seed: int = 0, size: int = 64) -> None:
        check_spec(self.name, seed, size, limit=self.max_size)
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

    def check_isolation(self) -> str | None:
        """How :meth:`check` isolates the answer it runs (``None``: it runs nothing).

        Tasks whose check executes code override this to describe the sandbox in use.
        """
        return "unknown" if self.executes_code else None

    def verdict(self, answer: Any) -> Verdict:
        """Check ``answer`` now and describe the outcome (what a run records).

        A missing answer (``None``) fails without running the checker.
        """
        if answer is None:
            return {
                "passed": False,
                "checker": self.name,
                "reason": "no answer",
                "isolation": None,
            }
        passed = bool(self.check(answer))
        return {
            "passed": passed,
            "checker": self.name,
            "reason": f"{'accepted' if passed else 'rejected'} by the {self.name} checker",
            "isolation": self.check_isolation(),
        }

    def spec(self) -> dict[str, Any]:
        """How to regenerate this instance (recorded in trace meta)."""
        return {"name": self.name, "seed": self.seed, "size": self.size}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed}, size={self.size})"
