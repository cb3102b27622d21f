"""The diff of a trace against its fork (or any other trace): which events are the same.

:func:`diff_traces` pairs the events of two :class:`~orchestrace.viewer.data.TraceView`
objects and marks each pair ``same``, ``retimed`` or ``changed`` and each unpaired event
``appeared`` or ``disappeared``; the page draws the marks and limits windows to one status.

Example:
    >>> from orchestrace.trace.generate import generate_trace
    >>> tr = generate_trace(agents=3, steps=20, seed=0)
    >>> d = diff_traces(TraceView(tr, source="a"), TraceView(tr, source="b"))
    >>> d["counts"]["same"], d["counts"]["changed"]
    (20, 0)
"""

from __future__ import annotations

import difflib
import json
import re
from collections import defaultdict
from typing import Any

import numpy as np

from orchestrace.trace.model import Event
from orchestrace.viewer.data import DIFF_STATUS, TraceView

__all__ = ["diff_traces"]

_SEQUENTIAL_ID = re.compile(r"e\d+\Z")
# fields compared by the diff, apart from timing
_DIFF_FIELDS = (
    "role",
    "from_",
    "to",
    "tool",
    "decision",
    "step",
    "content",
    "content_ref",
    "trusted",
    "tokens_in",
    "tokens_out",
    "cost",
    "error",
    "attrs",
)


def _fields(e: Event) -> tuple[Any, ...]:
    return tuple(
        json.dumps(getattr(e, f), sort_keys=True, default=str) if f == "attrs" else getattr(e, f)
        for f in _DIFF_FIELDS
    )


def diff_traces(a: TraceView, b: TraceView) -> dict[str, Any]:
    """Match the events of ``a`` (an original) and ``b`` (e.g. its fork); mark what differs.

    Events are paired by id first, when the id names the same agent and type in both traces
    (the runtime's sequential ``e<N>`` ids are not used: a fork re-executes the run and numbers
    its events afresh). The rest are paired in order within each agent's events of one type,
    by an alignment of their contents, so one inserted or dropped event does not shift every
    later one. A pair whose fields differ is ``changed`` (``retimed`` when only ``t``/``dur``
    differ); an unpaired event of ``b`` ``appeared``, one of ``a`` ``disappeared``. The result
    is also kept on both views (their windows can then be limited to one status).

    Returns:
        Counts per status, and for each side the indices of the events not ``same``, with
        their status, partner index and the fields that differ.

    Example:
        >>> from orchestrace.trace.generate import generate_trace
        >>> tr = generate_trace(agents=3, steps=20, seed=0)
        >>> e = tr.events[5]
        >>> import msgspec
        >>> edited = tr.replace(events=tuple(
        ...     msgspec.structs.replace(x, content="new") if x.id == e.id else x for x in tr.events))
        >>> d = diff_traces(TraceView(tr, source="a"), TraceView(edited, source="b"))
        >>> d["counts"]["changed"], d["counts"]["appeared"], d["counts"]["disappeared"]
        (1, 0, 0)
    """
    ea, eb = a.trace.events, b.trace.events
    pair_a = np.full(len(ea), -1, dtype=np.int64)
    pair_b = np.full(len(eb), -1, dtype=np.int64)
    sequential = all(_SEQUENTIAL_ID.match(e.id) for e in ea) and all(
        _SEQUENTIAL_ID.match(e.id) for e in eb
    )
    if not sequential:
        where_b = {e.id: j for j, e in enumerate(eb)}
        for i, e in enumerate(ea):
            j = where_b.get(e.id)
            if j is not None and pair_b[j] < 0 and eb[j].agent == e.agent and eb[j].type == e.type:
                pair_a[i], pair_b[j] = j, i
    streams_a: dict[tuple[str, str], list[int]] = defaultdict(list)
    streams_b: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, e in enumerate(ea):
        if pair_a[i] < 0:
            streams_a[(e.agent, e.type)].append(i)
    for j, e in enumerate(eb):
        if pair_b[j] < 0:
            streams_b[(e.agent, e.type)].append(j)
    for key, ia in streams_a.items():
        jb = streams_b.get(key)
        if not jb:
            continue
        sa = [_fields(ea[i]) for i in ia]
        sb = [_fields(eb[j]) for j in jb]
        sm = difflib.SequenceMatcher(None, sa, sb, autojunk=False)
        for op, a0, a1, b0, b1 in sm.get_opcodes():
            if op in ("equal", "replace"):
                for x, y in zip(range(a0, a1), range(b0, b1), strict=False):
                    pair_a[ia[x]], pair_b[jb[y]] = jb[y], ia[x]
    status_a = np.zeros(len(ea), dtype=np.int8)
    status_b = np.zeros(len(eb), dtype=np.int8)
    fields_a: dict[int, list[str]] = {}
    fields_b: dict[int, list[str]] = {}
    for i, e in enumerate(ea):
        j = int(pair_a[i])
        if j < 0:
            status_a[i] = DIFF_STATUS.index("disappeared")
            continue
        f = eb[j]
        changed = [
            ("from" if name == "from_" else name)
            for name, x, y in zip(_DIFF_FIELDS, _fields(e), _fields(f), strict=True)
            if x != y
        ]
        timing = [name for name in ("t", "dur") if getattr(e, name) != getattr(f, name)]
        if changed:
            code = DIFF_STATUS.index("changed")
        elif timing:
            code = DIFF_STATUS.index("retimed")
        else:
            code = 0
        status_a[i] = status_b[j] = code
        if changed or timing:
            fields_a[i] = fields_b[j] = changed + timing
    status_b[pair_b < 0] = DIFF_STATUS.index("appeared")
    for view, status, pair, fields in (
        (a, status_a, pair_a, fields_a),
        (b, status_b, pair_b, fields_b),
    ):
        view.mark_diff(status, pair.tolist(), fields)

    def side(status: np.ndarray, pair: np.ndarray, fields: dict[int, list[str]]) -> dict[str, Any]:
        idx = np.flatnonzero(status != 0)
        return {
            "idx": idx.tolist(),
            "status": status[idx].tolist(),
            "other": pair[idx].tolist(),
            "fields": [fields.get(int(i), []) for i in idx.tolist()],
        }

    counts = {name: 0 for name in DIFF_STATUS}
    for code, k in zip(*np.unique(status_a, return_counts=True), strict=True):
        if DIFF_STATUS[int(code)] != "appeared":
            counts[DIFF_STATUS[int(code)]] += int(k)
    counts["appeared"] = int(np.sum(status_b == DIFF_STATUS.index("appeared")))
    return {
        "statuses": list(DIFF_STATUS),
        "a": {"trace_id": a.trace.trace_id, "source": a.source},
        "b": {"trace_id": b.trace.trace_id, "source": b.source},
        "counts": counts,
        "matched_by": "position in each agent's events of a type"
        if sequential
        else "id, then position in each agent's events of a type",
        "side_a": side(status_a, pair_a, fields_a),
        "side_b": side(status_b, pair_b, fields_b),
    }
