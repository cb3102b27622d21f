"""Hostile inputs through every file-reading command: no crash, traceback, hang or damage.

The corpus (``tests/hostile/corpus.py``) is built at test time from a generated trace, recorded
runs and a Parquet dataset, then corrupted: malformed, truncated, binary and non-UTF-8 files,
wrong-typed, unknown, dangling, cyclic and duplicate content, extreme numbers, deep nesting, huge
strings, duplicate keys, damaged record streams, damaged Parquet datasets, hostile sizes and
code planted in a HumanEval answer, odd paths, FIFOs, devices, pipes and unreadable files.
Each input goes through validate (plain, ``--partial``, ``--keep-going``), analyze (text and
``--json``), convert (to ``.json``, ``.jsonl``, ``.parquet`` and ``--to upstream``), replay,
credit, reward (text and ``--json``) and export; the rules are in ``tests/hostile/runner.py``.

Ordinary inputs run in this process (``orchestrace.cli.main``); special paths run as real
processes, and so do the output cases about the process (a full disk, dropped write access, a
FIFO, a huge value under the child's memory limit). ``python benchmarks/hostile.py`` prints
the same results as a table.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostile.corpus import CASES, MARKER, OUTPUT_CASES, Case, OutputCase, make_seeds
from hostile.runner import (
    COMMANDS,
    Command,
    failure_lines,
    judge,
    run_case,
    run_child,
    run_in_process,
    run_output_case,
    unprivileged_prefix,
)

pytestmark = pytest.mark.slow

TIMEOUT = float(os.environ.get("ORCHESTRACE_HOSTILE_TIMEOUT", "30"))
ORDINARY = [c for c in CASES if not c.special]
SPECIAL = [c for c in CASES if c.special]
# child processes cost ~0.4 s each: special paths go through one command per reader (validate,
# analyze and load_all, which convert, replay, credit and export share with reward);
# `python benchmarks/hostile.py` runs them through every command
SPECIAL_COMMANDS = [c for c in COMMANDS if c.name in ("validate", "analyze", "reward")]


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory):
    return make_seeds(tmp_path_factory.mktemp("hostile-seeds"))


@pytest.mark.parametrize("case", ORDINARY, ids=lambda c: c.name)
def test_hostile_input(case: Case, seeds, tmp_path: Path) -> None:
    results = run_case(case, seeds, tmp_path, timeout=TIMEOUT)
    assert len(results) == len(COMMANDS)
    bad = failure_lines(results)
    assert not bad, f"{len(bad)} failed run(s):\n" + "\n".join(bad)


@pytest.mark.parametrize("case", SPECIAL, ids=lambda c: c.name)
def test_special_path(case: Case, seeds, tmp_path: Path) -> None:
    if case.unprivileged and unprivileged_prefix() is None:
        pytest.skip("running as root without user namespaces: no way to lose read access")
    results = run_case(case, seeds, tmp_path, timeout=TIMEOUT, commands=SPECIAL_COMMANDS)
    assert len(results) == len(case.commands or SPECIAL_COMMANDS)
    bad = failure_lines(results)
    assert not bad, f"{len(bad)} failed run(s):\n" + "\n".join(bad)


@pytest.mark.parametrize("case", OUTPUT_CASES, ids=lambda c: c.name)
def test_hostile_output_path(case: OutputCase, seeds, tmp_path: Path) -> None:
    if case.unprivileged and unprivileged_prefix() is None:
        pytest.skip("running as root without user namespaces: no way to lose write access")
    res = run_output_case(case, seeds, tmp_path, timeout=TIMEOUT)
    assert not res.problems, (
        f"{case.name} | rc={res.rc} | {'; '.join(res.problems)} | {res.first_line}"
    )


# ------------------------------------------------------------------ the harness itself
def test_corpus_is_large_and_deterministic(tmp_path: Path) -> None:
    assert len(CASES) >= 238
    assert len({c.name for c in CASES}) == len(CASES)
    kinds = {c.name.split("/")[0] for c in CASES}
    assert kinds == {"json", "stream", "lines", "parquet", "path", "special"}
    assert {c.name.split("/")[0] for c in OUTPUT_CASES} == {"output", "args"}
    a, b = make_seeds(tmp_path / "a", seed=3), make_seeds(tmp_path / "b", seed=3)
    for case in [c for c in ORDINARY if "binary" in c.name or "bit-flips" in c.name]:
        pa, pb = case.materialize(a, tmp_path / "ca"), case.materialize(b, tmp_path / "cb")
        files = sorted(p.relative_to(pa) for p in ([pa] if pa.is_file() else pa.rglob("*")))
        for rel in files:
            fa, fb = pa / rel if rel.parts else pa, pb / rel if rel.parts else pb
            if fa.is_file():
                assert fa.read_bytes() == fb.read_bytes(), (case.name, rel)


def test_corrupted_inputs_differ_from_their_seed(seeds, tmp_path: Path) -> None:
    good = {
        c.materialize(seeds, tmp_path).read_bytes()
        for c in CASES
        if c.name in ("json/valid", "json/run-valid", "stream/valid", "lines/valid")
    }
    same = [
        c.name
        for c in ORDINARY
        if c.expect in ("invalid", "truncated")
        and c.name.split("/")[0] in ("json", "stream", "lines")
        and (p := c.materialize(seeds, tmp_path)).is_file()
        and p.read_bytes() in good
    ]
    assert same == []


def _case(expect: str = "invalid") -> Case:
    return Case("test/x", expect, lambda s, d: d / "x.json")


@pytest.mark.parametrize(
    ("rc", "text", "hung", "expect", "kind"),
    [
        (
            3,
            "error: unexpected KeyError: 'lo'\nthis is a bug in orchestrace",
            False,
            "any",
            "exit-3",
        ),
        (1, "Traceback (most recent call last):\n  ...", False, "any", "traceback"),
        (None, "", True, "any", "hang"),
        (0, "x.json: ok", False, "invalid", "accepted"),
        (0, "scored", False, "truncated", "silent-partial"),
        (1, "error: x", False, "valid", "rejected"),
        (0, "x.json: ok", False, "truncated", "accepted"),
        (0, "trace \x1b[31mRED", False, "any", "control-char"),
        (0, "T" * 100_000, False, "any", "output-size"),
        (-9, "", False, "any", "exit-code"),
    ],
)
def test_judge_flags_each_kind(rc, text, hung, expect, kind, tmp_path: Path) -> None:
    word = "validate" if kind in ("rejected", "accepted") else "reward"
    cmd = Command(word, (word, "{in}"))
    assert {p.split(":")[0] for p in judge(_case(expect), cmd, rc, text, hung, tmp_path, 1)} == {
        kind
    }
    assert judge(_case("any"), cmd, 1, "error: x.json: bad; fix it", False, tmp_path, 1) == []


def test_judge_checks_outputs(tmp_path: Path) -> None:
    cmd = next(c for c in COMMANDS if c.output == "json")
    assert judge(_case("any"), cmd, 0, "", False, tmp_path, 1) == [
        "output-missing: exit 0 but no out.json"
    ]
    (tmp_path / "out.json").write_bytes(b'{"trace_id": "x", "ev')
    kinds = {p.split(":")[0] for p in judge(_case("any"), cmd, 0, "", False, tmp_path, 1)}
    assert kinds == {"output-incomplete"}
    (tmp_path / "out.json").unlink()
    (tmp_path / ".out.json.tmp123").write_bytes(b"{")
    kinds = {p.split(":")[0] for p in judge(_case("any"), cmd, 1, "error: x", False, tmp_path, 1)}
    assert kinds == {"leftover"}


def test_in_process_runs_are_timed_out_and_captured(monkeypatch, tmp_path: Path) -> None:
    import orchestrace.cli

    def slow(argv):
        time.sleep(20)
        return 0

    monkeypatch.setattr(orchestrace.cli, "main", slow)
    t0 = time.monotonic()
    rc, _text, hung = run_in_process(["validate", "x"], 0.3, tmp_path)
    # the call returns at its 0.3 s limit, long before the 20 s command would (the bound is loose
    # so that a loaded machine does not fail it)
    assert (rc, hung) == (None, True) and time.monotonic() - t0 < 15

    def spawns(argv):
        import subprocess

        subprocess.run(["true"], check=False)
        print("done")
        return 0

    monkeypatch.setattr(orchestrace.cli, "main", spawns)
    rc, text, hung = run_in_process(["validate", "x"], 5, tmp_path)
    assert rc == 0 and "done" in text and "[spawned] subprocess.Popen" in text


def test_child_runs_are_killed_at_the_limit(tmp_path: Path) -> None:
    t0 = time.monotonic()
    rc, _text, hung = run_child(["30"], 0.5, tmp_path, prefix=["sleep"])
    assert (rc, hung) == (None, True) and time.monotonic() - t0 < 10
    rc, text, hung = run_child(["hello"], 5, tmp_path, prefix=["echo"])
    assert (rc, text, hung) == (0, "hello\n", False)


def test_forked_runs_are_processes_of_their_own(tmp_path: Path, monkeypatch) -> None:
    """Child runs forked from the zygote: exit codes, fed input, and a hang killed at the limit."""
    from orchestrace import dumps, generate_trace

    rc, text, hung = run_child(["validate", "nope.json"], 30, tmp_path)
    assert (rc, hung) == (1, False) and "nope.json: file: no such file" in text
    data = dumps(generate_trace(agents=2, steps=5, seed=1))
    rc, text, hung = run_child(["validate", "-"], 30, tmp_path, feed="stdin", data=data)
    assert (rc, hung) == (0, False) and "ok (6 events" in text, text
    rc, text, hung = run_child(["validate", "/dev/stdin"], 30, tmp_path, feed="fd", data=data)
    assert (rc, hung) == (0, False) and "ok (6 events" in text, text
    # a FIFO whose writer stays silent: the run waits for data (30 s) and is killed at 1 s
    monkeypatch.setenv("ORCHESTRACE_PIPE_IDLE_S", "30")
    fifo = tmp_path / "silent.json"
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDWR)  # a writer that never writes
    try:
        t0 = time.monotonic()
        rc, _text, hung = run_child(["validate", str(fifo)], 1.0, tmp_path)
        assert (rc, hung) == (None, True) and time.monotonic() - t0 < 10
    finally:
        os.close(keep)


@pytest.fixture(scope="module", autouse=True)
def _fifo_probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A command reading a FIFO that nobody writes to, with the default wait (3 s).

    Started when this file's tests start, so that its 3 s of waiting pass while the other
    tests run; :func:`test_fifo_without_writer_is_refused_within_the_default_wait` reads what
    it printed.
    """
    import subprocess
    import sys

    fifo = tmp_path_factory.mktemp("fifo") / "nobody.json"
    os.mkfifo(fifo)
    env = {k: v for k, v in os.environ.items() if k != "ORCHESTRACE_FIFO_WRITER_S"}
    probe = (
        "import sys, time\n"
        "from orchestrace.errors import TraceFormatError\n"
        "from orchestrace.io._common import read_bytes\n"
        "t0 = time.monotonic()\n"
        "try:\n"
        "    read_bytes(sys.argv[1])\n"
        "except TraceFormatError as err:\n"
        "    print(f'{time.monotonic() - t0:.3f}', err)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", probe, str(fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_fifo_without_writer_is_refused_within_the_default_wait(_fifo_probe: Any) -> None:
    """The child runs above wait 0.3 s for a FIFO's writer; the default wait (3 s) ends too."""
    out, err = _fifo_probe.communicate(timeout=60)
    assert _fifo_probe.returncode == 0, err
    seconds, message = out.split(" ", 1)
    assert "a FIFO that no program opened for writing within 3 s" in message
    # it waited for a writer, and gave up (the bound is loose for a loaded machine)
    assert 3.0 <= float(seconds) < 13.0, seconds


def test_planted_code_would_be_noticed(seeds, tmp_path: Path) -> None:
    case = next(c for c in CASES if c.name == "json/humaneval-code")
    path = case.materialize(seeds, tmp_path)
    text = path.read_text()
    assert MARKER in text and str(path.parent / MARKER) in text
