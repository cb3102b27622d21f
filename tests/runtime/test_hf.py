"""The local transformers backend, on a tiny model built from a config (no download)."""

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

from orchestrace import check_trace
from orchestrace.runtime import run
from orchestrace.runtime.backends.hf import HFBackend
from orchestrace.testing import tiny_causal_lm


@pytest.mark.slow
def test_tiny_model_runs_a_topology(tmp_path):
    path = tiny_causal_lm(tmp_path / "tiny")
    res = run(
        "centralized",
        "arith",
        agents=2,
        task_size=4,
        backend=HFBackend(model=str(path), max_new_tokens=5),
    )
    llm = [e for e in res.trace.events if e.type == "llm_call"]
    assert len(llm) == 3 and all(e.error is None and e.tokens_out >= 1 for e in llm)
    assert all(e.dur > 0 for e in llm) and check_trace(res.trace) == []


def test_missing_model_is_a_config_error_recorded(tmp_path):
    res = run(
        "centralized",
        "arith",
        agents=1,
        task_size=2,
        backend=HFBackend(model=str(tmp_path / "nope")),
    )
    errors = [e.error for e in res.trace.events if e.type == "llm_call"]
    assert errors and all("cannot load model" in e for e in errors)
    assert check_trace(res.trace) == []
