import json

import pytest

from orchestrace.cli import main


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_train_evaluate_export(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    code, stdout, err = run(
        capsys,
        "train",
        "--env",
        "stop-v0",
        "--task",
        "multihop",
        "--algo",
        "grpo",
        "--steps",
        "64",
        "--batch",
        "32",
        "-o",
        str(out),
        "--no-progress",
    )
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["episodes"] == 64 and (out / "policy.pt").exists()
    code, stdout, err = run(
        capsys,
        "evaluate",
        str(out / "policy.pt"),
        "--task",
        "multihop",
        "--seeds",
        "2",
        "--episodes",
        "3",
    )
    assert code == 0, err
    assert "policy.pt" in stdout and "fixed-1" in stdout and "±" in stdout

    trace = tmp_path / "t.jsonl"
    assert (
        run(
            capsys,
            "run",
            "swarm",
            "--task",
            "arith",
            "--agents",
            "4",
            "-o",
            str(trace),
            "--no-progress",
        )[0]
        == 0
    )
    code, stdout, err = run(
        capsys, "export", str(trace), "--to", "trl", "-o", str(tmp_path / "d.jsonl")
    )
    assert code == 0, err and "wrote" in stdout


def test_bad_learn_inputs(tmp_path, capsys):
    code, _, err = run(capsys, "train", "--steps", "0", "--no-progress")
    assert code == 1 and "episodes must be >= 1" in err
    code, _, err = run(capsys, "evaluate", str(tmp_path / "missing.pt"))
    assert code == 1 and "cannot load policy" in err
    code, _, err = run(capsys, "export", str(tmp_path / "missing.json"), "-o", "x")
    assert code == 1 and "missing.json" in err
    with pytest.raises(SystemExit):
        main(["export", "x", "--to", "openrlhf", "-o", "y"])


def test_study_rejects_bad_settings(capsys, tmp_path):
    code, _, err = run(
        capsys, "study", "stopping", "--tasks", "arith", "--seeds", "0", "-o", str(tmp_path)
    )
    assert code == 1 and "seeds must be >= 1" in err
    code, _, err = run(
        capsys,
        "study",
        "stopping",
        "--tasks",
        "nope",
        "--train-episodes",
        "10",
        "--jobs",
        "1",
        "-o",
        str(tmp_path),
    )
    assert code == 1 and "unknown task 'nope'" in err
