"""Shared helpers of the readers and writers: safe file access and error locations."""

from __future__ import annotations

import io
import math
import mmap
import os
import re
import select
import stat
import sys
import time
from contextlib import suppress
from typing import IO, Any

from orchestrace.errors import ConfigError, TraceFormatError

__all__ = [
    "atomic_write",
    "describe_offset",
    "env_number",
    "format_error",
    "format_ns",
    "is_stream",
    "open_input",
    "peek_stream",
    "read_bytes",
]

PathLike = str | os.PathLike[str]
_BYTE = re.compile(r"\(byte (\d+)\)")
_BLANK = re.compile(rb"[ \t\r\n]*")


#: Longest document read from a pipe or FIFO (bytes); a longer stream is refused.
MAX_STREAM_BYTES = 4 << 30
#: Longest JSONL line (bytes); a longer line is refused instead of filling memory.
MAX_LINE_BYTES = 1 << 30
#: Seconds a pipe or FIFO may stay silent before reading gives up (no writer, or a stalled
#: one); ``$ORCHESTRACE_PIPE_IDLE_S`` sets it (read when a stream is opened).
PIPE_IDLE_TIMEOUT_S = 30.0
#: Seconds to wait for a program to open a named FIFO for writing before reading gives up;
#: ``$ORCHESTRACE_FIFO_WRITER_S`` sets it.
FIFO_WRITER_WAIT_S = 3.0


def env_number(name: str, default: float, unit: str = "seconds", unset: str = "") -> float:
    """The number environment variable ``name`` sets (``default`` when it is unset).

    Read when it is used, so that a bad value is one error of the command that needs it, not
    a failure of every command at start-up. ``unset`` says what leaving it unset gives (by
    default ``default``).

    Raises:
        ConfigError: The value is not a finite number > 0 (the message says how to fix it).

    Example:
        >>> env_number("ORCHESTRACE_EXAMPLE_UNSET_S", 30.0)
        30.0
    """
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(
            f"{name}={raw[:40]!r} is not a number of {unit} > 0; unset it (then "
            f"{unset or f'{default:g}'}) or set e.g. {name}={default:g}"
        )
    return value


#: How often a FIFO without a writer is checked for one (seconds).
_WRITER_POLL_S = 0.05
BOM = b"\xef\xbb\xbf"

_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class _PipeReader(io.RawIOBase):
    """Read a pipe or FIFO opened non-blocking, waiting at most ``idle`` seconds for data.

    A named FIFO that no program has opened for writing reads as end of file at once on a
    non-blocking descriptor; until a writer is seen, the reader checks for one every
    :data:`_WRITER_POLL_S` seconds and gives up after ``writer_wait`` seconds.
    """

    def __init__(self, fd: int, source: str, idle: float, writer_wait: float | None) -> None:
        self._fd = fd
        self._source = source
        self._idle = idle
        self._writer_wait = writer_wait  # None: a writer is known to be there (a pipe)
        self._pending = b""  # read while looking for a writer
        self._received = 0  # bytes read so far

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def _await_writer(self) -> None:
        """Wait for a program to open the FIFO for writing (or give up, in one line)."""
        assert self._writer_wait is not None
        deadline = time.monotonic() + self._writer_wait
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        while True:
            events = poller.poll(_WRITER_POLL_S * 1000)
            if any(ev & (select.POLLIN | select.POLLHUP) for _, ev in events):
                self._writer_wait = None  # data, or a writer that came and went
                return
            if self._probe_writer():
                self._writer_wait = None  # a writer holds it open: it is just slow
                return
            if time.monotonic() >= deadline:
                raise TraceFormatError(
                    self._source,
                    "file",
                    f"a FIFO that no program opened for writing within {self._writer_wait:g} s",
                    "start the writer first, or pass a file (ORCHESTRACE_FIFO_WRITER_S sets "
                    "the wait)",
                )

    def _probe_writer(self) -> bool:
        """Whether a writer holds the FIFO open now (a read would block rather than end)."""
        try:
            data = os.read(self._fd, 1)
        except BlockingIOError:
            return True
        if data:
            self._pending = data
            self._received += len(data)
            return True
        return False

    def readinto(self, buf: Any) -> int:
        view = memoryview(buf).cast("B")
        if self._writer_wait is not None:
            self._await_writer()
        if self._pending:
            n = min(len(view), len(self._pending))
            view[:n] = self._pending[:n]
            self._pending = self._pending[n:]
            return n
        while True:
            ready, _, _ = select.select([self._fd], [], [], self._idle)
            if not ready:
                if self._received:  # a writer that stalled, not one that never came
                    raise TraceFormatError(
                        self._source,
                        "file",
                        f"the writer sent {self._received:,} bytes, then nothing for "
                        f"{self._idle:g} s (hung, or still running?); nothing was read from it",
                        "let the writer finish (or write to a file and read that), or wait "
                        "longer (ORCHESTRACE_PIPE_IDLE_S sets the wait)",
                    )
                raise TraceFormatError(
                    self._source,
                    "file",
                    f"no data arrived for {self._idle:g} s (a pipe or FIFO with no writer?)",
                    "start the program that writes to it first, or pass a regular file "
                    "(ORCHESTRACE_PIPE_IDLE_S sets the wait)",
                )
            try:
                data = os.read(self._fd, len(view))
            except BlockingIOError:
                continue
            view[: len(data)] = data
            self._received += len(data)
            return len(data)

    def close(self) -> None:
        if not self.closed:
            with suppress(OSError):
                os.close(self._fd)
        super().close()


def _denied(src: str) -> TraceFormatError:
    return TraceFormatError(
        src, "file", f"cannot read {src}: permission denied", "check its permissions"
    )


# pipe and FIFO inputs read ahead (to tell their format), kept for the one reader that follows
_SPOOLED: dict[str, bytes] = {}


def peek_stream(path: PathLike, size: int = 4096) -> bytes | None:
    """The first ``size`` bytes of a pipe, FIFO or ``-`` input; ``None`` for anything else.

    The whole stream is read (a pipe cannot be rewound) and kept for the next
    :func:`open_input` of the same path.
    """
    src = str(path)
    if src not in _SPOOLED:
        if src != "-":
            try:
                if not stat.S_ISFIFO(os.stat(path).st_mode):
                    return None
            except OSError:
                return None
        with open_input(path) as fh:
            _SPOOLED[src] = _read_stream(fh, src)
    return _SPOOLED[src][:size]


def open_input(path: PathLike, *, directory_hint: str = "pass a trace file") -> IO[bytes]:
    """Open a trace file for reading as a binary stream.

    ``"-"`` reads standard input. Pipes and FIFOs (``<(cmd)``, ``/dev/stdin``) are read as
    streams that give up after :data:`PIPE_IDLE_TIMEOUT_S` seconds without data; a named FIFO
    that no program opens for writing within :data:`FIFO_WRITER_WAIT_S` seconds is refused
    sooner, so a FIFO nobody writes to never blocks for long. Devices and sockets are refused.

    Raises:
        TraceFormatError: Missing, a directory, a device, or unreadable; the message says why.
    """
    src = str(path)
    if src in _SPOOLED:
        return io.BytesIO(_SPOOLED.pop(src))
    try:
        if src == "-":
            fd = os.dup(sys.stdin.fileno())
        else:
            st = os.stat(path)
            if stat.S_ISDIR(st.st_mode):
                raise TraceFormatError(
                    src,
                    "file",
                    "is a directory",
                    directory_hint + " (a .parquet dataset is a directory: "
                    "give its path with a .parquet suffix)",
                )
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        st = os.fstat(fd)
    except FileNotFoundError:
        raise TraceFormatError(src, "file", "no such file", "check the path") from None
    except PermissionError:
        raise _denied(src) from None
    except NotADirectoryError:
        raise TraceFormatError(
            src, "file", "no such file (a parent in the path is a file)", "check the path"
        ) from None
    except OSError as err:
        raise TraceFormatError(
            src, "file", f"cannot open: {err.strerror or err}", "check the path"
        ) from None
    for test, kind in _KINDS:
        if test(st.st_mode):
            os.close(fd)
            raise TraceFormatError(
                src,
                "file",
                f"not a regular file ({kind})",
                "pass a trace file, or pipe a trace in (`cat FILE | orchestrace ... -`)",
            )
    if stat.S_ISFIFO(st.st_mode):
        named = src != "-" and _is_named_fifo(path)
        wait = env_number("ORCHESTRACE_FIFO_WRITER_S", FIFO_WRITER_WAIT_S) if named else None
        idle = env_number("ORCHESTRACE_PIPE_IDLE_S", PIPE_IDLE_TIMEOUT_S)
        return io.BufferedReader(_PipeReader(fd, src, idle, wait), 1 << 16)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _is_named_fifo(path: PathLike) -> bool:
    """A FIFO made with ``mkfifo`` (not a pipe reached through ``/dev/fd`` or ``/proc``)."""
    try:
        target = os.readlink(path)
    except OSError:
        return True  # not a link: the FIFO itself
    return not target.startswith(("pipe:", "/proc/", "/dev/fd/"))


def is_stream(fh: IO[bytes]) -> bool:
    """``True`` for an input that is not a regular file (it cannot seek back)."""
    try:
        return not stat.S_ISREG(os.fstat(fh.fileno()).st_mode)
    except (OSError, ValueError):
        return True


def read_bytes(path: PathLike, *, json: bool = True) -> Any:
    """Return the file's bytes (memory-mapped when large, so nothing is copied).

    Pipes and FIFOs are read to their end (see :func:`open_input`) and capped at
    :data:`MAX_STREAM_BYTES`; with ``json`` (a trace), a stream that does not begin as JSON
    does is refused at its first bytes. A leading UTF-8 byte-order mark is dropped.

    Raises:
        TraceFormatError: The file is missing, a directory, a device, unreadable, empty or
            (as a stream) too long.
    """
    src = str(path)
    fh = open_input(path)
    try:
        if is_stream(fh):
            data: Any = _read_stream(fh, src, json)
        else:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:  # empty, or a file whose size says nothing (/proc, /sys): read it
                data = _read_stream(fh, src, json)
            elif size < (1 << 24):
                data = fh.read()
            else:
                data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except PermissionError:
        raise _denied(src) from None
    except IsADirectoryError:
        raise TraceFormatError(src, "file", "is a directory", "pass a trace file") from None
    finally:
        fh.close()
    if not len(data):
        raise TraceFormatError(
            src, "line 1", "file is empty", "write a trace into it, or pass another file"
        )
    if data[:3] == BOM:
        data = bytes(data[3:])
    return data


def _read_stream(fh: IO[bytes], src: str, json: bool = True) -> bytes:
    chunks: list[bytes] = []
    total = 0
    begun = not json  # whether the first byte that is not whitespace was seen (and fits JSON)
    while True:
        chunk = fh.read(1 << 20)
        if not chunk:
            return b"".join(chunks)
        if not begun:
            begun = _json_begins(chunk if chunks else chunk.removeprefix(BOM), src, total)
        total += len(chunk)
        if total > MAX_STREAM_BYTES:
            raise TraceFormatError(
                src,
                "file",
                f"input is longer than {MAX_STREAM_BYTES:,} bytes",
                "for very large traces, write them to a file (or a Parquet dataset) first",
            )
        chunks.append(chunk)


def _json_begins(chunk: bytes, src: str, offset: int) -> bool:
    """Whether ``chunk`` shows where the streamed input begins; refuse it if not as JSON does.

    A stream is read whole before it is parsed; an input that cannot be a JSON or JSONL trace
    (binary data, ``/dev/zero`` piped in) is refused at its first bytes instead of after up to
    :data:`MAX_STREAM_BYTES` of them.
    """
    rest = chunk.lstrip(b" \t\r\n")
    if not rest:
        return False
    if rest[:1] in (b"{", b"["):
        return True
    at = offset + len(chunk) - len(rest)
    raise TraceFormatError(
        src,
        f"byte {at + 1:,}",
        f"not a JSON or JSONL trace (it begins with byte 0x{rest[0]:02x})",
        "give a trace written as JSON or JSONL (a Parquet dataset is read from its directory)",
    )


def format_ns(ns: float) -> str:
    """A duration given in nanoseconds, in the unit that shows it (``500 ns``, ``1.5 ms``).

    Example:
        >>> format_ns(500), format_ns(1_500_000), format_ns(2.5e9)
        ('500 ns', '1.5 ms', '2.5 s')
    """
    for unit, size in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= size:
            return f"{ns / size:.4g} {unit}"
    return f"{ns:.4g} ns"


def describe_offset(data: Any, offset: int, base_line: int = 1) -> str:
    """``"line L, column C (byte B)"`` for a byte offset into ``data``."""
    offset = max(0, min(offset, len(data)))
    head = data[:offset]
    line = head.count(b"\n") + base_line
    col = offset - (head.rfind(b"\n") + 1) + 1
    return f"line {line}, column {col} (byte {offset})"


def format_error(source: str, data: Any, err: Exception, *, base_line: int = 1) -> TraceFormatError:
    """Turn a JSON parser error into a :class:`TraceFormatError` naming the place and fix."""
    msg = str(err)
    if isinstance(err, RecursionError):
        return TraceFormatError(
            source,
            "document",
            "JSON nested too deeply",
            "a trace nests a few levels; this file is not a trace",
        )
    m = _BYTE.search(msg)
    if "truncated" in msg and _BLANK.fullmatch(data) is not None:
        return TraceFormatError(
            source,
            f"line {base_line}",
            "file is blank (only whitespace, no JSON value)",
            "write a trace into it, or pass another file",
        )
    if "truncated" in msg:
        where = f"end of data, {describe_offset(data, len(data), base_line)}"
        return TraceFormatError(
            source,
            where,
            "JSON ends early (the file was cut off)",
            "restore the full file; for a recording, use the JSONL file, "
            "which keeps every complete record",
        )
    if "UTF-8" in msg:
        return TraceFormatError(
            source, "document", "not UTF-8 text (binary data?)", "pass a JSON trace file"
        )
    where = describe_offset(data, int(m.group(1)), base_line) if m else "document"
    if m:
        at = int(m.group(1))
        if at and bytes(data[at - 1 : at]) == b"-":
            at -= 1  # ``-Infinity``: the parser stops after its sign
        word = bytes(data[at : at + 9])
        if word.startswith((b"NaN", b"Infinity", b"-Infinity")):
            return TraceFormatError(
                source,
                where,
                f"{word.split(b',')[0].split(b'}')[0].decode('ascii', 'replace')} is not a "
                "JSON number",
                "record a finite number there (JSON has no NaN or Infinity)",
            )
    if msg.startswith("Integer value out of range"):
        big = _BIG_INTEGER.search(data)
        return TraceFormatError(
            source,
            describe_offset(data, big.start(), base_line) if big else "document",
            "integer too long to read (over 4,300 digits)",
            "record a smaller number there (or the value as a string)",
        )
    reason = _BYTE.sub("", msg).strip().rstrip(":")
    if reason.startswith("JSON is malformed: "):
        reason = "malformed JSON: " + reason[len("JSON is malformed: ") :]
    return TraceFormatError(source, where, reason, "fix the JSON syntax there")


#: An integer too long for Python to read (over 4,300 digits), outside a string as far as a
#: scan can tell: after ``:``, ``[`` or ``,`` and whitespace.
_BIG_INTEGER = re.compile(rb"(?<=[:\[,])\s*-?[0-9]{4301,}")


# the write side (output checks, atomic replacement, locks) lives in one place
from orchestrace.io._output import (  # noqa: E402
    OutputError,
    atomic_write,
    check_output,
    file_mode,
    replace_dir,
    write_error,
)

__all__ += ["OutputError", "check_output", "file_mode", "replace_dir", "write_error"]
