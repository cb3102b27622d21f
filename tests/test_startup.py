"""Which process is the ``orchestrace`` command (it reports a Ctrl-C while loading)."""

import sys

import pytest

from orchestrace import _startup

PY = sys.executable


@pytest.mark.parametrize(
    ("orig_argv", "argv", "cli"),
    [
        ([PY, "-m", "orchestrace", "demo"], ["-m", "demo"], True),
        ([PY, "-m", "orchestrace", "demo"], ["/x/orchestrace/__main__.py", "demo"], True),
        ([PY, "/venv/bin/orchestrace", "demo"], ["/venv/bin/orchestrace", "demo"], True),
        ([PY, "script.py"], ["script.py"], False),
        ([PY, "-c", "import orchestrace"], ["-c"], False),
        # workers started by multiprocessing (spawn, forkserver) get the command's argv
        (
            [PY, "-B", "-c", "from multiprocessing.forkserver import main; main(3, 4, [])"],
            ["/x/orchestrace/__main__.py", "bench"],
            False,
        ),
        (
            [PY, "-c", "from multiprocessing.spawn import spawn_main; spawn_main()", "--mp"],
            ["/venv/bin/orchestrace", "bench"],
            False,
        ),
    ],
)
def test_starting_cli(monkeypatch, orig_argv, argv, cli):
    monkeypatch.setattr(sys, "orig_argv", orig_argv)
    monkeypatch.setattr(sys, "argv", argv)
    assert _startup._starting_cli() is cli


@pytest.mark.parametrize(
    ("sig", "code", "line"),
    [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated")],
)
def test_a_signal_while_the_command_loads_is_one_line(sig, code, line):
    """Before ``main`` runs (the package still loading), as ``python -m orchestrace`` is."""
    import subprocess

    script = (
        "import sys; sys.argv = ['-m']\n"
        "import os, signal, time, orchestrace\n"
        f"os.kill(os.getpid(), signal.{sig}); time.sleep(30); print('carried on')\n"
    )
    done = subprocess.run(
        [PY, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr, done.stdout) == (code, line + "\n", "")
