import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrace import ConfigError, check_trace, dumps, generate_trace
from orchestrace.io._writable import require_writable
from orchestrace.trace.generate import min_events


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 60), st.integers(1, 800), st.integers(0, 6), st.integers(0, 2**31))
def test_generated_traces_are_valid_and_exact(agents, steps, depth, seed):
    if agents > 1 and depth == 0:
        depth = 1
    tr = generate_trace(agents, steps, depth, seed)
    assert check_trace(tr) == []
    # marked writable without the writers' check: a copy without the mark passes it in full
    assert tr._writable and not tr.replace()._writable
    require_writable([tr.replace()])
    assert tr.n_events == max(steps, min_events(agents, depth))
    g = tr.graph
    assert len(g.agent_codes()) == agents
    assert g.spawn_depth() == (min(depth, agents - 1) if agents > 1 else 0)


def test_same_seed_same_bytes():
    a = dumps(generate_trace(30, 500, 2, seed=11))
    assert a == dumps(generate_trace(30, 500, 2, seed=11))
    assert a != dumps(generate_trace(30, 500, 2, seed=12))


def test_edges_point_forward_and_times_are_sorted():
    tr = generate_trace(50, 2000, 3, seed=1)
    g = tr.graph
    assert (g.src < g.dst).all()
    assert (g.t[1:] >= g.t[:-1]).all()


@pytest.mark.parametrize(
    "kw,msg",
    [
        ({"agents": 0}, "agents must be an integer >= 1"),
        ({"steps": -5}, "steps must be an integer >= 1"),
        ({"depth": 1000}, "depth must be <= 256"),
        ({"agents": 5, "depth": 0}, "depth 0 means a lone agent"),
    ],
)
def test_bad_arguments(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        generate_trace(**kw)


@pytest.mark.parametrize(
    "agents,steps,depth,seed,llm_events",
    [
        (1, 1, 0, 0, True),
        (1, 50, 0, 3, False),
        (5, 60, 2, 1, True),
        (30, 500, 2, 11, False),
        (7, 70_000, 1, 2, True),  # two row groups
    ],
)
def test_the_columns_write_the_dataset_the_trace_writes(
    tmp_path, agents, steps, depth, seed, llm_events
):
    from orchestrace.io.parquet import read_parquet, write_generated, write_parquet
    from orchestrace.trace.generate import generate_columns

    gen = generate_columns(agents, steps, depth, seed, llm_events=llm_events)
    tr = generate_trace(agents, steps, depth, seed, llm_events=llm_events)
    assert gen.trace() == tr and dumps(gen.trace()) == dumps(tr)
    write_generated(gen, tmp_path / "columns.parquet")
    write_parquet([tr], tmp_path / "trace.parquet")
    for name in ("events.parquet", "edges.parquet", "traces.parquet"):
        a = (tmp_path / "columns.parquet" / name).read_bytes()
        assert a == (tmp_path / "trace.parquet" / name).read_bytes(), name
    back = read_parquet(tmp_path / "columns.parquet")
    assert dumps(back[0]) == dumps(tr)  # the fields left at their defaults too


def test_generate_writes_parquet_from_the_columns(tmp_path):
    from orchestrace.cli import main
    from orchestrace.io.parquet import read_parquet

    for name in ("g.parquet", "g.json"):
        argv = ["generate", "-k", "9", "-l", "300", "-d", "2", "-s", "4"]
        assert main([*argv, "-o", str(tmp_path / name)]) == 0
    want = dumps(generate_trace(9, 300, 2, 4))
    assert dumps(read_parquet(tmp_path / "g.parquet")[0]) == want
    assert (tmp_path / "g.json").read_bytes().rstrip(b"\n") == want.rstrip(b"\n")


def test_times_are_exact_sums_of_the_durations_before_them():
    """A worker's next event starts when the one before ends, exactly (whole microseconds),
    however long the trace: only an aggregate waits for the last of several."""
    tr = generate_trace(20, 30_000, 2, seed=7)
    by_id = {e.id: e for e in tr.events}

    def us(x):
        return round(x * 1_000_000)

    checked = 0
    for edge in tr.edges:
        src, dst = by_id[edge.src], by_id[edge.dst]
        if dst.type != "aggregate":
            assert us(dst.t) == us(src.t) + us(src.dur), (edge, src, dst)
            checked += 1
    assert checked > 29_000


def test_arguments_the_trace_cannot_hold_are_refused():
    for kw, says in (
        ({"task_id": 5}, "task_id must be a non-empty string"),
        ({"task_id": ""}, "task_id must be a non-empty string"),
        ({"task_id": "\udc80"}, "task_id must be a non-empty string"),
        ({"seed": 2**63}, "seed must be an integer from 0 to 2\\*\\*63-1"),
    ):
        with pytest.raises(ConfigError, match=says):
            generate_trace(agents=3, steps=10, **kw)


def test_the_columns_are_read_only_and_the_writer_takes_nothing_else(tmp_path):
    from orchestrace.io.parquet import write_generated
    from orchestrace.trace.generate import generate_columns

    gen = generate_columns(3, 10)
    with pytest.raises(ValueError, match="read-only"):
        gen.t[3] = float("nan")
    with pytest.raises(ConfigError, match="write_generated takes what generate_columns returns"):
        write_generated(generate_trace(3, 10), tmp_path / "x.parquet")  # type: ignore[arg-type]
    assert not (tmp_path / "x.parquet").exists()


def test_a_depth_the_team_cannot_reach_is_capped_and_the_topology_says_so():
    tr = generate_trace(agents=2, steps=10, depth=5)
    assert tr.graph.spawn_depth() == 1 and tr.topology == "centralized"
    assert tr.meta["generator"]["depth"] == 5  # what was asked for


def test_string_columns_past_32_bit_offsets_are_written_in_chunks(tmp_path, monkeypatch):
    from orchestrace.io.parquet import read_parquet, write_parquet
    from orchestrace.trace import _tables

    tr = generate_trace(4, 300, 1, seed=2).replace(trace_id="t" * 50)
    write_parquet([tr], tmp_path / "whole.parquet")
    monkeypatch.setattr(_tables, "_MAX_STRING_BYTES", 1000)  # 20 ids a chunk
    write_parquet([tr], tmp_path / "chunked.parquet")
    assert read_parquet(tmp_path / "chunked.parquet") == [tr]
    for name in ("events.parquet", "edges.parquet", "traces.parquet"):
        assert (tmp_path / "whole.parquet" / name).read_bytes() == (
            tmp_path / "chunked.parquet" / name
        ).read_bytes()
