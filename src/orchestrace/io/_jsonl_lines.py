r"""Reading a JSONL file's lines: one at a time, or in blocks, with the same limits and errors.

Both readers number lines from 1, drop a byte-order mark at the start of the file, and refuse a
line longer than ``_common.MAX_LINE_BYTES`` at the same line with the same message: the
line-by-line reader serves trace lines and small files, the block reader record streams, whose
lines are then decoded in batches (:mod:`orchestrace.io._jsonl_records`).

Example:
    >>> import io
    >>> list(lines(io.BytesIO(b"a\nb"), "f.jsonl"))
    [(1, b'a\n'), (2, b'b')]
    >>> list(line_blocks(io.BytesIO(b"a\nb\n"), "f.jsonl", 0, 1 << 20))
    [(1, [b'a', b'b'], True)]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from orchestrace.errors import TraceFormatError
from orchestrace.io import _common

__all__ = ["Block", "Lines", "line_blocks", "lines"]

Lines = Iterator[tuple[int, bytes]]
#: ``(number of the first line, the lines without their newline, whether the last one ends
#: with a newline)``.
Block = tuple[int, list[bytes], bool]


def _too_long(src: str, at: int, limit: int) -> TraceFormatError:
    return TraceFormatError(
        src,
        f"line {at}",
        f"line is longer than {limit:,} bytes",
        "this is not a trace file; for very large traces use a Parquet dataset",
    )


def _read(read: Any, size: int, src: str) -> bytes:
    """``read(size)``, a denied or directory path refused in one line."""
    try:
        data: bytes = read(size)
    except PermissionError:
        raise _common._denied(src) from None
    except IsADirectoryError:
        raise TraceFormatError(src, "file", "is a directory", "pass a .jsonl file") from None
    return data


def lines(fh: IO[bytes], src: str) -> Lines:
    """``(line number, line)`` pairs, each line at most ``MAX_LINE_BYTES`` long.

    Raises:
        TraceFormatError: A line is longer than the limit, or the file cannot be read.
    """
    limit = _common.MAX_LINE_BYTES
    lineno = 0
    while True:
        line = _read(fh.readline, limit + 1, src)
        if not line:
            return
        lineno += 1
        if len(line) > limit and not line.endswith(b"\n"):
            raise _too_long(src, lineno, limit)
        if lineno == 1 and line.startswith(_common.BOM):
            line = line[len(_common.BOM) :]
        yield lineno, line


def line_blocks(fh: IO[bytes], src: str, lineno: int, block_bytes: int) -> Iterator[Block]:
    """The lines after line ``lineno`` in blocks: what :func:`lines` yields, read in bulk.

    Each block is a :data:`Block`, read ``block_bytes`` at a time; a line is refused at the same
    place, with the same error, as :func:`lines` refuses it.

    Raises:
        TraceFormatError: A line is longer than the limit, or the file cannot be read.
    """
    limit = _common.MAX_LINE_BYTES
    pending: list[bytes] = []  # the start of a line not yet ended
    pending_len = 0
    while True:
        chunk = _read(fh.read, block_bytes, src)
        if not chunk:
            if pending_len:
                if pending_len > limit:
                    raise _too_long(src, lineno + 1, limit)
                yield lineno + 1, [b"".join(pending)], False
            return
        if chunk.find(b"\n") < 0:
            pending.append(chunk)
            pending_len += len(chunk)
            if pending_len > limit:
                raise _too_long(src, lineno + 1, limit)
            continue
        if pending:
            chunk = b"".join([*pending, chunk])
            pending, pending_len = [], 0
        bodies = chunk.split(b"\n")
        rest = bodies.pop()
        if rest:
            pending, pending_len = [rest], len(rest)
        if max(map(len, bodies)) > limit:  # (a line of limit + 1 bytes with its newline is fine)
            k = next(k for k, b in enumerate(bodies) if len(b) > limit)
            if k:
                yield lineno + 1, bodies[:k], True
            raise _too_long(src, lineno + 1 + k, limit)
        yield lineno + 1, bodies, True
        lineno += len(bodies)
