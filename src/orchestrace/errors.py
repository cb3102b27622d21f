"""One error tree for orchestrace.

Every error message says what went wrong, where, and what to do about it.

Example:
    >>> from orchestrace.errors import Problem, TraceValidationError
    >>> p = Problem("duplicate-id", "duplicate event id 'e1'", "give every event a unique id",
    ...             path="$.events[3].id", event_id="e1")
    >>> str(p)
    "$.events[3].id: duplicate event id 'e1'; give every event a unique id"
    >>> err = TraceValidationError([p], source="t.json")
    >>> err.problems[0].code
    'duplicate-id'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

__all__ = [
    "ConfigError",
    "OrchestraceError",
    "Problem",
    "RuntimeError_",
    "TraceError",
    "TraceFormatError",
    "TraceValidationError",
]

Severity = Literal["error", "semantic", "warning"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding of a check: what is wrong, where, and how to fix it.

    Attributes:
        code: Stable machine-readable kind, e.g. ``"dangling-edge"``.
        message: What is wrong, naming the offending values.
        fix: What to do about it.
        path: JSON path of the place, e.g. ``"$.events[3].type"`` (``"$"`` for the whole trace).
        event_id: Id of the event concerned, when there is one.
        severity: ``"error"`` makes a trace invalid; ``"warning"`` does not; ``"semantic"``
            is an orchestrace rule (no cycles, no return without a spawn...) broken by an
            imported trace that is valid under the format it came in: listed, not fatal.
        source: File (and line) the trace came from, when known.
    """

    code: str
    message: str
    fix: str
    path: str = "$"
    event_id: str | None = None
    severity: Severity = "error"
    source: str | None = None

    def __str__(self) -> str:
        where = self.path
        if self.event_id is not None and f"'{self.event_id}'" not in self.message:
            where = f"{where} (event '{_short(self.event_id)}')"
        prefix = f"{self.source}: " if self.source else ""
        tag = f"{self.severity}: " if self.severity != "error" else ""
        return f"{prefix}{where}: {tag}{self.message}; {self.fix}"

    def at(self, source: str) -> Problem:
        """Return a copy of this problem attributed to ``source`` (a file name)."""
        return replace(self, source=source)


def _short(text: str, limit: int = 80) -> str:
    """Shorten a possibly hostile string for display (no newlines, bounded length)."""
    text = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return text if len(text) <= limit else text[: limit - 3] + "..."


class OrchestraceError(Exception):
    """Base class of every error orchestrace raises on purpose."""


class TraceError(OrchestraceError):
    """A trace could not be read, written or used."""


class TraceFormatError(TraceError):
    """A file is not parseable as a trace (malformed JSON, truncated file, binary data).

    Attributes:
        source: The file (or ``"<bytes>"``).
        where: Human-readable location, e.g. ``"line 3, column 17 (byte 120)"``.
        reason: What the parser found.
        fix: What to do.
    """

    def __init__(self, source: str, where: str, reason: str, fix: str) -> None:
        self.source = source
        self.where = where
        self.reason = reason
        self.fix = fix
        super().__init__(f"{source}: {where}: {reason}; {fix}")


class TraceValidationError(TraceError):
    """A trace breaks one or more rules; ``problems`` lists every one found.

    Attributes:
        problems: The errors (and warnings) found, each naming place and fix.
        source: The file the trace came from, when known.
    """

    def __init__(self, problems: Sequence[Problem], source: str | None = None) -> None:
        self.source = source
        self.problems = [p.at(source) if source and not p.source else p for p in problems]
        errors = [p for p in self.problems if p.severity == "error"]
        head = f"{len(errors)} problem(s) in trace"
        if source:
            head += f" {source}"
        lines = [str(p) for p in errors[:20]]
        if len(errors) > 20:
            lines.append(
                f"... and {len(errors) - 20} more (run `orchestrace validate` to list all)"
            )
        super().__init__(head + ":\n  " + "\n  ".join(lines))


class ConfigError(OrchestraceError, ValueError):
    """A configuration value is missing, out of range or inconsistent with another."""


class RuntimeError_(OrchestraceError):
    """The orchestration runtime failed in a way the run could not record as an event."""


def warning_line(problem: Problem) -> str:
    """``problem`` as a line for stderr, tagged ``warning:`` exactly once.

    Example:
        >>> warning_line(Problem("x", "odd", "fix it", severity="warning"))
        '$: warning: odd; fix it'
        >>> warning_line(Problem("x", "bad", "fix it"))
        'warning: $: bad; fix it'
    """
    text = str(problem)
    return text if problem.severity == "warning" else f"warning: {text}"
