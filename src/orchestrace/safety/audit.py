"""Trace audit: small public ``check_*`` functions over a recorded trace.

Filled in below; ``audit_trace(trace)`` runs every check in :data:`AUDIT_CHECKS`.

Example:
    >>> from orchestrace.trace.build import TraceBuilder
    >>> b = TraceBuilder(task_id="demo")
    >>> _ = b.add("message", "orchestrator", to="w1")
    >>> audit_trace(b.build())
    []
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from orchestrace.errors import Problem
from orchestrace.trace.model import Trace

__all__ = ["AUDIT_CHECKS", "audit_trace"]

#: Every audit check, in the order they run.
AUDIT_CHECKS: tuple[Callable[[Trace], Iterator[Problem]], ...] = ()


def audit_trace(trace: Trace) -> list[Problem]:
    """Run every audit check on ``trace``; the findings (empty for a clean trace)."""
    return [p for check in AUDIT_CHECKS for p in check(trace)]
