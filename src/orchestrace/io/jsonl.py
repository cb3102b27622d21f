"""JSON Lines: many traces per file, or one trace streamed record by record.

Two layouts share the ``.jsonl`` suffix and are told apart by the first key of the first line:

* **Trace lines**: each line is one complete trace (a dataset of traces), read as a JSON file
  of it is read: native, or survey schema when its top level has neither ``schema_version``
  nor ``meta``.
* **Record stream** (first key ``header``): what the runtime writes while it runs, one record
  per line and flushed as it happens: ``{"header": {...}}``, then ``{"event": {...}}`` and
  ``{"edge": {...}}`` records, and ``{"footer": {...}}`` (rewards, costs, metrics) when the run
  closes. A file cut off by a crash still loads: every complete record is kept and the trace
  is marked partial (``meta["partial"] = True``), which ``orchestrace validate --partial``
  accepts.

A damaged line stops reading with an error naming its line; with ``keep_going=True`` it is
reported and skipped, and every other record is read.

This module reads; the writers (:class:`StreamWriter`, :func:`write_jsonl`) live in
:mod:`orchestrace.io._jsonl_write` and are re-exported here, and the batched decoding of
record lines in :mod:`orchestrace.io._jsonl_records`, reading the file's lines (one at a time or
in blocks) in :mod:`orchestrace.io._jsonl_lines`. The trace-lines and the stream readers stay
together here: they share how a damaged line is reported and placed on its line, which must
read the same whichever path found it.

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

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from orchestrace.errors import Problem, TraceFormatError, TraceValidationError, _short
from orchestrace.io import _common
from orchestrace.io import _jsonl_lines as _jl
from orchestrace.io import _jsonl_records as _jr
from orchestrace.io._common import PathLike, format_error
from orchestrace.io._jsonl_lines import Lines
from orchestrace.io._jsonl_write import _ENC, StreamWriter, _Footer, _Header, _Line, write_jsonl
from orchestrace.io.json import (
    _check_duplicate_keys,
    _finish_survey,
    _native_top_level,
    duplicate_key,
    parse,
)
from orchestrace.trace.build import default_costs
from orchestrace.trace.check import _run, check_trace
from orchestrace.trace.diagnose import _EVENT_INDEX, _as_checked, knock_on, problem_from_msgspec
from orchestrace.trace.graph import TraceGraph
from orchestrace.trace.model import (
    Edge,
    Event,
    Trace,
)

__all__ = [
    "JsonlItem",
    "StreamWriter",
    "iter_jsonl",
    "read_jsonl",
    "write_jsonl",
]


_LINE = msgspec.json.Decoder(_Line)
_TRACE = msgspec.json.Decoder(Trace)


@dataclass
class JsonlItem:
    """One trace read from a JSONL file, with what was found on the way.

    Attributes:
        trace: The trace, or ``None`` when its line could not be read. Read with
            ``columnar=True`` from a record stream, it holds the header, footer and costs
            only (no events nor edges): those are in ``graph``.
        problems: Problems of this trace or line (each names the line).
        line: First line of the trace (1-based).
        graph: With ``columnar=True``, a record stream's trace compiled from columns
            (``None`` otherwise).
        n_errors: With ``graph``: how many events record an ``error``.
    """

    trace: Trace | None
    problems: list[Problem] = field(default_factory=list)
    line: int = 0
    graph: TraceGraph | None = None
    n_errors: int = 0

    @property
    def n_events(self) -> int:
        """Events of the trace (0 when it could not be read)."""
        if self.graph is not None:
            return self.graph.n
        return self.trace.n_events if self.trace is not None else 0


# ---------------------------------------------------------------------- reading
#: Bytes read at a time by the block reader of record streams.
BLOCK_BYTES = 1 << 22
#: Read record streams in blocks and decode their lines in batches (``False``: line by line).
BATCHED = True


def iter_jsonl(
    path: PathLike,
    *,
    keep_going: bool = False,
    partial: bool = False,
    check: bool = True,
    columnar: bool = False,
) -> Iterator[JsonlItem]:
    """Read a JSONL file (either layout) item by item, never raising on bad content.

    Args:
        path: The file.
        keep_going: Skip damaged lines (reported in ``problems``) instead of stopping there.
        partial: Accept truncated recordings (truncation becomes a warning).
        check: Run ``check_trace`` on each trace read.
        columnar: Keep a record stream's events and edges as columns and compile them into
            ``JsonlItem.graph`` (checked column-wise, with the same problems), instead of
            building event objects: memory then grows by about 150 bytes per event and
            edge, a fraction of what objects take. Trace lines are read as objects either
            way (each line is a whole trace).

    Yields:
        One :class:`JsonlItem` per trace (or per unreadable trace line).

    Raises:
        TraceFormatError: The file cannot be opened.
    """
    src = str(path)
    with _common.open_input(path, directory_hint="pass a .jsonl file") as fh:
        lines = _jl.lines(fh, src)
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
        if _jr.starts_a_stream(first[1]):
            blocks = None
            if BATCHED:
                n, line = first
                head = [(n, [line[:-1]], True) if line.endswith(b"\n") else (n, [line], False)]
                blocks = itertools.chain(head, _jl.line_blocks(fh, src, n, BLOCK_BYTES))
            yield from _iter_stream(rest, src, keep_going, partial, check, columnar, blocks)
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


def _repeats_a_key(line: bytes, kind: str, rec: _Line) -> bool:
    """Whether a record line may hold a repeated key (cheap; confirmed by a full parse).

    A line exactly as orchestrace writes it cannot (re-encoding the record gives it back);
    another line is counted (:func:`~orchestrace.io._jsonl_records.no_repeated_key`).
    """
    if _ENC.encode(rec) == line.rstrip(b"\r\n"):
        return False
    if kind not in ("event", "edge"):
        return True  # header and footer lines are rare: always checked in full
    return not _jr.no_repeated_key(line)


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
    syntax = isinstance(err, RecursionError) or (
        isinstance(err, msgspec.DecodeError) and not isinstance(err, msgspec.ValidationError)
    )
    fe = format_error(src, line, err) if syntax else None
    if fe is not None:
        return Problem(
            "malformed-json",
            fe.reason + f" at {fe.where.replace('line 1, ', '')}",
            "fix or delete this line (--keep-going skips it)",
            source=f"{src}:{lineno}",
        )

    p = problem_from_msgspec(err, "$", where="record")
    if p.code == "out-of-range" and p.path.startswith("$.event."):
        try:
            record = msgspec.json.decode(line)
        except (msgspec.DecodeError, RecursionError):
            record = None
        if isinstance(record, dict):
            p = _as_checked(p, record.get("event"))
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
                cut = Problem(
                    "truncated",
                    "last line is incomplete: the file was cut off in the middle of this trace",
                    "the traces on the lines before it are whole: --keep-going reads them "
                    "(keep_going=True in Python); --partial does not mend a cut trace line",
                    source=f"{src}:{lineno}",
                    path="$",
                )
                yield JsonlItem(None, [cut], lineno)
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
        if not _native_top_level(line, trace):
            # a survey-schema trace that the typed decoder also reads: imported as a JSON file
            # of it is (its markers restored, its graph problems semantic), whichever path
            # reads the line
            at = f"{src}:{lineno}"
            done = _finish_survey(line, trace, source=at, partial=partial, check=check)
            imported, problems = done or parse(line, source=at, partial=partial, check=check)
            yield JsonlItem(imported, problems, lineno)
            continue
        problems = (
            [p.at(f"{src}:{lineno}") for p in check_trace(trace, partial=partial)] if check else []
        )
        yield JsonlItem(trace, problems, lineno)


def _iter_stream(
    lines: Lines,
    src: str,
    keep_going: bool,
    partial: bool,
    check: bool,
    columnar: bool = False,
    blocks: Iterator[_jl.Block] | None = None,
) -> Iterator[JsonlItem]:
    header: _Header | None = None
    start = 0
    records = _Records(columnar)
    problems: list[Problem] = []
    bad_ids: list[str] = []
    # agents a damaged event spawned or addressed: their missing spawn is no separate error
    bad_to: set[str] = set()
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
        cols = records.columns
        events = records.events
        trace = Trace(
            trace_id=header.trace_id,
            task_id=header.task_id,
            events=() if cols is not None else tuple(events),
            edges=() if cols is not None else tuple(records.edges),
            rewards=footer.rewards if footer else {},
            costs=footer.costs
            if footer
            else (cols.costs() if cols is not None else _running_costs(events)),
            system=header.system,
            topology=header.topology,
            metrics=footer.metrics if footer else {},
            schema_version=header.schema_version,
            meta=meta,
        )._mark_decoded()
        graph = cols.graph() if cols is not None else None
        found = list(problems)
        if check:
            if graph is not None:
                checked = _run(trace, partial=partial, known_ids=frozenset(bad_ids), graph=graph)
            else:
                checked = check_trace(trace, partial=partial, known_ids=bad_ids)
            found += [
                _on_its_line(p, src, start, records.lines_of)
                for p in checked
                if not _knock_on(p, trace, graph, bad_to)
                # a trace whose reading stopped at a damaged line lacks events for that reason
                and not (p.code == "no-events" and problems)
            ]
        found.sort(key=lambda p: p.severity != "error")
        item = JsonlItem(trace, found, start)
        if cols is not None:
            item.graph, item.n_errors = graph, cols.n_errors
        return item

    def pieces() -> Iterator[_jr.Run | tuple[int, bytes]]:
        """Lines, and runs of clean records while a trace is open (read line by line else)."""
        if blocks is None:
            yield from lines
            return
        for piece in _jr.decoded(blocks, _repeats_a_key):
            if isinstance(piece, _jr.Run) and header is None:
                yield from piece.singles()
            else:
                yield piece

    lineno = 0
    for piece in pieces():
        if isinstance(piece, _jr.Run):
            records.add_run(piece)
            lineno = piece.last
            continue
        lineno, line = piece
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
                        f"{records.n_events} complete event(s)",
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
            header, start, problems, bad_ids = rec.header, lineno, [], []
            records = _Records(columnar)
            bad_to = set()
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
            records.add_event(rec.event, lineno)
        elif rec.edge is not None:
            records.add_edge(rec.edge, lineno)
        elif rec.footer is not None:
            yield finish(rec.footer, None)
            header, problems, bad_ids, bad_to = None, [], [], set()
            records = _Records(columnar)
        else:
            problems.append(
                Problem(
                    "invalid-value", "empty record", "delete this line", source=f"{src}:{lineno}"
                )
            )
    if header is not None:
        yield finish(
            None,
            f"no footer: the recording stopped after {records.n_events} event(s) (line {lineno})",
        )
    else:
        yield from headless()


class _Records:
    """The events and edges of the trace being read: objects, or columns (``columnar``)."""

    def __init__(self, columnar: bool) -> None:
        self.columns = _jr.RecordColumns() if columnar else None
        self.events: list[Event] = []
        self.edges: list[Edge] = []
        self._lines: dict[str, list[int]] = {"events": [], "edges": []}

    @property
    def lines_of(self) -> Any:
        """The line of each kept event and edge (problems name their line)."""
        return self.columns.lines_of if self.columns is not None else self._lines

    @property
    def n_events(self) -> int:
        """Events kept so far."""
        return self.columns.n_events if self.columns is not None else len(self.events)

    def add_event(self, event: Event, line: int) -> None:
        if self.columns is not None:
            self.columns.add_event(event, line)
        else:
            self.events.append(event)
            self._lines["events"].append(line)

    def add_edge(self, edge: Edge, line: int) -> None:
        if self.columns is not None:
            self.columns.add_edge(edge, line)
        else:
            self.edges.append(edge)
            self._lines["edges"].append(line)

    def add_run(self, run: _jr.Run) -> None:
        if self.columns is not None:
            self.columns.add_events(run.events, run.event_lines)
            self.columns.add_edges(run.edges, run.edge_lines)
        else:
            self.events += run.events
            self._lines["events"] += run.event_lines
            self.edges += run.edges
            self._lines["edges"] += run.edge_lines


def _knock_on(p: Problem, trace: Trace, graph: TraceGraph | None, bad_to: set[str]) -> bool:
    """:func:`~orchestrace.trace.diagnose.knock_on`, reading a compiled graph when given."""
    if graph is None:
        return knock_on(p, trace, bad_to)
    if p.code not in ("return-without-spawn", "event-before-spawn") or not bad_to:
        return False
    m = _EVENT_INDEX.match(p.path)
    if m is None or int(m.group(1)) >= graph.n:
        return False
    return graph.names[int(graph.agent_code[int(m.group(1))])] in bad_to


_RECORD_AT = re.compile(r"\$\.(events|edges)\[(\d+)\]")


def _on_its_line(p: Problem, src: str, start: int, lines_of: Any) -> Problem:
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
