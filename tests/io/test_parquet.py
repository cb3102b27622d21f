import subprocess
import sys

import duckdb
import pyarrow.parquet as pq
import pytest

from orchestrace import TraceFormatError, dump, generate_trace, load, load_all
from orchestrace.io import read_graph
from orchestrace.trace.analyze import summarize


def test_roundtrip_many_traces(tmp_path, small_trace):
    traces = [small_trace, *(generate_trace(8, 120, 2, seed=s) for s in range(3))]
    p = tmp_path / "ds.parquet"
    dump(traces, p)
    assert load_all(p) == traces
    dump(traces[:1], p, overwrite=True)  # rewriting replaces the dataset
    assert load(p) == small_trace


def test_readable_by_duckdb_and_pyarrow_without_orchestrace(tmp_path, medium_trace):
    p = tmp_path / "ds.parquet"
    dump(medium_trace, p)
    con = duckdb.connect()
    rows = con.execute(
        f"SELECT type, count(*) FROM '{p}/events.parquet' GROUP BY 1 ORDER BY 1"
    ).fetchall()
    expected = sorted(summarize(medium_trace)["events_by_type"].items())
    assert rows == expected
    (n_edges,) = con.execute(f"SELECT count(*) FROM '{p}/edges.parquet'").fetchone()
    assert n_edges == len(medium_trace.edges)
    (tokens,) = con.execute(f"SELECT costs['tokens'] FROM '{p}/traces.parquet'").fetchone()
    assert tokens == medium_trace.costs["tokens"]
    code = (
        "import pyarrow.parquet as pq, sys; t = pq.read_table(sys.argv[1]); "
        "print(t.num_rows, t.column('id')[0].as_py())"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code, str(p / "events.parquet")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == [str(medium_trace.n_events), medium_trace.events[0].id]
    assert pq.read_table(p / "events.parquet").schema.field("t").type == "double"


def test_read_graph_matches_objects(tmp_path, medium_trace):
    p = tmp_path / "ds.parquet"
    dump(medium_trace, p)
    g, header = read_graph(p)
    assert header["trace_id"] == medium_trace.trace_id
    assert summarize(g) == {**summarize(medium_trace), "errors": 0}


def test_read_graph_needs_trace_id_for_many(tmp_path):
    p = tmp_path / "ds.parquet"
    traces = [generate_trace(3, 20, 1, seed=s) for s in range(2)]
    dump(traces, p)
    with pytest.raises(TraceFormatError, match="dataset holds 2 traces"):
        read_graph(p)
    g, _ = read_graph(p, trace_id=traces[1].trace_id)
    assert g.n == traces[1].n_events
    with pytest.raises(TraceFormatError, match="no trace 'zz'"):
        read_graph(p, trace_id="zz")


def test_damaged_dataset(tmp_path, small_trace):
    p = tmp_path / "ds.parquet"
    dump(small_trace, p)
    (p / "events.parquet").write_bytes(b"garbage")
    with pytest.raises(TraceFormatError, match="cannot read Parquet"):
        load(p)
    (p / "edges.parquet").unlink()
    with pytest.raises(TraceFormatError, match=r"edges\.parquet: file missing from the dataset"):
        load(p)


def test_a_string_that_is_not_utf8_is_refused_by_every_command(tmp_path):
    """Arrow reads stored bytes unchecked: each reader names the column and the row."""
    import pyarrow as pa

    ds = tmp_path / "d.parquet"
    dump(generate_trace(agents=3, steps=12, seed=2), ds)
    events = pq.read_table(ds / "events.parquet")
    raw = [None] * events.num_rows
    raw[4] = b"\xff\xfe"
    k = events.schema.get_field_index("content")
    events = events.set_column(k, "content", pa.array(raw, pa.binary()).view(pa.string()))
    pq.write_table(events, ds / "events.parquet")
    says = (
        "events.parquet column `content`, row 4: holds bytes that are not UTF-8 text; store "
        "the value as UTF-8 text, or rewrite the dataset with `orchestrace convert`"
    )
    for argv in (["validate", str(ds)], ["convert", str(ds), "-o", str(tmp_path / "o.json")]):
        out = subprocess.run(
            [sys.executable, "-m", "orchestrace", *argv],
            capture_output=True,
            text=True,
            check=False,
        )
        assert out.returncode == 1, (argv, out.stderr)  # (3 was "a bug in orchestrace")
        assert says in out.stdout + out.stderr, (argv, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr
    assert not (tmp_path / "o.json").exists()
