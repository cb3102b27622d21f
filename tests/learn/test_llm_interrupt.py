"""Ctrl-C (SIGINT) during `orchestrace train --policy` leaves a loadable checkpoint and the CSV."""

import os
import signal
import subprocess
import sys
import time

import pytest


@pytest.mark.slow
def test_sigint_leaves_a_loadable_checkpoint_and_the_csv_so_far(tmp_path):
    transformers = pytest.importorskip("transformers")
    from orchestrace.learn.llm_policy import tiny_chat_lm

    model = tiny_chat_lm(tmp_path / "tiny")
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "orchestrace", "train", "--policy", str(model), "--steps", "500"]
    cmd += ["--tasks", "1", "--group", "2", "--save-every", "1", "--no-progress", "-o", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    csv = out / "train.csv"
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if csv.is_file() and csv.read_text().count("\n") >= 3:  # header and two iterations
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        rows_before = csv.read_text().count("\n") - 1
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    rows = csv.read_text().splitlines()
    assert len(rows) - 1 >= rows_before and rows[0].startswith("iteration,")
    iterations = [int(r.split(",")[0]) for r in rows[1:]]
    assert iterations == list(range(len(iterations)))  # every finished iteration, in order
    assert transformers.AutoModelForCausalLM.from_pretrained(out) is not None
    assert transformers.AutoTokenizer.from_pretrained(out).chat_template
    assert (out / "train-config.json").is_file()
