"""Native JSON: one trace per file (survey-schema files are recognised and imported).

Example:
    >>> from orchestrace.trace.generate import generate_trace
    >>> tr = generate_trace(agents=3, steps=20, seed=0)
    >>> loads(dumps(tr)) == tr
    True
    >>> loads(b'{"trace_id": "x"')
    Traceback (most recent call last):
    ...
    orchestrace.errors.TraceFormatError: <bytes>: end of data, line 1, column 17 (byte 16): JSON ends early (the file was cut off); restore the full file; for a recording, use the JSONL file, which keeps every complete record
"""

from __future__ import annotations

from typing import Any

import msgspec

from orchestrace.errors import Problem, TraceValidationError
from orchestrace.io._common import PathLike, atomic_write, format_error, read_bytes
from orchestrace.io.upstream import from_upstream, looks_upstream, restore_markers
from orchestrace.trace.check import check_structure, check_trace
from orchestrace.trace.model import Trace

__all__ = ["dumps", "loads", "parse", "read_json", "write_json"]

_DECODER = msgspec.json.Decoder(Trace)
_ENCODER = msgspec.json.Encoder()


def dumps(trace: Trace, *, indent: int | None = None) -> bytes:
    """Encode ``trace`` as native JSON bytes (compact, or indented by ``indent`` spaces)."""
    data = _ENCODER.encode(trace)
    return msgspec.json.format(data, indent=indent) if indent else data


def parse(
    data: Any,
    *,
    source: str = "<bytes>",
    partial: bool = False,
    upstream: bool | None = None,
    check: bool = True,
) -> tuple[Trace | None, list[Problem]]:
    """Decode one JSON trace; report problems instead of raising for bad content.

    Args:
        data: JSON bytes (or str).
        source: Name used in messages (the file).
        partial: Accept a truncated recording (see :func:`~orchestrace.trace.check.check_trace`).
        upstream: Force (``True``) or forbid (``False``) reading it as a survey-schema trace;
            ``None`` decides by the absence of ``schema_version``.
        check: Also run ``check_trace`` (otherwise only structural problems are reported).

    Returns:
        ``(trace, problems)``: the trace (``None`` when unusable) and every problem found.

    Raises:
        TraceFormatError: The bytes are not JSON (syntax error, cut off, binary).
    """
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    # 1. the typed decoder: native files, and survey-schema files (ours included) whose events
    #    carry only known fields
    try:
        trace = _DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass
    except RecursionError as err:
        raise format_error(source, data, err) from None
    else:
        native = data.rfind(b'"schema_version"') >= 0
        if upstream is not False or native:
            trace._mark_decoded()
            if not native:
                trace = restore_markers(trace)
            problems = check_trace(trace, partial=partial) if check else []
            return trace, [p.at(source) for p in problems]
    # 2. field by field, reporting every problem
    try:
        obj = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError) as err:
        raise format_error(source, data, err) from None
    found: tuple[Trace | None, list[Problem]]
    if upstream or (upstream is None and looks_upstream(obj)):
        found = from_upstream(obj, partial=partial, semantic=check)
    else:
        found = check_structure(obj, partial=partial, semantic=check)
    return found[0], [p.at(source) for p in found[1]]


def loads(
    data: Any, *, source: str = "<bytes>", upstream: bool | None = None, check: bool = True
) -> Trace:
    """Decode one JSON trace.

    Args:
        data: JSON bytes or str.
        source: Name used in error messages.
        upstream: See :func:`parse`.
        check: Run ``check_trace`` too (default); ``False`` checks structure only.

    Raises:
        TraceFormatError: Not JSON.
        TraceValidationError: JSON, but not a valid trace (lists every problem).
    """
    trace, problems = parse(data, source=source, upstream=upstream, check=check)
    if trace is None or any(p.severity == "error" for p in problems):
        raise TraceValidationError(problems, source=source)
    return trace


def read_json(path: PathLike, *, upstream: bool | None = None, check: bool = True) -> Trace:
    """Read a JSON trace file (native or survey schema); see :func:`loads`."""
    return loads(read_bytes(path), source=str(path), upstream=upstream, check=check)


def write_json(trace: Trace, path: PathLike, *, indent: int | None = None) -> None:
    """Write ``trace`` as native JSON, atomically (a crash never leaves half a file)."""
    data = dumps(trace, indent=indent)
    with atomic_write(path) as fh:
        fh.write(data)
