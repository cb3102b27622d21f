"""Reading and writing traces: native JSON, JSONL, Parquet and the survey schema.

:func:`load` and :func:`dump` pick the format from the file name (``.json``, ``.jsonl``,
``.parquet``) unless ``format=`` says otherwise; ``"upstream"`` reads or writes the public survey
schema.

Example:
    >>> import tempfile, os
    >>> from orchestrace.trace.generate import generate_trace
    >>> tr = generate_trace(agents=3, steps=20, seed=0)
    >>> d = tempfile.mkdtemp()
    >>> for name in ("t.json", "t.jsonl", "t.parquet"):
    ...     dump(tr, os.path.join(d, name))
    ...     assert load(os.path.join(d, name)) == tr
    >>> dump(tr, os.path.join(d, "up.json"), format="upstream")
    >>> load(os.path.join(d, "up.json")) == tr
    True
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from orchestrace._collector import paused
from orchestrace.errors import ConfigError, Problem, TraceFormatError, TraceValidationError
from orchestrace.io._common import (
    BOM,
    PathLike,
    atomic_write,
    open_input,
    peek_stream,
    read_bytes,
)
from orchestrace.io._output import OutputError, check_output, is_our_dataset
from orchestrace.io._writable import require_writable
from orchestrace.io.importers import (
    EXPORT_FORMATS,
    IMPORT_FORMATS,
    ImportResult,
    _json_values,
    export_bytes,
    import_path,
    sniff_value,
)
from orchestrace.io.json import check_indent, dumps, loads, parse, read_json, write_json
from orchestrace.io.jsonl import JsonlItem, StreamWriter, iter_jsonl, read_jsonl, write_jsonl
from orchestrace.io.parquet import parse_parquet, read_graph, read_parquet, write_parquet
from orchestrace.io.upstream import from_upstream, to_upstream
from orchestrace.trace.model import Trace

__all__ = [
    "EXPORT_FORMATS",
    "FORMATS",
    "IMPORT_FORMATS",
    "ImportResult",
    "JsonlItem",
    "OutputError",
    "StreamWriter",
    "check_dump_target",
    "detect_format",
    "dump",
    "dumps",
    "export_bytes",
    "foreign_format",
    "from_upstream",
    "import_path",
    "iter_jsonl",
    "iter_traces",
    "load",
    "load_all",
    "loads",
    "parse",
    "read_graph",
    "read_json",
    "read_jsonl",
    "read_parquet",
    "to_upstream",
    "write_json",
    "write_jsonl",
    "write_parquet",
]

#: Formats :func:`load` and :func:`dump` understand.
FORMATS: tuple[str, ...] = ("json", "upstream", "jsonl", "parquet")


def detect_format(path: PathLike) -> str:
    """The format of ``path``: from its suffix, else from its first bytes.

    Suffixes: ``.json``, ``.jsonl``/``.ndjson``, ``.parquet`` (a directory).

    Raises:
        TraceFormatError: The format cannot be told (the message says how to name it), or the
            file cannot be read (missing, a device, unreadable).
    """
    if not os.fspath(path):
        raise TraceFormatError("", "file", "the input path is empty", "give a trace file")
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".json":
        return "json"
    if suffix == ".parquet" or _is_dir(p):
        return "parquet"
    head = peek_stream(p)
    if head is None:
        with open_input(p) as fh:  # refuses devices; names a missing or unreadable file
            try:
                head = fh.read(4096)
            except OSError:
                head = b""
    if head.startswith(BOM):
        head = head[len(BOM) :]
    lines = [x for x in head.splitlines() if x.strip()]
    if lines and lines[0].lstrip().startswith(b"{"):
        return "jsonl" if len(lines) > 1 and lines[1].lstrip().startswith(b"{") else "json"
    raise TraceFormatError(
        str(path),
        "input" if str(path) == "-" else "file name",
        "cannot tell the trace format",
        "name it *.json, *.jsonl or *.parquet, or name its format with `--from` "
        f"(`orchestrace convert`) or format= (Python): one of {', '.join(FORMATS)}",
    )


#: Top-level keys that make a JSON value an orchestrace or survey-schema trace, or a record of a
#: streamed recording, rather than another tool's output.
_TRACE_KEYS = frozenset(
    {"trace_id", "task_id", "events", "edges", "schema_version", "meta"}
    | {"header", "event", "edge", "footer"}
)


def foreign_format(path: PathLike) -> str | None:
    """The import format of a JSON/JSONL file that is not a trace, told from its structure.

    Readers call this only after a file failed to read as a native or survey-schema trace,
    so reading traces costs nothing extra. The file's first JSON value (the document, or its
    first line) is a trace when it is an object with a trace's keys (``events``,
    ``trace_id``...) or a recording's (``header``...); then ``None`` is returned and the
    reader's own errors stand. Otherwise the importers' ``sniff`` functions decide.

    Only a regular file is looked at again. A pipe, FIFO or device was read to its end by the
    reader that failed, so ``None`` is returned for it at once (the reader's errors stand; a
    foreign format arriving on a stream is named with ``--from``), instead of reading nothing
    or waiting for a second writer.

    Raises:
        TraceFormatError: The file is neither a trace nor a format an importer recognises:
            one line naming the file and the ``--from`` choices.

    Example:
        >>> import json, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "t.json")
        >>> with open(path, "w") as fh:
        ...     json.dump({"trace_id": "t", "task_id": "k", "events": []}, fh)
        >>> foreign_format(path) is None  # a trace (an invalid one): its own errors stand
        True
    """
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        regular = False
    if not regular:
        return None
    try:
        values, _cut = _json_values(path)
    except (TraceFormatError, RecursionError):
        return None  # not JSON (or nested too deep): the reader's error says where
    if not values:
        return None
    if isinstance(values[0], dict) and not _TRACE_KEYS.isdisjoint(values[0]):
        return sniff_value(values[0])  # an Agents SDK span has a trace_id, yet is no trace
    found = sniff_value(values[0])
    if found is None:
        raise TraceFormatError(
            str(path),
            "file",
            "not an orchestrace trace, a survey-schema trace, or a format orchestrace can import",
            f"if it is one of {', '.join(IMPORT_FORMATS)}, name it with --from "
            "(`orchestrace convert --from FORMAT IN -o OUT`)",
        )
    return found


def _is_dir(p: Path) -> bool:
    try:
        return stat.S_ISDIR(os.stat(p).st_mode)
    except (OSError, ValueError):
        return False  # reading it names the problem


def _check_format(fmt: str, allowed: tuple[str, ...] = FORMATS) -> str:
    if fmt not in allowed:
        raise TraceFormatError(
            "format",
            "argument",
            f"unknown format {fmt!r}",
            f"use one of {', '.join(allowed)} (`--from`/`--to` of `orchestrace convert`)",
        )
    return fmt


@paused()
def load_all(
    path: PathLike,
    *,
    format: str | None = None,
    keep_going: bool = False,
    check: bool = False,
    partial: bool | None = None,
    problems: list[Problem] | None = None,
) -> list[Trace]:
    """Read every trace in ``path``.

    Every format is type- and range-checked while reading; ``check`` adds the rules of
    ``check_trace`` (unique ids, edges to existing events, no cycles, ...).

    Args:
        path: A trace file or Parquet dataset.
        format: One of :data:`FORMATS` or :data:`IMPORT_FORMATS` (default: from the name, and
            for a JSON/JSONL file that is not a trace, from its structure: see
            :func:`foreign_format`).
        keep_going: JSONL only: skip damaged lines instead of raising.
        check: Run ``check_trace`` and raise on errors.
        partial: With ``check``: accept (``True``) or refuse (``False``) a truncated
            recording (``meta.partial``). ``None``: JSONL accepts it, other formats refuse.
        problems: JSON: receives the problems that did not stop reading (warnings, and with
            ``check`` the ``"semantic"`` problems of an imported survey-schema trace).

    Raises:
        TraceFormatError: The file cannot be parsed.
        TraceValidationError: A trace is invalid (lists every problem).
    """
    fmt = _check_format(format or detect_format(path), FORMATS + IMPORT_FORMATS)
    if fmt in IMPORT_FORMATS:
        return import_path(path, format=fmt).traces
    try:
        return _load_native(
            path, fmt, keep_going=keep_going, check=check, partial=partial, problems=problems
        )
    except (TraceFormatError, TraceValidationError):
        foreign = foreign_format(path) if format is None and fmt in ("json", "jsonl") else None
        if foreign is None:
            raise
    return import_path(path, format=foreign).traces


def _load_native(
    path: PathLike,
    fmt: str,
    *,
    keep_going: bool,
    check: bool,
    partial: bool | None,
    problems: list[Problem] | None,
) -> list[Trace]:
    if fmt == "jsonl":
        return read_jsonl(
            path, keep_going=keep_going, check=check, partial=True if partial is None else partial
        )
    if fmt == "parquet":
        out: list[Trace] = []
        for label, item, found in parse_parquet(path, partial=bool(partial), check=check):
            if item is None or any(p.severity == "error" for p in found):
                raise TraceValidationError(found, source=f"{path}[{label}]")
            out.append(item)
        return out
    trace, found = parse(
        read_bytes(path),
        source=str(path),
        upstream=True if fmt == "upstream" else None,
        check=check,
        partial=bool(partial),
    )
    if trace is None or any(p.severity == "error" for p in found):
        raise TraceValidationError(found, source=str(path))
    if problems is not None:
        problems.extend(found)
    return [trace]


def load(
    path: PathLike, *, format: str | None = None, check: bool = True, partial: bool | None = None
) -> Trace:
    """Read the one trace in ``path`` (JSON, survey-schema JSON, JSONL or Parquet).

    Args:
        path: The file (or Parquet dataset directory).
        format: One of :data:`FORMATS` (default: from the name).
        check: Run ``check_trace`` and raise on errors (default).
        partial: Accept a truncated recording; see :func:`load_all`.

    Raises:
        TraceFormatError: Unparseable, or the file holds several traces (use :func:`load_all`).
        TraceValidationError: The trace is invalid (lists every problem).
    """
    traces = load_all(path, format=format, check=check, partial=partial)
    if len(traces) != 1:
        raise TraceFormatError(
            str(path),
            "file",
            f"holds {len(traces)} traces, not one",
            "read them with load_all() or iter_traces()",
        )
    return traces[0]


def iter_traces(
    path: PathLike, *, format: str | None = None, keep_going: bool = False
) -> Iterator[Trace]:
    """Yield the traces of ``path`` one at a time (JSONL is streamed line by line).

    Without ``format``, a JSON/JSONL file written by another tool is imported (see
    :func:`foreign_format`).
    """
    fmt = _check_format(format or detect_format(path), FORMATS + IMPORT_FORMATS)
    if fmt != "jsonl":
        yield from load_all(path, format=format, keep_going=keep_going)
        return
    first = True
    for item in iter_jsonl(path, keep_going=keep_going, partial=True, check=False):
        if item.trace is None or (
            not keep_going and any(p.severity == "error" for p in item.problems)
        ):
            if keep_going:
                continue
            foreign = foreign_format(path) if first and format is None else None
            if foreign is not None:
                yield from import_path(path, format=foreign).traces
                return
            raise TraceValidationError(item.problems, source=str(path))
        first = False
        yield item.trace


def output_format(path: PathLike, format: str | None = None) -> str:
    """The format :func:`dump` writes to ``path``: ``format``, else from the name.

    ``.json``, ``.jsonl``/``.ndjson`` and ``.parquet`` name their format; a name without a
    suffix is native JSON, unless it is an existing Parquet dataset orchestrace wrote. The
    contents of an existing file or directory never decide it (a directory that is not a
    dataset is refused when written, see :func:`~orchestrace.io._output.check_output`).

    Raises:
        TraceFormatError: An unknown format, or a suffix that names none.
    """
    if format is not None:
        return _check_format(format, FORMATS + EXPORT_FORMATS)
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".parquet" or is_our_dataset(p):
        return "parquet"
    if suffix in ("", ".json") or os.path.isdir(p):
        return "json"
    raise TraceFormatError(
        str(path),
        "file name",
        f"cannot tell the output format from the suffix {suffix!r}",
        "name it *.json, *.jsonl or *.parquet, or name the format (`--to` of `orchestrace "
        f"convert`, `--format` of `generate`, format= in Python): one of {', '.join(FORMATS)}",
    )


def check_dump_target(
    path: PathLike,
    *,
    format: str | None = None,
    overwrite: bool = False,
    inputs: Iterable[PathLike] = (),
) -> str:
    """Check, before any work, that :func:`dump` may write ``path``; return the format.

    Raises:
        OutputError: The output exists (without ``overwrite``), is a directory orchestrace
            did not write, or the path cannot hold it; the message says what to do.
        TraceFormatError: The format cannot be told.
    """
    fmt = output_format(path, format)
    check_output(
        path, force=overwrite, kind="dataset" if fmt == "parquet" else "file", inputs=inputs
    )
    return fmt


def dump(
    traces: Trace | Iterable[Trace],
    path: PathLike,
    *,
    format: str | None = None,
    indent: int | None = None,
    overwrite: bool = False,
) -> None:
    """Write one trace or many to ``path`` (atomically; the format comes from the name).

    JSON and survey-schema JSON hold exactly one trace; JSONL and Parquet hold any number.
    An existing output is replaced only with ``overwrite=True`` (a directory only when it is
    a dataset orchestrace wrote), by renaming a complete new file or dataset into place.

    Args:
        traces: One trace or many.
        path: The output file (or dataset directory).
        format: One of :data:`FORMATS` (default: from the name, see :func:`output_format`).
        indent: JSON: indent by this many spaces (0 to 32).
        overwrite: Replace an existing output.

    Raises:
        ConfigError: ``indent`` is negative or over 32, or something given is not a trace.
        TraceValidationError: A trace holds a value no file can hold exactly: NaN or
            infinity (JSON would write ``null``), a negative duration, a field of the wrong
            type. Nothing is written; the problems name each value.
        TraceFormatError: Several traces for a one-trace format, or an unknown format.
        OutputError: The output exists (without ``overwrite``), is not ours, the path cannot
            hold it, or writing failed (nothing half-written is left, the previous output is
            kept).
    """
    check_indent(indent)
    items = [traces] if isinstance(traces, Trace) else _items(traces)
    fmt = check_dump_target(path, format=format, overwrite=overwrite)
    # the caller's iterable is drained first: its own code (a run, say) is not paused
    with paused():
        require_writable(items)  # before anything is created
        _dump(items, path, fmt, indent, overwrite)


def _items(traces: Any) -> list[Any]:
    """The traces of ``traces`` as a list (a string or bytes is not a collection of traces)."""
    if isinstance(traces, str | bytes | bytearray | dict) or not hasattr(traces, "__iter__"):
        raise ConfigError(
            f"dump writes a Trace or an iterable of them, not a {type(traces).__name__}: "
            "build traces with TraceBuilder, or read them with orchestrace.io.load"
        )
    return list(traces)


def _dump(
    items: list[Trace], path: PathLike, fmt: str, indent: int | None, overwrite: bool
) -> None:
    if fmt in EXPORT_FORMATS:
        data = export_bytes(items, format=fmt)
        with atomic_write(path, force=overwrite) as fh:
            fh.write(data)
        return
    if fmt == "jsonl":
        write_jsonl(items, path, overwrite=overwrite)
        return
    if fmt == "parquet":
        write_parquet(items, path, overwrite=overwrite)
        return
    if len(items) != 1:
        raise TraceFormatError(
            str(path),
            "file",
            f"{fmt} holds one trace, got {len(items)}",
            "write them to a .jsonl file or a .parquet dataset",
        )
    if fmt == "upstream":
        data = msgspec.json.encode(to_upstream(items[0]))
        if indent:
            data = msgspec.json.format(data, indent=indent)
        with atomic_write(path, force=overwrite) as fh:
            fh.write(data)
        return
    write_json(items[0], path, indent=indent, overwrite=overwrite)
