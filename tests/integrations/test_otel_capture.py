"""Live capture from OpenTelemetry: the recording loads at any moment and equals the import."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from orchestrace.integrations.otel import (
    OrchestraceSpanExporter,
    OrchestraceSpanProcessor,
)
from orchestrace.io import load, load_all
from orchestrace.io._output import OutputError
from orchestrace.io.otel import import_values
from orchestrace.trace.check import check_trace

ROOT = Path(__file__).resolve().parents[2]


def _fixtures() -> Any:
    spec = importlib.util.spec_from_file_location(
        "_otel_fixtures", ROOT / "scripts" / "make_otel_fixtures.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Snapshots:
    """A span processor (added after the recorder) that loads the recording after every span."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: list[int] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        pass

    def _on_ending(self, span: Any) -> None:
        pass

    def on_end(self, span: Any) -> None:
        tr = load(self.path, partial=True)  # a whole recording at every moment
        assert tr.meta["partial"] is True
        assert not [p for p in check_trace(tr, partial=True) if p.severity == "error"]
        self.seen.append(tr.n_events)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def test_genai_flow_recording_loads_at_any_moment_and_equals_the_import(tmp_path: Path) -> None:
    fx = _fixtures()
    path = tmp_path / "run.jsonl"
    mem = InMemorySpanExporter()
    snaps = Snapshots(path)
    fx.run_genai_flow(
        [SimpleSpanProcessor(mem), OrchestraceSpanProcessor(path, min_interval=0), snaps]
    )
    assert len(snaps.seen) == 17 and snaps.seen == sorted(snaps.seen) and snaps.seen[0] >= 1
    live = load(path)
    assert "partial" not in live.meta
    imported = import_values([fx.otlp_json(mem.get_finished_spans())], source="x").traces
    assert [live] == imported
    assert check_trace(live) == []


@pytest.mark.slow
def test_openinference_agents_flow_equals_the_import(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    pytest.importorskip("openinference.instrumentation.openai_agents")
    fx = _fixtures()
    path = tmp_path / "run.jsonl"
    mem = InMemorySpanExporter()
    fx.run_openinference_flow([SimpleSpanProcessor(mem), OrchestraceSpanProcessor(path)])
    live = load(path)
    imported = import_values([fx.otlp_json(mem.get_finished_spans())], source="x").traces
    assert [live] == imported
    assert {e.agent for e in live.events if e.type == "llm_call"} == {
        "orchestrator",
        "researcher_a",
        "researcher_b",
        "writer",
    }


def test_exporter_with_the_sdk_processor_and_several_traces(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    provider = TracerProvider()
    mem = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(mem))
    provider.add_span_processor(SimpleSpanProcessor(OrchestraceSpanExporter(path)))
    tracer = provider.get_tracer("t")
    for name in ("a", "b"):
        with (
            tracer.start_as_current_span(
                f"invoke_agent {name}",
                attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name},
            ),
            tracer.start_as_current_span(
                "execute_tool calc",
                attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "calc"},
            ),
        ):
            pass
    mid = load_all(path)
    assert len(mid) == 2 and all(t.meta.get("partial") for t in mid)
    provider.shutdown()
    final = load_all(path)
    from orchestrace.integrations.otel import span_from_sdk
    from orchestrace.io.otel import import_spans

    assert final == import_spans([span_from_sdk(s) for s in mem.get_finished_spans()]).traces
    assert [t.events[0].agent for t in final] == ["a", "b"]


def test_open_parent_attributes_children_while_it_runs(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(OrchestraceSpanProcessor(path, min_interval=0))
    tracer = provider.get_tracer("t")
    with (
        tracer.start_as_current_span(
            "invoke_agent lead",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "lead"},
        ),
        tracer.start_as_current_span(
            "invoke_agent w",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "w"},
        ),
    ):
        with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
            pass
        tr = load(path, partial=True)
        assert [(e.type, e.agent) for e in tr.events] == [("spawn", "lead"), ("llm_call", "w")]
        assert [(d.src, d.type) for d in tr.edges] == [(tr.events[0].id, "spawn")]
    provider.shutdown()
    assert [e.type for e in load(path).events] == [
        "spawn",
        "llm_call",
        "return",
        "orchestrator_decision",
    ]


def test_existing_file_is_refused_and_a_crash_leaves_a_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text("keep me\n")
    with pytest.raises(OutputError):
        OrchestraceSpanProcessor(path)
    assert path.read_text() == "keep me\n"
    # a process killed mid-run leaves the last complete recording
    script = f"""
import os
from opentelemetry.sdk.trace import TracerProvider
from orchestrace.integrations.otel import OrchestraceSpanProcessor
p = TracerProvider()
p.add_span_processor(OrchestraceSpanProcessor({str(tmp_path / "crash.jsonl")!r}, min_interval=0))
t = p.get_tracer("t")
with t.start_as_current_span("invoke_agent lead", attributes={{"gen_ai.operation.name": "invoke_agent"}}):
    with t.start_as_current_span("chat", attributes={{"gen_ai.operation.name": "chat"}}):
        pass
    os._exit(9)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert r.returncode == 9, r.stderr
    tr = load(tmp_path / "crash.jsonl", partial=True)
    # the agent was still running: its chat is there, its stop is not
    assert tr.meta["partial"] is True and [e.type for e in tr.events] == ["llm_call"]
    assert not list(tmp_path.glob("*.tmp*"))


def test_missing_otel_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import builtins

    real = builtins.__import__

    def fake(name: str, *a: Any, **k: Any) -> Any:
        if name.startswith("opentelemetry"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ImportError, match=r"pip install 'orchestrace\[otel\]'"):
        OrchestraceSpanProcessor(tmp_path / "x.jsonl")


def test_import_orchestrace_does_not_import_opentelemetry() -> None:
    code = "import sys, orchestrace, orchestrace.io; print(any(m.startswith('opentelemetry') for m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "False"
