"""JSON lines on standard output that every JSON parser reads, whatever the numbers.

Python's ``json`` writes a NaN or an infinity as ``NaN`` / ``Infinity``, which strict parsers
(``jq``, browsers, most languages) refuse. A summary can hold one legitimately: the durations
of a valid trace can add up beyond the largest double, a confidence interval of one seed is
undefined. The ``--json`` outputs of the commands write such a number as ``null``
(:func:`orchestrace._safe.strict_json`) and say so once on standard error, naming the first.

Example:
    >>> lines = JsonLines("analyze --json")
    >>> lines.dumps({"trace_id": "t", "work_s": float("inf"), "n": 2})
    '{"trace_id": "t", "work_s": null, "n": 2}'
    >>> lines.replaced, lines.first
    (1, 'work_s = inf')
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from orchestrace._safe import strict_json

__all__ = ["JsonLines"]


class JsonLines:
    """Encode rows as strict JSON; non-finite numbers become ``null`` (see :meth:`finish`).

    Args:
        what: The output, named in the warning (e.g. ``"analyze --json"``).
        compact: No spaces after separators.
        default: As :func:`json.dumps`'s ``default``.
    """

    def __init__(
        self, what: str, *, compact: bool = False, default: Callable[[Any], Any] | None = None
    ) -> None:
        self.what = what
        self.separators = (",", ":") if compact else None
        self.default = default
        self.replaced = 0
        self.first = ""

    def dumps(self, obj: Any) -> str:
        """One JSON text for ``obj``, without a newline."""
        text, found = strict_json(obj, separators=self.separators, default=self.default)
        if found:
            self.replaced += len(found)
            self.first = self.first or found[0]
        return text

    def finish(self) -> None:
        """Say on standard error how many numbers were written as ``null``, if any."""
        if self.replaced:
            print(
                f"warning: {self.what}: {self.replaced} number(s) are not finite (first: "
                f"{self.first[:200]}) and were written as null: JSON has no NaN or infinity",
                file=sys.stderr,
            )
