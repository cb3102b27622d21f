"""Import/export fidelity and input handling: stale markers survive and are reported by every
command, explicit default values survive OTLP and survey round trips byte for byte, a FIFO
without a writer fails fast, and unclear inputs are named."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from orchestrace.cli import main
from orchestrace.io import dumps, from_upstream, loads, parse, to_upstream
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
