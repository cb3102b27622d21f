import json

import pytest

from orchestrace.errors import ConfigError
from orchestrace.learn.env import make_env
from orchestrace.learn.export import export, export_rows, orchestrator_turns


@pytest.fixture(scope="module")
def traces():
    env = make_env("stop-v0", task="multihop")
    out = []
    for seed in range(3):
        for extra in range(3):
            env.reset(seed=seed)
            for a in [0] * extra + [1]:
                *_, info = env.step(a)
            out.append(info["trace"])
    return out


def test_turns_carry_recorded_prompt_and_decision(traces):
    turns = orchestrator_turns(traces[2])  # two continues then stop
    assert len(turns) == 3
    assert "Answers so far: 2" in turns[2]["prompt"]
    assert json.loads(turns[2]["completion"])["stop"] is True
    assert json.loads(turns[0]["completion"])["stop"] is False


def test_group_advantages_are_relative_within_task(traces):
    rows = export_rows(traces)
    assert len(rows) == sum(len(orchestrator_turns(t)) for t in traces)
    for task in {r["task_id"] for r in rows}:
        per_run = {r["trace_id"]: r["advantage"] for r in rows if r["task_id"] == task}
        assert abs(sum(per_run.values())) < 1e-6
    for r in rows:
        assert r["label"] == (r["advantage"] > 0)
        group = {x["trace_id"]: x["reward"] for x in rows if x["task_id"] == r["task_id"]}
        mean = sum(group.values()) / len(group)
        # a run that beat its group's mean has a positive advantage, one below it negative
        assert (r["advantage"] > 0) == (r["reward"] > mean + 1e-9)
        assert (r["advantage"] < 0) == (r["reward"] < mean - 1e-9)


def test_credit_mode(traces):
    rows = export_rows(traces, mode="credit", method="discounted")
    assert rows and all(isinstance(r["advantage"], float) for r in rows)


def test_runtime_traces_without_recorded_prompts_export():
    from orchestrace.runtime import run

    trace = run("centralized", task="arith", agents=3, seed=1).trace
    rows = export_rows([trace])
    assert rows and rows[0]["prompt"].startswith("Task: Compute")
    assert any("worker" in r["prompt"] for r in rows[1:])


def test_trl_and_verl_files(tmp_path, traces):
    n = export(traces, tmp_path / "d.jsonl", to="trl")
    lines = (tmp_path / "d.jsonl").read_text().splitlines()
    assert n == len(lines) and {"prompt", "completion", "label", "advantage"} <= set(
        json.loads(lines[0])
    )
    import pyarrow.parquet as pq

    assert export(traces, tmp_path / "d.parquet", to="verl") == n
    t = pq.read_table(tmp_path / "d.parquet")
    assert {"data_source", "prompt", "ability", "reward_model", "extra_info"} <= set(t.column_names)
    first = t.slice(0, 1).to_pylist()[0]
    assert first["prompt"][0]["role"] == "user"
    assert isinstance(first["extra_info"]["advantage"], float)
    with pytest.raises(ConfigError, match="unknown export format"):
        export(traces, tmp_path / "x", to="openrlhf")
    with pytest.raises(ConfigError, match="advantage mode"):
        export_rows(traces, mode="magic")  # type: ignore[arg-type]


@pytest.mark.slow
def test_trl_kto_trains_a_tiny_model(tmp_path, traces):
    pytest.importorskip("trl")
    pytest.importorskip("datasets")
    import torch
    import transformers

    from orchestrace.learn.export import train_trl
    from orchestrace.testing import tiny_causal_lm

    export(traces, tmp_path / "d.jsonl", to="trl")
    model = tiny_causal_lm(tmp_path / "m")
    before = transformers.AutoModelForCausalLM.from_pretrained(str(model)).state_dict()
    before = {k: v.clone() for k, v in before.items()}
    res = train_trl(tmp_path / "d.jsonl", model, tmp_path / "out", steps=3, batch=4)
    losses = [r["loss"] for r in res["log"] if "loss" in r]
    assert losses and all(torch.isfinite(torch.tensor(x)) for x in losses)
    after = transformers.AutoModelForCausalLM.from_pretrained(res["model"]).state_dict()
    assert sum(float((after[k] - before[k]).abs().sum()) for k in before) > 0


def test_trl_rejects_one_sided_data(tmp_path):
    pytest.importorskip("trl")
    from orchestrace.learn.export import train_trl

    p = tmp_path / "d.jsonl"
    p.write_text(json.dumps({"prompt": "a", "completion": "b", "label": True}) + "\n")
    with pytest.raises(ConfigError, match="same label"):
        train_trl(p, tmp_path / "m", tmp_path / "o")
