"""Streamed recordings keep the token table of trainable calls (JSONL footer, tokens.parquet)."""

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

from orchestrace.io import load
from orchestrace.io.parquet import read_parquet
from orchestrace.learn.llm_policy import tiny_chat_lm
from orchestrace.runtime import run
from orchestrace.runtime.backends.hf import HFBackend
from orchestrace.runtime.export import MemoryExporter
from orchestrace.trace.tokens import TOKENS_KEY, token_table

pytestmark = pytest.mark.slow  # builds and runs a tiny model


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(tiny_chat_lm(tmp_path_factory.mktemp("m") / "tiny"))


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_streamed_hf_run_round_trips_its_token_table_exactly(model, tmp_path, suffix):
    out = tmp_path / f"run{suffix}"
    mem = MemoryExporter()
    backend = HFBackend(model=model, max_new_tokens=3, max_batch=8)
    res = run(
        "centralized",
        "arith",
        agents=3,
        task_size=3,
        backend=backend,
        output=out,
        processors=[mem],
    )
    table = token_table(res.trace)
    calls = [e.id for e in res.trace.events if e.type == "llm_call"]
    assert calls and sorted(table) == sorted(calls)  # the run did record token ids
    back = read_parquet(out)[0] if suffix == ".parquet" else load(out)
    assert back == res.trace == mem.trace
    assert token_table(back) == table
    assert not back.meta.get("partial")
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        assert pq.read_table(out / "tokens.parquet").num_rows == len(table)
        (meta,) = pq.read_table(out / "traces.parquet").column("meta").to_pylist()
        assert f'"{TOKENS_KEY}"' not in meta  # the side table is not inlined
    else:
        first = out.read_text().splitlines()[0]
        assert '"tokens"' not in first  # the table is written when the run ends, in the footer
