"""Command-line plumbing for recorded verdicts: the ``--rerun-checks`` option and its warnings."""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from orchestrace.rewards.base import VerdictWarning

__all__ = ["add_rerun_checks", "verdict_warnings"]

RERUN_HELP = (
    "check recorded answers again instead of using the verdict recorded with the run; for "
    "tasks whose check runs the answer as code (humaneval-v0) this runs code from the trace, "
    "inside the sandbox only"
)


def add_rerun_checks(parser: argparse.ArgumentParser) -> None:
    """Add ``--rerun-checks`` to a sub-command."""
    parser.add_argument("--rerun-checks", action="store_true", help=RERUN_HELP)


@contextlib.contextmanager
def verdict_warnings() -> Iterator[None]:
    """Print each distinct verdict warning raised inside as one ``warning: ...`` line on stderr.

    Other warnings keep their usual handling.
    """
    seen: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("always", VerdictWarning)
        previous = warnings.showwarning

        def show(message: Any, category: Any, *args: Any, **kw: Any) -> None:
            if isinstance(category, type) and issubclass(category, VerdictWarning):
                text = str(message)
                if text not in seen:
                    seen.add(text)
                    print(f"warning: {text}", file=sys.stderr)
                return
            previous(message, category, *args, **kw)

        warnings.showwarning = show
        yield
