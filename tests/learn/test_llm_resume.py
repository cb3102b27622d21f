"""A resumed LLM run continues exactly where the checkpoint left it."""

import csv

import pytest


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "grpo"])
def test_two_plus_two_iterations_equal_four_in_one_go(tmp_path, algo):
    pytest.importorskip("transformers")
    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig, resume_config, train_llm
    from orchestrace.learn.llm_policy import tiny_chat_lm

    model = str(tiny_chat_lm(tmp_path / "tiny"))
    common = {"policy": model, "algo": algo, "tasks": 1, "group": 2, "kl_coef": 0.1, "seed": 3}
    train_llm(LLMTrainConfig(iterations=4, out=str(tmp_path / "once"), **common))
    train_llm(LLMTrainConfig(iterations=2, out=str(tmp_path / "twice"), **common))
    cfg = resume_config(str(tmp_path / "twice"), iterations=4)
    assert cfg.start == 2 and cfg.policy == model  # the KL reference stays the start
    train_llm(cfg)
    once, twice = _rows(tmp_path / "once" / "train.csv"), _rows(tmp_path / "twice" / "train.csv")
    assert [r["iteration"] for r in twice] == ["0", "1", "2", "3"]
    for a, b in zip(once, twice, strict=True):
        for k in ("episodes", "reward", "tokens", "loss", "kl", "value_loss"):
            assert float(a[k]) == pytest.approx(float(b[k]), rel=1e-4, abs=1e-6), k


@pytest.mark.slow
def test_cli_resume_appends_and_never_replaces_a_csv(tmp_path, capsys):
    pytest.importorskip("transformers")
    from orchestrace.cli import main
    from orchestrace.learn.llm_policy import tiny_chat_lm

    model = str(tiny_chat_lm(tmp_path / "tiny"))
    out = str(tmp_path / "o")
    base = ["train", "--no-progress", "--tasks", "1", "--group", "2", "-o", out]
    assert main([*base, "--policy", model, "--steps", "1"]) == 0
    capsys.readouterr()
    assert main([*base, "--policy", model, "--steps", "1", "--force"]) == 1
    assert "holds the train.csv of an earlier run; continue it with --resume" in (
        capsys.readouterr().err
    )
    assert len(_rows(tmp_path / "o" / "train.csv")) == 1
    assert main(["train", "--no-progress", "--resume", out, "--steps", "3"]) == 0
    assert [r["iteration"] for r in _rows(tmp_path / "o" / "train.csv")] == ["0", "1", "2"]
    capsys.readouterr()
    assert main(["train", "--no-progress", "--resume", out, "--steps", "4", "--group", "3"]) == 1
    assert "a resume keeps its settings" in capsys.readouterr().err
    assert main(["train", "--no-progress", "--resume", model, "--steps", "4"]) == 1
    assert "no trainer-state.pt" in capsys.readouterr().err


@pytest.mark.slow
def test_lora_samples_plainly_and_resumes(tmp_path):
    pytest.importorskip("peft")
    import json

    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig, resume_config, train_llm
    from orchestrace.learn.llm_policy import tiny_chat_lm

    model = tiny_chat_lm(tmp_path / "tiny")
    gen = json.loads((model / "generation_config.json").read_text())
    (model / "generation_config.json").write_text(json.dumps({**gen, "repetition_penalty": 1.5}))
    out = str(tmp_path / "o")
    common = {"tasks": 1, "group": 2, "lora": True, "kl_coef": 0.1, "max_new_tokens": 3}
    res = train_llm(LLMTrainConfig(policy=str(model), iterations=1, out=out, **common))
    assert res.log[0]["approx_kl"] == 0.0
    res = train_llm(resume_config(out, iterations=2))
    assert [r["iteration"] for r in res.log] == [0, 1]
    assert [r["iteration"] for r in _rows(tmp_path / "o" / "train.csv")] == ["0", "1"]


@pytest.mark.slow
def test_a_relative_policy_is_recorded_so_a_resume_elsewhere_finds_it(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig, resume_config, train_llm
    from orchestrace.learn.llm_policy import tiny_chat_lm

    tiny_chat_lm(tmp_path / "tiny")
    monkeypatch.chdir(tmp_path)
    cfg = LLMTrainConfig(
        policy="tiny", iterations=1, tasks=1, group=2, kl_coef=0.1, out=str(tmp_path / "run")
    )
    train_llm(cfg)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    again = resume_config(str(tmp_path / "run"), iterations=2)
    assert again.policy == str((tmp_path / "tiny").resolve())
    train_llm(again)
    assert [r["iteration"] for r in _rows(tmp_path / "run" / "train.csv")] == ["0", "1"]
