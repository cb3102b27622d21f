"""Files of other tools are told apart by structure and handed to their importer without
``--from``; traces never are, and an unknown structure is one line naming the choices.

The importer here is a tiny stand-in registered in the importer registry for the test."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterable
from pathlib import Path

import pytest

from orchestrace.cli import main
from orchestrace.errors import TraceFormatError
from orchestrace.io import dump, foreign_format, importers, iter_traces, load, load_all
from orchestrace.io.importers import ImportResult
from orchestrace.trace.build import TraceBuilder
from orchestrace.trace.model import Trace

CALLS: list[str] = []


SNIFFED: list[object] = []


def _sniff(value: object) -> bool:
    SNIFFED.append(value)
    return isinstance(value, dict) and ("fakeSpans" in value or "fake_span" in value)


def _import_values(values: Iterable[object], *, source: str) -> ImportResult:
    CALLS.append(source)
    spans: list[dict] = []
    for v in values:
        assert isinstance(v, dict)
        spans += v.get("fakeSpans", [v.get("fake_span")])
    b = TraceBuilder(task_id="fake", trace_id="fake-trace")
    prev = None
    for s in spans:
        prev = b.add(
            "message",
            s["agent"],
            to="lead",
            dur=1.0,
            after=[prev] if prev else [],
            error=s.get("error"),
        )
    return ImportResult(traces=[b.build()], unmapped={"fake attr": 1})


@pytest.fixture
def fake(monkeypatch):
    mod = types.ModuleType("_orchestrace_fake_importer")
    mod.sniff = _sniff  # type: ignore[attr-defined]
    mod.import_values = _import_values  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setitem(importers._IMPORTERS, "fake", (mod.__name__, "import_values"))
    monkeypatch.setitem(importers._SNIFFERS, "fake", (mod.__name__, "sniff"))
    monkeypatch.setattr(importers, "_SNIFF_ORDER", ("fake",))
    CALLS.clear()
    SNIFFED.clear()
    return mod


def _otlp_like(tmp_path):
    p = tmp_path / "spans.json"
    doc = {"fakeSpans": [{"agent": "a"}, {"agent": "b", "error": "boom"}, {"agent": "c"}]}
    p.write_text(json.dumps(doc))
    return p


def _span_lines(tmp_path):
    p = tmp_path / "spans.jsonl"
    p.write_text("\n".join(json.dumps({"fake_span": {"agent": a}}) for a in "xyz") + "\n")
    return p


def test_loaders_import_foreign_json_and_jsonl_without_a_format(fake, tmp_path):
    doc, lines = _otlp_like(tmp_path), _span_lines(tmp_path)
    assert foreign_format(doc) == "fake" and foreign_format(lines) == "fake"
    tr = load(doc)
    assert isinstance(tr, Trace) and tr.n_events == 3 and tr.events[1].error == "boom"
    assert [t.n_events for t in load_all(lines)] == [3]
    assert [t.n_events for t in iter_traces(lines)] == [3]


def test_traces_never_reach_an_importer(fake, tmp_path, small_trace):
    for name in ("t.json", "t.jsonl"):
        dump(small_trace, tmp_path / name)
        assert foreign_format(tmp_path / name) is None
        assert load(tmp_path / name) == small_trace
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"trace_id": "x", "task_id": "y", "events": [{"id": 1}]}))
    with pytest.raises(Exception, match=r"\$\.events\[0\]"):
        load(broken)  # a trace's own errors, not an unknown format
    assert CALLS == []


def test_unknown_structure_is_one_line_naming_the_choices(fake, tmp_path, capsys):
    p = tmp_path / "other.json"
    p.write_text(json.dumps({"rows": [1, 2]}))
    with pytest.raises(TraceFormatError) as err:
        load(p)
    msg = str(err.value)
    assert msg == (
        f"{p}: file: not an orchestrace trace, a survey-schema trace, or a format orchestrace "
        f"can import; if it is one of {', '.join(importers.IMPORT_FORMATS)}, name it with "
        "--from (`orchestrace convert --from FORMAT IN -o OUT`)"
    )
    for cmd in (["validate"], ["analyze"], ["convert", "-o", str(tmp_path / "o.json")]):
        code = main([cmd[0], str(p), *cmd[1:]])
        out = capsys.readouterr()
        lines = [x for x in (out.out + out.err).splitlines() if x.strip()]
        assert code == 1 and len(lines) == 1 and "name it with --from" in lines[0], (cmd, lines)


def test_commands_accept_foreign_files_without_from(fake, tmp_path, capsys):
    p = _otlp_like(tmp_path)
    assert main(["validate", str(p)]) == 0
    assert capsys.readouterr().out.strip().endswith("ok (fake: 1 trace(s), 3 events)")
    assert main(["analyze", str(p), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["trace_id"] == "fake-trace" and s["events"] == 3 and s["errors"] == 1
    out = tmp_path / "native.json"
    assert main(["convert", str(p), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "imported 1 trace(s), 3 events" in err and "1 x fake attr" in err
    assert load(out).n_events == 3
    lines = _span_lines(tmp_path)
    assert main(["analyze", str(lines)]) == 0
    assert "trace fake-trace" in capsys.readouterr().out
    assert main(["reward", str(p)]) == 0
    capsys.readouterr()


def test_native_path_does_not_sniff(fake, tmp_path, small_trace, capsys):
    for name in ("t.json", "t.jsonl", "t.parquet"):
        dump(small_trace, tmp_path / name)
        load(tmp_path / name)
        assert main(["validate", str(tmp_path / name)]) == 0
        assert main(["analyze", str(tmp_path / name)]) == 0
    capsys.readouterr()
    assert SNIFFED == [] and CALLS == []
    load(_otlp_like(tmp_path))
    assert len(SNIFFED) == 1  # the check that would have caught a sniff on the native path


@pytest.mark.parametrize("fmt", ["otel", "openinference", "openai-agents", "langgraph"])
def test_deeply_nested_file_is_one_line_for_every_import_format(tmp_path: Path, fmt: str) -> None:
    from orchestrace.io.importers import import_path

    p = tmp_path / "deep.json"
    p.write_text("[" * 200_000)
    with pytest.raises(TraceFormatError, match="JSON nested too deeply"):
        import_path(p, format=fmt)


@pytest.mark.parametrize("command", ["validate", "analyze", "reward"])
def test_a_fifo_nobody_writes_to_is_waited_for_once(
    command: str, tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed read of a FIFO is not followed by a second read that sniffs a foreign format."""
    import os
    import time

    from orchestrace.cli import main
    from orchestrace.io import _common

    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    opened: list[str] = []
    real_open = _common.open_input

    def counting(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(_common, "FIFO_WRITER_WAIT_S", 0.2)
    monkeypatch.setattr(_common, "open_input", counting)
    t0 = time.monotonic()
    assert main([command, str(fifo)]) == 1
    assert time.monotonic() - t0 < 10
    out = capsys.readouterr()
    said = out.out + out.err
    assert said.count("no program opened for writing") == 1, said
    assert opened.count(str(fifo)) <= 1, opened


def test_foreign_format_does_not_open_a_stream(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import time

    from orchestrace.io import _common, foreign_format

    fifo = tmp_path / "spans.json"
    os.mkfifo(fifo)
    monkeypatch.setattr(_common, "FIFO_WRITER_WAIT_S", 30.0)
    t0 = time.monotonic()
    assert foreign_format(fifo) is None
    assert time.monotonic() - t0 < 5
