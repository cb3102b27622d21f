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
        assert r["label"] == (True if r["advantage"] > 0 else False if r["advantage"] < 0 else None)
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
    assert rows and rows[-1]["prompt"].startswith("Task: Compute")
    assert any("worker" in r["prompt"] for r in rows[1:])


def test_every_row_completion_answers_its_own_prompt():
    from orchestrace.runtime import run
    from orchestrace.runtime.prompts import render
    from orchestrace.tasks import make_task

    trace = run("centralized", task="arith", agents=3, seed=1).trace
    turns = orchestrator_turns(trace)
    plan = next(e for e in trace.events if e.type == "llm_call" and e.agent == "orchestrator")
    question = make_task("arith-mapreduce-v0", seed=trace.meta["task"]["seed"]).question
    # the planning call: the prompt it was sent, the answer it gave (a worker count)
    asked = render("plan", {"prompt": question}, "orchestrator")[-1]["content"]
    assert turns[0] == {
        "turn": "orchestrator@0",
        "agent": "orchestrator",
        "prompt": asked,
        "completion": plan.content,
    }
    assert "How many parallel workers" in turns[0]["prompt"]
    # the final decision: the task and the workers' results, answered with the run's answer
    done = next(e for e in trace.events if e.type == "orchestrator_decision")
    assert turns[-1]["prompt"].startswith(f"Task: {question}\nReceived so far:\n")
    assert turns[-1]["completion"] == f"ANSWER: {done.attrs['answer']}"
    assert all(not t["completion"].startswith("[{") for t in turns)


def test_trl_and_verl_files(tmp_path, traces):
    n = export(traces, tmp_path / "d.jsonl", to="trl")
    lines = (tmp_path / "d.jsonl").read_text().splitlines()
    assert n == len(lines) and {"prompt", "completion", "label", "advantage"} <= set(
        json.loads(lines[0])
    )
    # rows without a preference (advantage 0) are left out of the TRL file only
    assert all(json.loads(x)["label"] is not None for x in lines)
    rows = export_rows(traces)
    assert n == sum(r["label"] is not None for r in rows)
    import pyarrow.parquet as pq

    assert export(traces, tmp_path / "d.parquet", to="verl") == len(rows)
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


def _collapse_steps(trace):
    """The same run as a recorder that numbers no steps would write it (every step 0)."""
    import msgspec

    return trace.replace(events=[msgspec.structs.replace(e, step=0) for e in trace.events])


def test_each_row_completion_is_the_decision_after_its_prompt(traces):
    for trace in (traces[2], _collapse_steps(traces[2])):
        recorded = [
            (e.attrs["prompt"], e.attrs["completion"])
            for e in trace.events
            if e.attrs and "prompt" in e.attrs and "completion" in e.attrs
        ]
        turns = orchestrator_turns(trace)
        assert [(t["prompt"], t["completion"]) for t in turns] == recorded
        assert len(turns) == 3


def test_a_planning_call_and_a_decision_in_one_step_are_two_rows():
    import msgspec

    from orchestrace.runtime import run

    trace = run("centralized", task="arith", agents=3, seed=1).trace
    # the aggregate of the workers' results recorded in the same step as the planning call
    events = [
        msgspec.structs.replace(e, step=0) if e.agent == "orchestrator" else e for e in trace.events
    ]
    turns = orchestrator_turns(trace.replace(events=events))
    assert len(turns) == 2
    first_llm = next(e for e in trace.events if e.type == "llm_call")
    assert turns[0]["completion"] == first_llm.content
    assert "How many parallel workers" in turns[0]["prompt"]
    assert turns[1]["completion"].startswith("ANSWER: ") and "worker" in turns[1]["prompt"]


def test_groups_are_task_instances_and_ties_are_not_undesirable():
    from orchestrace.learn.env import make_env
    from orchestrace.runtime import run

    # one run each of different instances: no group to compare against, no preference
    singles = [run("centralized", task="arith", agents=3, seed=s).trace for s in (1, 2, 7)]
    assert len({t.meta["result"]["success"] for t in singles}) == 2  # mixed outcomes
    rows = export_rows(singles)
    assert rows and all(r["advantage"] == 0.0 and r["label"] is None for r in rows)
    rows = export_rows(singles, mode="credit", method="discounted")
    assert rows and all(r["advantage"] == 0.0 and r["label"] is None for r in rows)
    # a group where every run succeeds
    env = make_env("stop-v0", task="multihop")
    wins = []
    for _ in range(3):
        env.reset(seed=1)
        for a in (0, 0, 1):
            *_, info = env.step(a)
        wins.append(info["trace"])
    assert all(t.meta["result"]["success"] for t in wins)
    rows = export_rows(wins)
    assert rows and all(r["label"] is None and r["advantage"] == 0.0 for r in rows)


def test_verl_ground_truth_is_the_tasks_and_compute_score_handles_every_source(tmp_path, traces):
    import pyarrow.parquet as pq

    from orchestrace.learn.verl_reward import compute_score, data_sources, score_details
    from orchestrace.runtime import run
    from orchestrace.tasks import TASKS, make_task

    failed = run("centralized", task="arith", agents=3, seed=1).trace  # answered wrong
    assert failed.meta["result"]["success"] is False
    export([*traces, failed], tmp_path / "d.parquet", to="verl")
    rows = pq.read_table(tmp_path / "d.parquet").to_pylist()
    by_trace = {t.trace_id: t for t in [*traces, failed]}
    for row in rows:
        trace = by_trace[row["extra_info"]["trace_id"]]
        spec = trace.meta["task"]
        truth = make_task(spec["name"], seed=spec["seed"], size=spec["size"]).answer
        assert json.loads(row["reward_model"]["ground_truth"]) == truth
        assert row["data_source"] in data_sources()
        right = compute_score(
            row["data_source"],
            f"ANSWER: {json.dumps(truth)}",
            row["reward_model"]["ground_truth"],
            row["extra_info"],
        )
        wrong = compute_score(
            row["data_source"],
            row["extra_info"]["completion"],
            row["reward_model"]["ground_truth"],
            row["extra_info"],
        )
        assert (right, wrong) == (1.0, 0.0)
    failed_row = next(r for r in rows if r["extra_info"]["trace_id"] == failed.trace_id)
    recorded = failed.meta["result"]["answer"]
    assert json.loads(failed_row["reward_model"]["ground_truth"]) != recorded
    assert (
        compute_score(
            failed_row["data_source"],
            f"ANSWER: {recorded}",
            failed_row["reward_model"]["ground_truth"],
        )
        == 0.0
    )
    # every data_source the export can emit (one per task) is handled
    for name in TASKS:
        source = f"orchestrace/{name}"
        assert source in data_sources()
        score, reason = score_details(source, "nothing", json.dumps(None))
        assert score == 0.0 and reason
    code = score_details("orchestrace/humaneval-v0", "ANSWER: 1", '"x"')
    assert code[0] == 0.0 and "running them as code" in code[1]
    with pytest.raises(ConfigError, match="not an orchestrace task"):
        compute_score("gsm8k", "ANSWER: 1", "1")


def test_verl_refuses_traces_without_task_meta(tmp_path, traces):
    from orchestrace.errors import TraceError

    bare = traces[0].replace(meta={})
    with pytest.raises(TraceError) as err:
        export([bare], tmp_path / "d.parquet", to="verl")
    msg = str(err.value)
    assert bare.trace_id in msg and "meta.task" in msg and "\n" not in msg
    assert not (tmp_path / "d.parquet").exists()
    odd = traces[0].replace(meta={**traces[0].meta, "task": {"name": "multihop-v0", "seed": "x"}})
    with pytest.raises(TraceError, match=r"meta\.task\.seed is 'x', not an integer"):
        export([odd], tmp_path / "d.parquet", to="verl")
    unknown = traces[0].replace(meta={**traces[0].meta, "task": {"name": "chess-v9"}})
    with pytest.raises(TraceError, match="not a known task"):
        export([unknown], tmp_path / "d.parquet", to="verl")


def test_docs_verl_config_uses_the_shipped_reward():
    from pathlib import Path

    import orchestrace.learn.verl_reward as vr

    doc = (Path(__file__).parents[2] / "docs" / "learning.md").read_text()
    assert "custom_reward_function" in doc and "orchestrace/learn/verl_reward.py" in doc
    assert "name: compute_score" in doc and callable(vr.compute_score)


@pytest.mark.parametrize(
    ("to", "name", "want"),
    [("verl", "rows.jsonl", "*.parquet"), ("trl", "rows.parquet", "*.jsonl")],
)
def test_cli_refuses_an_output_suffix_of_the_other_format(tmp_path, capsys, to, name, want):
    from orchestrace.cli import main
    from orchestrace.runtime import run

    src = tmp_path / "run.jsonl"
    run("debate", "arith", agents=3, seed=1, output=src)
    out = tmp_path / name
    assert main(["export", "--to", to, str(src), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"a {to} export is written as" in err and f"name the output {want}" in err
    assert not out.exists()


def test_cli_exports_every_trace_of_a_parquet_dataset(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    from orchestrace.cli import main
    from orchestrace.io import write_parquet
    from orchestrace.runtime import run

    traces = [
        run("centralized", task="arith", agents=3, seed=s, task_seed=1).trace for s in range(3)
    ]
    write_parquet(traces, tmp_path / "ds")
    assert (
        main(["export", str(tmp_path / "ds"), "--to", "trl", "-o", str(tmp_path / "o.jsonl")]) == 0
    )
    assert "from 3 traces" in capsys.readouterr().out
