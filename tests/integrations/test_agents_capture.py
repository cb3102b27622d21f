"""Live capture for the OpenAI Agents SDK: the recording equals the import of the SDK's export."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from orchestrace.io import import_path, load
from orchestrace.trace.check import check_trace

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "frameworks"
HAVE_AGENTS = importlib.util.find_spec("agents") is not None
needs_agents = pytest.mark.skipif(not HAVE_AGENTS, reason="openai-agents is not installed")


def flow_module():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import make_framework_fixtures as m
    finally:
        sys.path.pop(0)
    return m


def test_fixture_recording_equals_import_of_export():
    live = load(FIXTURES / "agents_live.jsonl")
    imported = import_path(FIXTURES / "agents_run.json").traces[0]
    assert live == imported
    assert check_trace(live) == []


@pytest.mark.slow
@needs_agents
def test_live_run_recording_equals_import(tmp_path):
    from orchestrace.integrations.openai_agents import OrchestraceTracingProcessor

    m = flow_module()
    collector = m.Collector()
    proc = OrchestraceTracingProcessor(tmp_path / "rec")
    assert m.run_agents_flow([collector, proc]) == "final answer"
    (path,) = proc.paths.values()
    export = tmp_path / "export.json"
    export.write_text(json.dumps({"data": collector.items}))
    live = load(path)
    imported = import_path(export).traces[0]
    assert live == imported
    assert {e.agent for e in live.events if e.type != "tool_result"} == {
        "orchestrator",
        "researcher_a",
        "researcher_b",
        "writer",
    }
    assert proc.errors == []


@needs_agents
def test_recording_loads_as_partial_while_the_run_goes_on(tmp_path):
    from orchestrace.integrations.openai_agents import OrchestraceTracingProcessor

    m = flow_module()
    proc = OrchestraceTracingProcessor(tmp_path)
    seen: list[tuple[int, bool]] = []

    class Peek(m.Collector):
        def on_span_end(self, span):
            super().on_span_end(span)
            for path in proc.paths.values():
                tr = load(path, partial=True)
                seen.append((tr.n_events, bool(tr.meta.get("partial"))))

    assert m.run_agents_flow([proc, Peek()]) == "final answer"
    assert seen and all(partial for _, partial in seen)
    counts = [n for n, _ in seen]
    assert counts == sorted(counts) and counts[-1] > 0
    final = load(next(iter(proc.paths.values())))
    assert not final.meta.get("partial") and final.n_events >= counts[-1]


def test_cut_recording_loads_as_partial(tmp_path):
    lines = (FIXTURES / "agents_live.jsonl").read_text().splitlines(keepends=True)
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(lines[: len(lines) // 2]) + lines[len(lines) // 2][:15])
    tr = load(path, partial=True)
    assert tr.meta["partial"] is True and tr.n_events > 0
    assert [p for p in check_trace(tr, partial=True) if p.severity == "error"] == []


@needs_agents
def test_unwritable_directory_is_reported_not_raised_in_callbacks(tmp_path):
    from orchestrace.errors import ConfigError
    from orchestrace.integrations.openai_agents import OrchestraceTracingProcessor

    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(ConfigError, match="exists and is not a directory"):
        OrchestraceTracingProcessor(afile)
    proc = OrchestraceTracingProcessor(tmp_path / "d")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "trace_x.jsonl").write_text("taken")

    class T:
        trace_id = "trace_x"

        def export(self):
            return {"object": "trace", "id": "trace_x", "workflow_name": "w"}

    proc.on_trace_start(T())  # the SDK swallows callback errors: they are kept instead
    assert proc.errors and "exists" in str(proc.errors[0])
    with pytest.raises(type(proc.errors[0])):
        proc.force_flush()


def test_missing_sdk_gives_install_hint(monkeypatch):
    from orchestrace.integrations import openai_agents

    monkeypatch.setitem(sys.modules, "agents", None)
    with pytest.raises(ImportError, match=r"pip install 'orchestrace\[agents\]'"):
        openai_agents.OrchestraceTracingProcessor("x")


def test_import_orchestrace_does_not_import_the_sdk():
    import subprocess

    code = (
        "import sys, orchestrace, orchestrace.io, orchestrace.integrations.openai_agents, "
        "orchestrace.integrations.langgraph; "
        "print(any(m == 'agents' or m.startswith(('agents.', 'langgraph', 'langchain')) "
        "for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
