"""Load what the viewer shows: a trace from any file the project reads, and a credit file.

Example:
    >>> import tempfile, os
    >>> from orchestrace.io import dump
    >>> from orchestrace.trace.generate import generate_trace
    >>> path = os.path.join(tempfile.mkdtemp(), "run.json")
    >>> dump(generate_trace(agents=2, steps=10, seed=1), path)
    >>> load_views(path).n
    10
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from orchestrace.credit.base import UNITS, unit_members
from orchestrace.errors import ConfigError
from orchestrace.io import load_all
from orchestrace.viewer.data import TraceView

__all__ = ["load_credit_file", "load_views"]


def load_views(
    path: str | os.PathLike[str], *, trace_id: str | None = None, format: str | None = None
) -> TraceView:
    """Load the trace of ``path`` that the viewer shows (the first, or ``trace_id``).

    Any file the project reads works: native JSON, JSONL (trace lines or a recording, also one
    still being written), Parquet datasets, survey-schema JSON and the import formats (told
    from the file's structure, or named by ``format``).

    Raises:
        TraceFormatError: The file cannot be read (the message names the place and the fix).
        ConfigError: ``trace_id`` is not in the file, or the file holds no trace.

    Example:
        >>> import tempfile, os
        >>> from orchestrace.io import dump
        >>> from orchestrace.trace.generate import generate_trace
        >>> path = os.path.join(tempfile.mkdtemp(), "two.jsonl")
        >>> dump([generate_trace(agents=2, steps=10, seed=s) for s in (1, 2)], path)
        >>> view = load_views(path)
        >>> view.n, "holds 2 traces" in view.note
        (10, True)
    """
    shown = os.fspath(path)
    traces = load_all(path, format=format, check=False, partial=True)
    if not traces:
        raise ConfigError(f"{shown}: holds no trace; record or convert one first")
    note = None
    if trace_id is not None:
        chosen = [t for t in traces if t.trace_id == trace_id]
        if not chosen:
            ids = ", ".join(repr(t.trace_id[:40]) for t in traces[:5])
            raise ConfigError(
                f"{shown}: no trace {trace_id[:80]!r}; --trace-id takes one of {ids}"
                + (" ..." if len(traces) > 5 else "")
            )
        tr = chosen[0]
    else:
        tr = traces[0]
        if len(traces) > 1:
            note = (
                f"{shown} holds {len(traces)} traces; showing the first "
                f"({tr.trace_id}); choose another with --trace-id ID"
            )
    return TraceView(tr, source=shown, note=note)


def load_credit_file(path: str | os.PathLike[str], view: TraceView) -> list[dict[str, Any]]:
    r"""Read ``orchestrace credit --json`` output: one ``{unit, id, value}`` row per line.

    Raises:
        ConfigError: The file cannot be read, a line is not such a row (its number is named),
            or no row names a unit of the trace.

    Example:
        >>> import tempfile, os
        >>> from orchestrace.trace.generate import generate_trace
        >>> view = TraceView(generate_trace(agents=3, steps=20, seed=0), source="t")
        >>> path = os.path.join(tempfile.mkdtemp(), "credit.jsonl")
        >>> with open(path, "w") as fh:
        ...     _ = fh.write('{"unit": "agent", "id": "orchestrator", "value": 0.5}\n')
        >>> load_credit_file(path, view)[0]["value"]
        0.5
    """
    shown = os.fspath(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else type(err).__name__
        raise ConfigError(
            f"--credit {shown}: cannot read it ({reason}); give the file written by "
            "`orchestrace credit TRACE --json > FILE`"
        ) from None
    rows: list[dict[str, Any]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        ok = (
            isinstance(row, dict)
            and row.get("unit") in UNITS
            and isinstance(row.get("id"), str)
            and isinstance(row.get("value"), int | float)
            and not isinstance(row.get("value"), bool)
            and math.isfinite(float(row["value"]))
        )
        if not ok and isinstance(row, dict) and row.get("unit") in UNITS and "value" in row:
            value = row["value"]
            if value is None or (isinstance(value, float) and not math.isfinite(value)):
                raise ConfigError(
                    f"--credit {shown}:{lineno}: the credit of {str(row.get('id'))[:80]!r} is "
                    "not a finite number (credit writes NaN or infinity as null): fix the "
                    "reward or the credit method, then write the file again"
                )
        if not ok:
            raise ConfigError(
                f"--credit {shown}:{lineno}: not a credit row (expected "
                '{"unit": ..., "id": ..., "value": <number>}); give the output of '
                "`orchestrace credit TRACE --json`"
            )
        assert isinstance(row, dict)
        rows.append(row)
    if not rows:
        raise ConfigError(
            f"--credit {shown}: holds no credit rows; write it with "
            "`orchestrace credit TRACE --json > FILE`"
        )
    known = 0
    for unit in {r["unit"] for r in rows}:
        ids = set(unit_members(view.trace, unit))
        known += sum(1 for r in rows if r["unit"] == unit and r["id"] in ids)
    if not known:
        raise ConfigError(
            f"--credit {shown}: none of its {len(rows)} rows names a unit of trace "
            f"{view.trace.trace_id[:80]!r}; compute it for this trace with "
            f"`orchestrace credit {view.source} --json`"
        )
    return rows
