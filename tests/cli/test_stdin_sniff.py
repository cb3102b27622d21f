"""A piped input that cannot be a trace is refused at its first bytes, not after gigabytes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrace.errors import TraceFormatError
from orchestrace.io import detect_format
from orchestrace.io._common import read_bytes


def _validate_stdin(feed: bytes) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "ORCHESTRACE_NO_REEXEC": "1"}
    return subprocess.run(
        [sys.executable, "-m", "orchestrace", "validate", "-"],
        input=feed,
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(("feed", "byte"), [(b"\0" * (3 << 20), "0x00"), (b"  \n\tPK\3\4", "0x50")])
def test_binary_on_stdin_is_refused_at_once(feed: bytes, byte: str) -> None:
    got = _validate_stdin(feed)
    assert got.returncode == 1
    at = len(feed) - len(feed.lstrip(b" \t\r\n")) + 1
    assert (got.stdout + got.stderr).decode() == (
        f"-: byte {at}: not a JSON or JSONL trace (it begins with byte {byte}); give a trace "
        "written as JSON or JSONL (a Parquet dataset is read from its directory)\n"
    )


def test_a_fifo_of_text_is_still_read_where_text_is_wanted(tmp_path: Path) -> None:
    fifo = tmp_path / "key"
    os.mkfifo(fifo)
    pid = os.fork()
    if pid == 0:  # the writer
        try:
            with open(fifo, "wb") as fh:
                fh.write(b"sk-not-json\n")
        finally:
            os._exit(0)
    try:
        assert bytes(read_bytes(fifo, json=False)) == b"sk-not-json\n"
    finally:
        os.waitpid(pid, 0)


def test_an_empty_input_path_is_named() -> None:
    with pytest.raises(TraceFormatError, match="the input path is empty; give a trace file"):
        detect_format("")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="no /proc here")
def test_a_file_whose_size_says_nothing_is_read() -> None:
    """Files of /proc report size 0: they are read, not called empty."""
    with pytest.raises(TraceFormatError, match=r"not a JSON or JSONL trace \(it begins with byte"):
        read_bytes("/proc/self/status")
