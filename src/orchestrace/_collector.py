"""Pausing Python's cyclic garbage collector around bulk steps.

Decoding, generating, simulating or writing a trace allocates millions of objects that all
live until the step ends. A collection triggered meanwhile frees nothing, yet it rescans
every young container: a column of a million values, or the tuple of a trace's events, is
walked by each collection of its generation (on 1,000,000 events this was 0.7 s of
``orchestrace convert`` to Parquet and 1.6 s of ``orchestrace generate``). Reference
counting frees memory as usual while the collector is paused; only reference cycles wait
until it is back on.

:func:`paused` nests: the collector is switched back on when the outermost step ends, and
only when it was on before that step began. It pauses only in the main thread: the
collector is one per process, and pauses overlapping in several threads could keep it off
for every thread indefinitely, so a step running in another thread leaves it alone.

Example:
    >>> import gc
    >>> was = gc.isenabled()
    >>> with paused():
    ...     with paused():
    ...         gc.isenabled()
    ...     gc.isenabled()
    False
    False
    >>> gc.isenabled() == was
    True
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Iterator

__all__ = ["paused"]

_DEPTH = [0]  # main-thread steps now pausing the collector
_WAS_ON = [False]  # whether it was on when the outermost of them began


@contextlib.contextmanager
def paused(when: bool = True) -> Iterator[None]:
    """Pause the cyclic garbage collector for a bulk step (``when`` false: leave it alone).

    Usable as a decorator too: ``@paused()``. Do not wrap a generator that yields to its
    caller, nor code that runs the caller's own iterables: the caller's work would run with
    the collector off. In a thread other than the main one this changes nothing. A
    ``gc.disable()`` made inside a step is undone when the outermost step ends (the
    collector is back as it was before that step); a process forked inside a step keeps it
    paused until the copy of that step ends there.

    Example:
        >>> import gc
        >>> @paused()
        ... def bulk() -> bool:
        ...     return gc.isenabled()
        >>> bulk()
        False
    """
    if not when or threading.current_thread() is not threading.main_thread():
        yield
        return
    counted = False
    try:
        # counted inside the ``try``: an interrupt between the steps below cannot leave the
        # collector off with no step left to switch it back on
        if _DEPTH[0] == 0:
            _WAS_ON[0] = gc.isenabled()
        _DEPTH[0] += 1
        counted = True
        gc.disable()
        yield
    finally:
        if counted:
            _DEPTH[0] -= 1
            if _DEPTH[0] == 0 and _WAS_ON[0]:
                gc.enable()


_FORKED_FROM_MAIN = [True]


def _before_fork() -> None:
    _FORKED_FROM_MAIN[0] = threading.current_thread() is threading.main_thread()


def _after_fork_in_child() -> None:
    """A child forked by another thread has none of the main thread's steps: end their pause."""
    if not _FORKED_FROM_MAIN[0] and _DEPTH[0]:
        _DEPTH[0] = 0
        if _WAS_ON[0]:
            gc.enable()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
