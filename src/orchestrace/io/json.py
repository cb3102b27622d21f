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

import json as pyjson
import re
from typing import Any

import msgspec
import numpy as np

from orchestrace._collector import paused
from orchestrace.errors import (
    ConfigError,
    Problem,
    TraceFormatError,
    TraceValidationError,
    _short,
)
from orchestrace.io._common import (
    BOM,
    PathLike,
    atomic_write,
    describe_offset,
    format_error,
    read_bytes,
)
from orchestrace.io._writable import require_writable
from orchestrace.io.upstream import from_typed, from_upstream, is_native_object
from orchestrace.trace.check import _RANK, check_trace
from orchestrace.trace.diagnose import check_structure
from orchestrace.trace.model import Trace

__all__ = ["dumps", "loads", "parse", "read_json", "write_json"]

_DECODER = msgspec.json.Decoder(Trace)
_ENCODER = msgspec.json.Encoder()


#: Most spaces JSON output is indented by.
MAX_INDENT = 32


def check_indent(indent: int | None) -> None:
    """Refuse an indent that is not a whole number of spaces from 0 to :data:`MAX_INDENT`.

    Example:
        >>> check_indent(2)
        >>> check_indent(10**9)
        Traceback (most recent call last):
        ...
        orchestrace.errors.ConfigError: indent must be at most 32 spaces (got 1,000,000,000); e.g. 2
    """
    if indent is None:
        return
    if not isinstance(indent, int) or isinstance(indent, bool) or indent < 0:
        raise ConfigError(f"indent must be a whole number of spaces >= 0 (got {indent!r}); e.g. 2")
    if indent > MAX_INDENT:
        raise ConfigError(f"indent must be at most {MAX_INDENT} spaces (got {indent:,}); e.g. 2")


def dumps(trace: Trace, *, indent: int | None = None) -> bytes:
    """Encode ``trace`` as native JSON bytes (compact, or indented by ``indent`` spaces).

    Raises:
        ConfigError: ``trace`` is not a trace, or ``indent`` is out of range.
        TraceValidationError: The trace holds a value JSON cannot hold exactly (NaN or
            infinity, which an encoder writes as ``null``), or one of the wrong type.
    """
    check_indent(indent)
    require_writable([trace])
    data = _ENCODER.encode(trace)
    return msgspec.json.format(data, indent=indent) if indent else data


@paused()
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
            ``None`` decides by its structure: a top level without ``schema_version`` and
            ``meta`` is a survey-schema trace, imported exactly (see
            :mod:`orchestrace.io.upstream`); its problems beyond the survey schema are
            ``"semantic"`` (listed, not fatal).
        check: Also run ``check_trace`` (otherwise only structural problems are reported).

    Returns:
        ``(trace, problems)``: the trace (``None`` when unusable) and every problem found.

    Raises:
        TraceFormatError: The bytes are not JSON (syntax error, cut off, binary).
    """
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if data[:3] == BOM:
        data = bytes(data[3:])
    top = _check_duplicate_keys(data, source)
    # 1. the typed decoder: native files, and survey-schema files (ours included) whose events
    #    carry only known fields
    typed_error = ""
    try:
        trace = _DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as err:
        typed_error = str(err)
    except RecursionError as err:
        raise format_error(source, data, err) from None
    else:
        trace._mark_decoded()
        if upstream is False or (upstream is None and _native_top_level(data, trace, top)):
            problems = check_trace(trace, partial=partial) if check else []
            return trace, [p.at(source) for p in problems]
        done = _finish_survey(data, trace, top, source=source, partial=partial, check=check)
        if done is not None:
            return done
    # 2. field by field, reporting every problem
    try:
        obj = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError) as err:
        if "Number out of range" in str(err):
            raise _out_of_range(source, data, typed_error) from None
        raise format_error(source, data, err) from None
    found: tuple[Trace | None, list[Problem]]
    if upstream or (upstream is None and isinstance(obj, dict) and not is_native_object(obj)):
        found = from_upstream(obj, partial=partial, semantic=check)
    else:
        found = check_structure(obj, partial=partial, semantic=check)
    return found[0], [p.at(source) for p in found[1]]


def _finish_survey(
    data: Any,
    trace: Trace,
    top: _TopLevel | None = None,
    *,
    source: str,
    partial: bool,
    check: bool,
) -> tuple[Trace, list[Problem]] | None:
    """Import a survey-schema document that already decoded as ``trace`` (the typed path).

    ``None`` when the typed path cannot import it exactly (see
    :func:`~orchestrace.io.upstream.from_typed`): the caller imports it field by field.
    """
    done = from_typed(data, trace, top)
    if done is None:
        return None
    trace, problems = done
    if check:
        problems += check_trace(trace, partial=partial, imported=True)
        problems.sort(key=lambda p: _RANK[p.severity])
    return trace, [p.at(source) for p in problems]


_SCHEMA_VERSION_KEY = b'"schema_version"'
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
#: Above this many bytes after the key, :func:`_native_top_level` asks the decoder instead.
_SCAN_LIMIT = 1 << 20


class _TopLevel(msgspec.Struct):
    """The top level of a document, each value kept as its raw bytes (nothing is decoded).

    The raw ``events`` and ``edges`` values point into the document itself, which tells where
    the two large arrays lie without copying them.
    """

    schema_version: msgspec.Raw = msgspec.Raw()
    meta: msgspec.Raw = msgspec.Raw()
    events: msgspec.Raw = msgspec.Raw()
    edges: msgspec.Raw = msgspec.Raw()
    rewards: msgspec.Raw = msgspec.Raw()
    costs: msgspec.Raw = msgspec.Raw()
    metrics: msgspec.Raw = msgspec.Raw()


_TOP_LEVEL = msgspec.json.Decoder(_TopLevel)


def _native_top_level(data: Any, trace: Trace, top: _TopLevel | None = None) -> bool:
    """Whether a document that decoded as a trace has ``schema_version`` or ``meta`` at its top.

    That is what makes it native (see :func:`~orchestrace.io.upstream.is_native_object`). The
    native writer puts ``schema_version`` just before ``meta`` at the end, so the last
    ``"schema_version"`` token is checked first by scanning only what follows it; when that
    is not conclusive the top level is decoded on its own (skipping everything nested),
    unless ``top`` already holds it.
    """
    if trace.meta:
        return True
    if top is not None:
        return bool(len(top.schema_version) or len(top.meta))
    p = data.rfind(_SCHEMA_VERSION_KEY)
    if p < 0 and data.find(b'"meta"') < 0:
        return False
    if p >= 0 and len(data) - p <= _SCAN_LIMIT and _key_at_top(data, p):
        return True
    top = _TOP_LEVEL.decode(data)
    return bool(len(top.schema_version) or len(top.meta))


def _key_at_top(data: Any, p: int) -> bool:
    """Whether the string token at byte ``p`` of a JSON object is a key of the object itself."""
    back = p
    while back > 0 and data[back - 1] == 0x5C:  # backslashes: an escaped quote inside a string
        back -= 1
    if (p - back) % 2:
        return False
    rest = bytes(data[p + len(_SCHEMA_VERSION_KEY) :]).lstrip()
    if not rest.startswith(b":"):
        return False  # a value, not a key
    brackets = _STRING.sub(b"", rest).translate(None, _NOT_BRACKETS)
    depth = 0
    for k, c in enumerate(brackets):
        depth += 1 if c in b"[{" else -1
        if depth < 0:
            return k == len(brackets) - 1  # the top-level object closes right after
    return False


# top-level keys of a trace: a second copy of one would silently replace the first
_TOP_KEYS = tuple(
    f'"{k}"'.encode()
    for k in (
        "trace_id",
        "task_id",
        "events",
        "edges",
        "rewards",
        "costs",
        "system",
        "topology",
        "metrics",
        "schema_version",
        "meta",
        "agents",
        "rl",
    )
)
#: Documents up to this size are searched for duplicate keys at every level.
DUPLICATE_CHECK_BYTES = 4 << 20
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?[eE][+-]?[0-9]{3,}")


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def duplicate_key(data: Any) -> str | None:
    """The first key some JSON object in ``data`` names twice; ``None`` when there is none.

    A decoder keeps only the last value of a repeated key, so a repeated key silently loses
    data. Data that is not JSON yields ``None`` (the decoders report it).
    """

    def hook(pairs: list[tuple[str, Any]]) -> None:
        # in C: a dict of the pairs is shorter only when a key repeats (nothing is kept)
        if len(dict(pairs)) != len(pairs):
            seen: set[str] = set()
            for k, _ in pairs:
                if k in seen:
                    raise _DuplicateKey(k)
                seen.add(k)

    try:
        pyjson.loads(
            bytes(data).decode("utf-8"),
            object_pairs_hook=hook,
            parse_constant=lambda _: None,
        )
    except _DuplicateKey as dup:
        return dup.key
    except (ValueError, RecursionError):
        pass
    return None


def _repeats_a_top_key(data: Any) -> bool:
    """Whether a top-level key of a trace occurs twice anywhere in ``data`` (a cheap screen)."""
    return any(data.find(k, data.find(k) + 1) > 0 for k in _TOP_KEYS)


def _top_level(data: Any) -> tuple[_TopLevel | None, bool]:
    """The raw top level of a large document, and whether one of its keys may occur twice.

    Decoding the top level skips every nested value in C; the document minus its ``events``
    and ``edges`` arrays (located by their raw values, which point into ``data``) is then
    searched for a second copy of a top-level key. A document whose top level does not
    decode as an object is searched whole, as are those two arrays when a key occurs twice.
    """
    try:
        top = _TOP_LEVEL.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None, _repeats_a_top_key(data)
    spans = sorted(
        span for raw in (top.events, top.edges) if (span := _span_in(data, raw)) is not None
    )
    if not spans:
        return top, _repeats_a_top_key(data)
    view = memoryview(data)
    pieces, at = [], 0
    for start, end in spans:
        pieces.append(view[at:start])
        at = end
    pieces.append(view[at:])
    return top, _repeats_a_top_key(b"".join(pieces))


def _span_in(data: Any, raw: msgspec.Raw) -> tuple[int, int] | None:
    """Where the raw value ``raw`` lies in ``data`` (``None`` when it is empty or a copy)."""
    if not len(raw):
        return None
    base = np.frombuffer(data, dtype=np.uint8)
    start = np.frombuffer(raw, dtype=np.uint8).ctypes.data - base.ctypes.data
    del base  # (an exported mmap could not be closed)
    if not 0 <= start <= len(data) - len(raw):
        return None
    return start, start + len(raw)


def _check_duplicate_keys(data: Any, source: str) -> _TopLevel | None:
    """Refuse a JSON object that names one key twice (a decoder would keep only the last).

    Documents up to :data:`DUPLICATE_CHECK_BYTES` are searched at every level; larger ones
    for a second copy of a top-level key (and at every level when one is found).

    Returns:
        The raw top level of a large document (``None`` for a small one, or when the top
        level is not a JSON object).
    """
    top = None
    if len(data) > DUPLICATE_CHECK_BYTES:
        top, suspicious = _top_level(data)
        if not suspicious:
            return top
    key = duplicate_key(data)
    if key is not None:
        needle = pyjson.dumps(key).encode()
        first = data.find(needle)
        second = data.find(needle, first + 1) if first >= 0 else -1
        where = describe_offset(data, second) if second >= 0 else "document"
        raise TraceFormatError(
            source,
            where,
            f"duplicate key {_short(key)!r}: a JSON object names it twice",
            "keep one of them (a reader would silently use only the last)",
        )
    return top


def _out_of_range(source: str, data: Any, typed_error: str) -> TraceFormatError:
    m = _NUMBER.search(data)
    where = describe_offset(data, m.start()) if m else "document"
    value = m.group().decode() if m else "a number"
    at = re.search(r"at `(\$[^`]*)`", typed_error) if "out of range" in typed_error else None
    path = f" at {at.group(1)}" if at else ""
    return TraceFormatError(
        source,
        where,
        f"number {_short(value, 40)}{path} is out of range (beyond the largest float)",
        "record a finite number",
    )


def loads(
    data: Any,
    *,
    source: str = "<bytes>",
    upstream: bool | None = None,
    check: bool = True,
    partial: bool = False,
) -> Trace:
    """Decode one JSON trace.

    Args:
        data: JSON bytes or str.
        source: Name used in error messages.
        upstream: See :func:`parse`.
        check: Run ``check_trace`` too (default); ``False`` checks structure only.
        partial: Accept a truncated recording (see :func:`parse`).

    Raises:
        TraceFormatError: Not JSON.
        TraceValidationError: JSON, but not a valid trace (lists every problem).
    """
    trace, problems = parse(data, source=source, upstream=upstream, check=check, partial=partial)
    if trace is None or any(p.severity == "error" for p in problems):
        raise TraceValidationError(problems, source=source)
    return trace


def read_json(
    path: PathLike, *, upstream: bool | None = None, check: bool = True, partial: bool = False
) -> Trace:
    """Read a JSON trace file (native or survey schema); see :func:`loads`."""
    return loads(
        read_bytes(path), source=str(path), upstream=upstream, check=check, partial=partial
    )


def write_json(
    trace: Trace, path: PathLike, *, indent: int | None = None, overwrite: bool = False
) -> None:
    """Write ``trace`` as native JSON, atomically (a crash never leaves half a file).

    Args:
        trace: The trace.
        path: The output file.
        indent: Indent by this many spaces (default: compact).
        overwrite: Replace ``path`` if it exists (otherwise an existing file is an error).

    Raises:
        OutputError: The file exists (without ``overwrite``), the path cannot hold it, or
            writing failed; nothing is left half-written.
    """
    data = dumps(trace, indent=indent)
    with atomic_write(path, force=overwrite) as fh:
        fh.write(data)
