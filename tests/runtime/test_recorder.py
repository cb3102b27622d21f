"""The recording pipeline: processors and exporters, flushing, shutdown, failures reported."""

import errno
import os
import resource
import signal
import subprocess
import sys

import pytest

from orchestrace.errors import RuntimeError_
from orchestrace.io import OutputError, load
from orchestrace.runtime import run
from orchestrace.runtime.export import Exporter, JsonlExporter, MemoryExporter
from orchestrace.runtime.recorder import BatchProcessor, Processor, Recorder, SimpleProcessor
from orchestrace.trace.model import Event


def _events(n):
    return [Event(id=f"e{i + 1}", t=float(i), type="message", agent="a") for i in range(n)]


class Calls(Processor):
    """Remembers the calls it gets, in order."""

    def __init__(self):
        self.calls = []

    def on_start(self, header):
        self.calls.append("on_start")

    def on_event(self, event, edges):
        self.calls.append("on_event")

    def on_end(self, trace):
        self.calls.append("on_end")

    def force_flush(self, timeout_s=None):
        self.calls.append("force_flush")
        return True

    def shutdown(self):
        self.calls.append("shutdown")


class RaisesOnThird(Processor):
    def __init__(self):
        self.n = 0

    def on_event(self, event, edges):
        self.n += 1
        if self.n == 3:
            raise ValueError("third")


# ---------------------------------------------------------------------- failing processors
def test_a_processor_raising_on_the_third_event_is_kept_and_reported():
    bad, calls, mem = RaisesOnThird(), Calls(), MemoryExporter()
    res = run("centralized", agents=2, seed=3, processors=[bad, calls, mem])
    n = res.trace.n_events
    assert bad.n == n  # kept: it saw every event, before and after its failure
    assert calls.calls.count("on_event") == n and len(mem.records) == n  # others untouched
    line = "processor RaisesOnThird failed: on_event raised ValueError: third (at event e3)"
    assert res.processor_failures == (line,)
    assert res.trace.meta["processor_failures"] == [
        {
            "processor": "RaisesOnThird",
            "method": "on_event",
            "error": "ValueError: third",
            "count": 1,
            "event": "e3",
        }
    ]
    assert mem.trace == res.trace  # the meta reaches the exporters too
    ok = run("centralized", agents=2, seed=3)  # a clean run records no such key
    assert "processor_failures" not in ok.trace.meta


def test_a_failure_after_the_trace_is_closed_is_still_reported():
    class BadEnd(Processor):
        def on_end(self, trace):
            raise KeyError("x")

    res = run("centralized", agents=2, processors=[BadEnd()])
    assert res.processor_failures == ("processor BadEnd failed: on_end raised KeyError: 'x'",)
    assert "processor_failures" not in res.trace.meta  # the trace was final before on_end


def test_an_exporter_raising_on_the_third_export_stops_and_fails_the_run(tmp_path):
    class Bad(Exporter):
        def __init__(self):
            self.n = 0

        def export(self, records):
            self.n += 1
            if self.n == 3:
                raise ValueError("third")

    bad, mem, out = Bad(), MemoryExporter(), tmp_path / "r.jsonl"
    with pytest.raises(RuntimeError_) as ei:
        run("debate", agents=4, rounds=50, output=out, processors=[bad, mem])
    assert str(ei.value) == (
        "Bad failed (ValueError: third); the recording is incomplete, so the run was stopped"
    )
    assert bad.n == 3  # no call after the failure
    tr = load(out)  # the other outputs are complete recordings of the stopped run
    assert tr == mem.trace and tr.meta["result"]["stop_reason"].startswith("recording failed")
    assert tr.meta["processor_failures"][0] == {
        "processor": "Bad",
        "method": "on_event",
        "error": "ValueError: third",
        "count": 1,
        "event": "e3",
        "critical": True,
    }


def _cli(args, tmp_path, fsize=None):
    def limit():
        if fsize is not None:  # a file system that fills up at fsize bytes, even for root
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [sys.executable, "-m", "orchestrace", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        preexec_fn=limit,
        timeout=120,
        check=False,
    )


def test_a_full_disk_fails_the_run_loudly_and_keeps_what_was_recorded(tmp_path):
    out = tmp_path / "r.jsonl"
    proc = _cli(
        ["run", "debate", "--agents", "4", "--no-progress", "-o", str(out)], tmp_path, fsize=4_000
    )
    assert proc.returncode == 1 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()  # one line, no traceback
    assert line.startswith(f"error: cannot write {out}: File too large; choose another path; the ")
    assert line.endswith(
        f"whole records written before are kept in {out} (a partial recording: "
        "read it with --partial)"
    )
    data = out.read_bytes()
    assert 0 < len(data) <= 4_000 and data.endswith(b"\n")  # whole lines only
    tr = load(out, partial=True)
    assert tr.meta["partial"] and tr.n_events > 5
    kept = int(line.split("; the ")[1].split()[0])
    assert tr.n_events + len(tr.edges) == kept


def test_an_exporter_on_an_unwritable_path_fails_before_the_run(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OutputError, match="afile is a file, not a directory"):
        JsonlExporter(tmp_path / "afile" / "r.jsonl")
    with pytest.raises(OutputError, match="exists"):
        JsonlExporter(tmp_path / "afile")


def test_a_failing_write_mid_run_keeps_the_whole_records(tmp_path, monkeypatch):
    out = tmp_path / "r.jsonl"
    exp = JsonlExporter(out)
    real, n = os.write, [0]

    def write(fd, data):
        n[0] += 1
        if n[0] == 6:  # half the sixth record reaches the disk, then the disk is full
            real(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    rec = Recorder([exp])
    rec.start({"trace_id": "t", "task_id": "k", "meta": {}})
    for e in _events(8):
        rec.event(e, [])
    monkeypatch.undo()
    assert isinstance(rec.error, OutputError)
    assert str(rec.error).endswith(
        f"the 4 whole records written before are kept in {out} (a partial recording: read it "
        "with --partial)"
    )
    rec.shutdown()
    tr = load(out, partial=True)
    assert [e.id for e in tr.events] == ["e1", "e2", "e3", "e4"]
    assert rec.failures == [
        "processor JsonlExporter failed: on_event raised " + str(rec.error) + " (at event e5)"
        "; the recording is incomplete and the run was stopped"
    ]


# ---------------------------------------------------------------------- flush and shutdown
def test_force_flush_returns_once_the_records_are_on_disk(tmp_path, monkeypatch):
    out = tmp_path / "r.jsonl"
    exp = JsonlExporter(out)
    rec = Recorder([exp])
    rec.start({"trace_id": "t", "task_id": "k", "meta": {}})
    for e in _events(3):
        rec.event(e, [])
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    assert rec.force_flush() is True
    assert synced == [exp.writer._fd]
    assert [e.id for e in load(out, partial=True).events] == ["e1", "e2", "e3"]
    rec.shutdown()


def test_force_flush_reports_a_failed_sync(tmp_path, monkeypatch):
    exp = JsonlExporter(tmp_path / "r.jsonl")
    rec = Recorder([exp])
    rec.start({"trace_id": "t", "task_id": "k", "meta": {}})

    def broken(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", broken)
    assert rec.force_flush() is False
    monkeypatch.undo()
    assert isinstance(rec.error, OutputError) and "Input/output error" in str(rec.error)
    rec.shutdown()


def test_batch_processor_exports_in_batches_and_on_flush():
    mem = MemoryExporter()
    rec = Recorder([BatchProcessor(mem, max_batch=4)])
    rec.start({"trace_id": "t", "task_id": "k", "meta": {}})
    seen = []
    for e in _events(6):
        rec.event(e, [])
        seen.append(len(mem.records))
    assert seen == [0, 0, 0, 4, 4, 4]
    assert rec.force_flush() is True and len(mem.records) == 6 and mem.flushes == 1
    with pytest.raises(ValueError, match="max_batch must be >= 1"):
        BatchProcessor(mem, max_batch=0)


def test_a_batched_run_records_the_same_trace():
    mem, batched = MemoryExporter(), MemoryExporter()
    res = run("swarm", agents=3, seed=2, processors=[mem, BatchProcessor(batched, max_batch=7)])
    assert batched.trace == mem.trace == res.trace
    assert batched.records == mem.records


def test_the_runtime_flushes_then_shuts_down_at_the_end_of_a_run():
    calls = Calls()
    res = run("centralized", agents=2, processors=[calls])
    n = res.trace.n_events
    assert calls.calls == ["on_start"] + ["on_event"] * n + ["on_end", "force_flush", "shutdown"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stop_flushes_and_shuts_down(sig):
    class Signaller(Calls):
        def on_event(self, event, edges):
            super().on_event(event, edges)
            if self.calls.count("on_event") == 20:
                os.kill(os.getpid(), sig)

    calls = Signaller()
    res = run("debate", agents=4, rounds=200, processors=[calls], stop_on_signals=True)
    assert res.interrupted_by == signal.Signals(sig).name
    assert calls.calls[-3:] == ["on_end", "force_flush", "shutdown"]


def test_shutdown_is_idempotent(tmp_path):
    class Counting(MemoryExporter):
        shutdowns = 0

        def shutdown(self):
            self.shutdowns += 1

    mem = Counting()
    out = tmp_path / "r.jsonl"
    exp = JsonlExporter(out)
    rec = Recorder([mem, exp])
    rec.start({"trace_id": "t", "task_id": "k", "meta": {}})
    rec.event(_events(1)[0], [])
    rec.shutdown()
    rec.shutdown()
    assert mem.shutdowns == 1
    exp.shutdown()  # the exporter itself also tolerates a second call
    assert load(out, partial=True).n_events == 1 and rec.failures == []


def test_exporters_are_wrapped_and_processors_are_not():
    mem, calls = MemoryExporter(), Calls()
    rec = Recorder([mem, calls])
    assert isinstance(rec.processors[0], SimpleProcessor) and rec.processors[0].exporter is mem
    assert rec.processors[1] is calls


def test_orchestrace_run_names_a_failing_processor_on_stderr(tmp_path, capsys, monkeypatch):
    import functools

    from orchestrace.cli import main
    from orchestrace.cli import run as run_cli

    monkeypatch.setattr(run_cli, "run", functools.partial(run, processors=[RaisesOnThird()]))
    out = tmp_path / "r.jsonl"
    code = main(["run", "centralized", "--agents", "2", "--no-progress", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0  # the recording is complete: the run still succeeds
    assert err.splitlines() == [
        "warning: processor RaisesOnThird failed: on_event raised ValueError: third (at event e3)"
    ]
    assert load(out).meta["processor_failures"][0]["processor"] == "RaisesOnThird"


def test_a_finished_recording_is_synced_to_disk_when_the_run_ends(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    out = tmp_path / "r.jsonl"
    res = run("centralized", agents=2, output=out)
    assert synced == [str(out)]  # once, after the footer
    assert load(out) == res.trace


def test_a_processor_with_a_plain_force_flush_is_flushed_without_a_failure():
    class Plain(Processor):
        flushed = 0

        def force_flush(self):  # no timeout argument, returns nothing
            self.flushed += 1

    p = Plain()
    res = run("centralized", agents=2, processors=[p])
    assert p.flushed == 1 and res.processor_failures == ()
    rec = Recorder([p])
    assert rec.force_flush() is True and p.flushed == 2
    assert rec.force_flush(timeout_s=0.0) is False  # the deadline passed before any flush


def test_a_full_disk_under_a_parquet_recording_fails_the_run_loudly(tmp_path):
    out = tmp_path / "r.parquet"
    proc = _cli(
        ["run", "debate", "--agents", "4", "--no-progress", "-o", str(out)],
        tmp_path,
        fsize=2_000,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()  # one line, no traceback
    assert line.startswith(f"error: cannot write {out}: ")
    assert line.endswith(
        "a Parquet dataset is readable only once complete, so nothing of this run was kept "
        "there (record to a .jsonl file to keep a partial recording)"
    )
    assert list(tmp_path.iterdir()) == []  # no half-written dataset, no temporary directory


def test_a_parquet_row_group_that_cannot_be_written_stops_the_run(tmp_path):
    out = tmp_path / "r.parquet"
    code = (
        "import sys\n"
        "from orchestrace.errors import OrchestraceError\n"
        "from orchestrace.io.parquet_stream import ParquetExporter\n"
        "from orchestrace.runtime import run\n"
        "try:\n"
        f"    run('debate', agents=4, rounds=50, processors=[ParquetExporter({str(out)!r}, "
        "row_group=8)])\n"
        "except OrchestraceError as err:\n"
        "    print(type(err).__name__, err.path, err)\n"
    )

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (3_000, 3_000))

    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        preexec_fn=limit,
        timeout=120,
        check=False,
    )
    assert proc.stdout.startswith(f"OutputError {out} cannot write {out}: "), proc.stderr
    assert "nothing of this run was kept there" in proc.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_run_given_up_on_a_second_signal_still_flushes_and_shuts_down(monkeypatch):
    import orchestrace.runtime as runtime

    # a second interrupt later than the first one's own repeats (sooner, it is the same one)
    monkeypatch.setattr(runtime, "_SAME_INTERRUPT_S", 0.0)

    class Signaller(Calls):
        def on_event(self, event, edges):
            super().on_event(event, edges)
            if self.calls.count("on_event") == 20:
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGINT)

    calls = Signaller()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run("debate", agents=4, rounds=200, processors=[calls], stop_on_signals=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert "on_end" not in calls.calls  # the trace was never finished
    assert calls.calls[-2:] == ["force_flush", "shutdown"]
