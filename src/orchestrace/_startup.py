"""Quiet start-up of the command line.

While the ``orchestrace`` command loads its modules, a Ctrl-C ends it with one line and exit
code 130 instead of an import traceback; :func:`orchestrace.cli.main` puts the ordinary
handler back as soon as it can report an interrupt itself. Imported as a library (any other
program), nothing changes.
"""

from __future__ import annotations

import os
import signal
import sys
import threading


def _quiet_exit(signum: int, frame: object) -> None:
    os.write(2, b"interrupted\n")
    os._exit(130)


def _starting_cli() -> bool:
    argv0 = sys.argv[0] if getattr(sys, "argv", None) else ""
    # `python -m orchestrace` shows "-m" while the package loads; the script shows its name
    return argv0 == "-m" or os.path.basename(argv0) == "orchestrace"


if _starting_cli() and threading.current_thread() is threading.main_thread():
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _quiet_exit)
    except (ValueError, OSError):  # pragma: no cover - no signals here
        pass
