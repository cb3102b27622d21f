"""OTLP export: valid for the real OTel protobuf, GenAI attributes, exact round trip."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrace.io import dump, import_path, load
from orchestrace.io.otel import import_values
from orchestrace.io.otlp import BASE_UNIX_NANO, export_bytes
from orchestrace.trace.generate import generate_trace
from orchestrace.trace.model import Edge, Event, Trace

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "otel"


def roundtrip(traces: list[Trace]) -> list[Trace]:
    return import_values([msgspec.json.decode(export_bytes(traces))], source="x.json").traces


def attrs_of(span: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for a in span["attributes"]:
        v = a["value"]
        out[a["key"]] = next(iter(v.values()))
    return out


@pytest.mark.parametrize(
    ("agents", "steps", "depth", "seed", "llm"),
    [(1, 5, 0, 0, True), (4, 60, 1, 1, True), (12, 400, 3, 2, True), (6, 80, 2, 3, False)],
)
def test_roundtrip_generated(agents: int, steps: int, depth: int, seed: int, llm: bool) -> None:
    tr = generate_trace(agents, steps, depth, seed, llm_events=llm)
    (back,) = roundtrip([tr])
    assert back == tr


def test_roundtrip_several_traces_and_a_file(tmp_path: Path) -> None:
    trs = [generate_trace(3, 30, 1, s) for s in range(3)]
    assert roundtrip(trs) == trs
    path = tmp_path / "t.otlp.json"
    dump(trs[0], path, format="otlp")
    assert import_path(path).traces == [trs[0]]  # recognised by structure
    assert load(path, format="otel") == trs[0]


@pytest.mark.slow
def test_roundtrip_runtime_recorded(tmp_path: Path) -> None:
    from orchestrace.runtime import run

    for topology in ("centralized", "debate", "hierarchical"):
        tr = run(topology, "arith", agents=3, seed=1).trace
        (back,) = roundtrip([tr])
        assert back == tr, topology
    out = tmp_path / "run.jsonl"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrace",
            "run",
            "swarm",
            "-k",
            "3",
            "-o",
            str(out),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    rec = load(out)
    assert roundtrip([rec]) == [rec]


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_opt_text = st.none() | st.text(max_size=12)
_nonneg = st.floats(min_value=0, max_value=1e9, allow_nan=False)


@st.composite
def traces(draw: Any) -> Trace:
    n = draw(st.integers(1, 8))
    events = []
    for i in range(n):
        events.append(
            Event(
                id=draw(st.sampled_from([f"e{i}", f"ev {i} ü", f"{i}.x"])),
                t=draw(_nonneg),
                type=draw(
                    st.sampled_from(
                        [
                            "spawn",
                            "message",
                            "llm_call",
                            "tool_call",
                            "tool_result",
                            "return",
                            "safety_event",
                        ]
                    )
                ),
                agent=draw(st.text(min_size=1, max_size=6)),
                dur=draw(_nonneg),
                role=draw(_opt_text),
                from_=draw(_opt_text),
                to=draw(_opt_text),
                tool=draw(_opt_text),
                decision=draw(st.none() | st.sampled_from(["spawn", "delegate", "stop"])),
                step=draw(st.none() | st.integers(0, 2**63 - 1)),
                content=draw(_opt_text),
                content_ref=draw(_opt_text),
                trusted=draw(st.none() | st.booleans()),
                tokens_in=draw(st.integers(0, 2**63 - 1)),
                tokens_out=draw(st.integers(0, 10**6)),
                cost=draw(_nonneg),
                error=draw(_opt_text),
                attrs=draw(st.none() | st.dictionaries(st.text(max_size=4), _json, max_size=3)),
            )
        )
    ids = [e.id for e in events] + ["gone"]
    edges = draw(
        st.lists(
            st.builds(
                Edge,
                st.sampled_from(ids),
                st.sampled_from(ids),
                st.sampled_from(["causal", "spawn", "return", "aggregate", "message"]),
            ),
            max_size=6,
        )
    )
    return Trace(
        trace_id=draw(st.text(min_size=1, max_size=8)),
        task_id=draw(st.text(min_size=1, max_size=8)),
        events=tuple(events),
        edges=tuple(edges),
        rewards=draw(
            st.dictionaries(st.text(max_size=4), st.floats(allow_nan=False, allow_infinity=False))
        ),
        costs=draw(st.dictionaries(st.text(max_size=4), _nonneg, max_size=3)),
        system=draw(_opt_text),
        topology=draw(st.none() | st.sampled_from(["debate", "swarm", "unknown"])),
        metrics=draw(st.dictionaries(st.text(max_size=4), _nonneg, max_size=2)),
        meta=draw(st.dictionaries(st.text(max_size=4), _json, max_size=3)),
    )


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(traces(), min_size=1, max_size=3))
def test_roundtrip_any_trace(trs: list[Trace]) -> None:
    back = roundtrip(trs)
    assert back == trs
    # explicit nulls and empty objects inside attrs and meta survive too
    enc = msgspec.json.encode
    assert [enc([e.attrs for e in t.events]) for t in back] == [
        enc([e.attrs for e in t.events]) for t in trs
    ]
    assert [enc(t.meta) for t in back] == [enc(t.meta) for t in trs]


def test_valid_for_the_otel_protobuf() -> None:
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    tr = generate_trace(5, 80, 2, 4)
    data = json.loads(export_bytes([tr]))

    def to_b64(node: Any) -> None:  # OTLP/JSON writes ids in hex, protobuf JSON in base64
        if isinstance(node, dict):
            for k in ("traceId", "spanId", "parentSpanId"):
                if k in node:
                    node[k] = base64.b64encode(bytes.fromhex(node[k])).decode()
            for v in node.values():
                to_b64(v)
        elif isinstance(node, list):
            for v in node:
                to_b64(v)

    to_b64(data)
    msg = json_format.Parse(json.dumps(data), ExportTraceServiceRequest())
    spans = msg.resource_spans[0].scope_spans[0].spans
    assert len(spans) == tr.n_events
    assert all(len(s.trace_id) == 16 and len(s.span_id) == 8 for s in spans)
    assert msg.resource_spans[0].scope_spans[0].scope.name == "orchestrace"
    first = spans[0]
    assert first.start_time_unix_nano == BASE_UNIX_NANO + round(tr.events[0].t * 1e9)
    assert first.kind == 1  # SPAN_KIND_INTERNAL
    n_links = sum(len(s.links) for s in spans)
    assert n_links == len(tr.edges)
    # the file as written (hex ids) parses too
    json_format.Parse(export_bytes([tr]), ExportTraceServiceRequest())


def test_genai_semconv_attributes() -> None:
    tr = generate_trace(4, 40, 1, 0)
    doc = json.loads(export_bytes([tr]))
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    res = {a["key"]: a["value"] for a in doc["resourceSpans"][0]["resource"]["attributes"]}
    assert res["service.name"] == {"stringValue": "orchestrace.generate"}
    by_id = {attrs_of(s)["orchestrace.event.id"]: s for s in spans}
    for e in tr.events:
        s = by_id[e.id]
        a = attrs_of(s)
        if e.type == "llm_call":
            assert a["gen_ai.operation.name"] == "chat" and s["name"] == f"chat {e.tool}"
            assert a["gen_ai.request.model"] == e.tool
            assert int(a["gen_ai.usage.input_tokens"]) == e.tokens_in
            assert int(a["gen_ai.usage.output_tokens"]) == e.tokens_out
            assert a["gen_ai.agent.name"] == e.agent
        elif e.type == "tool_call":
            assert a["gen_ai.operation.name"] == "execute_tool"
            assert a["gen_ai.tool.name"] == e.tool
        elif e.type == "spawn":
            assert a["gen_ai.operation.name"] == "invoke_agent"
            assert a["gen_ai.agent.name"] == e.to
        assert int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"]) == round(e.dur * 1e9)
    # a worker's events hang below the spawn that started it
    spawn = next(e for e in tr.events if e.type == "spawn")
    child = next(e for e in tr.events if e.agent == spawn.to)
    assert by_id[child.id]["parentSpanId"] == by_id[spawn.id]["spanId"]


def test_export_of_an_import_keeps_the_original_clock() -> None:
    tr = import_path(FIX / "genai_otlp.json").traces[0]
    doc = json.loads(export_bytes([tr]))
    first = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert int(first["startTimeUnixNano"]) == 1_750_000_000 * 10**9
    assert roundtrip([tr]) == [tr]


def test_cli_convert_to_otlp_and_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from orchestrace.cli import main

    src = tmp_path / "t.json"
    tr = generate_trace(4, 50, 1, 5)
    dump(tr, src)

    def cli(*args: str) -> tuple[int, str]:
        code = main(list(args))
        return code, capsys.readouterr().err

    code, err = cli("convert", str(src), "--to", "otlp", "-o", str(tmp_path / "t.otlp"))
    assert code == 0, err
    code, err = cli(
        "convert", str(tmp_path / "t.otlp"), "--from", "otel", "-o", str(tmp_path / "b.json")
    )
    assert code == 0, err
    assert "imported 1 trace(s)" in err
    assert load(tmp_path / "b.json") == tr
    code, err = cli(
        "convert", str(FIX / "genai_otlp.json"), "--from", "otel", "-o", str(tmp_path / "g.jsonl")
    )
    assert code == 0, err
    assert load(tmp_path / "g.jsonl").n_events == 24


def test_edited_orchestrace_attributes_are_one_line_error() -> None:
    from orchestrace.errors import TraceFormatError

    doc = json.loads(export_bytes([generate_trace(2, 10, 1, 0)]))
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for a in span["attributes"]:
        if a["key"] == "orchestrace.event.type":
            a["value"] = {"stringValue": "teleport"}
    with pytest.raises(TraceFormatError) as err:
        import_values([doc], source="x.json")
    msg = str(err.value)
    assert "\n" not in msg and "spans[0]" in msg and "teleport" in msg


@pytest.mark.parametrize(
    ("where", "key", "value"),
    [
        ("resource", "orchestrace.meta", {"stringValue": "{not json"}),
        ("resource", "orchestrace.trace_id", {"intValue": "5"}),
        ("span", "orchestrace.event.attrs", {"intValue": "5"}),
        ("span", "orchestrace.event.t", {"doubleValue": -1.0}),
    ],
)
def test_damaged_export_is_one_line_error(where: str, key: str, value: dict[str, Any]) -> None:
    from orchestrace.errors import TraceFormatError

    doc = json.loads(export_bytes([generate_trace(2, 10, 1, 0)]))
    rs = doc["resourceSpans"][0]
    attrs = (
        rs["resource"]["attributes"]
        if where == "resource"
        else rs["scopeSpans"][0]["spans"][1]["attributes"]
    )
    attrs[:] = [a for a in attrs if a["key"] != key] + [{"key": key, "value": value}]
    with pytest.raises(TraceFormatError) as err:
        import_values([doc], source="x.json")
    assert "\n" not in str(err.value) and "re-export" in str(err.value)
