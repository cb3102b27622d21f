"""Formats of other tools: importers and exporters.

Importers read OTel, OpenInference, OpenAI Agents SDK and LangGraph output; exporters write OTLP
and Perfetto.

Every importer lives in its own module under :mod:`orchestrace.io` and is loaded only when used.
An importer module provides two functions:

- ``sniff(value: object) -> bool``: whether the first JSON value of a file (the whole document of a
  ``.json`` file, the first line of a JSONL file) has this format's *structure*. Cheap; never
  raises.
- ``import_values(values: Iterable[object], *, source: str) -> ImportResult``: the traces in the
  file's JSON values (one value for a JSON document, one per line for JSONL), with every problem
  named (event id and fix) and what could not be mapped counted (it is kept verbatim in ``attrs`` or ``meta["unmapped"]``).

An exporter module provides ``export_bytes(traces: Sequence[Trace]) -> bytes``.

Example:
    >>> IMPORT_FORMATS
    ('otel', 'openinference', 'openai-agents', 'langgraph')
    >>> EXPORT_FORMATS
    ('otlp', 'perfetto')
    >>> print(ImportResult(traces=[], unmapped={"span kind X": 2}).summary("in.json"))
    in.json: imported 0 trace(s), 0 events; 0 problem(s); kept verbatim, unmapped: 2 x span kind X
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from orchestrace.errors import Problem, TraceFormatError, _short
from orchestrace.io._common import BOM, PathLike, format_error, read_bytes
from orchestrace.io._writable import require_writable
from orchestrace.io.upstream import is_native_object
from orchestrace.trace.model import Trace

__all__ = [
    "EXPORT_FORMATS",
    "IMPORT_FORMATS",
    "ImportResult",
    "describe_value",
    "export_bytes",
    "import_path",
    "import_values",
    "sniff_value",
]

#: Formats that can be read (``--from``) but not written.
IMPORT_FORMATS: tuple[str, ...] = ("otel", "openinference", "openai-agents", "langgraph")
#: Formats that can be written (``--to``) but are not orchestrace's own.
EXPORT_FORMATS: tuple[str, ...] = ("otlp", "perfetto")

# format -> (module, function). Several formats may share a module.
_IMPORTERS: dict[str, tuple[str, str]] = {
    "otel": ("orchestrace.io.otel", "import_values"),
    "openinference": ("orchestrace.io.otel", "import_values"),
    "openai-agents": ("orchestrace.io.openai_agents", "import_values"),
    "langgraph": ("orchestrace.io.langgraph", "import_values"),
}
_SNIFFERS: dict[str, tuple[str, str]] = {
    "otel": ("orchestrace.io.otel", "sniff"),
    "openinference": ("orchestrace.io.otel", "sniff_openinference"),
    "openai-agents": ("orchestrace.io.openai_agents", "sniff"),
    "langgraph": ("orchestrace.io.langgraph", "sniff"),
}
# Order of auto-detection: the most specific structure first (OpenInference spans are OTel spans).
_SNIFF_ORDER = ("openinference", "otel", "openai-agents", "langgraph")
_EXPORTERS: dict[str, tuple[str, str]] = {
    "otlp": ("orchestrace.io.otlp", "export_bytes"),
    "perfetto": ("orchestrace.io.perfetto", "export_bytes"),
}


@dataclass
class ImportResult:
    """What an importer made of a file.

    Attributes:
        traces: The imported traces (each keeps the source's identifiers in ``meta.source``).
        problems: What was wrong in the input and how it was handled (``warning``: imported with the
            problem named; ``error``: the thing could not be imported).
        unmapped: Things with no orchestrace meaning, kept verbatim (in ``attrs`` or the trace's ``meta["unmapped"]``), by kind and count.
    """

    traces: list[Trace]
    problems: list[Problem] = field(default_factory=list)
    unmapped: dict[str, int] = field(default_factory=dict)

    def summary(self, source: str) -> str:
        """One line: what was imported, how many problems, what was kept unmapped."""
        n = sum(t.n_events for t in self.traces)
        line = (
            f"{source}: imported {len(self.traces)} trace(s), {n} events; "
            f"{len(self.problems)} problem(s)"
        )
        if self.unmapped:
            kept = ", ".join(f"{c} x {k}" for k, c in sorted(self.unmapped.items()))
            line += f"; kept verbatim, unmapped: {kept}"
        return line


def _load(table: dict[str, tuple[str, str]], fmt: str, what: str) -> Callable[..., Any]:
    try:
        module, name = table[fmt]
    except KeyError:
        raise TraceFormatError(
            "format", "argument", f"unknown {what} format {fmt!r}", f"use one of {', '.join(table)}"
        ) from None
    fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return fn


def sniff_value(value: object) -> str | None:
    """The foreign format whose structure ``value`` (a file's first JSON value) has, if any."""
    for fmt in _SNIFF_ORDER:
        try:
            if _load(_SNIFFERS, fmt, "import")(value):
                return fmt
        except (ImportError, AttributeError):
            continue
    return None


_LABELS = {
    "otel": "OTLP JSON or an OTel span dump",
    "openinference": "OpenInference spans (OTLP JSON)",
    "openai-agents": "an OpenAI Agents SDK export",
    "langgraph": "a LangGraph run, stream or checkpoint export",
}
_KINDS = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", float: "a number"}


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return "a number" if type(value) is int else _KINDS.get(type(value), type(value).__name__)


def describe_value(value: object) -> tuple[str, str]:
    """What a file's first JSON value looks like, and which ``--from`` reads it.

    Returns:
        ``(looks_like, fix)``: a phrase naming the structure found, and what to pass instead.

    Example:
        >>> describe_value({"trace_id": "t", "schema_version": "1.0", "events": []})[0]
        'a native orchestrace trace'
        >>> describe_value({"resourceSpans": "oops"})[0]
        'OTLP JSON whose `resourceSpans` is a string, not a list'
    """
    if is_native_object(value):
        return "a native orchestrace trace", "drop --from (or pass --from native)"
    if isinstance(value, dict) and "resourceSpans" in value:
        rs = value["resourceSpans"]
        if not isinstance(rs, list):
            return (
                f"OTLP JSON whose `resourceSpans` is {_kind(rs)}, not a list",
                "export the spans again (OTLP JSON holds a list of resource spans)",
            )
    fmt = sniff_value(value)
    if fmt is not None:
        return _LABELS.get(fmt, fmt), f"pass --from {fmt}"
    if isinstance(value, dict) and isinstance(value.get("events"), list) and "trace_id" in value:
        return "a survey-schema trace", "drop --from (or pass --from upstream)"
    if isinstance(value, dict):
        keys = ", ".join(repr(_short(str(k), 30)) for k in list(value)[:5])
        more = ", ..." if len(value) > 5 else ""
        return (
            f"an object with keys {keys}{more}" if value else "an empty object",
            "pass a file in that format",
        )
    return _kind(value), "pass a file in that format"


def import_values(values: Iterable[object], *, format: str, source: str) -> ImportResult:
    """Import already parsed JSON values in ``format`` (one of :data:`IMPORT_FORMATS`)."""
    result: ImportResult = _load(_IMPORTERS, format, "import")(values, source=source)
    return result


def _json_values(path: PathLike) -> tuple[list[object], int | None]:
    """The JSON values of ``path`` and the number of a cut-off last line, if any.

    One document, one value per line (JSONL / span-per-line), or values written one after
    another (indented spans of ``ConsoleSpanExporter``).
    """
    src = str(path)
    data = read_bytes(path)
    raw = bytes(data)
    if raw.startswith(BOM):
        raw = raw[len(BOM) :]
    try:
        return [msgspec.json.decode(raw)], None
    except msgspec.DecodeError as doc_err:
        lines = raw.splitlines()
        values: list[object] = []
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                values.append(msgspec.json.decode(line))
            except msgspec.DecodeError as err:
                if len(values) == 0:
                    concatenated = _concatenated(raw)
                    if concatenated:
                        return concatenated, None
                    raise format_error(src, raw, doc_err) from None
                if "truncated" in str(err) and not any(x.strip() for x in lines[i:]):
                    # the last line was cut off: import the complete ones, name the loss
                    return values, i
                raise format_error(src, line, err, base_line=i) from None
        if not values:
            raise format_error(src, raw, doc_err) from None
        return values, None


def _concatenated(raw: bytes) -> list[object]:
    """JSON values written one after another, e.g. indented spans of ``ConsoleSpanExporter``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return []
    dec = json.JSONDecoder()
    out: list[object] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return out if len(out) > 1 else []
        try:
            value, pos = dec.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return []
        out.append(value)


def import_path(path: PathLike, *, format: str | None = None) -> ImportResult:
    """Import a file written by another tool.

    Args:
        path: An OTLP JSON file, a span-per-line dump, an OpenAI Agents SDK export or a LangGraph
            run/checkpoint export.
        format: One of :data:`IMPORT_FORMATS`; default: told from the file's structure.

    Raises:
        TraceFormatError: The file cannot be read or parsed, or its format cannot be told (the
            message says which ``--from`` to pass).
    """
    try:
        return _import_path(path, format)
    except RecursionError:
        raise TraceFormatError(
            str(path),
            "document",
            "JSON nested too deeply",
            "a trace nests a few levels; this file is not a trace export",
        ) from None


def _import_path(path: PathLike, format: str | None) -> ImportResult:
    values, cut = _json_values(path)
    fmt = format or sniff_value(values[0])
    if fmt is None:
        raise TraceFormatError(
            str(path),
            "file",
            "not an orchestrace trace, a survey-schema trace, or a trace format orchestrace "
            "can import",
            f"pass --from (one of {', '.join(IMPORT_FORMATS)}) if it is one of those",
        )
    try:
        result = import_values(values, format=fmt, source=str(path))
    except TraceFormatError as err:
        found = sniff_value(values[0]) if format is not None and values else None
        if format is None or (found is not None and _IMPORTERS[found] == _IMPORTERS[fmt]):
            raise
        looks, fix = describe_value(values[0])  # the wrong --from: say what the file is
        raise TraceFormatError(
            str(path),
            err.where,
            f"--from {format} found nothing to import: the file looks like {looks}",
            fix,
        ) from None
    if cut is not None:
        result.problems.insert(
            0,
            Problem(
                "truncated",
                f"line {cut} was cut off mid-record; the {len(values)} complete line(s) before "
                "it were imported",
                "restore the full file to import the rest",
                severity="warning",
                source=f"{path}:{cut}",
            ),
        )
        result.traces = [
            t.replace(meta={**t.meta, "partial": True, "truncated": f"line {cut} was cut off"})
            for t in result.traces
        ]
    return result


def export_bytes(traces: Sequence[Trace], *, format: str) -> bytes:
    """Encode ``traces`` in ``format`` (one of :data:`EXPORT_FORMATS`).

    Raises:
        TraceValidationError: A trace holds a value the format cannot hold exactly.
    """
    traces = list(traces)  # (an iterator is read once: by the check, then by the exporter)
    require_writable(traces)
    data: bytes = _load(_EXPORTERS, format, "export")(traces)
    return data
