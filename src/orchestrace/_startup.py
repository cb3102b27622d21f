"""Quiet start-up of the command line.

While the ``orchestrace`` command loads its modules, a Ctrl-C ends it with one line and exit
code 130 instead of an import traceback, and a SIGTERM with one line and 143 instead of a
silent death; :func:`orchestrace.cli.main` puts its own handlers in place as soon as it can
report an interrupt itself. Imported as a library (any other
program), nothing changes.

:func:`child_signals` is called first thing in every process the package forks (worker pools,
snapshot copies): a copy inherits its parent's Python signal handlers, and a Ctrl-C or a
SIGTERM sent to the process group would otherwise raise inside each copy and print one
traceback per process. The parent reports the interrupt once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading


def _quiet_exit(signum: int, frame: object) -> None:
    os.write(2, b"interrupted\n")
    os._exit(130)


def _quiet_term(signum: int, frame: object) -> None:
    os.write(2, b"terminated\n")
    os._exit(143)


def child_signals() -> None:
    """In a forked child process: SIGINT and SIGTERM end it at once, quietly (the default).

    A signal the command was started ignoring (``nohup``, a background job) stays ignored.

    Example:
        >>> import os, signal
        >>> pid = os.fork()
        >>> if pid == 0:  # the child
        ...     child_signals()
        ...     os._exit(0 if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL else 1)
        >>> os.waitpid(pid, 0)[1]
        0
    """
    if threading.current_thread() is not threading.main_thread():  # pragma: no cover
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is not signal.SIG_IGN:  # ignored (nohup, `&`): still ignored
            signal.signal(sig, signal.SIG_DFL)


def _starting_cli() -> bool:
    """Whether this process is the ``orchestrace`` command (the script or ``python -m``).

    Not a worker that ``multiprocessing`` started with ``spawn`` or ``forkserver``: it is
    given the command's ``sys.argv``, but its interpreter runs ``-c from multiprocessing...``.
    """
    orig = getattr(sys, "orig_argv", [])
    if "-c" in orig[:-1] and orig[orig.index("-c") + 1].startswith("from multiprocessing"):
        return False
    argv0 = sys.argv[0] if getattr(sys, "argv", None) else ""
    # `python -m orchestrace` shows "-m" while the package loads and the path of its
    # __main__.py once it runs; the script shows its name
    return (
        argv0 == "-m"
        or os.path.basename(argv0) == "orchestrace"
        or argv0.endswith(os.path.join("orchestrace", "__main__.py"))
    )


if _starting_cli() and threading.current_thread() is threading.main_thread():
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _quiet_exit)
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _quiet_term)
    except (ValueError, OSError):  # pragma: no cover - no signals here
        pass
