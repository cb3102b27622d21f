"""Writing JSON Lines: traces one per line, or one trace streamed record by record.

The record layout and how it is read back (partial recovery included) are described in
:mod:`orchestrace.io.jsonl`, which re-exports :class:`StreamWriter` and :func:`write_jsonl`.

Example:
    >>> import tempfile, os
    >>> from orchestrace.trace.generate import generate_trace
    >>> tr = generate_trace(agents=2, steps=6, seed=1)
    >>> path = os.path.join(tempfile.mkdtemp(), "many.jsonl")
    >>> write_jsonl([tr, tr], path)
    2
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from orchestrace._numbers import as_real, is_finite
from orchestrace.errors import ConfigError, TraceFormatError, _short
from orchestrace.io._common import PathLike, atomic_write
from orchestrace.io._output import OutputError, StreamTarget, write_error
from orchestrace.io._writable import check_record, json_finite, readable, require_writable
from orchestrace.trace.model import SCHEMA_VERSION, Edge, Event, TopologyName, Trace

__all__ = ["StreamWriter", "write_jsonl"]


class _Header(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    trace_id: str
    task_id: str
    system: str | None = None
    topology: TopologyName | None = None
    schema_version: str = SCHEMA_VERSION
    meta: dict[str, Any] = {}


class _Footer(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    rewards: dict[str, float] = {}
    costs: dict[str, float] = {}
    metrics: dict[str, float] = {}
    meta: dict[str, Any] = {}


class _Line(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    header: _Header | None = None
    event: Event | None = None
    edge: Edge | None = None
    footer: _Footer | None = None


_ENC = msgspec.json.Encoder()


def write_jsonl(traces: Iterable[Trace], path: PathLike, *, overwrite: bool = False) -> int:
    """Write traces one per line, atomically. Returns how many were written.

    Args:
        traces: The traces.
        path: The output file.
        overwrite: Replace ``path`` if it exists (otherwise an existing file is an error).

    Raises:
        OutputError: The file exists (without ``overwrite``), the path cannot hold it, or
            writing failed; nothing is left half-written.
        TraceValidationError: A trace holds a value no file can hold exactly (see
            :func:`~orchestrace.io._writable.require_writable`); nothing is written.
    """
    n = 0
    with atomic_write(path, force=overwrite) as fh:
        for i, tr in enumerate(traces):
            require_writable([tr], first=i)  # (the temporary file is dropped when it refuses)
            fh.write(_ENC.encode(tr))
            fh.write(b"\n")
            n += 1
    return n


def _checked_header(trace_id: Any, task_id: Any, system: Any, topology: Any, meta: Any) -> _Header:
    """The header record, its fields checked (a bad one is refused before any file exists)."""
    if meta is not None and not isinstance(meta, Mapping):
        raise ConfigError(f"meta is a {type(meta).__name__}: give a dict of run information")
    fields = {"trace_id": trace_id, "task_id": task_id, "system": system, "topology": topology}
    try:
        header = msgspec.convert(fields, _Header)
        header.meta = dict(meta or {})
        _ENC.encode(header)
        if not json_finite(header.meta):
            raise ValueError("meta holds NaN or infinity, which JSON writes as null")
    except (msgspec.ValidationError, msgspec.EncodeError, TypeError, ValueError) as err:
        raise ConfigError(
            f"StreamWriter header: {str(err)[:200]}; give trace_id and task_id as strings, a "
            "known topology or None, and JSON-serialisable meta"
        ) from None
    return header


def _finite_totals(name: str, given: Any) -> dict[str, float]:
    """``given`` (rewards, costs or metrics) as a dict of finite floats, or a ConfigError."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise ConfigError(f"{name} is a {type(given).__name__}: give a dict of numbers")
    out = {}
    for key, value in given.items():
        if not isinstance(key, str) or not is_finite(value):
            raise ConfigError(
                f"{name}[{str(key)[:60]!r}] is {str(value)[:40]}: give finite numbers under "
                "string keys (JSON cannot hold NaN or infinity)"
            )
        out[key] = as_real(value)
    return out


class StreamWriter:
    """Append a trace to a JSONL record stream as it is recorded (crash-safe).

    Every record is one complete line, written with a single ``write`` and flushed, so a crash
    (even ``kill -9``) loses at most the line being written. ``close`` writes the footer.

    A new file is created (an existing one is never truncated) and locked while it is written,
    so a second writer on the same path is refused. With ``overwrite=True`` an existing file is
    replaced: the recording goes to a temporary sibling renamed into place by ``close``, and
    the previous file stays whole until then.

    Args:
        path: File to create (or append to, with ``append=True``).
        trace_id: Id of the trace.
        task_id: Id of its task.
        system: Producing system.
        topology: Topology name.
        meta: Run information for the header.
        fsync: Also ``fsync`` after each record (survives power loss; slower).
        append: Add this trace after the traces already in the file.
        overwrite: Replace ``path`` if it exists.
        target: An output already opened with :class:`~orchestrace.io._output.StreamTarget`
            (``path``, ``append`` and ``overwrite`` are then taken from it).

    Raises:
        OutputError: The file exists (without ``overwrite``), another process writes it, the
            path cannot hold it, or writing failed.
    """

    def __init__(
        self,
        path: PathLike,
        *,
        trace_id: str,
        task_id: str,
        system: str | None = "orchestrace",
        topology: str | None = None,
        meta: Mapping[str, Any] | None = None,
        fsync: bool = False,
        append: bool = False,
        overwrite: bool = False,
        target: StreamTarget | None = None,
    ) -> None:
        header = _checked_header(trace_id, task_id, system, topology, meta)  # before any file
        self.path = Path(path)
        self._target = target or StreamTarget(path, force=overwrite, append=append)
        self._fd = self._target.fd
        self._fsync = fsync
        self.closed = False
        self.records = 0
        self._end = os.lseek(self._fd, 0, os.SEEK_END)  # where the last whole record ends
        self._write(_Line(header=header))

    def _write(self, rec: _Line) -> None:
        """Append ``rec``, one line (a header or a footer: checked by their callers)."""
        try:
            data = _ENC.encode(rec)
        except (TypeError, ValueError, RecursionError) as err:  # (nothing of it was written)
            why = "nesting too deep, or a cycle" if isinstance(err, RecursionError) else str(err)
            raise ConfigError(
                f"cannot write this record: {_short(why, 100)}; record plain Python values "
                "(float(x), int(x), str(x); text without lone surrogates), not numpy's or "
                "other objects"
            ) from None
        self._write_line(data)

    def _write_line(self, data: bytes) -> None:
        """Append one line of JSON (the newline is added here)."""
        if self.closed:
            raise TraceFormatError(
                str(self.path),
                "stream",
                "writer is closed",
                "open a new StreamWriter to record another trace",
            )
        data += b"\n"
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            if self._fsync:
                os.fsync(self._fd)
        except OSError as err:
            raise self._failed(err) from None
        self._end += len(data)
        self.records += 1

    def _failed(self, err: OSError) -> OutputError:
        """Close after a failed write, keeping the whole records written before it.

        The part of the record that was being written is cut off, so the file ends on a whole
        line and reads back as a partial trace. A recording holding no event is removed (as is
        a recording that was to replace a file, which stays).
        """
        error = write_error(self.path, err)
        kept = self.records - 1  # records after the header
        if kept < 1 or self._target._tmp is not None:  # nothing to keep, or a replacement
            self.discard()
            return error
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self._end)
        self.abandon()
        return OutputError(
            self.path,
            f"{error}; the {kept} whole records written before are kept in {self.path} "
            "(a partial recording: read it with --partial)",
        )

    def flush(self) -> None:
        """Make every record written so far durable (``fsync``).

        Raises:
            OutputError: The file could not be synced (its records may not be on disk).
        """
        if self.closed:
            return
        try:
            os.fsync(self._fd)
        except OSError as err:
            raise write_error(self.path, err) from None

    def event(self, event: Event) -> None:
        """Append one event record.

        Raises:
            ConfigError: ``event`` is not an :class:`~orchestrace.trace.model.Event`, its
                time, duration or cost is not a finite number (JSON would write ``null``), or
                the reader would refuse its line (an unknown type, a negative number, a field
                of the wrong type); nothing of it is written.
        """
        check_record(event, "StreamWriter.event")
        # read back as the reader reads it: nothing is written that it would refuse
        self._write_line(b'{"event":' + readable(event, "StreamWriter.event")[1] + b"}")

    def edge(self, edge: Edge) -> None:
        """Append one edge record.

        Raises:
            ConfigError: ``edge`` is not an :class:`~orchestrace.trace.model.Edge`, or one the
                reader would refuse (an unknown type, an empty end); nothing is written.
        """
        if not isinstance(edge, Edge):
            raise ConfigError(f"StreamWriter.edge takes an Edge, not a {type(edge).__name__}")
        self._write_line(b'{"edge":' + readable(edge, "StreamWriter.edge")[1] + b"}")

    def close(
        self,
        *,
        rewards: Mapping[str, float] | None = None,
        costs: Mapping[str, float] | None = None,
        metrics: Mapping[str, float] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """Write the footer and close the file. Closing twice does nothing.

        Raises:
            OutputError: The footer could not be written (the recording is removed, and a
                file it was to replace is kept).
            ConfigError: A reward, cost or metric is not a finite number, or ``meta`` is not
                a dict (nothing is written: the writer stays open, so close it again).
        """
        if self.closed:
            return
        totals = {
            name: _finite_totals(name, given)
            for name, given in (("rewards", rewards), ("costs", costs), ("metrics", metrics))
        }
        if meta is not None and not isinstance(meta, Mapping):
            raise ConfigError(f"meta is a {type(meta).__name__}: give a dict of run information")
        if meta and not json_finite(dict(meta)):
            raise ConfigError(
                "meta holds NaN or infinity, which JSON would write as null; record finite "
                "numbers (or strings) there"
            )
        self._write(_Line(footer=_Footer(**totals, meta=dict(meta or {}))))
        self.closed = True
        self._target.commit()

    def abandon(self) -> None:
        """Close the file without a footer (the trace stays marked partial).

        A recording that was to replace an existing file is dropped instead, keeping that file.
        """
        if not self.closed:
            self.closed = True
            self._target.close_partial()

    def discard(self) -> None:
        """Close and remove the recording (it cannot be completed).

        A file it was to replace is kept.
        """
        if not self.closed:
            self.closed = True
            self._target.discard(remove_new=True)
