"""An output stream that cannot be written is one line and exit 1, not an internal error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrace import dump, generate_trace


def _cli(args: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ORCHESTRACE_NO_REEXEC": "1"}
    return subprocess.run(  # type: ignore[call-overload,no-any-return]
        [sys.executable, "-m", "orchestrace", *args],
        check=False,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=120,
        **kw,
    )


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    p = tmp_path / "t.json"
    dump(generate_trace(agents=3, steps=30, seed=1), p)
    return p


@pytest.mark.parametrize("command", [["validate"], ["analyze"], ["analyze", "--json"]])
def test_a_closed_stdout_is_one_line(trace_file: Path, command: list[str]) -> None:
    got = _cli(
        [*command, str(trace_file)], stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(1)
    )
    assert got.returncode == 1, got.stderr
    assert got.stderr == (
        "error: standard output is closed; check where the output goes (a closed or full file "
        "or device)\n"
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
@pytest.mark.parametrize("command", [["schema"], ["analyze", "--json"]])
def test_a_full_stdout_is_one_line(trace_file: Path, command: list[str]) -> None:
    args = [*command, str(trace_file)] if command[0] == "analyze" else command
    with open("/dev/full", "w") as full:
        got = _cli(args, stdout=full)
    assert got.returncode == 1, got.stderr
    assert got.stderr == (
        "error: cannot write to standard output: No space left on device; check where the "
        "output goes (a closed or full file or device)\n"
    )


def test_generate_says_when_the_team_needs_more_events(tmp_path: Path) -> None:
    got = _cli(["generate", "-k", "5", "-l", "3", "-o", str(tmp_path / "g.json")])
    assert got.returncode == 0, got.stderr
    assert got.stderr.startswith(
        "note: 5 agents at spawn depth 1 need at least 15 events, so the trace has 15, not 3\n"
    )


def test_generate_says_when_the_team_cannot_reach_the_depth(tmp_path: Path) -> None:
    got = _cli(["generate", "-k", "3", "-l", "50", "-d", "20", "-o", str(tmp_path / "g.json")])
    assert got.returncode == 0, got.stderr
    assert got.stderr.splitlines() == [
        "note: 3 agents reach spawn depth 2 at most, so the trace has depth 2, not 20",
        f"wrote {tmp_path / 'g.json'}: 50 events, 51 edges, 3 agents",
    ]


@pytest.mark.parametrize("near", [True, False])
def test_c_code_failing_at_the_memory_limit_is_out_of_memory(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], near: bool, tmp_path: Path
) -> None:
    """Under ``ulimit -v``, C code may fail with SystemError instead of MemoryError."""
    import orchestrace.cli as cli
    import orchestrace.cli.generate as gen

    def boom(*a: object, **k: object) -> None:
        raise SystemError("error return without exception set")

    monkeypatch.setattr(gen, "generate_columns", boom)
    monkeypatch.setattr(cli, "_near_memory_limit", lambda: near)
    code = cli.main(["generate", "-k", "3", "-l", "10", "-o", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    if near:
        assert (code, err.splitlines()[0]) == (
            1,
            "error: out of memory; for very large traces use a Parquet dataset "
            "(`orchestrace convert IN -o OUT.parquet`)",
        )
    else:  # far from any limit, a SystemError stays a reported bug
        assert code == 3 and err.startswith("error: unexpected SystemError: error return")
