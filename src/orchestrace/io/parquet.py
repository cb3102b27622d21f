"""Parquet datasets: ``events``, ``edges`` and ``traces`` tables, readable without orchestrace.

A dataset is a directory (conventionally named ``*.parquet``) holding three files::

    run.parquet/
      events.parquet   trace_id, id, t, type, agent, dur, role, from, to, tool, decision, step,
                       content, content_ref, trusted, tokens_in, tokens_out, cost, error,
                       attrs (JSON text)
      edges.parquet    trace_id, src, dst, type
      traces.parquet   trace_id, task_id, system, topology, schema_version, rewards, costs,
                       metrics (map<string, double>), meta (JSON text), n_events, n_edges

Query it with DuckDB (``SELECT type, count(*) FROM 'run.parquet/events.parquet' GROUP BY 1``)
or pyarrow. Many traces fit in one dataset; rows keep recording order, so traces round-trip
losslessly. :func:`read_graph` compiles a trace straight from the columns, without event
objects, for analysing traces too large to hold as objects.

Example:
    >>> import tempfile, os
    >>> from orchestrace.trace.generate import generate_trace
    >>> tr = generate_trace(agents=4, steps=40, seed=2)
    >>> path = os.path.join(tempfile.mkdtemp(), "run.parquet")
    >>> write_parquet([tr], path)
    >>> read_parquet(path) == [tr]
    True
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec

from orchestrace.errors import TraceFormatError
from orchestrace.io._common import PathLike
from orchestrace.io._output import OutputError, replace_dir
from orchestrace.trace.graph import TraceGraph
from orchestrace.trace.model import Edge, Event, Trace

__all__ = ["EVENT_COLUMNS", "read_graph", "read_parquet", "read_tables", "write_parquet"]

#: Event columns in file order (``from`` is the JSON name of ``Event.from_``).
EVENT_COLUMNS = (
    "id",
    "t",
    "type",
    "agent",
    "dur",
    "role",
    "from",
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
assert tuple(f.encode_name for f in msgspec.structs.fields(Event)) == EVENT_COLUMNS
_ATTR = {c: ("from_" if c == "from" else c) for c in EVENT_COLUMNS}
_FILES = ("events.parquet", "edges.parquet", "traces.parquet")
_EVENT: Any = Event  # built positionally from columns in field order
# rows per row group: small groups let readers stream a trace in bounded memory
_ROW_GROUP = 1 << 16


def _pa() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is a core dependency
        raise ImportError("Parquet support needs pyarrow: pip install 'pyarrow>=15'") from None
    return pa, pq


def _schemas() -> tuple[Any, Any, Any]:
    pa, _ = _pa()
    s = pa.string()
    events = pa.schema(
        [
            ("trace_id", s),
            ("id", s),
            ("t", pa.float64()),
            ("type", s),
            ("agent", s),
            ("dur", pa.float64()),
            ("role", s),
            ("from", s),
            ("to", s),
            ("tool", s),
            ("decision", s),
            ("step", pa.int64()),
            ("content", s),
            ("content_ref", s),
            ("trusted", pa.bool_()),
            ("tokens_in", pa.int64()),
            ("tokens_out", pa.int64()),
            ("cost", pa.float64()),
            ("error", s),
            ("attrs", s),
        ]
    )
    edges = pa.schema([("trace_id", s), ("src", s), ("dst", s), ("type", s)])
    m = pa.map_(s, pa.float64())
    traces = pa.schema(
        [
            ("trace_id", s),
            ("task_id", s),
            ("system", s),
            ("topology", s),
            ("schema_version", s),
            ("rewards", m),
            ("costs", m),
            ("metrics", m),
            ("meta", s),
            ("n_events", pa.int64()),
            ("n_edges", pa.int64()),
        ]
    )
    return events, edges, traces


def write_parquet(traces: Iterable[Trace], path: PathLike, *, overwrite: bool = False) -> None:
    """Write traces as a Parquet dataset directory.

    The dataset is built in a temporary sibling directory and renamed into place when
    complete. An existing dataset is replaced only with ``overwrite=True``, and only when it
    is one orchestrace wrote (the three tables and nothing else); any other directory is
    refused.

    Args:
        traces: The traces.
        path: The dataset directory (conventionally ``*.parquet``).
        overwrite: Replace an existing dataset.

    Raises:
        OutputError: The output exists (without ``overwrite``), is not ours, the path cannot
            hold it, or writing failed (the temporary directory is removed and the previous
            dataset kept).
    """
    pa, _ = _pa()
    with replace_dir(path, force=overwrite) as tmp:
        try:
            _write_tables(traces, tmp)
        except pa.ArrowException as err:
            if isinstance(err, OSError):
                raise
            raise OutputError(
                path,
                f"cannot write {path}: {str(err)[:200]}; write these traces as .json or "
                ".jsonl instead",
            ) from None


def _write_tables(traces: Iterable[Trace], tmp: Path) -> None:
    pa, pq = _pa()
    ev_schema, ed_schema, tr_schema = _schemas()
    enc = msgspec.json.Encoder()
    ev_writer = pq.ParquetWriter(tmp / _FILES[0], ev_schema)
    ed_writer = pq.ParquetWriter(tmp / _FILES[1], ed_schema)
    rows: dict[str, list[Any]] = {f.name: [] for f in tr_schema}
    try:
        for tr in traces:
            ev = tr.events
            cols: dict[str, Any] = {"trace_id": [tr.trace_id] * len(ev)}
            for c in EVENT_COLUMNS:
                values = list(map(attrgetter(_ATTR[c]), ev))
                if c == "attrs":
                    values = [None if v is None else enc.encode(v).decode() for v in values]
                cols[c] = values
            ev_writer.write_table(pa.table(cols, schema=ev_schema), row_group_size=_ROW_GROUP)
            ed = tr.edges
            ed_writer.write_table(
                pa.table(
                    {
                        "trace_id": [tr.trace_id] * len(ed),
                        "src": list(map(attrgetter("src"), ed)),
                        "dst": list(map(attrgetter("dst"), ed)),
                        "type": list(map(attrgetter("type"), ed)),
                    },
                    schema=ed_schema,
                ),
                row_group_size=_ROW_GROUP,
            )
            for key, value in (
                ("trace_id", tr.trace_id),
                ("task_id", tr.task_id),
                ("system", tr.system),
                ("topology", tr.topology),
                ("schema_version", tr.schema_version),
                ("rewards", list(tr.rewards.items())),
                ("costs", list(tr.costs.items())),
                ("metrics", list(tr.metrics.items())),
                ("meta", enc.encode(tr.meta).decode()),
                ("n_events", len(ev)),
                ("n_edges", len(ed)),
            ):
                rows[key].append(value)
    finally:
        ev_writer.close()
        ed_writer.close()
    pq.write_table(pa.table(rows, schema=tr_schema), tmp / _FILES[2])


_REWRITE = "rewrite the dataset with `orchestrace convert`"
# what each column must hold: "str", "float" (integers accepted), "int" or "bool"
_EVENT_KINDS: dict[str, str] = {
    "trace_id": "str",
    "id": "str",
    "t": "float",
    "type": "str",
    "agent": "str",
    "dur": "float",
    "role": "str",
    "from": "str",
    "to": "str",
    "tool": "str",
    "decision": "str",
    "step": "int",
    "content": "str",
    "content_ref": "str",
    "trusted": "bool",
    "tokens_in": "int",
    "tokens_out": "int",
    "cost": "float",
    "error": "str",
    "attrs": "str",
}
_EDGE_KINDS = {"trace_id": "str", "src": "str", "dst": "str", "type": "str"}
_TRACE_KINDS = {
    "trace_id": "str",
    "task_id": "str",
    "system": "str",
    "topology": "str",
    "schema_version": "str",
    "rewards": "map",
    "costs": "map",
    "metrics": "map",
    "meta": "str",
    "n_events": "int",
    "n_edges": "int",
}
# columns that may not hold nulls (the model's fields without a None default)
_NOT_NULL = {
    "trace_id",
    "id",
    "t",
    "type",
    "agent",
    "dur",
    "tokens_in",
    "tokens_out",
    "cost",
    "src",
    "dst",
    "task_id",
    "schema_version",
    "n_events",
    "n_edges",
}
_NAMES = {"str": "a string", "float": "a number", "int": "an integer", "bool": "a boolean"}


def _check_dataset(path: PathLike) -> Path:
    p = Path(path)
    if not p.is_dir():
        raise TraceFormatError(
            str(path),
            "dataset",
            "not a Parquet dataset directory",
            "pass the directory written by `orchestrace convert --to parquet`",
        )
    for name in _FILES:
        if not (p / name).exists():
            raise TraceFormatError(
                str(path),
                name,
                "file missing from the dataset",
                "rewrite the dataset with `orchestrace convert`",
            )
    return p


def read_tables(
    path: PathLike, columns: list[str] | None = None, trace_id: str | None = None
) -> tuple[Any, Any, Any]:
    """Read the ``(events, edges, traces)`` Arrow tables of a dataset.

    Args:
        path: The dataset directory.
        columns: Event columns to read (``trace_id`` is always read); all by default.
        trace_id: Read only this trace.

    Raises:
        TraceFormatError: Not a dataset, or a file is damaged.
    """
    pa, pq = _pa()
    p = _check_dataset(path)
    filt = [("trace_id", "=", trace_id)] if trace_id is not None else None
    cols = None if columns is None else ["trace_id", *[c for c in columns if c != "trace_id"]]
    try:
        events = pq.read_table(p / _FILES[0], columns=cols, filters=filt)
        edges = pq.read_table(p / _FILES[1], filters=filt)
        traces = pq.read_table(p / _FILES[2], filters=filt)
    except (pa.ArrowInvalid, OSError) as err:
        raise TraceFormatError(
            str(path),
            "dataset",
            f"cannot read Parquet: {str(err)[:200]}",
            "rewrite the dataset with `orchestrace convert`",
        ) from None
    return events, edges, traces


def _json_field(text: Any, where: str, path: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise TraceFormatError(
            path,
            where,
            "column holds invalid JSON",
            "rewrite the dataset with `orchestrace convert`",
        ) from None


def read_parquet(path: PathLike) -> list[Trace]:
    """Read every trace of a dataset, in the order written.

    Raises:
        TraceFormatError: Not a dataset, or damaged.
    """
    events, edges, traces = read_tables(path)
    out: list[Trace] = []
    ev_cols = {c: events.column(c).to_pylist() for c in ("trace_id", *EVENT_COLUMNS)}
    ed_cols = {c: edges.column(c).to_pylist() for c in ("trace_id", "src", "dst", "type")}
    ev_pos = 0
    ed_pos = 0
    src = str(path)
    for row in traces.to_pylist():
        n_ev, n_ed = row["n_events"], row["n_edges"]
        if ev_cols["trace_id"][ev_pos : ev_pos + n_ev].count(row["trace_id"]) != n_ev:
            raise TraceFormatError(
                src,
                "events.parquet",
                "events are not grouped by trace",
                "rewrite the dataset with `orchestrace convert`",
            )
        sl = slice(ev_pos, ev_pos + n_ev)
        attrs = [
            None if a is None else _json_field(a, "events.attrs", src) for a in ev_cols["attrs"][sl]
        ]
        columns = [ev_cols[c][sl] for c in EVENT_COLUMNS[:-1]]
        evs = tuple(_EVENT(*vals, attrs=a) for *vals, a in zip(*columns, attrs, strict=True))
        eds = tuple(
            Edge(s, d, t)
            for s, d, t in zip(
                ed_cols["src"][ed_pos : ed_pos + n_ed],
                ed_cols["dst"][ed_pos : ed_pos + n_ed],
                ed_cols["type"][ed_pos : ed_pos + n_ed],
                strict=True,
            )
        )
        out.append(
            Trace(
                trace_id=row["trace_id"],
                task_id=row["task_id"],
                events=evs,
                edges=eds,
                rewards=dict(row["rewards"] or []),
                costs=dict(row["costs"] or []),
                system=row["system"],
                topology=row["topology"],
                metrics=dict(row["metrics"] or []),
                schema_version=row["schema_version"],
                meta=_json_field(row["meta"], "traces.meta", src) or {},
            )
        )
        ev_pos += n_ev
        ed_pos += n_ed
    return out


_GRAPH_COLUMNS = [
    "id",
    "t",
    "dur",
    "type",
    "agent",
    "to",
    "role",
    "tool",
    "decision",
    "step",
    "tokens_in",
    "tokens_out",
    "cost",
]


def read_graph(path: PathLike, trace_id: str | None = None) -> tuple[TraceGraph, dict[str, Any]]:
    """Compile one trace of a dataset straight from its columns (no event objects).

    Events are read row group by row group and kept only as compact numpy columns, so the
    peak memory stays within about twice the size of the events table.

    Args:
        path: The dataset directory.
        trace_id: Which trace (required when the dataset holds several).

    Returns:
        ``(graph, header)``: the compiled graph and the trace's row of the ``traces`` table.

    Raises:
        TraceFormatError: Not a dataset, several traces and no ``trace_id``, or unknown id.
    """
    pa, pq = _pa()
    p = _check_dataset(path)
    try:
        traces = pq.read_table(p / _FILES[2]).to_pylist()
    except (pa.ArrowInvalid, OSError) as err:
        raise TraceFormatError(
            str(path),
            _FILES[2],
            f"cannot read Parquet: {str(err)[:200]}",
            "rewrite the dataset with `orchestrace convert`",
        ) from None
    ids = [row["trace_id"] for row in traces]
    if trace_id is None:
        if len(ids) != 1:
            raise TraceFormatError(
                str(path),
                "traces.parquet",
                f"dataset holds {len(ids)} traces",
                f"pick one with trace_id= (first: {ids[:3]})",
            )
        trace_id = ids[0]
    elif trace_id not in ids:
        raise TraceFormatError(
            str(path), "traces.parquet", f"no trace {trace_id!r}", f"use one of {ids[:5]}"
        )
    k = ids.index(trace_id)
    row = traces[k]
    ev_lo = sum(r["n_events"] for r in traces[:k])
    ed_lo = sum(r["n_edges"] for r in traces[:k])

    def rows(file: str, columns: list[str], lo: int, count: int) -> Any:
        """Yield record batches covering rows [lo, lo + count) of ``file``."""
        pf = pq.ParquetFile(p / file, pre_buffer=False)
        pos = 0
        for batch in pf.iter_batches(batch_size=1 << 16, columns=columns, use_threads=False):
            start, stop = max(lo - pos, 0), min(lo + count - pos, batch.num_rows)
            pos += batch.num_rows
            if stop > start:
                yield batch.slice(start, stop - start)
            if pos >= lo + count:
                break

    def edge_ref(k: int, end: str) -> str:
        table = pq.read_table(p / _FILES[1], columns=[end])
        return str(table.column(end)[ed_lo + k].as_py())

    try:
        graph = TraceGraph.from_batches(
            rows(_FILES[0], _GRAPH_COLUMNS, ev_lo, row["n_events"]),
            rows(_FILES[1], ["src", "dst", "type"], ed_lo, row["n_edges"]),
            n_events=row["n_events"],
            n_edges=row["n_edges"],
            edge_refs=edge_ref,
        )
    except ValueError as err:
        raise TraceFormatError(
            str(path), "events.parquet", str(err), "fix the values or rewrite the dataset"
        ) from None
    except (pa.ArrowInvalid, OSError, KeyError) as err:
        raise TraceFormatError(
            str(path),
            "dataset",
            f"cannot read Parquet: {str(err)[:200]}",
            "rewrite the dataset with `orchestrace convert`",
        ) from None
    return graph, row
