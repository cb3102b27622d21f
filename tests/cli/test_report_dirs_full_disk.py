"""Report directories (bench, train, study) when a write fails: one clean error line, exit 1,
no half-written files, a valid marker, and a directory a later ``--force`` run accepts."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from orchestrace.cli import main
from orchestrace.io import OutputError
from orchestrace.io._output import MARKER

pytest.importorskip("matplotlib")

NOSPACE = "No space left on device; free space or choose another path"
BENCH = (
    "bench",
    "--suite",
    "smoke-v2",
    "--seeds",
    "1",
    "--jobs",
    "1",
    "--no-envelope",
    "--no-progress",
)
TRAIN = (
    "train",
    "--env",
    "stop-v0",
    "--algo",
    "reinforce",
    "--steps",
    "8",
    "--batch",
    "8",
    "--no-progress",
)
BENCH_FILES = ["e1_e2.png", "e4.png", "report.json", "report.md"]
TRAIN_FILES = ["config.json", "curve.png", "policy.pt", "train.csv"]


def cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _disk_full(monkeypatch: pytest.MonkeyPatch, name: str) -> list[str]:
    """Make the completion (fsync) of the temporary file of ``name`` fail with ENOSPC.

    The error carries no file name, as a full disk reports it. Returns the list of faults hit.
    """
    real = os.fsync
    hits: list[str] = []

    def fsync(fd: int) -> None:
        try:
            base = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            base = ""
        if base.startswith(f".{name}.") and base.endswith(".tmp"):
            hits.append(base)
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return hits


def _marker(d: Path) -> dict[str, object]:
    data = json.loads((d / MARKER).read_text())
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize("name", [*BENCH_FILES, MARKER])
def test_bench_write_fails_in_new_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    out = tmp_path / "b"
    with monkeypatch.context() as m:
        hits = _disk_full(m, name)
        code, _, err = cli(capsys, *BENCH, "-o", out)
    assert hits
    assert code == 1
    assert err == f"error: cannot write {out / name}: {NOSPACE}\n"
    assert not out.exists()  # nothing left: the directory was new
    assert os.listdir(tmp_path) == []
    code, _, err = cli(capsys, *BENCH, "-o", out, "--force")
    assert (code, err) == (0, "")
    assert sorted(os.listdir(out)) == sorted([*BENCH_FILES, MARKER])
    assert _marker(out)["files"] == BENCH_FILES


@pytest.mark.parametrize("name", [*TRAIN_FILES, MARKER])
def test_train_write_fails_in_new_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    out = tmp_path / "deep" / "t"
    with monkeypatch.context() as m:
        hits = _disk_full(m, name)
        code, _, err = cli(capsys, *TRAIN, "-o", out)
    assert hits
    assert code == 1
    assert err.splitlines()[-1] == f"error: cannot write {out / name}: {NOSPACE}"
    assert os.listdir(tmp_path) == []  # the directories this run created are gone too
    code, _, _ = cli(capsys, *TRAIN, "-o", out, "--force")
    assert code == 0
    assert sorted(os.listdir(out)) == sorted([*TRAIN_FILES, MARKER])
    assert _marker(out)["files"] == TRAIN_FILES


def test_failed_force_keeps_earlier_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "t"
    assert cli(capsys, *TRAIN, "-o", out)[0] == 0
    before = {n: (out / n).read_bytes() for n in TRAIN_FILES}
    with monkeypatch.context() as m:
        _disk_full(m, "policy.pt")
        code, _, err = cli(capsys, *TRAIN, "-o", out, "--force")
    assert code == 1
    assert err.splitlines()[-1] == f"error: cannot write {out / 'policy.pt'}: {NOSPACE}"
    assert sorted(os.listdir(out)) == sorted([*TRAIN_FILES, MARKER])  # no temporary files
    for n in ("policy.pt", "config.json", "curve.png"):  # not reached: untouched
        assert (out / n).read_bytes() == before[n]
    assert _marker(out) == {"writer": "orchestrace", "kind": "train", "files": TRAIN_FILES}
    assert cli(capsys, *TRAIN, "-o", out, "--force")[0] == 0


def test_failed_marker_update_leaves_previous_marker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "b"
    assert cli(capsys, *BENCH, "-o", out)[0] == 0
    marker = (out / MARKER).read_bytes()
    with monkeypatch.context() as m:
        _disk_full(m, MARKER)
        code, _, err = cli(capsys, *BENCH, "-o", out, "--force")
    assert code == 1
    assert err == f"error: cannot write {out / MARKER}: {NOSPACE}\n"
    assert (out / MARKER).read_bytes() == marker  # never empty, never half-written
    assert sorted(os.listdir(out)) == sorted([*BENCH_FILES, MARKER])


def test_leftovers_of_an_interrupted_write_are_ours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t"
    assert cli(capsys, *TRAIN, "-o", out)[0] == 0
    (out / ".policy.pt.k2j4_x9a.tmp").write_bytes(b"\x80half")  # a run killed mid-write
    code, _, err = cli(capsys, *TRAIN, "-o", out)
    assert (code, err.splitlines()[-1]) == (1, f"error: {out} exists; pass --force to replace it")
    assert cli(capsys, *TRAIN, "-o", out, "--force")[0] == 0
    assert sorted(os.listdir(out)) == sorted([*TRAIN_FILES, MARKER])  # the leftover is gone

    only = tmp_path / "only"  # killed while writing its first file: no marker yet
    only.mkdir()
    (only / ".report.json.abcdefgh.tmp").write_bytes(b"{")
    assert cli(capsys, *BENCH, "-o", only, "--force")[0] == 0

    other = tmp_path / "other"  # anything else stays refused
    other.mkdir()
    (other / ".report.json.abcdefgh.tmp").write_bytes(b"{")
    (other / "notes.txt").write_text("mine")
    code, _, err = cli(capsys, *BENCH, "-o", other, "--force")
    assert code == 1
    assert "is a directory that orchestrace did not write" in err


def test_python_writers_check_their_directory(tmp_path: Path) -> None:
    from orchestrace.learn.stopping import write_report as write_study
    from orchestrace.masbench.report import write_report

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    with pytest.raises(OutputError, match="did not write"):
        write_report({"suite": {}, "runs": []}, foreign)
    with pytest.raises(OutputError, match="did not write"):
        write_study({}, foreign)
    assert os.listdir(foreign) == ["notes.txt"]


@pytest.mark.parametrize("name", ["timeline.png", "reward_credit.png"])
def test_papers_plot_write_fails_in_new_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "papers"))
    from _papers_pool import write_papers

    papers = write_papers(tmp_path / "papers.csv")
    out = tmp_path / "figs"
    with monkeypatch.context() as m:
        hits = _disk_full(m, name)
        code, _, err = cli(capsys, "papers", "plot", papers, "-o", out)
    assert hits
    assert (code, err) == (1, f"error: cannot write {out / name}: {NOSPACE}\n")
    assert not out.exists()
    assert cli(capsys, "papers", "plot", papers, "-o", out, "--force")[0] == 0
    assert sorted(os.listdir(out)) == [MARKER, "reward_credit.png", "timeline.png"]
