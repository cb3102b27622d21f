"""Writers never destroy what they did not write; failures leave the previous output whole.

Each test injects one fault and asserts the message.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

import pytest

from orchestrace import dump, load, load_all
from orchestrace.io import (
    OutputError,
    StreamWriter,
    _output,
    write_json,
    write_jsonl,
    write_parquet,
)
from orchestrace.io._output import MARKER, atomic_write, check_output, is_our_dataset


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with the bytes of its files (directories map to None)."""
    out: dict[str, bytes | None] = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = None if p.is_dir() else p.read_bytes()
    return out


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    d = tmp_path / "victim"
    (d / "sub").mkdir(parents=True)
    (d / "notes.txt").write_text("precious\n")
    (d / "sub" / "results.csv").write_text("data\n")
    return d


# ---------------------------------------------------------------------- not ours: refused
@pytest.mark.parametrize("name", ["victim", "victim.parquet"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_a_directory_we_did_not_write_is_refused_even_with_overwrite(
    tmp_path, small_trace, name, overwrite
):
    d = tmp_path / name
    (d / "sub").mkdir(parents=True)
    (d / "notes.txt").write_text("precious\n")
    before = _tree(tmp_path)
    with pytest.raises(OutputError) as ei:
        dump(small_trace, d, overwrite=overwrite)
    assert str(ei.value) == (
        f"{d} is a directory that orchestrace did not write (it holds notes.txt, sub/); "
        "choose another path"
    )
    assert _tree(tmp_path) == before


def test_a_dataset_with_an_extra_file_is_not_ours(tmp_path, small_trace):
    p = tmp_path / "ds.parquet"
    dump(small_trace, p)
    (p / "README.md").write_text("mine\n")
    before = _tree(tmp_path)
    with pytest.raises(OutputError, match=r"did not write \(it holds README.md\)"):
        dump(small_trace, p, overwrite=True)
    assert _tree(tmp_path) == before


def test_many_foreign_entries_are_summarised(tmp_path, small_trace):
    d = tmp_path / "d.parquet"
    d.mkdir()
    for i in range(6):
        (d / f"f{i}").write_text("x")
    with pytest.raises(OutputError, match=r"it holds f0, f1, f2 and 3 more\); choose"):
        dump(small_trace, d, overwrite=True)


# ---------------------------------------------------------------------- ours: --force only
def test_existing_file_needs_overwrite(tmp_path, small_trace, medium_trace):
    p = tmp_path / "t.json"
    dump(small_trace, p)
    before = p.read_bytes()
    with pytest.raises(OutputError) as ei:
        dump(medium_trace, p)
    assert str(ei.value) == f"{p} exists; pass overwrite=True to replace it"
    assert p.read_bytes() == before
    dump(medium_trace, p, overwrite=True)
    assert load(p) == medium_trace
    assert sorted(x.name for x in tmp_path.iterdir()) == ["t.json"]


def test_our_dataset_is_replaced_whole_with_overwrite(tmp_path, small_trace, medium_trace):
    p = tmp_path / "ds.parquet"
    dump(small_trace, p)
    assert is_our_dataset(p)
    assert sorted(os.listdir(p)) == [MARKER, "edges.parquet", "events.parquet", "traces.parquet"]
    with pytest.raises(OutputError, match="exists; pass overwrite=True to replace it"):
        dump(medium_trace, p)
    assert load(p) == small_trace
    dump(medium_trace, p, overwrite=True)
    assert load(p) == medium_trace
    assert sorted(x.name for x in tmp_path.iterdir()) == ["ds.parquet"]  # nothing left over


def test_a_dataset_without_the_marker_is_still_ours(tmp_path, small_trace, medium_trace):
    p = tmp_path / "old.parquet"
    dump(small_trace, p)
    (p / MARKER).unlink()
    assert is_our_dataset(p)
    dump(medium_trace, p, overwrite=True)
    assert load(p) == medium_trace


def test_an_empty_directory_takes_a_dataset(tmp_path, small_trace):
    p = tmp_path / "empty.parquet"
    p.mkdir()
    dump(small_trace, p)
    assert load(p) == small_trace


def test_a_name_without_suffix_naming_our_dataset_is_written_as_one(tmp_path, small_trace):
    p = tmp_path / "ds"
    write_parquet([small_trace], p)
    dump(small_trace, p, overwrite=True)
    assert load_all(p, format="parquet") == [small_trace]


# ---------------------------------------------------------------------- bad paths
@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            "out/",
            "out/ ends in '/'; name a file (OUT.json, OUT.jsonl) or a dataset "
            "(OUT.parquet) without a trailing slash",
        ),
        (
            "ds.parquet/",
            "ds.parquet/ ends in '/'; name a file (OUT.json, OUT.jsonl) or a "
            "dataset (OUT.parquet) without a trailing slash",
        ),
        (".", ". is a directory, not an output name; give a file name inside it"),
        ("..", ".. is a directory, not an output name; give a file name inside it"),
        (
            "afile/x.json",
            "cannot write afile/x.json: afile is a file, not a directory; choose another path",
        ),
        (
            "afile/deeper/x.parquet",
            "cannot write afile/deeper/x.parquet: afile is a file, not "
            "a directory; choose another path",
        ),
        (
            "missing/x.json",
            "cannot write missing/x.json: directory missing does not exist; "
            "create it first (mkdir -p missing) or choose another path",
        ),
        ("", "the output path is empty; give a file name"),
    ],
)
def test_bad_output_paths_touch_nothing(tmp_path, monkeypatch, small_trace, raw, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("keep\n")
    before = _tree(tmp_path)
    with pytest.raises(OutputError) as ei:
        dump(small_trace, raw, overwrite=True)
    assert str(ei.value) == message
    assert _tree(tmp_path) == before


def test_output_equal_to_an_input_is_refused(tmp_path, small_trace):
    p = tmp_path / "t.json"
    dump(small_trace, p)
    with pytest.raises(OutputError) as ei:
        check_output(p, force=True, inputs=[p])
    assert str(ei.value) == f"{p} is also an input; write the output to another path"
    link = tmp_path / "link.json"
    link.symlink_to(p)
    with pytest.raises(OutputError, match="is also an input"):
        check_output(link, force=True, inputs=[p])


def test_unwritable_directory_is_named(tmp_path, monkeypatch, small_trace):
    monkeypatch.setattr(_output.os, "access", lambda *a, **k: False)
    p = tmp_path / "t.json"
    with pytest.raises(OutputError) as ei:
        dump(small_trace, p)
    assert str(ei.value) == (
        f"cannot write {p}: permission denied in directory {tmp_path}; make it writable or "
        "choose another path"
    )
    assert not p.exists()


def test_a_special_file_is_never_replaced(tmp_path, small_trace):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match=r"pipe\.json is not a regular file; choose another path"):
        dump(small_trace, fifo, overwrite=True)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


# ---------------------------------------------------------------------- modes
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_follow_the_umask(tmp_path, small_trace, umask, mode):
    old = os.umask(umask)
    try:
        dump(small_trace, tmp_path / "t.json")
        dump(small_trace, tmp_path / "t.jsonl")
        dump(small_trace, tmp_path / "t.parquet")
        dump(small_trace, tmp_path / "up.json", format="upstream")
        w = StreamWriter(tmp_path / "s.jsonl", trace_id="t", task_id="x")
        w.close()
        StreamWriter(tmp_path / "s.jsonl", trace_id="t", task_id="x", overwrite=True).close()
    finally:
        os.umask(old)
    files = [
        "t.json",
        "t.jsonl",
        "up.json",
        "s.jsonl",
        *(f"t.parquet/{n}" for n in ("events.parquet", "edges.parquet", "traces.parquet", MARKER)),
    ]
    for name in files:
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == mode, name
    assert stat.S_IMODE(os.stat(tmp_path / "t.parquet").st_mode) == 0o777 & ~umask


# ---------------------------------------------------------------------- write failures
def _enospc(*a, **k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _eacces(*a, **k):
    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))


@pytest.mark.parametrize("name", ["t.json", "t.jsonl", "up.json"])
def test_disk_full_keeps_the_previous_file_and_no_temp(
    tmp_path, monkeypatch, small_trace, medium_trace, name
):
    p = tmp_path / name
    fmt = "upstream" if name == "up.json" else None
    dump(small_trace, p, format=fmt)
    before = _tree(tmp_path)
    monkeypatch.setattr(_output.os, "fsync", _enospc)
    with pytest.raises(OutputError) as ei:
        dump(medium_trace, p, format=fmt, overwrite=True)
    assert str(ei.value) == (
        f"cannot write {p}: No space left on device; free space or choose another path"
    )
    assert _tree(tmp_path) == before


def test_disk_full_while_writing_a_dataset(tmp_path, monkeypatch, small_trace, medium_trace):
    import pyarrow.parquet as pq

    p = tmp_path / "ds.parquet"
    dump(small_trace, p)
    before = _tree(tmp_path)
    monkeypatch.setattr(pq.ParquetWriter, "write_table", _enospc)
    with pytest.raises(OutputError) as ei:
        dump(medium_trace, p, overwrite=True)
    assert str(ei.value) == (
        f"cannot write {p}: No space left on device; free space or choose another path"
    )
    assert _tree(tmp_path) == before  # no .ds.parquet.*.tmp directory left behind


def test_disk_full_on_a_new_dataset_leaves_nothing(tmp_path, monkeypatch, small_trace):
    import pyarrow.parquet as pq

    monkeypatch.setattr(pq, "write_table", _enospc)
    with pytest.raises(OutputError, match="No space left on device; free space"):
        dump(small_trace, tmp_path / "new.parquet")
    assert list(tmp_path.iterdir()) == []


def test_permission_denied_creating_the_temp_file(tmp_path, monkeypatch, small_trace):
    monkeypatch.setattr(tempfile, "mkstemp", _eacces)
    p = tmp_path / "t.json"
    with pytest.raises(OutputError) as ei:
        write_json(small_trace, p)
    assert str(ei.value) == (
        f"cannot write {p}: Permission denied; make the directory writable or choose another path"
    )
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_write_leaves_no_temp(tmp_path, small_trace):
    p = tmp_path / "t.jsonl"

    def traces():
        yield small_trace
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_jsonl(traces(), p)
    assert list(tmp_path.iterdir()) == []


def test_stream_disk_full_removes_the_incomplete_recording(tmp_path, monkeypatch, small_trace):
    p = tmp_path / "run.jsonl"
    w = StreamWriter(p, trace_id="t", task_id="x")
    monkeypatch.setattr(os, "write", _enospc)
    with pytest.raises(OutputError) as ei:
        w.event(small_trace.events[0])
    monkeypatch.undo()
    assert str(ei.value) == (
        f"cannot write {p}: No space left on device; free space or choose another path"
    )
    assert not p.exists()


def test_stream_replacing_a_file_keeps_it_until_complete(tmp_path, monkeypatch, small_trace):
    p = tmp_path / "run.jsonl"
    dump(small_trace, p)
    before = p.read_bytes()
    w = StreamWriter(p, trace_id="t2", task_id="x", overwrite=True)
    w.event(small_trace.events[0])
    assert p.read_bytes() == before  # the new recording is still a temporary sibling
    monkeypatch.setattr(os, "write", _enospc)
    with pytest.raises(OutputError, match="No space left on device"):
        w.event(small_trace.events[1])
    monkeypatch.undo()
    assert _tree(tmp_path) == {"run.jsonl": before}
    w2 = StreamWriter(p, trace_id="t3", task_id="x", overwrite=True)
    w2.close()
    assert load_all(p)[0].trace_id == "t3"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["run.jsonl"]


def test_stream_never_truncates_an_existing_file(tmp_path, small_trace):
    p = tmp_path / "run.jsonl"
    dump(small_trace, p)
    before = p.read_bytes()
    with pytest.raises(OutputError, match=r"run\.jsonl exists; pass overwrite=True to replace it"):
        StreamWriter(p, trace_id="t", task_id="x")
    assert p.read_bytes() == before


# ---------------------------------------------------------------------- two writers
def test_second_writer_on_one_path_is_refused(tmp_path, small_trace):
    p = tmp_path / "run.jsonl"
    first = StreamWriter(p, trace_id="a", task_id="x")
    first.event(small_trace.events[0])
    with pytest.raises(OutputError) as ei:
        StreamWriter(p, trace_id="b", task_id="x", overwrite=True)
    assert str(ei.value) == (
        f"{p} is being written by another orchestrace process; wait for it to finish or "
        "choose another path"
    )
    with pytest.raises(OutputError, match="being written by another orchestrace process"):
        dump(small_trace, p, overwrite=True)
    with pytest.raises(OutputError, match=r"run\.jsonl exists; pass overwrite=True"):
        StreamWriter(p, trace_id="b", task_id="x")
    first.close()
    tr = load_all(p)[0]
    assert tr.trace_id == "a" and tr.n_events == 1 and not tr.meta.get("partial")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["run.jsonl"]


def test_a_writer_replacing_a_file_locks_it_too(tmp_path, small_trace):
    p = tmp_path / "run.jsonl"
    dump(small_trace, p)
    first = StreamWriter(p, trace_id="a", task_id="x", overwrite=True)
    with pytest.raises(OutputError, match="being written by another orchestrace process"):
        StreamWriter(p, trace_id="b", task_id="x", overwrite=True)
    first.close()
    assert load_all(p)[0].trace_id == "a"


def test_atomic_write_refuses_a_file_made_meanwhile(tmp_path):
    p = tmp_path / "t.json"
    with (
        pytest.raises(OutputError, match=r"t\.json exists; pass overwrite=True"),
        atomic_write(p) as fh,
    ):
        fh.write(b"mine")
        p.write_bytes(b"theirs")
    assert p.read_bytes() == b"theirs"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["t.json"]


@pytest.mark.parametrize(
    "fault", [OSError(errno.EXDEV, "Invalid cross-device link"), KeyboardInterrupt()]
)
def test_a_failed_swap_puts_the_previous_dataset_back(
    tmp_path, monkeypatch, small_trace, medium_trace, fault
):
    p = tmp_path / "ds.parquet"
    dump(small_trace, p)
    before = _tree(tmp_path)
    real = os.rename

    def rename(src, dst):
        if Path(src).name.endswith(".tmp"):  # the new dataset moving in
            raise fault
        return real(src, dst)

    monkeypatch.setattr(_output.os, "rename", rename)
    with pytest.raises((OutputError, KeyboardInterrupt)):
        dump(medium_trace, p, overwrite=True)
    monkeypatch.undo()
    assert _tree(tmp_path) == before


def test_a_recording_removed_while_written_is_reported(tmp_path, small_trace):
    p = tmp_path / "run.jsonl"
    w = StreamWriter(p, trace_id="t", task_id="x")
    w.event(small_trace.events[0])
    p.unlink()
    with pytest.raises(OutputError) as ei:
        w.close()
    assert str(ei.value) == (
        f"{p} was moved or removed while it was being written; the recording is not there; "
        "run again"
    )


def test_system_refusals_of_a_name_are_one_line(tmp_path, monkeypatch, small_trace):
    monkeypatch.chdir(tmp_path)
    long = "a" * 300
    for raw in (f"{long}.json", f"{long}/x.json", f"{long}.parquet"):
        with pytest.raises(OutputError) as ei:
            dump(small_trace, raw)
        assert str(ei.value).endswith(": File name too long; choose another path")
        assert str(ei.value).startswith("cannot write aaaa")
    os.symlink("loop1", "loop2")
    os.symlink("loop2", "loop1")
    with pytest.raises(OutputError) as ei:
        dump(small_trace, "loop1/x.json")
    assert str(ei.value) == (
        "cannot write loop1/x.json: loop1 is a broken symbolic link; choose another path"
    )
    with pytest.raises(OutputError, match=r"^loop1 is a broken symbolic link; choose another"):
        dump(small_trace, "loop1", overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["loop1", "loop2"]


def test_a_replaced_file_keeps_its_mode(tmp_path, small_trace, medium_trace):
    old = os.umask(0o022)
    try:
        for name in ("t.json", "s.jsonl"):
            p = tmp_path / name
            dump(small_trace, p)
            os.chmod(p, 0o640)
            if name == "s.jsonl":
                StreamWriter(p, trace_id="t", task_id="x", overwrite=True).close()
            else:
                dump(medium_trace, p, overwrite=True)
            assert stat.S_IMODE(os.stat(p).st_mode) == 0o640, name
    finally:
        os.umask(old)


def test_a_failed_report_keeps_files_it_did_not_write(tmp_path):
    from orchestrace.io._output import report_dir, report_file

    out = tmp_path / "rep"
    with pytest.raises(RuntimeError, match="work failed"), report_dir(out, report="bench") as d:
        with report_file(d / "report.json", "w") as fh:
            fh.write("{}")
        (d / "notes.txt").write_text("the user's")  # appears while the run goes on
        raise RuntimeError("work failed")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_discarding_a_new_stream_file_leaves_what_replaced_it(tmp_path):
    from orchestrace.io._output import StreamTarget

    path = tmp_path / "run.jsonl"
    target = StreamTarget(path)
    os.rename(path, tmp_path / "moved.jsonl")
    path.write_text("the user's own file\n")
    target.discard(remove_new=True)
    assert path.read_text() == "the user's own file\n"
    mine = StreamTarget(tmp_path / "mine.jsonl")
    mine.discard(remove_new=True)
    assert not (tmp_path / "mine.jsonl").exists()
