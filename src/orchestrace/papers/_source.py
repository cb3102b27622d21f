r"""Read a paper-pool file's bytes and decode them, naming every problem's place and fix.

A pool file is read whole (at most :data:`MAX_BYTES`), from a regular file or a pipe (read as
the trace readers read one: a FIFO no program opens for writing within
``ORCHESTRACE_FIFO_WRITER_S`` seconds, or a pipe idle for ``ORCHESTRACE_PIPE_IDLE_S``, is
refused), then decoded as UTF-8
without a byte-order mark: each line with other bytes is reported. Public through
:mod:`orchestrace.papers.check`.

Example:
    >>> text, problems = decode(b"key,year\na,2025\n", "papers.csv")
    >>> text.splitlines(), problems
    (['key,year', 'a,2025'], [])
"""

from __future__ import annotations

import io
import os
import stat
import sys
from collections.abc import Sequence

from orchestrace.errors import OrchestraceError, Problem, TraceFormatError
from orchestrace.io._common import FIFO_WRITER_WAIT_S, _is_named_fifo, _PipeReader, env_number

__all__ = ["MAX_BYTES", "PaperPoolError", "decode", "fail", "problem", "read_source"]

PathLike = str | os.PathLike[str]
#: Largest pool file read (bytes); a paper pool is a few hundred kilobytes.
MAX_BYTES = 64 << 20
#: Lines of non-UTF-8 bytes reported one by one before the rest are summarised.
_MAX_ENCODING_LINES = 10
_BOM = b"\xef\xbb\xbf"
#: Seconds a pipe may stay silent (``$ORCHESTRACE_PIPE_IDLE_S`` sets it, read when used).
_PIPE_IDLE_S = 30.0


class PaperPoolError(OrchestraceError):
    """A pool file cannot be used; ``problems`` lists every problem found.

    Attributes:
        problems: One :class:`~orchestrace.errors.Problem` per problem, each naming the file,
            line, column and fix.

    Example:
        >>> err = PaperPoolError([Problem("x", "is a directory", "pass a CSV file",
        ...                               path="file", source="d")])
        >>> str(err)
        'd: file: is a directory; pass a CSV file'
    """

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        lines = [str(p) for p in self.problems[:20]]
        if len(self.problems) > 20:
            lines.append(
                f"... and {len(self.problems) - 20} more "
                "(`orchestrace papers check` lists every one)"
            )
        if len(lines) == 1:
            super().__init__(lines[0])
        else:
            head = f"{len(self.problems)} problems in the paper pool"
            super().__init__(head + ":\n  " + "\n  ".join(lines))


# ---------------------------------------------------------------------- reading bytes
def problem(source: str, where: str, message: str, fix: str, code: str) -> Problem:
    if not source.isprintable():  # a file name with control characters stays on one line
        source = source.encode("unicode_escape", "backslashreplace").decode("ascii")
    return Problem(code, message, fix, path=where, source=source)


def fail(source: str, message: str, fix: str, code: str = "unreadable") -> PaperPoolError:
    return PaperPoolError([problem(source, "file", message, fix, code)])


def _read_pipe(fd: int, src: str, named: bool) -> bytes:
    """Read a pipe or FIFO to its end as the trace readers do (one reader, one behaviour).

    A named FIFO that no program opens for writing gives up after
    ``ORCHESTRACE_FIFO_WRITER_S`` seconds (3 by default); a pipe that stays silent after
    ``ORCHESTRACE_PIPE_IDLE_S`` (30).
    """
    wait = env_number("ORCHESTRACE_FIFO_WRITER_S", FIFO_WRITER_WAIT_S) if named else None
    idle = env_number("ORCHESTRACE_PIPE_IDLE_S", _PIPE_IDLE_S)
    try:
        with io.BufferedReader(_PipeReader(os.dup(fd), src, idle, wait), 1 << 16) as fh:
            data = fh.read(MAX_BYTES + 1)
    except TraceFormatError as err:
        raise fail(src, err.reason, err.fix) from None
    if len(data) > MAX_BYTES:
        raise fail(src, f"longer than {MAX_BYTES:,} bytes", "this is not a paper pool")
    return data


def read_source(path: PathLike) -> bytes:
    """Return the bytes of a pool file (``"-"``: standard input).

    Pipes and FIFOs are read to their end, giving up after ``ORCHESTRACE_PIPE_IDLE_S``
    seconds (default 30) without data, or after ``ORCHESTRACE_FIFO_WRITER_S`` (3) for a FIFO
    no program opens for writing; directories, devices and sockets are refused.

    Raises:
        PaperPoolError: Missing, unreadable, not a file, or longer than :data:`MAX_BYTES`.
    """
    src = os.fspath(path)
    fix_path = "check the path"
    try:
        if src == "-":
            fd = os.dup(sys.stdin.fileno())
        else:
            st = os.stat(src)
            if stat.S_ISDIR(st.st_mode):
                raise fail(src, "is a directory", "pass the CSV file (e.g. papers.csv)")
            fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise fail(src, "no such file", fix_path) from None
    except PermissionError:
        raise fail(src, "permission denied", "make the file readable") from None
    except NotADirectoryError:
        raise fail(src, "no such file (a parent in the path is a file)", fix_path) from None
    except OSError as err:
        raise fail(src, f"cannot open: {err.strerror or err}", fix_path) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
            raise fail(src, "is not a regular file (a device or socket)", "pass a CSV file")
        if stat.S_ISFIFO(mode):
            return _read_pipe(fd, src, named=src != "-" and _is_named_fifo(src))
        os.set_blocking(fd, True)
        data = b""
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise fail(src, f"longer than {MAX_BYTES:,} bytes", "this is not a paper pool")
        return data
    except IsADirectoryError:
        raise fail(src, "is a directory", "pass the CSV file (e.g. papers.csv)") from None
    except PermissionError:
        raise fail(src, "permission denied", "make the file readable") from None
    except OSError as err:
        raise fail(src, f"cannot read: {err.strerror or err}", fix_path) from None
    finally:
        os.close(fd)


# ---------------------------------------------------------------------- decoding
def decode(data: bytes, src: str) -> tuple[str, list[Problem]]:
    problems: list[Problem] = []
    if data.startswith(_BOM):
        problems.append(
            problem(
                src,
                "line 1, column 1",
                "the file starts with a UTF-8 byte-order mark",
                "save it as UTF-8 without BOM (e.g. `sed -i '1s/^\\xEF\\xBB\\xBF//' FILE`)",
                "bom",
            )
        )
        data = data[3:]
    try:
        return data.decode("utf-8"), problems
    except UnicodeDecodeError:
        pass
    bad = 0
    for i, line in enumerate(data.split(b"\n"), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as err:
            bad += 1
            if bad <= _MAX_ENCODING_LINES:
                col = len(line[: err.start].decode("utf-8", "replace")) + 1
                byte = line[err.start : err.start + 1].hex().upper()
                problems.append(
                    problem(
                        src,
                        f"line {i}, column {col}",
                        f"byte 0x{byte} is not UTF-8 text",
                        "save the file as UTF-8 (it may be Latin-1 or Windows-1252)",
                        "not-utf8",
                    )
                )
    if bad > _MAX_ENCODING_LINES:
        problems.append(
            problem(
                src,
                "file",
                f"{bad - _MAX_ENCODING_LINES} more lines hold bytes that are not UTF-8",
                "save the file as UTF-8",
                "not-utf8",
            )
        )
    return data.decode("utf-8", "replace"), problems
