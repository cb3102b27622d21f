"""Every file-reading command turns one injected fault into one clear error and exit 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import msgspec
import pytest

from orchestrace import dumps
from orchestrace.cli import main
from orchestrace.io import _common
from orchestrace.io.parquet import write_parquet

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "io"))
from test_bad_inputs import PARQUET_FAULTS, corrupt, stream_bytes

COMMANDS = ["validate", "analyze", "convert", "replay", "reward", "credit", "export"]


def run(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def invoke(capsys, command, path, tmp_path):
    extra = {"convert": ["-o", tmp_path / "out.json"], "export": ["-o", tmp_path / "out.jsonl"]}
    return run(capsys, command, path, *extra.get(command, []))


def assert_clean_failure(code, out, err, expected):
    text = out + err
    assert code == 1, text
    assert "Traceback" not in text and "unexpected" not in text, text
    assert expected in text, text


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", sorted(PARQUET_FAULTS))
def test_parquet_fault_every_command(tmp_path, capsys, small_trace, command, kind):
    ds = tmp_path / "d.parquet"
    write_parquet([small_trace], ds)
    corrupt(ds, kind)
    code, out, err = invoke(capsys, command, ds, tmp_path)
    assert_clean_failure(code, out, err, PARQUET_FAULTS[kind])
    assert not (tmp_path / "out.json").exists() and not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_integer_beyond_int64_every_command(tmp_path, capsys, small_trace, command):
    doc = json.loads(dumps(small_trace))
    doc["events"][2]["tokens_in"] = 2**63
    p = tmp_path / "big.json"
    p.write_text(json.dumps(doc))
    code, out, err = invoke(capsys, command, p, tmp_path)
    assert_clean_failure(
        code,
        out,
        err,
        "$.events[2].tokens_in: value out of range: expected an integer <= "
        "9223372036854775807 (2^63-1)",
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_fifo_without_writer_every_command(tmp_path, capsys, monkeypatch, command):
    monkeypatch.setattr(_common, "FIFO_WRITER_WAIT_S", 0.2)
    p = tmp_path / "t.json"
    os.mkfifo(p)
    code, out, err = invoke(capsys, command, p, tmp_path)
    assert_clean_failure(
        code,
        out,
        err,
        f"{p}: file: a FIFO that no program opened for writing within 0.2 s; "
        "start the writer first, or pass a file",
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_character_device_every_command(tmp_path, capsys, command):
    link = tmp_path / "zero.jsonl"
    link.symlink_to("/dev/zero")
    code, out, err = invoke(capsys, command, link, tmp_path)
    assert_clean_failure(code, out, err, "not a regular file (a character device)")


@pytest.mark.parametrize("command", COMMANDS)
def test_directory_as_json_every_command(tmp_path, capsys, command):
    p = tmp_path / "t.json"
    p.mkdir()
    code, out, err = invoke(capsys, command, p, tmp_path)
    assert_clean_failure(code, out, err, f"{p}: file: is a directory")


def test_malformed_spawn_part_in_reward(tmp_path, capsys, small_trace):
    """R7 (orchestration) reads ``attrs.part``; a malformed one is named, never a crash."""
    ev = list(small_trace.events)
    k = next(i for i, e in enumerate(ev) if e.type == "spawn")
    ev[k] = msgspec.structs.replace(ev[k], attrs={"part": {"lo": "a"}})
    p = tmp_path / "t.json"
    p.write_bytes(dumps(small_trace.replace(events=tuple(ev))))
    code, out, err = run(capsys, "reward", p)
    assert_clean_failure(
        code,
        out,
        err,
        f"$.events[{k}].attrs.part (event '{ev[k].id}'): spawn attrs.part is {{'lo': 'a'}}, not "
        '{"lo": int, "hi": int} with 0 <= lo <= hi',
    )


# ---------------------------------------------------------------------- truncated recordings
TRUNCATED = "is truncated (no footer): scores may mislead; pass --partial to accept it"
#: The warning of the commands that go on with a truncated recording (it does not tell the
#: user to pass --partial to have it accepted: it is)
USED = (
    "is truncated (no footer): used as recorded so far, so its scores describe an unfinished "
    "run (--partial accepts it without this warning)"
)


@pytest.fixture
def truncated_run(tmp_path, small_trace):
    p = tmp_path / "run.jsonl"
    p.write_bytes(stream_bytes(small_trace, footer=False))
    return p


@pytest.mark.parametrize("command", ["reward", "credit", "export"])
def test_truncated_recording_is_refused_where_scores_mislead(
    tmp_path, capsys, truncated_run, command
):
    code, _, err = invoke(capsys, command, truncated_run, tmp_path)
    assert code == 1
    assert err == f"error: {truncated_run} {TRUNCATED}\n"


@pytest.mark.parametrize("command", ["reward", "credit", "export"])
def test_truncated_recording_accepted_with_partial(tmp_path, capsys, truncated_run, command):
    extra = ["-o", tmp_path / "out.jsonl"] if command == "export" else []
    code, _, err = run(capsys, command, truncated_run, "--partial", *extra)
    assert code == 0, err
    assert TRUNCATED not in err and USED not in err


@pytest.mark.parametrize("command", ["analyze", "convert"])
def test_truncated_recording_warns(tmp_path, capsys, truncated_run, command):
    code, _, err = invoke(capsys, command, truncated_run, tmp_path)
    assert code == 0, err
    assert f"warning: {truncated_run} {USED}\n" in err


def test_cut_mid_line_recording_warns_in_analyze(tmp_path, capsys, small_trace):
    p = tmp_path / "cut.jsonl"
    data = stream_bytes(small_trace)
    p.write_bytes(data[: len(data) // 2])
    code, _, err = run(capsys, "analyze", p)
    assert code == 0 and f"warning: {p} {USED}\n" in err


# ---------------------------------------------------------------------- --keep-going
@pytest.fixture
def bad_header_stream(tmp_path, small_trace):
    p = tmp_path / "stream.jsonl"
    p.write_bytes(stream_bytes(small_trace, header={"trace_id": 1, "task_id": "x"}))
    return p


def test_validate_keep_going_bad_header_is_not_ok(capsys, bad_header_stream):
    code, out, _ = run(capsys, "validate", "--keep-going", bad_header_stream)
    assert code == 1
    assert "ok (" not in out
    assert out.splitlines()[0] == (
        f"{bad_header_stream}:1: $.header.trace_id: expected str, got int; make the value a "
        "str (--keep-going skips this line)"
    )
    assert "record(s) (lines 2-" in out.splitlines()[1]


def test_convert_keep_going_bad_header_writes_nothing(tmp_path, capsys, bad_header_stream):
    out_path = tmp_path / "out.json"
    code, _, err = run(capsys, "convert", "--keep-going", bad_header_stream, "-o", out_path)
    assert code == 1
    assert f"error: {bad_header_stream}: no readable trace to write (2 problem(s)" in err
    assert not out_path.exists()


def test_convert_keep_going_records_what_it_skipped(tmp_path, capsys, small_trace):
    p = tmp_path / "run.jsonl"
    lines = stream_bytes(small_trace).split(b"\n")
    k = next(i for i, line in enumerate(lines) if line.startswith(b'{"edge"'))
    rec = json.loads(lines[k])
    rec["edge"]["type"] = 5  # the trace is whole without this edge
    lines[k] = json.dumps(rec).encode()
    p.write_bytes(b"\n".join(lines))
    out_path = tmp_path / "out.json"
    code, _, err = run(capsys, "convert", "--keep-going", p, "-o", out_path)
    assert code == 0, err
    assert "1 problem(s) skipped over (--keep-going)" in err
    skipped = json.loads(out_path.read_text())["meta"]["skipped"]
    assert len(skipped) == 1 and skipped[0].startswith(f"{p}:{k + 1}: $.edge.")
    assert run(capsys, "validate", out_path)[0] == 0  # what is written reads back
    # an event skipped leaves edges to nothing and a return without its spawn: not written
    lines = stream_bytes(small_trace).split(b"\n")
    rec = json.loads(lines[2])
    rec["event"]["t"] = -1  # a spawn
    lines[2] = json.dumps(rec).encode()
    p.write_bytes(b"\n".join(lines))
    out_path.unlink()
    code, _, err = run(capsys, "convert", "--keep-going", p, "-o", out_path)
    assert code == 1 and not out_path.exists()
    assert f"{p}:3: $.event.t: t is negative -1.0" in err


def _first_event_twice(tmp_path, trace):
    """A record stream of ``trace`` whose line 3 repeats its first event (id ``e1``)."""
    p = tmp_path / "run.jsonl"
    lines = stream_bytes(trace).split(b"\n")
    lines.insert(2, lines[1])
    p.write_bytes(b"\n".join(lines))
    return p


def test_convert_keep_going_writes_no_trace_that_breaks_a_rule(tmp_path, capsys, small_trace):
    """A repeated event id is no damaged line to skip: the trace would not validate."""
    p = _first_event_twice(tmp_path, small_trace)
    out_path = tmp_path / "out.json"
    code, _, err = run(capsys, "convert", "--keep-going", p, "-o", out_path)
    assert code == 1 and not out_path.exists()
    assert f"{p}:3: $.event.id: duplicate event id 'e1' (first used at line 2)" in err


def test_analyze_names_a_stream_problem_by_its_line_as_validate_does(tmp_path, capsys, small_trace):
    p = _first_event_twice(tmp_path, small_trace)
    said = f"{p}:3: $.event.id: duplicate event id 'e1' (first used at line 2)"
    code, out, _ = run(capsys, "validate", p)
    assert code == 1 and said in out
    code, _, err = run(capsys, "analyze", "--json", p)
    assert code == 1 and said in err and "$.events[" not in err


def test_a_record_before_the_first_header_is_named_as_such(tmp_path, capsys, small_trace):
    """Not read as a file of whole-trace lines because its first line is no header."""
    p = tmp_path / "run.jsonl"
    lines = stream_bytes(small_trace).split(b"\n")
    p.write_bytes(b"\n".join([lines[2], *lines]))
    code, out, _ = run(capsys, "validate", p)
    assert code == 1
    assert out.splitlines()[0] == (
        f'{p}:1: $: record before any header; a record stream starts with a {{"header": ...}} line'
    )
    code, out, _ = run(capsys, "validate", "--keep-going", p)
    assert out.splitlines()[0].startswith(f"{p}:1: $: 1 record(s) (line 1) were skipped")


def test_validate_line_with_event_and_edge(tmp_path, capsys, small_trace):
    p = tmp_path / "run.jsonl"
    lines = stream_bytes(small_trace).split(b"\n")
    rec = json.loads(lines[1])
    rec["edge"] = {"src": "e1", "dst": "e2", "type": "causal"}
    lines[1] = json.dumps(rec).encode()
    p.write_bytes(b"\n".join(lines))
    code, out, _ = run(capsys, "validate", "--keep-going", p)
    assert code == 1
    assert out.splitlines()[0] == (
        f"{p}:2: $: line holds `event` and `edge` records in one object; only one is allowed "
        "per line; put each record on its own line (--keep-going skips this line)"
    )


# ---------------------------------------------------------------------- A5: right paths
def test_validate_paths_after_a_schema_failure(tmp_path, capsys, small_trace):
    doc = json.loads(dumps(small_trace))
    doc["events"][1]["type"] = "bogus"
    doc["events"][5]["id"] = doc["events"][4]["id"]
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    code, out, _ = run(capsys, "validate", p)
    assert code == 1
    dup = doc["events"][4]["id"]
    assert (
        f"{p}: $.events[5].id: duplicate event id '{dup}' (first used at $.events[4]); "
        "give every event a unique id"
    ) in out.splitlines()


# ---------------------------------------------------------------------- pipes
def test_validate_reads_a_pipe_as_a_stream(capsys, small_trace):
    r, w = os.pipe()

    def write():
        with os.fdopen(w, "wb") as fh:
            fh.write(stream_bytes(small_trace))

    threading.Thread(target=write, daemon=True).start()
    try:
        code, out, err = run(capsys, "validate", f"/dev/fd/{r}")
    finally:
        os.close(r)
    assert code == 0, out + err
    assert out == f"/dev/fd/{r}: ok (1 trace(s), {small_trace.n_events} events)\n"


@pytest.mark.slow
@pytest.mark.parametrize("arg", ["-", "/dev/stdin"])
def test_validate_standard_input(small_trace, arg):
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrace", "validate", arg],
        input=stream_bytes(small_trace),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == f"{arg}: ok (1 trace(s), {small_trace.n_events} events)\n"


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("suffix", [".json", ".jsonl", ".parquet", ""])
def test_name_too_long_every_command(tmp_path, capsys, command, suffix):
    p = tmp_path / ("a" * 300 + suffix)
    code, out, err = invoke(capsys, command, p, tmp_path)
    assert_clean_failure(code, out, err, ": cannot open: File name too long; check the path")


@pytest.mark.parametrize("command", ["analyze", "reward", "convert", "validate"])
def test_dangling_edge_in_a_complete_stream_is_an_error(tmp_path, capsys, small_trace, command):
    """Accepting truncated recordings never relaxes the checks of a complete one."""
    p = tmp_path / "run.jsonl"
    data = stream_bytes(small_trace)
    dst = small_trace.edges[0].dst.encode()
    p.write_bytes(data.replace(b'"dst":"' + dst + b'"', b'"dst":"nowhere"', 1))
    code, out, err = invoke(capsys, command, p, tmp_path)
    assert_clean_failure(code, out, err, "edge points to unknown event 'nowhere'")


@pytest.mark.parametrize("command", ["analyze", "reward", "validate"])
def test_dangling_edge_in_a_dataset_is_an_error(tmp_path, capsys, small_trace, command):
    ds = tmp_path / "d.parquet"
    broken = small_trace.replace(
        edges=(
            *small_trace.edges[1:],
            type(small_trace.edges[0])(
                small_trace.edges[0].src, "nowhere", small_trace.edges[0].type
            ),
        )
    )
    write_parquet([broken], ds)
    code, out, err = invoke(capsys, command, ds, tmp_path)
    assert_clean_failure(code, out, err, "edge points to unknown event 'nowhere'")
