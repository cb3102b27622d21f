"""``-o`` of every command: never destroys what orchestrace did not write; --force replaces;
a recording that cannot be written fails the run; SIGINT/SIGTERM end a run cleanly."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrace import dump, load
from orchestrace.cli import main
from orchestrace.io import OutputError
from orchestrace.io._output import MARKER, check_output, mark_report_dir


def cli(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    from orchestrace.runtime import run

    p = tmp_path / "in" / "t.json"
    p.parent.mkdir()
    dump(run("centralized", agents=2).trace, p)
    return p


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    d = tmp_path / "victim"
    (d / "sub").mkdir(parents=True)
    (d / "notes.txt").write_text("precious\n")
    (d / "sub" / "results.csv").write_text("data\n")
    return d


def _commands(inp: Path, out: Path | str) -> dict[str, list[str]]:
    return {
        "convert": ["convert", str(inp), "-o", str(out)],
        "generate": ["generate", "--agents", "3", "--steps", "10", "-o", str(out)],
        "replay": ["replay", str(inp), "-o", str(out)],
        "run": ["run", "centralized", "--agents", "2", "--no-progress", "-o", str(out)],
        "export": ["export", str(inp), "-o", str(out)],
    }


@pytest.mark.parametrize("command", ["convert", "generate", "replay", "run", "export"])
@pytest.mark.parametrize("force", [False, True])
def test_an_existing_foreign_directory_is_never_written(
    tmp_path, capsys, trace_file, victim, command, force
):
    before = _tree(tmp_path)
    args = _commands(trace_file, victim)[command] + (["--force"] if force else [])
    code, out, err = cli(capsys, *args)
    assert code == 1
    assert err == (
        f"error: {victim} is a directory that orchestrace did not write (it holds notes.txt, "
        "sub/); choose another path\n"
    )
    assert "Traceback" not in err and "trace in" not in out
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("command", ["convert", "generate", "replay", "run"])
def test_existing_output_needs_force_then_is_replaced(tmp_path, capsys, trace_file, command):
    out_path = tmp_path / "out.jsonl"
    args = _commands(trace_file, out_path)[command]
    assert cli(capsys, *args)[0] == 0  # an output of orchestrace's own
    old = out_path.read_bytes()
    code, _, err = cli(capsys, *args)
    assert (code, err) == (1, f"error: {out_path} exists; pass --force to replace it\n")
    assert out_path.read_bytes() == old
    code, _, err = cli(capsys, *args, "--force")
    assert (code, err.startswith("error")) == (0, False), err
    assert load(out_path).n_events > 0
    assert sorted(x.name for x in tmp_path.iterdir()) == ["in", "out.jsonl"]


@pytest.mark.parametrize("command", ["convert", "generate", "replay", "run", "export"])
@pytest.mark.parametrize("content", ["old\n", "precious user data", '{"a": 1}\n', ""])
def test_a_users_file_is_never_replaced_even_with_force(
    tmp_path, capsys, trace_file, command, content, marked_outputs
):
    out_path = tmp_path / "out.jsonl"
    out_path.write_text(content)
    code, _, err = cli(capsys, *_commands(trace_file, out_path)[command], "--force")
    assert (code, err) == (
        1,
        f"error: {out_path} exists and orchestrace did not write it (--force replaces only "
        "orchestrace's own outputs); move it away or choose another path\n",
    )
    assert out_path.read_text() == content
    assert sorted(x.name for x in tmp_path.iterdir()) == ["in", "out.jsonl"]


def test_an_unmarked_trace_file_counts_as_orchestraces(tmp_path, capsys, trace_file):
    """A trace written before outputs were marked (or copied without the mark) is replaced."""
    out_path = tmp_path / "old.json"
    out_path.write_bytes(trace_file.read_bytes())  # (a plain copy carries no mark)
    code, _, err = cli(capsys, "generate", "-k", "3", "-l", "10", "-o", out_path, "--force")
    assert code == 0, err


def test_dash_is_not_standard_output(tmp_path, capsys, trace_file, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, "generate", "-k", "3", "-l", "10", "-o", "-")
    assert (code, err) == (
        1,
        "error: '-' is not standard output here: outputs are written to files; give a file "
        "name (./- for a file named '-')\n",
    )
    assert not (tmp_path / "-").exists()


def test_export_needs_force(tmp_path, capsys, trace_file):
    out_path = tmp_path / "turns.jsonl"
    out_path.write_text("old\n")
    code, _, err = cli(capsys, "export", trace_file, "-o", out_path)
    assert (code, err) == (1, f"error: {out_path} exists; pass --force to replace it\n")
    assert out_path.read_text() == "old\n"


@pytest.mark.parametrize("command", ["convert", "replay", "export"])
def test_output_equal_to_the_input_is_refused(capsys, trace_file, command):
    before = trace_file.read_bytes()
    args = _commands(trace_file, trace_file)[command] + ["--force"]
    code, _, err = cli(capsys, *args)
    assert (code, err) == (
        1,
        f"error: {trace_file} is also an input; write the output to another path\n",
    )
    assert trace_file.read_bytes() == before


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (
            "dir/",
            "dir/ ends in '/'; name a file (OUT.json, OUT.jsonl) or a dataset "
            "(OUT.parquet) without a trailing slash",
        ),
        (".", ". is a directory, not an output name; give a file name inside it"),
        ("..", ".. is a directory, not an output name; give a file name inside it"),
        (
            "afile/x.json",
            "cannot write afile/x.json: afile is a file, not a directory; choose another path",
        ),
        (
            "nodir/x.jsonl",
            "cannot write nodir/x.jsonl: directory nodir does not exist; "
            "create it first (mkdir -p nodir) or choose another path",
        ),
    ],
)
@pytest.mark.parametrize("command", ["convert", "generate", "run"])
def test_bad_output_paths(tmp_path, monkeypatch, capsys, trace_file, command, out, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("keep\n")
    (tmp_path / "dir").mkdir()
    before = _tree(tmp_path)
    code, stdout, err = cli(capsys, *_commands(trace_file, out)[command], "--force")
    assert (code, err) == (1, f"error: {message}\n")
    assert "trace in" not in stdout
    assert _tree(tmp_path) == before


def test_convert_replaces_our_dataset_with_force_only(tmp_path, capsys, trace_file):
    ds = tmp_path / "ds.parquet"
    assert cli(capsys, "convert", trace_file, "-o", ds)[0] == 0
    code, _, err = cli(capsys, "convert", trace_file, "-o", ds)
    assert (code, err) == (1, f"error: {ds} exists; pass --force to replace it\n")
    assert cli(capsys, "convert", trace_file, "-o", ds, "--force")[0] == 0
    assert load(ds) == load(trace_file)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["ds.parquet", "in"]


def test_convert_disk_full_is_one_line_and_keeps_the_old_output(
    tmp_path, capsys, monkeypatch, trace_file
):
    from orchestrace.io import _output

    out = tmp_path / "c.json"
    assert cli(capsys, "generate", "-k", "2", "-l", "5", "-o", out)[0] == 0
    old = out.read_bytes()

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_output.os, "fsync", full)
    code, _, err = cli(capsys, "convert", trace_file, "-o", out, "--force")
    assert (code, err) == (
        1,
        f"error: cannot write {out}: No space left on device; free space or choose another path\n",
    )
    assert out.read_bytes() == old
    assert sorted(x.name for x in tmp_path.iterdir()) == ["c.json", "in"]


# ---------------------------------------------------------------------- run: recording failures
def _fail_writes_to(monkeypatch, name: str, after: int, err: int = errno.ENOSPC) -> None:
    real = os.write
    seen = [0]

    def write(fd, data):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if os.path.basename(target).endswith(name):
            seen[0] += 1
            if seen[0] > after:
                raise OSError(err, os.strerror(err))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


@pytest.mark.parametrize("after", [0, 5])
def test_run_stops_and_fails_when_the_recording_cannot_be_written(
    tmp_path, capsys, monkeypatch, after
):
    out = tmp_path / "r.jsonl"
    _fail_writes_to(monkeypatch, "r.jsonl", after)
    code, stdout, err = cli(
        capsys, "run", "centralized", "--agents", "2", "--no-progress", "-o", out
    )
    assert code == 1
    kept = (
        ""
        if after == 0  # not even the header: nothing is kept
        else f"; the {after - 1} whole records written before are kept in {out} "
        "(a partial recording: read it with --partial)"
    )
    assert err == (
        f"error: cannot write {out}: No space left on device; free space or choose another "
        f"path{kept}\n"
    )
    assert stdout == ""  # no "trace in" line, no analysis
    if after == 0:
        assert list(tmp_path.iterdir()) == []
    else:  # what was recorded before the failure stays, whole lines only
        tr = load(out, partial=True)
        assert tr.meta.get("partial") and 0 < tr.n_events + len(tr.edges) == after - 1
        assert sorted(x.name for x in tmp_path.iterdir()) == ["r.jsonl"]


def test_run_replacing_a_recording_keeps_it_when_writing_fails(tmp_path, capsys, monkeypatch):
    out = tmp_path / "r.jsonl"
    assert cli(capsys, "run", "centralized", "--agents", "2", "--no-progress", "-o", out)[0] == 0
    before = out.read_bytes()
    _fail_writes_to(monkeypatch, ".tmp", 3)
    code, _, err = cli(
        capsys, "run", "centralized", "--agents", "3", "--no-progress", "-o", out, "--force"
    )
    assert code == 1 and "No space left on device" in err
    assert out.read_bytes() == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["r.jsonl"]


def test_a_failing_extra_processor_is_reported_without_traceback(tmp_path, caplog):
    from orchestrace.runtime import Processor, run

    class Broken(Processor):
        def on_event(self, event, edges):
            raise ValueError("boom")

    out = tmp_path / "r.jsonl"
    res = run("centralized", agents=2, output=out, processors=[Broken()])
    assert load(out).n_events == res.trace.n_events  # the recording is complete
    (rec,) = [r for r in caplog.records if "Broken" in r.getMessage()]
    assert rec.getMessage() == (
        "processor Broken failed: on_event raised ValueError: boom (at event e1)"
    )
    assert not rec.exc_info
    n = res.trace.n_events  # kept, not dropped: every event failed, and the run says so
    assert res.processor_failures == (
        f"processor Broken failed: on_event raised ValueError: boom ({n} calls failed, "
        "first at event e1)",
    )
    assert load(out).meta["processor_failures"][0]["count"] == n  # in the footer's meta


def test_run_checks_the_output_before_building_the_task(tmp_path, monkeypatch):
    from orchestrace import runtime

    def never(*a, **k):
        raise AssertionError("the task was built")

    monkeypatch.setattr(runtime, "make_task", never)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OutputError, match="afile is a file, not a directory"):
        runtime.run("centralized", output=tmp_path / "afile" / "r.jsonl")


# ---------------------------------------------------------------------- report directories
@pytest.mark.parametrize("report", ["bench", "train", "study"])
def test_report_directories(tmp_path, report):
    out = tmp_path / "runs" / report
    assert check_output(out, kind="dir", report=report) == out  # missing: created later
    out.mkdir(parents=True)
    check_output(out, kind="dir", report=report)  # empty: fine
    (out / "report.md").write_text("x")
    mark_report_dir(out, report)
    with pytest.raises(OutputError, match=f"{out} exists; pass overwrite=True to replace it"):
        check_output(out, kind="dir", report=report, force=False)
    check_output(out, kind="dir", report=report, force=True)
    other = "train" if report != "train" else "bench"
    with pytest.raises(OutputError, match="did not write"):
        check_output(out, kind="dir", report=other, force=True)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(OutputError) as ei:
        check_output(out, kind="dir", report=report, force=True)
    assert str(ei.value) == (
        f"{out} is a directory that orchestrace did not write (it holds {MARKER}, notes.txt, "
        "report.md); choose another path"
    )


@pytest.mark.parametrize("command", ["bench", "train", "study"])
def test_report_commands_refuse_a_foreign_directory_before_running(
    tmp_path, capsys, victim, command
):
    args = {"bench": ["bench"], "train": ["train"], "study": ["study", "stopping"]}[command]
    before = _tree(tmp_path)
    t0 = time.perf_counter()
    code, _, err = cli(capsys, *args, "-o", victim, "--force")
    assert code == 1 and time.perf_counter() - t0 < 5  # refused before any work
    assert err == (
        f"error: {victim} is a directory that orchestrace did not write (it holds notes.txt, "
        "sub/); choose another path\n"
    )
    assert _tree(tmp_path) == before


# ---------------------------------------------------------------------- signals, two runs
_SLOW = [
    sys.executable,
    "-m",
    "orchestrace",
    "run",
    "debate",
    "-O",
    "rounds=3000",
    "-k",
    "10",
    "--no-progress",
]


def _start(out: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [*_SLOW, "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ORCHESTRACE_NO_REEXEC": "1"},
    )
    deadline = time.monotonic() + 60
    while not (out.exists() and out.stat().st_size > 0):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return proc


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_run_cleanly(tmp_path, capsys, sig, code):
    out = tmp_path / "x.jsonl"
    proc = _start(out)
    time.sleep(0.5)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr and "never retrieved" not in stderr
    name = signal.Signals(sig).name
    assert f"interrupted by {name}: the run was stopped early and its stop recorded" in stderr
    assert f"stop: interrupted by {name}" in stdout
    tr = load(out)  # validated: complete, with its footer
    assert not tr.meta.get("partial")
    last = tr.events[-1]
    assert (last.type, last.decision, last.content) == (
        "orchestrator_decision",
        "stop",
        f"interrupted by {name}",
    )
    assert cli(capsys, "validate", out)[0] == 0


@pytest.mark.slow
def test_a_second_run_on_the_same_output_is_refused(tmp_path, capsys):
    out = tmp_path / "same.jsonl"
    first = _start(out)
    try:
        code, stdout, err = cli(
            capsys, "run", "swarm", "--agents", "4", "--no-progress", "-o", out, "--force"
        )
        assert (code, err) == (
            1,
            f"error: {out} is being written by another orchestrace process; wait for it to "
            "finish or choose another path\n",
        )
        assert stdout == ""
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    assert first.returncode == 130
    assert load(out).topology == "debate"


def test_an_interrupted_report_is_marked_so_force_can_replace_it(tmp_path):
    from orchestrace.io._output import report_dir

    out = tmp_path / "runs" / "study"
    with pytest.raises(KeyboardInterrupt), report_dir(out, report="study"):
        out.mkdir(parents=True)
        (out / "train-arith.csv").write_text("partial")
        raise KeyboardInterrupt
    with pytest.raises(OutputError, match="exists; pass overwrite=True to replace it"):
        check_output(out, kind="dir", report="study")
    with report_dir(out, force=True, report="study"):
        (out / "results.md").write_text("done")
    assert check_output(out, kind="dir", report="study", force=True) == out


def test_a_report_that_cannot_be_written_is_one_line(tmp_path):
    from orchestrace.io._output import report_dir

    out = tmp_path / "bench"
    with pytest.raises(OutputError) as ei, report_dir(out, report="bench"):
        out.mkdir()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(out / "report.md"))
    assert str(ei.value) == (
        f"cannot write {out / 'report.md'}: No space left on device; free space or choose "
        "another path"
    )
    with pytest.raises(OSError, match="unrelated"), report_dir(tmp_path / "b2", report="bench"):
        raise OSError(errno.ENOENT, "unrelated", "/elsewhere/model.bin")


class _Signaller:
    """A processor that sends signals to this process once the run has recorded a few events."""

    def __init__(self, sig: int, times: int) -> None:
        self.sig, self.times, self.n = sig, times, 0

    def __getattr__(self, name):
        return lambda *a, **k: None

    def on_event(self, event, edges):
        self.n += 1
        if self.n == 20:
            for _ in range(self.times):
                os.kill(os.getpid(), self.sig)


@pytest.mark.parametrize(("sig", "name"), [(signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")])
def test_a_signal_during_a_run_records_the_stop(tmp_path, sig, name):
    from orchestrace.runtime import run

    out = tmp_path / "r.jsonl"
    before = signal.getsignal(sig)
    res = run(
        "debate",
        agents=4,
        rounds=200,
        output=out,
        processors=[_Signaller(sig, 1)],
        stop_on_signals=True,
    )
    assert signal.getsignal(sig) == before  # the handler is put back
    assert res.interrupted_by == name
    tr = load(out)
    assert not tr.meta.get("partial")
    assert (tr.events[-1].decision, tr.events[-1].content) == ("stop", f"interrupted by {name}")
    assert tr.meta["result"]["stop_reason"] == f"interrupted by {name}"


def _run_sent_two_sigints(out):
    """A recorded debate that sends itself SIGINT twice at once, after 20 events."""
    from orchestrace.runtime import run

    return run(
        "debate",
        agents=4,
        rounds=200,
        output=out,
        processors=[_Signaller(signal.SIGINT, 2)],
        stop_on_signals=True,
    )


def test_one_interrupt_delivered_twice_is_still_one_clean_stop(tmp_path):
    """``timeout -s INT`` signals the process and then its group: two signals at once."""
    out = tmp_path / "r.jsonl"
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        res = _run_sent_two_sigints(out)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert res.interrupted_by == "SIGINT"
    tr = load(out)  # the footer is there
    assert not tr.meta.get("partial")
    assert tr.meta["result"]["stop_reason"] == "interrupted by SIGINT"


def test_a_second_signal_gives_up_the_clean_stop(tmp_path, monkeypatch):
    import orchestrace.runtime as runtime

    # a second interrupt later than the first one's own repeats
    monkeypatch.setattr(runtime, "_SAME_INTERRUPT_S", 0.0)
    out = tmp_path / "r.jsonl"
    # Python's own SIGINT handler, also where the test process started with SIGINT ignored
    # (a shell's background job)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            _run_sent_two_sigints(out)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
    tr = load(out, partial=True)  # every complete record kept, no footer
    assert tr.meta.get("partial") and tr.n_events >= 20


@pytest.mark.parametrize(
    "content",
    [
        "Notes: we analyse runs with orchestrace\n",
        '{"header": "Quarterly budget", "rows": []}\n',
        '{"cfg": {"trace_id": 5}}\n',
        "<!doctype html><p>import orchestrace</p>\n",
    ],
)
def test_a_file_that_merely_looks_related_is_not_ours(tmp_path, capsys, content, marked_outputs):
    out_path = tmp_path / "out.json"
    out_path.write_text(content)
    code, _, err = cli(capsys, "generate", "-k", "3", "-l", "10", "-o", out_path, "--force")
    assert code == 1 and "orchestrace did not write it" in err
    assert out_path.read_text() == content


def test_without_extended_attributes_force_replaces_as_before(tmp_path, capsys, monkeypatch):
    out_path = tmp_path / "out.json"
    out_path.write_text("a file where nothing can tell who wrote it\n")
    monkeypatch.delattr(os, "getxattr")  # a platform with none (macOS's Python)
    code, _, err = cli(capsys, "generate", "-k", "3", "-l", "10", "-o", out_path, "--force")
    assert code == 0, err
    assert load(out_path).n_events >= 10


def test_a_report_file_written_on_its_own_keeps_a_users_file(tmp_path, marked_outputs):
    from orchestrace.io._output import OutputError, report_file

    mine = tmp_path / "policy.pt"
    mine.write_bytes(b"my own weights")

    def write() -> None:
        with report_file(mine) as fh:
            fh.write(b"new")

    with pytest.raises(OutputError, match="orchestrace did not write it"):
        write()
    assert mine.read_bytes() == b"my own weights"
    ours = tmp_path / "ours.pt"
    for data in (b"one", b"two"):  # its own file, written again
        with report_file(ours) as fh:
            fh.write(data)
    assert ours.read_bytes() == b"two"


@pytest.mark.parametrize("name", ["d.json", "d.jsonl", "d.parquet"])
def test_demo_writes_the_format_its_output_names(tmp_path, capsys, name):
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    out_path = tmp_path / name
    code, _, err = cli(capsys, "demo", "--agents", "4", "-o", out_path)
    assert code == 0, err  # a JSON output once held a JSONL recording and failed its own check
    assert load(out_path).n_events > 0


def test_a_users_file_that_appears_during_the_write_is_kept(tmp_path, marked_outputs):
    from orchestrace.io._output import OutputError, atomic_write

    out = tmp_path / "late.json"

    def write() -> None:
        with atomic_write(out, force=True) as fh:
            fh.write(b'{"trace_id": "new"}')
            out.write_text("a user's file, made while the output was written")

    with pytest.raises(OutputError, match="orchestrace did not write it"):
        write()
    assert out.read_text() == "a user's file, made while the output was written"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["late.json"]  # no temporary left


def _leftover_file(parent: Path, name: str, *, marked: bool) -> Path:
    p = parent / f".{name}.abcd1234.tmp"
    p.write_bytes(b'{"trace_id": "half written')
    if marked:
        os.setxattr(p, "user.orchestrace.output", b"1")
    return p


def test_a_killed_writers_leftovers_are_swept(tmp_path, capsys, marked_outputs):
    """What a write killed with SIGKILL left (its temporary, held by nobody) goes next time."""
    import fcntl

    out = tmp_path / "out.json"
    ours = _leftover_file(tmp_path, "out.json", marked=True)
    users = tmp_path / ".out.json.user1234.tmp"  # named like ours, not marked: a user's
    users.write_text("mine")
    held = _leftover_file(tmp_path, "out.json", marked=True).rename(
        tmp_path / ".out.json.held5678.tmp"
    )
    fd = os.open(held, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a writer still at work
    try:
        assert cli(capsys, "generate", "-k", "3", "-l", "10", "-o", out)[0] == 0
    finally:
        os.close(fd)
    assert not ours.exists() and users.read_text() == "mine" and held.exists()
    dataset = tmp_path / ".d.parquet.efgh5678.tmp"
    dataset.mkdir()
    (dataset / "events.parquet").write_bytes(b"PAR1")
    keep = tmp_path / ".d.parquet.ijkl9012.tmp"
    keep.mkdir()
    (keep / "notes.txt").write_text("not a table")
    pytest.importorskip("pyarrow")
    assert cli(capsys, "generate", "-k", "3", "-l", "10", "-o", tmp_path / "d.parquet")[0] == 0
    assert not dataset.exists() and (keep / "notes.txt").exists()
