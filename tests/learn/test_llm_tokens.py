"""Token records of trainable calls: recorded by the runtime, round-tripped by every format."""

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

from orchestrace import check_trace
from orchestrace.credit.base import unit_members
from orchestrace.errors import ConfigError, TraceFormatError
from orchestrace.io._output import is_our_dataset
from orchestrace.io.json import read_json, write_json
from orchestrace.io.parquet import read_parquet, write_parquet
from orchestrace.learn.llm_policy import tiny_chat_lm
from orchestrace.runtime import run
from orchestrace.runtime.backends.hf import HFBackend
from orchestrace.trace.tokens import attach_tokens, token_credit, token_record, token_table

pytestmark = pytest.mark.slow  # builds and runs a tiny model


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    path = tiny_chat_lm(tmp_path_factory.mktemp("m") / "tiny")
    backend = HFBackend(model=str(path), max_new_tokens=3, max_batch=8)
    res = run("centralized", "arith", agents=3, task_size=3, backend=backend)
    return res.trace, backend


def test_every_hf_call_has_a_token_record_referenced_from_its_event(traced):
    trace, backend = traced
    calls = [e for e in trace.events if e.type == "llm_call"]
    table = token_table(trace)
    assert calls and set(table) == {e.id for e in calls}
    for e in calls:
        assert e.attrs["tokens_ref"] == e.id
        assert len(table[e.id]["completion_ids"]) == e.tokens_out
        assert len(table[e.id]["prompt_ids"]) == e.tokens_in
    assert check_trace(trace) == []
    assert max(backend.batch_sizes) > 1  # the workers' concurrent calls shared a generate call


def test_token_table_round_trips_through_json_jsonl_and_parquet(traced, tmp_path):
    trace, _ = traced
    write_json(trace, tmp_path / "t.json")
    assert read_json(tmp_path / "t.json") == trace
    from orchestrace.io.jsonl import read_jsonl, write_jsonl

    write_jsonl([trace], tmp_path / "t.jsonl")
    assert read_jsonl(tmp_path / "t.jsonl") == [trace]
    write_parquet([trace, trace.replace(trace_id="other")], tmp_path / "d.parquet")
    assert (tmp_path / "d.parquet" / "tokens.parquet").is_file()
    assert is_our_dataset(tmp_path / "d.parquet")
    back = read_parquet(tmp_path / "d.parquet")
    assert back[0] == trace and token_table(back[1]) == token_table(trace)
    import pyarrow.parquet as pq

    meta = pq.read_table(tmp_path / "d.parquet" / "traces.parquet").column("meta").to_pylist()
    assert all('"tokens"' not in m for m in meta)  # the side table is not inlined
    write_parquet([trace], tmp_path / "d.parquet", overwrite=True)  # ours: may be replaced


def test_damaged_token_table_is_one_clear_error(traced, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    trace, _ = traced
    write_parquet([trace], tmp_path / "d.parquet")
    p = tmp_path / "d.parquet" / "tokens.parquet"
    t = pq.read_table(p)
    bad = t.set_column(
        5,
        "mask",
        pa.array([[7] * len(m) for m in t.column("mask").to_pylist()], type=pa.list_(pa.int8())),
    )
    pq.write_table(bad, p)
    with pytest.raises(TraceFormatError, match=r"tokens.parquet row 0 .*mask must hold 0"):
        read_parquet(tmp_path / "d.parquet")


def test_token_unit_credit_maps_onto_real_token_ids(traced):
    trace, _ = traced
    table = token_table(trace)
    units = unit_members(trace, "token")
    assert len(units) == sum(len(r["completion_ids"]) for r in table.values())
    eid = next(iter(table))
    credit = {f"{eid}:{k}": 1.0 + k for k in range(len(table[eid]["completion_ids"]))}
    assert token_credit(trace, credit)[eid] == [1.0 + k for k in range(len(credit))]


def test_bad_records_are_refused(traced):
    trace, _ = traced
    with pytest.raises(ConfigError, match="logprobs has 1 values for 2 completion tokens"):
        token_record([1], [2, 3], [-0.1])
    with pytest.raises(ConfigError, match="which the trace does not hold"):
        attach_tokens(trace, {"nope": token_record([1], [2], [-0.1])})


def test_a_replay_reproduces_the_token_table(traced):
    from orchestrace.runtime.replay import replay

    trace, _ = traced
    again = replay(trace).trace
    assert token_table(again) == token_table(trace)
    assert [e.attrs for e in again.events] == [e.attrs for e in trace.events]
