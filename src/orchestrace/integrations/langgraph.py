"""Live capture for LangGraph and LangChain: a callback handler and a stream adapter.

Both write a crash-safe orchestrace JSONL record stream while the graph runs (header first,
then each event and edge as soon as it is final, the footer at the end); a recording cut off
at any moment loads with :func:`orchestrace.io.load` as a partial trace. Both use the
importer's :class:`~orchestrace.io.langgraph.RunMapper`, so a recording equals the import of
the native output of the same run (rules: ``docs/import-langgraph.md``):

- :class:`OrchestraceCallbackHandler` (a LangChain tracer: pass it in ``config["callbacks"]``)
  records every graph node, LLM and tool run, with tokens, ``Send`` fan-out and ``Command``
  handoffs; it equals the import of the run tree that :class:`RunTreeCollector` collects.
- :func:`record_stream` wraps ``graph.stream``: it yields what ``graph.stream`` yields and
  records the tasks of its ``debug`` chunks; it equals the import of the chunks written with
  :func:`stream_chunk_json`.

:func:`snapshot_json` writes ``get_state_history()`` snapshots for the checkpoint importer.

Needs the ``[langgraph]`` extra (``pip install 'orchestrace[langgraph]'``); LangChain and
LangGraph are imported only when a handler is made or a stream recorded.

Example:
    >>> from orchestrace.integrations.langgraph import stream_chunk_json
    >>> stream_chunk_json(("updates", {"node": {"x": (1, 2)}}))
    {'ns': [], 'mode': 'updates', 'data': {'node': {'x': [1, 2]}}}
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Iterator, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from orchestrace.errors import OrchestraceError
from orchestrace.io._foreign import parse_time as _time
from orchestrace.io._output import check_output
from orchestrace.io.jsonl import StreamWriter
from orchestrace.io.langgraph import SYSTEM, RunMapper, run_record, to_json
from orchestrace.io.langgraph._checkpoints import _checkpoint
from orchestrace.io.langgraph._stream import _Stream
from orchestrace.trace.build import default_costs
from orchestrace.trace.model import Edge, Event

__all__ = [
    "HINT",
    "OrchestraceCallbackHandler",
    "RunTreeCollector",
    "record_stream",
    "run_json",
    "snapshot_json",
    "stream_chunk_json",
]

#: How to install what this module needs.
HINT = "pip install 'orchestrace[langgraph]'"

if TYPE_CHECKING:  # made on first use (they subclass LangChain's BaseTracer)
    RunTreeCollector: Any
    OrchestraceCallbackHandler: Any


def _require(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"{module} is not installed ({err}); install it with: {HINT}") from None


def stream_chunk_json(chunk: Any, *, mode: str | None = None) -> dict[str, Any]:
    """One ``graph.stream`` chunk as the importer reads it: ``{"ns", "mode", "data"}``.

    Args:
        chunk: ``(mode, data)``, ``(namespace, mode, data)``, or the bare data of a stream
            with a single mode (then pass ``mode``).
        mode: The stream mode of a bare chunk.
    """
    if isinstance(chunk, tuple) and len(chunk) == 3 and isinstance(chunk[1], str):
        ns, m, data = chunk
    elif isinstance(chunk, tuple) and len(chunk) == 2 and isinstance(chunk[0], str):
        ns, (m, data) = (), chunk
    else:
        ns, m, data = (), mode or "updates", chunk
    return {"ns": [str(x) for x in ns], "mode": m, "data": to_json(data)}


def snapshot_json(snapshot: Any) -> dict[str, Any]:
    """A ``StateSnapshot`` of ``get_state_history()`` as a JSON object (fields by name).

    Example:
        >>> from collections import namedtuple
        >>> Snap = namedtuple("Snap", "values next config")
        >>> snapshot_json(Snap({"x": 1}, ("a",), {"configurable": {"checkpoint_id": "c1"}}))
        {'values': {'x': 1}, 'next': ['a'], 'config': {'configurable': {'checkpoint_id': 'c1'}}}
    """
    out = to_json(snapshot)
    if not isinstance(out, dict):
        raise OrchestraceError(
            f"not a state snapshot: {type(snapshot).__name__}; pass what get_state_history() yields"
        )
    return out


def run_json(run: Any, *, children: bool = True) -> dict[str, Any]:
    """A LangChain ``Run`` as JSON: the fields of ``Run.dict()``, objects written by ``to_json``.

    Args:
        run: The run (a ``langsmith`` ``RunTree`` / ``langchain_core`` ``Run``).
        children: Include ``child_runs`` (nested).

    Example:
        >>> from types import SimpleNamespace as Run
        >>> r = Run(id=1, name="n", run_type="chain", start_time=None, end_time=None,
        ...         parent_run_id=None, inputs={"q": (1,)}, outputs=None, error=None, extra={},
        ...         tags=[], child_runs=[])
        >>> run_json(r)["inputs"]
        {'q': [1]}
    """

    def iso(value: Any) -> Any:
        return value.isoformat() if hasattr(value, "isoformat") else value

    out: dict[str, Any] = {
        "id": str(run.id),
        "name": run.name,
        "run_type": run.run_type,
        "start_time": iso(run.start_time),
        "end_time": iso(run.end_time),
        "parent_run_id": str(run.parent_run_id) if run.parent_run_id else None,
        "trace_id": str(run.trace_id) if getattr(run, "trace_id", None) else None,
        "dotted_order": getattr(run, "dotted_order", None),
        "inputs": to_json(run.inputs),
        "outputs": to_json(run.outputs),
        "error": run.error,
        "extra": to_json(run.extra or {}),
        "tags": list(run.tags or []),
    }
    if children:
        out["child_runs"] = [run_json(c) for c in (run.child_runs or [])]
    return out


@cache
def _classes() -> tuple[type[Any], type[Any]]:
    base = _require("langchain_core.tracers.base").BaseTracer

    class RunTreeCollector(base):  # type: ignore[misc, valid-type]
        """A LangChain tracer keeping each finished root run as JSON (:func:`run_json`).

        Pass it in ``config["callbacks"]``; :meth:`roots` gives the run trees, which
        ``orchestrace convert --from langgraph`` imports.
        """

        def __init__(self) -> None:
            super().__init__()
            self._roots: list[dict[str, Any]] = []

        def _persist_run(self, run: Any) -> None:
            self._roots.append(run_json(run))

        def roots(self) -> list[dict[str, Any]]:
            """The finished root runs, each with its nested ``child_runs``."""
            return list(self._roots)

    class OrchestraceCallbackHandler(RunTreeCollector):
        """A LangChain tracer writing each graph run as an orchestrace JSONL recording.

        It is also a :class:`RunTreeCollector`: :meth:`roots` gives the run trees it built,
        whose import equals the recording.

        Args:
            path: The recording (a ``.jsonl`` file). A second root run in the same handler is
                appended to it as another trace.
            overwrite: Replace an existing file.
            fsync: ``fsync`` after every record.

        Raises:
            OutputError: ``path`` exists (without ``overwrite``) or cannot be written; raised
                when the handler is made, before any graph runs.

        Attributes:
            errors: Problems met in callbacks (LangChain logs and swallows exceptions raised
                there); :meth:`close` raises the first one.
        """

        def __init__(
            self, path: str | os.PathLike[str], *, overwrite: bool = False, fsync: bool = False
        ) -> None:
            super().__init__()
            # an output that may not be written fails here, before the graph runs
            self.path = check_output(path, force=overwrite)
            self.overwrite = overwrite
            self.fsync = fsync
            self.errors: list[OrchestraceError] = []
            self.traces = 0
            self._lock = threading.RLock()
            self._writer: StreamWriter | None = None
            self._mapper: RunMapper | None = None
            self._root: str | None = None
            self._events: list[Event] = []

        def _open(self, rec: dict[str, Any]) -> None:
            meta = rec["metadata"]
            thread = meta.get("thread_id")
            graph = rec["name"]
            src: dict[str, Any] = {"format": SYSTEM, "root_run_id": rec["id"], "graph": graph}
            if not isinstance(thread, str) or not thread:
                thread = None
            else:
                src["thread_id"] = thread
            self._writer = StreamWriter(
                self.path,
                trace_id=rec["id"],
                task_id=thread or graph,
                system=SYSTEM,
                meta={"source": src, "clock": "wall"},
                fsync=self.fsync,
                append=self.traces > 0,
                overwrite=self.overwrite and self.traces == 0,
            )
            self.traces += 1
            self._events = []
            writer = self._writer

            def on_event(ev: Event) -> None:
                self._events.append(ev)
                writer.event(ev)

            def on_edge(edge: Edge) -> None:
                writer.edge(edge)

            start = _time(rec.get("started_at"))
            self._mapper = RunMapper(
                t0=start if start is not None else 0.0,
                graph=graph,
                emit_event=on_event,
                emit_edge=on_edge,
            )
            self._root = rec["id"]

        def _mine(self, run: Any) -> bool:
            """Whether ``run`` belongs to the graph run being recorded."""
            return self._root is not None and str(getattr(run, "trace_id", "")) == self._root

        def _on_run_create(self, run: Any) -> None:
            with self._lock:
                try:
                    if self._mapper is None:
                        if run.parent_run_id is not None:
                            return  # part of a run that started before this handler saw it
                        self._open(run_record(run_json(run, children=False)))
                    elif not self._mine(run):
                        if run.parent_run_id is None:
                            self.errors.append(
                                OrchestraceError(
                                    f"{self.path}: graph run {run.id} started while "
                                    f"{self._root} was being recorded and was not recorded; "
                                    "give each concurrent run its own handler"
                                )
                            )
                        return
                    assert self._mapper is not None
                    self._mapper.start(run_record(run_json(run, children=False)))
                except OrchestraceError as err:
                    self.errors.append(err)

        def _on_run_update(self, run: Any) -> None:
            with self._lock:
                if self._mapper is None or not self._mine(run):
                    return
                try:
                    rec = run_record(run_json(run, children=False))
                    self._mapper.end(rec)
                    if rec["id"] == self._root:
                        self._mapper.finish()  # the root agent's stop
                        self._finish()
                except OrchestraceError as err:
                    self.errors.append(err)

        def _finish(self) -> None:
            if self._writer is not None and self._mapper is not None:
                self._writer.close(costs=default_costs(self._events), meta=self._mapper.meta())
            self._writer = self._mapper = self._root = None

        def close(self) -> None:
            """Close a recording still open (it stays partial); raise the first callback error.

            Raises:
                OrchestraceError: A recording could not be opened or written.
            """
            with self._lock:
                if self._writer is not None:
                    self._writer.abandon()
                self._writer = self._mapper = self._root = None
            if self.errors:
                raise self.errors[0]

    return RunTreeCollector, OrchestraceCallbackHandler


def __getattr__(name: str) -> Any:
    if name == "RunTreeCollector":
        return _classes()[0]
    if name == "OrchestraceCallbackHandler":
        return _classes()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def record_stream(
    graph: Any,
    input: Any,
    config: Any = None,
    *,
    path: str | os.PathLike[str],
    stream_mode: str | Sequence[str] = "updates",
    overwrite: bool = False,
    fsync: bool = False,
    **kwargs: Any,
) -> Iterator[Any]:
    """``graph.stream(input, config, stream_mode=...)``, recording the run to ``path``.

    Yields exactly what ``graph.stream`` yields for ``stream_mode``; ``debug`` chunks are also
    requested (for task times) and recorded, and yielded only when asked for. The recording
    is closed when the stream ends (partial when it is abandoned or fails).

    Args:
        graph: A compiled LangGraph graph.
        input: The graph input (or ``None`` / a ``Command`` to resume).
        config: The run config.
        path: The recording (a ``.jsonl`` file).
        stream_mode: As for ``graph.stream``.
        overwrite: Replace an existing file.
        fsync: ``fsync`` after every record.
        **kwargs: Passed to ``graph.stream``.

    Raises:
        OutputError: ``path`` exists (without ``overwrite``) or cannot be written; raised by
            the call itself, before the graph runs.

    Example:
        >>> for chunk in record_stream(graph, {"question": "q"}, path="run.jsonl"):  # doctest: +SKIP
        ...     print(chunk)
    """
    _require("langgraph")
    # an output that may not be written fails here, before the graph runs
    check_output(path, force=overwrite)
    return _record_stream(graph, input, config, path, stream_mode, overwrite, fsync, kwargs)


def _record_stream(
    graph: Any,
    input: Any,
    config: Any,
    path: str | os.PathLike[str],
    stream_mode: str | Sequence[str],
    overwrite: bool,
    fsync: bool,
    kwargs: dict[str, Any],
) -> Iterator[Any]:
    single = isinstance(stream_mode, str)
    modes = [stream_mode] if isinstance(stream_mode, str) else list(stream_mode)
    asked = set(modes)
    if "debug" not in asked:
        modes.append("debug")
    st = _Stream(timed=True)
    writer: StreamWriter | None = None
    mapper: RunMapper | None = None
    events: list[Event] = []
    k = 0
    closed = False
    try:
        for chunk in graph.stream(input, config, stream_mode=modes, **kwargs):
            value = stream_chunk_json(chunk)
            k += 1
            if value["mode"] == "debug":
                calls = st.feed(f"$[{k - 1}]", value, float(k - 1))
                for call, rid in calls:
                    rec = run_record(st.runs[rid])
                    if writer is None:
                        thread = st.thread()
                        writer = StreamWriter(
                            path,
                            trace_id=st.trace_id(),
                            task_id=thread or rec["name"],
                            system=SYSTEM,
                            meta={
                                "source": {
                                    "format": SYSTEM,
                                    "root_run_id": rec["id"],
                                    "graph": rec["name"],
                                },
                                "clock": "wall",
                            },
                            fsync=fsync,
                            overwrite=overwrite,
                        )
                        w = writer

                        def on_event(ev: Event, w: StreamWriter = w) -> None:
                            events.append(ev)
                            w.event(ev)

                        start = _time(rec.get("started_at"))
                        mapper = RunMapper(
                            t0=start if start is not None else 0.0,
                            graph=rec["name"],
                            emit_event=on_event,
                            emit_edge=w.edge,
                        )
                    assert mapper is not None
                    if call == "start":
                        mapper.start(rec)
                    else:
                        mapper.end(rec)
            if value["mode"] in asked:
                yield chunk[-1] if single and isinstance(chunk, tuple) else chunk
        if writer is not None and mapper is not None:
            # the graph runs end with the stream (innermost first), as when it is imported
            graphs = [r for r in st.order if r == "graph" or r.startswith("graph:")]
            for rid in sorted(graphs, key=lambda r: -r.count("|") - (r != "graph")):
                mapper.end(run_record(st.runs[rid]))
            mapper.finish()  # the root agent's stop
            meta = mapper.meta()
            if st.checkpoints:
                meta["checkpoints"] = [
                    c.id for w, s in st.checkpoints if (c := _checkpoint(w, s)) is not None
                ]
            writer.close(costs=default_costs(events), meta=meta)
            closed = True
    finally:
        if writer is not None and not closed:
            writer.abandon()
