"""Shared helpers of the readers and writers: safe file access and error locations."""

from __future__ import annotations

import mmap
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from orchestrace.errors import TraceFormatError

__all__ = ["atomic_write", "describe_offset", "format_error", "read_bytes"]

PathLike = str | os.PathLike[str]
_BYTE = re.compile(r"\(byte (\d+)\)")


def read_bytes(path: PathLike) -> Any:
    """Return the file's bytes (memory-mapped when large, so nothing is copied).

    Raises:
        TraceFormatError: The file is missing, a directory, unreadable or empty.
    """
    p = Path(path)
    src = str(path)
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                raise TraceFormatError(
                    src, "line 1", "file is empty", "write a trace into it, or pass another file"
                )
            if size < (1 << 24):
                return fh.read()
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise TraceFormatError(src, "file", "no such file", "check the path") from None
    except IsADirectoryError:
        raise TraceFormatError(
            src,
            "file",
            "is a directory",
            "pass a trace file (a .parquet dataset is a directory: "
            "give its path with a .parquet suffix)",
        ) from None
    except PermissionError:
        raise TraceFormatError(src, "file", "permission denied", "make the file readable") from None


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
    reason = _BYTE.sub("", msg).strip().rstrip(":")
    if reason.startswith("JSON is malformed: "):
        reason = "malformed JSON: " + reason[len("JSON is malformed: ") :]
    return TraceFormatError(source, where, reason, "fix the JSON syntax there")


@contextmanager
def atomic_write(path: PathLike, mode: str = "wb") -> Iterator[IO[Any]]:
    """Write to a temporary file beside ``path`` and rename it into place on success.

    A crash or error never leaves a half-written file where a good one was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
