"""``orchestrace train --policy``: values given reach the trainer; bad ones are one line."""

import json
import os

import pytest


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("transformers")
    from orchestrace.learn.llm_policy import tiny_chat_lm

    return str(tiny_chat_lm(tmp_path_factory.mktemp("m") / "tiny"))


def _run(argv, capsys):
    from orchestrace.cli import main

    code = main(["train", "--no-progress", *argv])
    return code, capsys.readouterr()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("flags", "want"),
    [
        ([], {"algo": "grpo", "lr": 0.01, "task": "arith", "iterations": 1}),
        (["--lr", "0.001"], {"lr": 0.001}),
        (["--task", "arith-mapreduce-v0"], {"task": "arith-mapreduce-v0"}),
        (["--algo", "ppo", "--vf-coef", "0.25"], {"algo": "ppo", "vf_coef": 0.25}),
    ],
)
def test_explicit_values_are_kept_and_the_default_algo_is_grpo(tmp_path, capsys, tiny, flags, want):
    out = tmp_path / "o"
    base = ["--policy", tiny, "--steps", "1", "--tasks", "1", "--group", "2", "-o", str(out)]
    code, cap = _run([*base, *flags], capsys)
    assert code == 0, cap.err
    got = json.loads((out / "train-config.json").read_text())
    assert {k: got[k] for k in want} == want


def test_steps_20000_is_kept_not_replaced(tiny):
    import argparse

    from orchestrace.cli import train

    seen = {}
    orig = train.train_llm
    train.train_llm = lambda cfg, progress=None: seen.setdefault("cfg", cfg) and 1 / 0
    try:
        ns = argparse.ArgumentParser()
        sub = ns.add_subparsers()
        train.add_parser(sub)
        args = ns.parse_args(["train", "--policy", tiny, "--steps", "20000", "--no-progress"])
        args.output = None
        with pytest.raises(ZeroDivisionError):
            train._train_llm(args)
    finally:
        train.train_llm = orig
    assert seen["cfg"].iterations == 20000


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--batch", "7"], "--batch does not apply to an LLM policy"),
        (["--device", "bogus"], "--device 'bogus' is not a device name; available here: cpu"),
        (["--steps", "0"], "iterations (--steps) must be >= 1, got 0"),
        (["--save-every", "0"], "save_every (--save-every) must be >= 1, got 0"),
        (["--credit-samples", "0"], "credit_samples (--credit-samples) must be >= 1, got 0"),
        (["--kl", "-1"], "kl_coef (--kl) must be >= 0, got -1.0"),
        (["--lr", "nan"], "lr (--lr) must be > 0, got nan"),
    ],
)
def test_bad_values_name_their_flag(tmp_path, capsys, tiny, flags, message):
    code, cap = _run(["--policy", tiny, "-o", str(tmp_path / "o"), *flags], capsys)
    assert code == 1
    assert cap.err.strip() == f"error: {message}" or message in cap.err
    assert cap.err.count("\n") == 1 and not (tmp_path / "o").exists()


def test_cuda_on_a_cpu_torch_is_a_config_error(tmp_path, capsys, tiny):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    code, cap = _run(["--policy", tiny, "--device", "cuda", "-o", str(tmp_path / "o")], capsys)
    assert code == 1 and "--device cuda: " in cap.err and "available here: cpu" in cap.err


def test_mlp_only_and_llm_only_options_are_refused_on_the_other_path(tmp_path, capsys):
    code, cap = _run(["--tasks", "3", "-o", str(tmp_path / "o")], capsys)
    assert code == 1 and "--tasks applies to an LLM policy only" in cap.err


def test_missing_fifo_and_file_model_paths_never_reach_the_hub(tmp_path, capsys, monkeypatch):
    pytest.importorskip("transformers")
    import huggingface_hub

    def no_network(*a, **k):
        raise AssertionError("a hub lookup")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_network)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "empty").mkdir()
    cases = [
        (["--policy", str(tmp_path / "nope")], "--policy", "no such directory"),
        (["--policy", str(fifo)], "--policy", "not a directory"),
        (["--policy", str(tmp_path / "empty")], "--policy", "has no config.json"),
    ]
    for flags, flag, what in cases:
        code, cap = _run([*flags, "-o", str(tmp_path / "o")], capsys)
        assert code == 1 and flag in cap.err and what in cap.err, cap.err
        assert cap.err.count("\n") == 1


@pytest.mark.slow
def test_frozen_workers_need_a_chat_template_and_a_local_dir(tmp_path, capsys, tiny):
    from orchestrace.testing import tiny_causal_lm

    plain = tiny_causal_lm(tmp_path / "plain")
    base = ["--policy", tiny, "--steps", "1", "--tasks", "1", "--group", "2"]
    code, cap = _run([*base, "--workers", f"frozen:{plain}", "-o", str(tmp_path / "a")], capsys)
    assert code == 1 and "has no chat template" in cap.err
    code, cap = _run([*base, "--workers", "frozen:/no/such", "-o", str(tmp_path / "b")], capsys)
    assert code == 1 and "--workers frozen:/no/such: no such directory" in cap.err


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_output_that_is_not_a_directory_says_what_it_is(tmp_path, capsys, kind):
    path = tmp_path / "fifo"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path = "/dev/null"
    code, cap = _run(["--steps", "1", "-o", str(path)], capsys)
    want = "is a FIFO, not a directory" if kind == "fifo" else "is a device, not a directory"
    assert code == 1 and want in cap.err


def test_help_describes_the_llm_outputs(capsys):
    from orchestrace.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "train-config.json" in text and "value_head.pt" in text and "--resume" in text
