"""Import LangGraph runs: run trees, streamed chunks and events, and checkpoint history.

Accepted input (the JSON shapes are written out in ``docs/import-langgraph.md``):

- **Run trees**: LangChain runs as a tracer collects them (``Run.dict()`` / ``model_dump``:
  ``id``, ``name``, ``run_type``, ``start_time``, ``end_time``, ``parent_run_id``,
  ``child_runs``, ``inputs``, ``outputs``, ``error``, ``extra.metadata`` with
  ``langgraph_node`` / ``langgraph_step`` / ``langgraph_triggers``, ``tags``): nested or flat,
  one document or one run per line. The richest form: times, LLM tokens, tools, ``Send``
  fan-out and ``Command`` handoffs are all in it.
- **Streamed chunks** of ``graph.stream(..., stream_mode=[...])``: ``{"ns": [...], "mode": M,
  "data": ...}``, or ``[M, data]`` / ``[ns, M, data]`` as a JSON encoder writes the tuples;
  ``debug`` chunks give task start and end times. **Streamed events** of
  ``astream_events(version="v2")``: ``{"event": "on_chain_start", "run_id", "parent_ids",
  "name", "metadata", "data"}``.
- **Checkpoint history**: ``get_state_history()`` snapshots as objects (``values``, ``next``,
  ``config``, ``metadata``, ``created_at``, ``parent_config``, ``tasks``, ``interrupts``), or
  the LangGraph server's thread states (``checkpoint`` / ``parent_checkpoint``). One trace per
  branch; a branch made by ``update_state`` or a fork gets ``meta["fork"]`` and a
  ``human_intervention`` event.

Objects that are not JSON (messages, ``Send``, ``Command``, ``Interrupt``) are written by
:func:`to_json`: LangChain objects as ``dumpd`` writes them, LangGraph's as
``{"lc": 2, "type": "constructor", "id": ["langgraph", "types", NAME], "kwargs": {...}}``.

Every form becomes *run records* fed to one :class:`RunMapper`, which the live callback
handler (:mod:`orchestrace.integrations.langgraph`) feeds too.

Example:
    >>> runs = [
    ...     {"id": "g", "name": "LangGraph", "run_type": "chain", "parent_run_id": None,
    ...      "start_time": 0.0, "end_time": 3.0},
    ...     {"id": "n1", "name": "planner", "run_type": "chain", "parent_run_id": "g",
    ...      "start_time": 0.0, "end_time": 1.0, "outputs": {"plan": "p"}, "tags": ["graph:step:1"],
    ...      "extra": {"metadata": {"langgraph_node": "planner", "langgraph_step": 1}}},
    ...     {"id": "l1", "name": "FakeChat", "run_type": "llm", "parent_run_id": "n1",
    ...      "start_time": 0.1, "end_time": 0.9,
    ...      "outputs": {"llm_output": {"token_usage": {"prompt_tokens": 9, "completion_tokens": 2}}}},
    ...     {"id": "n2", "name": "writer", "run_type": "chain", "parent_run_id": "g",
    ...      "start_time": 1.0, "end_time": 3.0, "outputs": {"answer": "a"}, "tags": ["graph:step:2"],
    ...      "extra": {"metadata": {"langgraph_node": "writer", "langgraph_step": 2}}},
    ... ]
    >>> sniff(runs)
    True
    >>> tr = import_values([runs], source="runs.json").traces[0]
    >>> [(e.type, e.agent, e.dur, e.tokens) for e in tr.events]  # doctest: +NORMALIZE_WHITESPACE
    [('orchestrator_decision', 'planner', 0.1, 0), ('llm_call', 'planner', 0.8, 11),
     ('message', 'planner', 0.1, 0), ('message', 'writer', 2.0, 0),
     ('orchestrator_decision', 'planner', 0.0, 0)]
    >>> tr.events[-1].decision, tr.events[-1].content, [e.role for e in tr.events][:2]
    ('stop', '{"answer":"a"}', ['orchestrator', 'orchestrator'])
"""

from __future__ import annotations

from collections.abc import Iterable

from orchestrace.errors import Problem, TraceFormatError
from orchestrace.io._repair import warning as _problem
from orchestrace.io.importers import ImportResult
from orchestrace.io.langgraph._checkpoints import _import_history, _with_checkpoints
from orchestrace.io.langgraph._mapper import RunMapper
from orchestrace.io.langgraph._runs import _import_runs
from orchestrace.io.langgraph._stream import stream_runs
from orchestrace.io.langgraph._values import (
    SYSTEM,
    _flatten,
    _is_chunk,
    _kind,
    run_record,
    sniff,
    to_json,
)
from orchestrace.io.langgraph._values import _as_send as _as_send  # importable here too
from orchestrace.trace.model import Trace

__all__ = [
    "SYSTEM",
    "RunMapper",
    "import_values",
    "run_record",
    "sniff",
    "stream_runs",
    "to_json",
]


def import_values(values: Iterable[object], *, source: str) -> ImportResult:
    """Import LangGraph runs, streamed chunks/events or checkpoint history (module docstring).

    Raises:
        TraceFormatError: Nothing in the file maps to an event (one line naming the fix).

    Example:
        >>> res = import_values([["updates", {"a": {"x": 1}}]], source="s.jsonl")
        >>> res.unmapped
        {}
        >>> import_values([["values", {"x": 1}]], source="s.jsonl")
        Traceback (most recent call last):
        ...
        orchestrace.errors.TraceFormatError: s.jsonl: file: holds no LangGraph run, task or ...
    """
    vals = list(values)
    many = len(vals) > 1
    items: list[tuple[str, object]] = []
    for n, value in enumerate(vals):
        base = f"line {n + 1}: $" if many else "$"
        if isinstance(value, list) and not _is_chunk(value):
            items.extend((f"{base}[{i}]", x) for i, x in enumerate(value))
        elif (
            isinstance(value, dict)
            and _kind(value) is None
            and any(
                isinstance(value.get(k), list)
                for k in ("runs", "history", "chunks", "events", "states")
            )
        ):
            for key in ("runs", "history", "chunks", "events", "states"):
                inner = value.get(key)
                if isinstance(inner, list):
                    items.extend((f"{base}.{key}[{i}]", x) for i, x in enumerate(inner))
        else:
            items.append((base, value))
    problems: list[Problem] = []
    kinds: dict[str, list[tuple[str, object]]] = {}
    for where, item in items:
        kind = _kind(item)
        if kind is None:
            problems.append(
                _problem(
                    "unknown-item",
                    "not a LangGraph run, stream chunk, stream event or state snapshot",
                    "it was skipped; see docs/import-langgraph.md for the accepted shapes",
                    where,
                    source,
                )
            )
            continue
        kinds.setdefault("stream" if kind in ("chunks", "events") else kind, []).append(
            (where, item)
        )
    traces: list[Trace] = []
    unmapped: dict[str, int] = {}
    if "runs" in kinds:
        flat: list[tuple[str, object]] = []
        for where, run in kinds["runs"]:
            _flatten(run, None, flat, where)
        traces += _import_runs(flat, problems, unmapped, source, clock="wall")
    if "stream" in kinds:
        st = stream_runs(kinds["stream"])
        for k, c in st.unmapped.items():
            unmapped[k] = unmapped.get(k, 0) + c
        runs: list[tuple[str, object]] = [
            (st.runs[r].pop("_where", "$"), st.runs[r]) for r in st.order
        ]
        got = _import_runs(
            runs,
            problems,
            unmapped,
            source,
            clock="wall" if st.timed else "order",
            extra_unmapped=st.unmapped_items,
            trace_id=st.trace_id(),
            task_id=st.thread(),
        )
        traces += [_with_checkpoints(tr, st.checkpoints) for tr in got]
    if "history" in kinds:
        traces += _import_history(kinds["history"], problems, unmapped, source)
    if not traces:
        raise TraceFormatError(
            source,
            "file",
            "holds no LangGraph run, task or checkpoint that maps to an event",
            "export the run tree, stream with stream_mode='debug', or use "
            "orchestrace.integrations.langgraph",
        )
    return ImportResult(traces=traces, problems=problems, unmapped=unmapped)
