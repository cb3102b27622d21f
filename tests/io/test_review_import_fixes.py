"""Import/export fidelity and input handling: stale markers survive and are reported by every
command, explicit default values survive OTLP and survey round trips byte for byte, a FIFO
without a writer fails fast, and unclear inputs are named."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from orchestrace.cli import main
from orchestrace.errors import TraceFormatError
from orchestrace.io import _common, dumps, from_upstream, load_all, loads, parse, to_upstream
from orchestrace.io._common import read_bytes
from orchestrace.io.otel import import_values
from orchestrace.io.otlp import export_bytes
from orchestrace.trace.build import TraceBuilder
from orchestrace.trace.generate import generate_trace
from orchestrace.trace.model import Trace


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _llm_trace(topology: str = "critic_loop") -> Trace:
    b = TraceBuilder(task_id="t", topology=topology)
    b.llm("w", tokens_in=5, dur=1.0)
    b.add("message", "w", to="lead")
    return b.build()


def _imports(doc: dict[str, Any]) -> list[tuple[Trace | None, list[Any]]]:
    """Both import paths: field by field, and ``parse`` (the typed fast path when it can)."""
    return [from_upstream(copy.deepcopy(doc)), parse(json.dumps(doc).encode(), source="u.json")]


# ---------------------------------------------------------------------- 1. stale markers
def _edited_docs() -> list[tuple[str, dict[str, Any]]]:
    doc = to_upstream(_llm_trace())
    typed = copy.deepcopy(doc)
    typed["events"][0]["type"] = "message"
    topo = copy.deepcopy(doc)
    topo["topology"] = "debate"
    tr = _llm_trace().replace(costs={})  # the export fills the required costs in
    costs = to_upstream(tr)
    costs["costs"]["tokens"] = 99
    both = copy.deepcopy(typed)
    both["topology"] = "swarm"
    return [("type", typed), ("topology", topo), ("costs", costs), ("type+topology", both)]


@pytest.mark.parametrize("name,doc", _edited_docs(), ids=[n for n, _ in _edited_docs()])
def test_a_stale_marker_is_kept_and_written_back(name: str, doc: dict[str, Any]) -> None:
    for trace, problems in _imports(doc):
        assert trace is not None
        assert "stale-marker" in {p.code for p in problems}, name
        assert to_upstream(trace) == doc  # the round-trip promise holds for an edited file
        again, problems2 = from_upstream(to_upstream(trace))
        assert again == trace
        assert [p.code for p in problems2] == [p.code for p in problems]


def test_a_kept_marker_object_does_not_apply_to_another_event() -> None:
    # a native event that holds a marker-like key in attrs: it stays an attrs key
    b = TraceBuilder(task_id="t")
    b.add("tool_call", "w", tool="x", attrs={"x_orchestrace_type": "llm_call"})
    b.add("message", "w", attrs={"x_orchestrace_trace": {"topology": "critic_loop"}})
    b.add("message", "w", attrs={"x_orchestrace_fields": {"dur": 0.0}, "x_other": 1})
    tr = b.build()
    doc = to_upstream(tr)
    back, _ = from_upstream(json.loads(json.dumps(doc)))
    assert back == tr
    assert to_upstream(back) == doc


def test_convert_prints_the_warnings_validate_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = to_upstream(_llm_trace())
    doc["events"][0]["type"] = "message"
    doc["x_custom"] = 1  # an unknown top-level field: a warning too
    src = tmp_path / "up.json"
    src.write_text(json.dumps(doc))
    code, out, _ = _cli(capsys, "validate", str(src))
    assert code == 0
    expected = [ln for ln in out.splitlines() if ": warning: " in ln]
    assert len(expected) == 2
    code, _, err = _cli(capsys, "convert", str(src), "-o", str(tmp_path / "n.json"))
    assert code == 0
    assert [ln for ln in err.splitlines() if ": warning: " in ln] == expected
    code, _, err = _cli(
        capsys,
        "convert",
        str(tmp_path / "n.json"),
        "--to",
        "upstream",
        "-o",
        str(tmp_path / "u.json"),
    )
    assert code == 0
    assert json.loads((tmp_path / "u.json").read_text()) == doc  # upstream -> native -> upstream


# ---------------------------------------------------------------------- 2. explicit defaults
def _via_otlp(tr: Trace) -> Trace:
    return import_values([msgspec.json.decode(export_bytes([tr]))], source="x").traces[0]


def _via_upstream(tr: Trace) -> Trace:
    return loads(msgspec.json.encode(to_upstream(tr)))


def _assert_same_native_bytes(tr: Trace) -> None:
    native = dumps(tr)
    back = loads(native)
    assert dumps(back) == native  # what the native round trip keeps ...
    for via in (_via_otlp, _via_upstream):
        other = via(back)
        assert other == back, via.__name__
        assert dumps(other) == native, via.__name__  # ... the others keep too


def _with_explicit_defaults(tr: Trace, every: int) -> Trace:
    doc = json.loads(dumps(tr))
    for i, ev in enumerate(doc["events"]):
        if i % every == 0:
            ev["dur"] = 0.0
        if i % every == 1:
            ev["cost"] = 0.0
    return loads(json.dumps(doc).encode())


def test_explicit_zero_duration_survives_otlp_and_survey_round_trips() -> None:
    b = TraceBuilder(task_id="t")
    b.add("message", "a", to="b")
    b.add("tool_call", "a", tool="s", dur=1.0)
    tr = _with_explicit_defaults(b.build(), 2)
    assert b'"dur":0.0' in dumps(tr) and b'"cost":0.0' in dumps(tr)
    _assert_same_native_bytes(tr)


@pytest.mark.parametrize("seed", range(6))
def test_generated_traces_give_the_same_native_bytes(seed: int) -> None:
    tr = generate_trace(agents=3 + seed % 3, steps=15, seed=seed)
    _assert_same_native_bytes(tr)
    _assert_same_native_bytes(_with_explicit_defaults(tr, 3 + seed % 2))


# ---------------------------------------------------------------------- 3. FIFOs
def _fifo(tmp_path: Path, name: str = "in.json") -> Path:
    path = tmp_path / name
    os.mkfifo(path)
    return path


def _writer(path: Path, data: bytes, delay: float, *, hold: bool) -> threading.Thread:
    """Write ``data`` to the FIFO; ``hold``: open it first and write after ``delay``."""

    def run() -> None:
        if not hold:
            time.sleep(delay)
        fd = os.open(path, os.O_WRONLY)  # blocks until the reader opens it
        try:
            if hold:
                time.sleep(delay)
            os.write(fd, data)
        finally:
            os.close(fd)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


@pytest.fixture
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_common, "FIFO_WRITER_WAIT_S", 0.4)
    monkeypatch.setattr(_common, "PIPE_IDLE_TIMEOUT_S", 5.0)


@pytest.mark.usefixtures("short_waits")
def test_a_fifo_nobody_writes_to_fails_fast_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _fifo(tmp_path)
    start = time.monotonic()
    with pytest.raises(TraceFormatError, match="start the writer first, or pass a file"):
        read_bytes(path)
    assert time.monotonic() - start < 3.0  # the writer wait, not the 5 s idle timeout
    start = time.monotonic()
    code = main(["convert", str(path), "-o", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert code == 1 and time.monotonic() - start < 3.0
    assert err.count("\n") == 1 and "no program opened for writing" in err
    assert not (tmp_path / "o.json").exists()


@pytest.mark.usefixtures("short_waits")
def test_a_fifo_whose_writer_is_connected_but_slow_is_read(tmp_path: Path) -> None:
    data = dumps(generate_trace(agents=2, steps=5, seed=1))
    path = _fifo(tmp_path)
    th = _writer(path, data, 1.0, hold=True)  # longer than the writer wait, shorter than idle
    assert read_bytes(path) == data
    th.join(5)


@pytest.mark.usefixtures("short_waits")
def test_a_fifo_whose_writer_starts_late_within_the_wait_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tr = generate_trace(agents=2, steps=5, seed=2)
    path = _fifo(tmp_path)
    th = _writer(path, dumps(tr), 0.1, hold=False)
    code = main(["convert", str(path), "--from", "native", "-o", str(tmp_path / "o.json")])
    assert code == 0, capsys.readouterr().err
    assert loads((tmp_path / "o.json").read_bytes()) == tr
    th.join(5)


def test_a_pipe_on_stdin_is_read(tmp_path: Path) -> None:
    tr = generate_trace(agents=2, steps=5, seed=3)
    out = tmp_path / "o.json"
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrace", "convert", "-", "--from", "native", "-o", str(out)],
        input=dumps(tr),
        check=False,
        capture_output=True,
        timeout=60,
        env={**os.environ, "ORCHESTRACE_FIFO_WRITER_S": "0.2"},
    )
    assert proc.returncode == 0, proc.stderr
    assert loads(out.read_bytes()) == tr


# ---------------------------------------------------------------------- 4. wording
def test_a_blank_json_file_is_called_blank(tmp_path: Path) -> None:
    path = tmp_path / "ws.json"
    path.write_bytes(b"  \n\t\r\n ")
    with pytest.raises(TraceFormatError, match=r"file is blank \(only whitespace"):
        load_all(path)
    cut = tmp_path / "cut.json"
    cut.write_bytes(b'{"trace_id": "t", "events": [')
    with pytest.raises(TraceFormatError, match="JSON ends early"):
        load_all(cut)


@pytest.mark.parametrize("name", ["empty", "empty.parquet"])
def test_an_empty_directory_is_not_called_a_damaged_dataset(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.mkdir()
    with pytest.raises(TraceFormatError, match="the directory is empty, not a Parquet dataset"):
        load_all(path, format="parquet")
    (path / "notes.txt").write_text("x")
    with pytest.raises(TraceFormatError, match=r"holds none of events\.parquet"):
        load_all(path, format="parquet")


def _wrong_inputs(tmp_path: Path) -> list[tuple[Path, str, str]]:
    native = tmp_path / "native.json"
    native.write_bytes(dumps(generate_trace(agents=2, steps=5, seed=0)))
    survey = tmp_path / "survey.json"
    survey.write_text(json.dumps(to_upstream(_llm_trace())))
    oops = tmp_path / "oops.json"
    oops.write_text('{"resourceSpans": "oops"}')
    otlp = tmp_path / "spans.json"
    otlp.write_bytes(export_bytes([_llm_trace()]))
    return [
        (native, "a native orchestrace trace", "--from native"),
        (survey, "a survey-schema trace", "--from upstream"),
        (oops, "`resourceSpans` is a string, not a list", "export the spans again"),
        (otlp, "OTLP JSON", "--from otel"),
    ]


@pytest.mark.parametrize("fmt", ["otel", "openai-agents", "langgraph"])
def test_a_wrong_from_names_what_the_file_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    for path, looks, fix in _wrong_inputs(tmp_path):
        if fmt == "otel" and path.name == "spans.json":
            continue  # the right --from
        code = main(["convert", "--from", fmt, str(path), "-o", str(tmp_path / "o.json")])
        err = capsys.readouterr().err
        assert code == 1 and err.count("\n") == 1, err
        assert f"--from {fmt} found nothing to import: the file looks like" in err
        assert looks in err and fix in err, err


def test_an_agents_sdk_file_given_to_the_otel_importer_is_named(tmp_path: Path) -> None:
    from orchestrace.io.importers import describe_value, sniff_value

    value = [{"object": "trace.span", "id": "span_1", "trace_id": "trace_1", "span_data": {}}]
    if sniff_value(value) != "openai-agents":
        pytest.skip("not the shape the Agents SDK sniffer recognises")
    assert describe_value(value) == ("an OpenAI Agents SDK export", "pass --from openai-agents")


def _otlp(spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}


def _span(sid: str, name: str, start: int, end: int, **extra: Any) -> dict[str, Any]:
    return {
        "traceId": "a" * 32,
        "spanId": sid,
        "name": name,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        **extra,
    }


def test_clock_skew_is_printed_in_a_unit_that_shows_it() -> None:
    base = 1_700_000_000 * 10**9
    doc = _otlp(
        [
            _span("b" * 16, "invoke_agent lead", base, base + 10**9),
            _span("c" * 16, "chat m", base - 500, base + 10**6, parentSpanId="b" * 16),
        ]
    )
    result = import_values([doc], source="s.json")
    skew = [p for p in result.problems if p.code == "clock-skew"]
    assert skew and "starts 500 ns before its parent" in skew[0].message
    assert skew[0].path == "$.resourceSpans[0].scopeSpans[0].spans[1]"


def test_a_link_cycle_is_located_at_the_span_that_carries_the_link() -> None:
    base = 1_700_000_000 * 10**9
    tid = "a" * 32
    doc = _otlp(
        [
            _span("b" * 16, "invoke_agent lead", base, base + 10**9),
            _span("c" * 16, "chat m", base + 10, base + 10**6, parentSpanId="b" * 16),
            _span(
                "d" * 16,
                "execute_tool t",
                base + 2 * 10**6,
                base + 3 * 10**6,
                parentSpanId="b" * 16,
                links=[{"traceId": tid, "spanId": "e" * 16}],
            ),
            _span(
                "e" * 16,
                "execute_tool u",
                base + 2 * 10**6,
                base + 3 * 10**6,
                parentSpanId="b" * 16,
                links=[{"traceId": tid, "spanId": "d" * 16}],
            ),
        ]
    )
    result = import_values([doc], source="l.json")
    cycles = [p for p in result.problems if p.code == "causal-cycle"]
    assert len(cycles) == 1, [str(p) for p in result.problems]
    # the second link closes the cycle: named at the span that carries it, not at "$"
    assert cycles[0].path == "$.resourceSpans[0].scopeSpans[0].spans[3]", str(cycles[0])
    assert cycles[0].event_id is not None


def test_a_fifo_writer_that_stalls_after_some_data_is_named_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not "no writer": it sent data, then stopped (the wait ends it, in one line)."""
    monkeypatch.setattr(_common, "PIPE_IDLE_TIMEOUT_S", 0.5)
    path = _fifo(tmp_path)
    release = threading.Event()

    def run() -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, b'{"header": {"trace_id": "t", "task_id": "k"}}\n')
            release.wait(10)
        finally:
            os.close(fd)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    try:
        with pytest.raises(TraceFormatError, match=r"the writer sent 46 bytes, then nothing for"):
            read_bytes(path)
    finally:
        release.set()
        th.join()
