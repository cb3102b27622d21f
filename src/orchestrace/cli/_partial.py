"""Truncated recordings in the commands that read traces: never used without saying so.

A recording cut off by a crash (no footer; ``meta.partial``) keeps every complete event, but
its rewards and scores describe an unfinished run. ``analyze`` and ``convert`` print a warning
and go on; ``reward``, ``credit`` and ``export``, whose numbers could mislead a training run,
refuse it unless ``--partial`` is given.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from orchestrace.errors import TraceError, _short
from orchestrace.trace.model import Trace

__all__ = ["add_partial_flag", "refuse_truncated", "truncated", "warn_truncated"]


def add_partial_flag(parser: Any) -> None:
    """Add ``--partial`` (accept recordings cut off by a crash) to a command."""
    parser.add_argument(
        "--partial",
        action="store_true",
        help="accept recordings cut off by a crash (no footer): their scores describe an "
        "unfinished run",
    )


def truncated(trace: Trace) -> bool:
    """Whether ``trace`` is an incomplete recording (``meta.partial``)."""
    meta = trace.meta
    return isinstance(meta, dict) and bool(meta.get("partial"))


def _message(path: str, trace: Trace, several: bool, *, used: bool = False) -> str:
    where = f"{path} [{_short(trace.trace_id, 60)}]" if several else path
    if used:  # the command goes on with it
        return (
            f"{where} is truncated (no footer): used as recorded so far, so its scores "
            "describe an unfinished run (--partial accepts it without this warning)"
        )
    return f"{where} is truncated (no footer): scores may mislead; pass --partial to accept it"


def warn_truncated(path: str, traces: Iterable[Trace], *, partial: bool) -> None:
    """Print one warning line per truncated trace, unless ``partial`` accepts them."""
    found = [tr for tr in traces if truncated(tr)]
    if partial:
        return
    for tr in found:
        print(f"warning: {_message(path, tr, len(found) > 1, used=True)}", file=sys.stderr)


def refuse_truncated(path: str, traces: Iterable[Trace], *, partial: bool) -> None:
    """Raise on the first truncated trace, unless ``partial`` accepts them.

    Raises:
        TraceError: A trace is truncated and ``partial`` is off.
    """
    if partial:
        return
    found = [tr for tr in traces if truncated(tr)]
    if found:
        raise TraceError(_message(path, found[0], len(found) > 1))
