"""JSON Lines: many traces per file, or one trace streamed record by record.

Two layouts share the ``.jsonl`` suffix and are told apart by the first line:

* **Trace lines**: each line is one complete native trace (a dataset of traces).
* **Record stream**: what the runtime writes while it runs, one record per line and flushed as
  it happens: ``{"header": {...}}``, then ``{"event": {...}}`` and ``{"edge": {...}}`` records,
  and ``{"footer": {...}}`` (rewards, costs, metrics) when the run closes. A file cut off by a
  crash still loads: every complete record is kept and the trace is marked partial
  (``meta["partial"] = True``), which ``orchestrace validate --partial`` accepts.

A damaged line stops reading with an error naming its line; with ``keep_going=True`` it is
reported and skipped, and every other record is read.

Example:
    >>> import tempfile, os
    >>> from orchestrace.trace.generate import generate_trace
    >>> tr = generate_trace(agents=3, steps=12, seed=0)
    >>> path = os.path.join(tempfile.mkdtemp(), "run.jsonl")
    >>> w = StreamWriter(path, trace_id=tr.trace_id, task_id=tr.task_id)
    >>> for e in tr.events: w.event(e)
    >>> for e in tr.edges: w.edge(e)
    >>> w.close(costs=tr.costs)
    >>> back = read_jsonl(path)[0]
    >>> back.events == tr.events, back.meta.get("partial", False)
    (True, False)
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

import msgspec

from orchestrace.errors import Problem, TraceFormatError, TraceValidationError, _short
from orchestrace.io import _common
from orchestrace.io._common import PathLike, atomic_write, format_error
from orchestrace.io._output import OutputError, StreamTarget, write_error
from orchestrace.io.json import _check_duplicate_keys, duplicate_key
from orchestrace.trace.check import check_trace
from orchestrace.trace.diagnose import knock_on
from orchestrace.trace.model import (
    SCHEMA_VERSION,
    Edge,
    Event,
    TopologyName,
    Trace,
)

__all__ = [
    "JsonlItem",
    "StreamWriter",
    "iter_jsonl",
    "read_jsonl",
    "write_jsonl",
]


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


_LINE = msgspec.json.Decoder(_Line)
_TRACE = msgspec.json.Decoder(Trace)
_ENC = msgspec.json.Encoder()


@dataclass
class JsonlItem:
    """One trace read from a JSONL file, with what was found on the way.

    Attributes:
        trace: The trace, or ``None`` when its line could not be read.
        problems: Problems of this trace or line (each names the line).
        line: First line of the trace (1-based).
    """

    trace: Trace | None
    problems: list[Problem] = field(default_factory=list)
    line: int = 0


# ---------------------------------------------------------------------- writing
def write_jsonl(traces: Iterable[Trace], path: PathLike, *, overwrite: bool = False) -> int:
    """Write traces one per line, atomically. Returns how many were written.

    Args:
        traces: The traces.
        path: The output file.
        overwrite: Replace ``path`` if it exists (otherwise an existing file is an error).

    Raises:
        OutputError: The file exists (without ``overwrite``), the path cannot hold it, or
            writing failed; nothing is left half-written.
    """
    n = 0
    with atomic_write(path, force=overwrite) as fh:
        for tr in traces:
            fh.write(_ENC.encode(tr))
            fh.write(b"\n")
            n += 1
    return n


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
        self.path = Path(path)
        self._target = target or StreamTarget(path, force=overwrite, append=append)
        self._fd = self._target.fd
        self._fsync = fsync
        self.closed = False
        self.records = 0
        self._end = os.lseek(self._fd, 0, os.SEEK_END)  # where the last whole record ends
        header = _Header(
            trace_id=trace_id,
            task_id=task_id,
            system=system,
            topology=topology,  # type: ignore[arg-type]
            meta=dict(meta or {}),
        )
        self._write(_Line(header=header))

    def _write(self, rec: _Line) -> None:
        if self.closed:
            raise TraceFormatError(
                str(self.path),
                "stream",
                "writer is closed",
                "open a new StreamWriter to record another trace",
            )
        data = _ENC.encode(rec) + b"\n"
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
        """Append one event record."""
        self._write(_Line(event=event))

    def edge(self, edge: Edge) -> None:
        """Append one edge record."""
        self._write(_Line(edge=edge))

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
        """
        if self.closed:
            return
        self._write(
            _Line(
                footer=_Footer(
                    rewards=dict(rewards or {}),
                    costs=dict(costs or {}),
                    metrics=dict(metrics or {}),
                    meta=dict(meta or {}),
                )
            )
        )
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


# ---------------------------------------------------------------------- reading
Lines = Iterator[tuple[int, bytes]]


def _lines(fh: IO[bytes], src: str) -> Lines:
    """``(line number, line)`` pairs, each line at most ``MAX_LINE_BYTES`` long.

    Raises:
        TraceFormatError: A line is longer than the limit, or the file cannot be read.
    """
    limit = _common.MAX_LINE_BYTES
    lineno = 0
    while True:
        try:
            line = fh.readline(limit + 1)
        except PermissionError:
            raise _common._denied(src) from None
        except IsADirectoryError:
            raise TraceFormatError(src, "file", "is a directory", "pass a .jsonl file") from None
        if not line:
            return
        lineno += 1
        if len(line) > limit and not line.endswith(b"\n"):
            raise TraceFormatError(
                src,
                f"line {lineno}",
                f"line is longer than {limit:,} bytes",
                "this is not a trace file; for very large traces use a Parquet dataset",
            )
        if lineno == 1 and line.startswith(_common.BOM):
            line = line[len(_common.BOM) :]
        yield lineno, line


def iter_jsonl(
    path: PathLike,
    *,
    keep_going: bool = False,
    partial: bool = False,
    check: bool = True,
) -> Iterator[JsonlItem]:
    """Read a JSONL file (either layout) item by item, never raising on bad content.

    Args:
        path: The file.
        keep_going: Skip damaged lines (reported in ``problems``) instead of stopping there.
        partial: Accept truncated recordings (truncation becomes a warning).
        check: Run ``check_trace`` on each trace read.

    Yields:
        One :class:`JsonlItem` per trace (or per unreadable trace line).

    Raises:
        TraceFormatError: The file cannot be opened.
    """
    src = str(path)
    with _common.open_input(path, directory_hint="pass a .jsonl file") as fh:
        lines = _lines(fh, src)
        first = next(((n, x) for n, x in lines if x.strip()), None)
        if first is None:
            yield JsonlItem(
                None,
                [
                    Problem(
                        "no-events",
                        "file holds no records",
                        "write traces into it",
                        source=f"{src}:1",
                    )
                ],
                1,
            )
            return
        rest = itertools.chain([first], lines)
        if first[1].lstrip().startswith(b'{"header"'):
            yield from _iter_stream(rest, src, keep_going, partial, check)
        else:
            yield from _iter_lines(rest, src, keep_going, partial, check)


class _Mixed(Exception):
    """A stream line holding more than one record."""

    def __init__(self, kinds: list[str]) -> None:
        super().__init__(" and ".join(f"`{k}`" for k in kinds))
        self.kinds = kinds


class _Duplicate(Exception):
    """A stream line whose JSON names one key twice in an object."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


# keys whose repetition on a record line is looked for (the whole line is then checked);
# header and footer lines are rare and always checked in full
_SCREEN = {
    "event": (b'"event"', b'"id"', b'"type"', b'"agent"', b'"t"'),
    "edge": (b'"edge"', b'"src"', b'"dst"', b'"type"'),
}


def _repeats_a_key(line: bytes, kind: str, rec: _Line) -> bool:
    """Whether a record line may hold a repeated key (cheap; confirmed by a full parse).

    A line exactly as orchestrace writes it cannot (re-encoding the record gives it back);
    other lines are searched for repeats of their main keys.
    """
    if _ENC.encode(rec) == line.rstrip(b"\r\n"):
        return False
    keys = _SCREEN.get(kind)
    return keys is None or any(line.count(k) > 1 for k in keys)


def _line_error(src: str, lineno: int, line: bytes, err: Exception, complete: bool) -> Problem:
    if isinstance(err, _Duplicate):
        return Problem(
            "duplicate-key",
            f"duplicate key {_short(err.key)!r}: a JSON object on this line names it twice",
            "keep one of them (a reader would silently use only the last; --keep-going skips "
            "this line)",
            source=f"{src}:{lineno}",
        )
    if isinstance(err, _Mixed):
        return Problem(
            "mixed-record",
            f"line holds {err} records in one object; only one is allowed per line",
            "put each record on its own line (--keep-going skips this line)",
            source=f"{src}:{lineno}",
        )
    if not complete:
        return Problem(
            "truncated",
            "last line is incomplete: the file was cut off mid-record",
            "every complete record before it was kept; validate with --partial to "
            "accept a recording interrupted by a crash",
            source=f"{src}:{lineno}",
            path="$",
        )
    syntax = isinstance(err, msgspec.DecodeError) and not isinstance(err, msgspec.ValidationError)
    fe = format_error(src, line, err) if syntax else None
    if fe is not None:
        return Problem(
            "malformed-json",
            fe.reason + f" at {fe.where.replace('line 1, ', '')}",
            "fix or delete this line (--keep-going skips it)",
            source=f"{src}:{lineno}",
        )
    from orchestrace.trace.diagnose import problem_from_msgspec

    p = problem_from_msgspec(err, "$", where="record")
    return Problem(
        p.code,
        p.message,
        p.fix + " (--keep-going skips this line)",
        path=p.path,
        source=f"{src}:{lineno}",
    )


def _iter_lines(
    lines: Lines, src: str, keep_going: bool, partial: bool, check: bool
) -> Iterator[JsonlItem]:
    from orchestrace.io.json import parse

    for lineno, line in lines:
        if not line.strip():
            continue
        complete = line.endswith(b"\n")
        try:
            trace = _TRACE.decode(line)
            _check_duplicate_keys(line, f"{src}:{lineno}")
        except TraceFormatError as fe:
            yield JsonlItem(
                None,
                [
                    Problem(
                        "duplicate-key",
                        f"{fe.reason} ({fe.where})",
                        f"{fe.fix} (--keep-going skips this line)",
                        source=f"{src}:{lineno}",
                    )
                ],
                lineno,
            )
            if not keep_going:
                return
            continue
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as err:
            if isinstance(err, msgspec.DecodeError) and not complete:
                # a whole trace is lost: an error even for --partial (which covers streams)
                yield JsonlItem(None, [_line_error(src, lineno, line, err, complete)], lineno)
                return
            salvaged: Trace | None
            try:
                salvaged, problems = parse(
                    line, source=f"{src}:{lineno}", partial=partial, check=check
                )
            except TraceFormatError as fe:
                problems = [
                    Problem(
                        "malformed-json",
                        f"{fe.reason} at {fe.where}",
                        "fix or delete this line (--keep-going skips it)",
                        source=f"{src}:{lineno}",
                    )
                ]
                salvaged = None
            yield JsonlItem(salvaged, problems, lineno)
            if not keep_going and any(p.severity == "error" for p in problems):
                return
            continue
        trace._mark_decoded()
        problems = (
            [p.at(f"{src}:{lineno}") for p in check_trace(trace, partial=partial)] if check else []
        )
        yield JsonlItem(trace, problems, lineno)


def _iter_stream(
    lines: Lines, src: str, keep_going: bool, partial: bool, check: bool
) -> Iterator[JsonlItem]:
    header: _Header | None = None
    start = 0
    events: list[Event] = []
    edges: list[Edge] = []
    problems: list[Problem] = []
    bad_ids: list[str] = []
    # agents a damaged event spawned or addressed: their missing spawn is no separate error
    bad_to: set[str] = set()
    # the line each kept event and edge was read from (problems name their line)
    lines_of: dict[str, list[int]] = {"events": [], "edges": []}
    # records read while no header was open (its line was damaged, or missing)
    orphans: list[int] = []

    def headless() -> Iterator[JsonlItem]:
        """Report what was read outside any trace (damaged header, records before one)."""
        nonlocal problems, orphans
        if orphans:
            first, last = orphans[0], orphans[-1]
            lines_ = f"line {first}" if first == last else f"lines {first}-{last}"
            problems.append(
                Problem(
                    "missing-header",
                    f"{len(orphans)} record(s) ({lines_}) were skipped: no readable "
                    "header comes before them",
                    'fix the {"header": ...} line that starts this trace',
                    source=f"{src}:{first}",
                )
            )
        if problems:
            yield JsonlItem(None, problems, orphans[0] if orphans else 0)
        problems, orphans = [], []

    def finish(footer: _Footer | None, truncated: str | None) -> JsonlItem:
        assert header is not None
        meta = dict(header.meta)
        if footer is not None:
            meta.update(footer.meta)
        if truncated:
            meta["partial"] = True
            meta["truncated"] = truncated
        trace = Trace(
            trace_id=header.trace_id,
            task_id=header.task_id,
            events=tuple(events),
            edges=tuple(edges),
            rewards=footer.rewards if footer else {},
            costs=footer.costs if footer else _running_costs(events),
            system=header.system,
            topology=header.topology,
            metrics=footer.metrics if footer else {},
            schema_version=header.schema_version,
            meta=meta,
        )._mark_decoded()
        found = list(problems)
        if check:
            found += [
                _on_its_line(p, src, start, lines_of)
                for p in check_trace(trace, partial=partial, known_ids=bad_ids)
                if not knock_on(p, trace, bad_to)
                # a trace whose reading stopped at a damaged line lacks events for that reason
                and not (p.code == "no-events" and problems)
            ]
        found.sort(key=lambda p: p.severity != "error")
        return JsonlItem(trace, found, start)

    lineno = 0
    for lineno, line in lines:
        if not line.strip():
            continue
        complete = line.endswith(b"\n")
        try:
            rec = _LINE.decode(line)
            kinds = [k for k in ("header", "event", "edge", "footer") if getattr(rec, k)]
            if len(kinds) > 1:
                raise _Mixed(kinds)
            if kinds and _repeats_a_key(line, kinds[0], rec):
                dup = duplicate_key(line)
                if dup is not None:
                    raise _Duplicate(dup)
        except (
            msgspec.ValidationError,
            msgspec.DecodeError,
            RecursionError,
            _Mixed,
            _Duplicate,
        ) as err:
            p = _line_error(src, lineno, line, err, complete)
            if not complete:
                if header is not None:
                    yield finish(
                        None,
                        f"line {lineno} was cut off mid-record after "
                        f"{len(events)} complete event(s)",
                    )
                else:
                    yield JsonlItem(None, [p], lineno)
                return
            problems.append(p)
            try:
                raw = msgspec.json.decode(line)
                ev = raw.get("event") if isinstance(raw, dict) else None
                eid = ev.get("id") if isinstance(ev, dict) else None
                if isinstance(eid, str):
                    bad_ids.append(eid)
                if isinstance(ev, dict) and isinstance(ev.get("to"), str):
                    bad_to.add(ev["to"])
            except (msgspec.DecodeError, AttributeError, RecursionError):
                pass
            if not keep_going:
                if header is not None:
                    yield finish(
                        None,
                        f"reading stopped at damaged line {lineno} (--keep-going reads past it)",
                    )
                else:
                    yield JsonlItem(None, problems, lineno)
                return
            continue
        if rec.header is not None:
            if header is not None:
                yield finish(None, f"a new trace starts at line {lineno} before this one closed")
            else:
                yield from headless()
            header, start, events, edges, problems, bad_ids = rec.header, lineno, [], [], [], []
            bad_to = set()
            lines_of = {"events": [], "edges": []}
        elif header is None:
            if not keep_going:
                problems.append(
                    Problem(
                        "missing-header",
                        "record before any header",
                        'a record stream starts with a {"header": ...} line',
                        source=f"{src}:{lineno}",
                    )
                )
                yield JsonlItem(None, problems, lineno)
                return
            orphans.append(lineno)
        elif rec.event is not None:
            events.append(rec.event)
            lines_of["events"].append(lineno)
        elif rec.edge is not None:
            edges.append(rec.edge)
            lines_of["edges"].append(lineno)
        elif rec.footer is not None:
            yield finish(rec.footer, None)
            header, problems, bad_ids, bad_to = None, [], [], set()
        else:
            problems.append(
                Problem(
                    "invalid-value", "empty record", "delete this line", source=f"{src}:{lineno}"
                )
            )
    if header is not None:
        yield finish(
            None, f"no footer: the recording stopped after {len(events)} event(s) (line {lineno})"
        )
    else:
        yield from headless()


_RECORD_AT = re.compile(r"\$\.(events|edges)\[(\d+)\]")


def _on_its_line(p: Problem, src: str, start: int, lines_of: dict[str, list[int]]) -> Problem:
    """Attribute a problem of a streamed trace to the line of the record it is about.

    ``$.events[3].id`` becomes ``FILE:LINE: $.event.id``, and a mention of another record
    (``first used at $.events[1]``) names its line, so dropped lines never shift a location.
    """

    def line(kind: str, index: str) -> int | None:
        found = lines_of[kind]
        i = int(index)
        return found[i] if i < len(found) else None

    def mention(m: re.Match[str]) -> str:
        at = line(m.group(1), m.group(2))
        return f"line {at}" if at is not None else m.group(0)

    message = _RECORD_AT.sub(mention, p.message)
    m = _RECORD_AT.match(p.path)
    at = line(m.group(1), m.group(2)) if m else None
    if m is None or at is None:
        return replace(p, message=message, source=f"{src}:{start}")
    path = f"$.{m.group(1)[:-1]}{p.path[m.end() :]}"
    return replace(p, message=message, path=path, source=f"{src}:{at}")


def _running_costs(events: list[Event]) -> dict[str, float]:
    from orchestrace.trace.build import default_costs

    return default_costs(events)


def read_jsonl(
    path: PathLike, *, keep_going: bool = False, partial: bool = True, check: bool = False
) -> list[Trace]:
    """Read every trace of a JSONL file (either layout).

    A recording cut off by a crash is returned with ``meta["partial"] = True`` and every
    complete event kept.

    Args:
        path: The file.
        keep_going: Skip damaged lines and keep traces with errors instead of raising.
        partial: Accept truncated recordings (default; ``False`` raises on them).
        check: Also run ``check_trace`` on each trace and raise on errors.

    Raises:
        TraceFormatError: A line is damaged (and ``keep_going`` is off).
        TraceValidationError: A trace has errors.
    """
    out: list[Trace] = []
    for item in iter_jsonl(path, keep_going=keep_going, partial=partial, check=check):
        if item.trace is None:
            if keep_going:
                continue
            raise TraceValidationError(item.problems, source=str(path))
        if not keep_going and any(p.severity == "error" for p in item.problems):
            raise TraceValidationError(item.problems, source=str(path))
        out.append(item.trace)
    return out
