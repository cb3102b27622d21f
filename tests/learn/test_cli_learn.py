import json

import pytest

from orchestrace.cli import main


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
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

    # two runs of one task instance whose rewards differ (seed 0 solves it, seed 3 does not), so
    # the export has turns with a non-zero advantage to write
    traces = []
    for seed in ("0", "3"):
        traces.append(tmp_path / f"t{seed}.jsonl")
        code, _, err = run(
            capsys,
            "run",
            "swarm",
            "--task",
            "arith",
            "--agents",
            "4",
            "--seed",
            seed,
            "--task-seed",
            "0",
            "-o",
            str(traces[-1]),
            "--no-progress",
        )
        assert code == 0, err
    rewards = [json.loads(p.read_text().splitlines()[-1])["footer"]["rewards"] for p in traces]
    assert rewards[0]["team"] != rewards[1]["team"], rewards
    data = tmp_path / "d.jsonl"
    code, stdout, err = run(capsys, "export", *map(str, traces), "--to", "trl", "-o", str(data))
    assert code == 0, err
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    assert rows and f"wrote {len(rows)} turns from 2 traces" in stdout, stdout
    assert {type(r["label"]) for r in rows} == {bool} and all(r["advantage"] != 0 for r in rows)


def test_bad_learn_inputs(tmp_path, capsys):
    code, _, err = run(capsys, "train", "--steps", "0", "--no-progress")
    assert code == 1 and "--steps must be >= 1 (got 0)" in err
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
