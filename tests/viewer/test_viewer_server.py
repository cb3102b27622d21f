"""The viewer's server: endpoints, windows, analyses, diff, overlays, live files, errors, CSP."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import numpy as np
import pytest

from orchestrace.errors import ConfigError, TraceFormatError
from orchestrace.io import StreamWriter, dump, load
from orchestrace.trace.generate import generate_trace
from orchestrace.viewer.data import TraceView
from orchestrace.viewer.diff import diff_traces

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from orchestrace.viewer.server import CSP, ViewerState, create_app


def client(*paths: Path, **kw: object) -> TestClient:
    state = ViewerState(*paths, **kw)  # type: ignore[arg-type]
    return TestClient(create_app(state), base_url="http://127.0.0.1")


@pytest.fixture(scope="module")
def gen_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("gen") / "g.json"
    dump(generate_trace(agents=6, steps=400, depth=2, seed=4), p)
    return p


def test_page_and_api_carry_the_csp(gen_path: Path) -> None:
    c = client(gen_path)
    for url in ("/", "/api/meta", "/static/viewer.js", "/api/window?t0=x"):
        r = c.get(url)
        assert r.headers["content-security-policy"] == CSP, url
        assert r.headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
    page = c.get("/").text
    assert '<script src="static/viewer.js">' in page


def test_meta_summary_and_lanes(gen_path: Path) -> None:
    tr = load(gen_path)
    meta = client(gen_path).get("/api/meta").json()
    (view,) = meta["views"]
    s = view["summary"]
    assert s["n_events"] == tr.n_events == 400
    assert s["trace_id"] == tr.trace_id
    names = {ln["name"] for ln in view["lanes"]}
    assert {e.agent for e in tr.events} <= names
    assert sum(ln["n"] for ln in view["lanes"]) == tr.n_events
    # spawn tree order: every lane's parent comes before it, one level up
    for ln in view["lanes"]:
        if ln["parent"] >= 0:
            parent = view["lanes"][ln["parent"]]
            assert parent["i"] < ln["i"] and parent["depth"] == ln["depth"] - 1
    assert meta["diff"] is False


def test_window_buckets_filters_and_counts(gen_path: Path) -> None:
    tr = load(gen_path)
    c = client(gen_path)
    s = c.get("/api/meta").json()["views"][0]["summary"]
    full = c.get(f"/api/window?t0={s['t_start']}&t1={s['t_end']}&px=100000").json()
    assert full["px"] == 20000  # capped
    lanes = {ln["name"]: ln["i"] for ln in c.get("/api/meta").json()["views"][0]["lanes"]}
    span = s["t_end"] - s["t_start"]
    keys = {
        (lanes[e.agent], min(int((e.t - s["t_start"]) / span * 20000), 19999)) for e in tr.events
    }
    assert full["total"] == 400 and len(full["idx"]) == len(keys) and sum(full["count"]) == 400
    coarse = c.get(f"/api/window?t0={s['t_start']}&t1={s['t_end']}&px=4").json()
    assert coarse["total"] == 400 and len(coarse["idx"]) < 60 and sum(coarse["count"]) == 400
    # the shown event of a bucket is its longest
    for i, n in zip(coarse["idx"], coarse["count"], strict=True):
        assert n >= 1 and tr.events[i].dur >= 0
    mid = (s["t_start"] + s["t_end"]) / 2
    half = c.get(f"/api/window?t0={s['t_start']}&t1={mid}&px=100000").json()
    expect = sum(1 for e in tr.events if e.t <= mid and e.t + e.dur >= s["t_start"])
    assert half["total"] == expect < 400
    llm = c.get(f"/api/window?t0=0&t1={s['t_end']}&px=100000&types=llm_call").json()
    assert llm["total"] == sum(e.type == "llm_call" for e in tr.events)
    one_lane = c.get(f"/api/window?t0=0&t1={s['t_end']}&px=100000&lanes=0").json()
    assert set(one_lane["lane"]) == {0}
    q = c.get(f"/api/window?t0=0&t1={s['t_end']}&px=100000&q=SEARCH").json()
    assert q["total"] == sum(
        "search"
        in " ".join([e.id, e.agent, e.type, e.tool or "", e.role or "", e.content or ""]).lower()
        for e in tr.events
    )
    assert q["total"] > 0
    assert full["edges"] is not None and len(full["edges"]["src"]) == len(tr.edges)


def test_bad_parameters_are_one_error_line(gen_path: Path) -> None:
    c = client(gen_path)
    r = c.get("/api/window?t0=abc&t1=1")
    assert r.status_code == 400
    assert r.json()["error"] == "error: parameter t0 must be a finite number (got 'abc')"
    r = c.get("/api/window?t0=5&t1=1")
    assert r.status_code == 400 and "is not a time range" in r.json()["error"]
    r = c.get("/api/event?i=nope")
    assert r.status_code == 400
    assert r.json()["error"].startswith("error: no event 'nope' in trace")
    assert c.get("/api/diff").json()["error"].startswith("error: no second trace to compare")
    assert c.get("/api/window?v=b").status_code == 400
    r = c.get("/api/overlay?kind=credit:magic")
    assert r.status_code == 400 and "unknown overlay" in r.json()["error"]


def test_other_hosts_are_refused(gen_path: Path) -> None:
    state = ViewerState(gen_path)
    c = TestClient(create_app(state), base_url="http://attacker.example")
    assert c.get("/api/meta").status_code == 400


def test_event_detail_edges_and_critical_path(gen_path: Path) -> None:
    tr = load(gen_path)
    c = client(gen_path)
    cp = c.get("/api/critical").json()
    ref = tr.graph.critical_path()
    assert cp["idx"] == list(ref.indices)
    assert cp["length"] == pytest.approx(ref.length)
    assert cp["work"] == pytest.approx(sum(e.dur for e in tr.events))
    assert cp["speedup"] == pytest.approx(cp["work"] / ref.length)
    assert cp["critical_steps"] == tr.graph.critical_steps()
    i = ref.indices[len(ref.indices) // 2]
    ev = c.get(f"/api/event?i={i}").json()
    e = tr.events[i]
    assert (ev["id"], ev["type"], ev["agent"], ev["t"]) == (e.id, e.type, e.agent, e.t)
    assert ev["on_critical_path"] is True
    assert {x["id"] for x in ev["in"]} == {d.src for d in tr.edges if d.dst == e.id}
    assert {x["id"] for x in ev["out"]} == {d.dst for d in tr.edges if d.src == e.id}
    assert c.get(f"/api/event?id={e.id}").json()["idx"] == i


def test_huge_content_is_paged(hostile_path: Path) -> None:
    c = client(hostile_path)
    ev = c.get("/api/event?i=10").json()
    assert ev["content_length"] == 10**7 + len("<script>window.__pwned = 1; alert('x')</script>")
    assert len(ev["content"]) == 65536
    more = c.get("/api/event?i=10&offset=9999990").json()
    assert more["content"].startswith("A" * 10) and more["content"].endswith("</script>")


def test_graph_agents_and_events(gen_path: Path) -> None:
    c = client(gen_path)
    g = c.get("/api/graph?mode=agents").json()
    assert len(g["nodes"]) == len(c.get("/api/meta").json()["views"][0]["lanes"])
    assert any(e["type"] == "spawn" for e in g["edges"])
    assert any(e["critical"] for e in g["edges"])
    ge = c.get("/api/graph?mode=events&limit=50").json()
    assert len(ge["nodes"]) == 50 and ge["total"] == 400
    ids = {n["idx"] for n in ge["nodes"]}
    assert all(e["src"] in ids and e["dst"] in ids for e in ge["edges"])


def test_fork_diff_marks_the_changes(debate_pair: tuple[Path, Path]) -> None:
    a, b = debate_pair
    c = client(a, b)
    d = c.get("/api/diff").json()
    orig, forked = load(a), load(b)
    # the dropped message disappears; messages of the others change
    assert d["counts"]["disappeared"] == orig.n_events - forked.n_events + d["counts"]["appeared"]
    assert d["counts"]["disappeared"] >= 1 and d["counts"]["changed"] >= 1
    gone = [
        orig.events[i]
        for i, s in zip(d["side_a"]["idx"], d["side_a"]["status"], strict=True)
        if d["statuses"][s] == "disappeared"
    ]
    assert any(e.type == "message" for e in gone)
    ev = c.get(f"/api/event?v=a&i={d['side_a']['idx'][0]}").json()
    assert ev["diff"]["status"] != "same"
    s = c.get("/api/meta").json()["views"][0]["summary"]
    ghosts = c.get(f"/api/window?v=a&t0=0&t1={s['t_end'] + 1}&px=100000&subset=disappeared").json()
    assert ghosts["total"] == d["counts"]["disappeared"]


def _edit(tr, drop: int | None = None, change: int | None = None):  # type: ignore[no-untyped-def]
    events = list(tr.events)
    if change is not None:
        events[change] = msgspec.structs.replace(events[change], content="changed text")
    if drop is not None:
        gone = events.pop(drop).id
        edges = tuple(e for e in tr.edges if gone not in (e.src, e.dst))
        return tr.replace(events=tuple(events), edges=edges)
    return tr.replace(events=tuple(events))


def test_diff_is_exact_on_edited_traces() -> None:
    tr = generate_trace(agents=4, steps=80, seed=7)
    va = TraceView(tr, source="a")
    d = diff_traces(va, TraceView(_edit(tr, change=30), source="b"))
    assert d["counts"] == {"same": 79, "retimed": 0, "changed": 1, "appeared": 0, "disappeared": 0}
    assert d["side_b"]["idx"] == [30] and d["side_b"]["fields"] == [["content"]]
    # one event dropped: nothing after it is shifted onto the wrong partner
    d = diff_traces(va, TraceView(_edit(tr, drop=40), source="b"))
    assert d["counts"]["disappeared"] == 1 and d["counts"]["changed"] == 0
    assert d["side_a"]["idx"] == [40]
    # and one added
    d = diff_traces(TraceView(_edit(tr, drop=40), source="a"), va)
    assert d["counts"]["appeared"] == 1 and d["side_b"]["idx"] == [40]


def test_markers_show_safety_events_and_failures(tmp_path: Path) -> None:
    from orchestrace.runtime import run

    tr = run("critic_loop", "arith", agents=3, seed=1).trace
    events = list(tr.events)
    events[3] = msgspec.structs.replace(events[3], type="safety_event", content="injection")
    p = tmp_path / "s.json"
    dump(tr.replace(events=tuple(events)), p)
    m = client(p).get("/api/markers").json()
    kinds = {it["kind"] for it in m["items"]}
    assert "safety" in kinds and "failure" in kinds
    assert any("incorrect_verification" in it["label"] for it in m["items"])


def test_overlays_from_a_credit_file_and_computed(
    tmp_path: Path, debate_pair: tuple[Path, Path]
) -> None:
    from orchestrace.credit import make_assigner

    a, _ = debate_pair
    tr = load(a)
    table = make_assigner("uniform").assign(tr, "agent", reward=1.0)
    credit = tmp_path / "credit.jsonl"
    credit.write_text(table.to_json() + "\n")
    c = client(a, credit=credit)
    meta = c.get("/api/meta").json()
    assert meta["overlays"][0] == "credit:file"
    ov = c.get("/api/overlay?kind=credit:file").json()
    assert ov["unit"] == "agent" and ov["n"] > 0
    s = meta["views"][0]["summary"]
    w = c.get(f"/api/window?t0=0&t1={s['t_end']}&px=100000&overlay=credit:file").json()
    by_agent = table.by_unit("agent")
    for i, v in zip(w["idx"], w["value"], strict=True):
        agent = tr.events[i].agent
        if agent in by_agent:
            assert v == pytest.approx(by_agent[agent])
    uni = c.get("/api/overlay?kind=credit:discounted&unit=message").json()
    assert uni["unit"] == "message" and uni["n"] > 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"unit": "agent", "id": "x", "value": 1}\nnot json\n')
    with pytest.raises(ConfigError, match=r"bad.jsonl:2: not a credit row"):
        ViewerState(a, credit=bad)
    nan = tmp_path / "nan.jsonl"
    nan.write_text('{"unit": "agent", "id": "a0", "value": null}\n')  # credit --json's NaN
    with pytest.raises(ConfigError, match=r"nan.jsonl:1: the credit of .* is not a finite number"):
        ViewerState(a, credit=nan)
    other = tmp_path / "other.jsonl"
    other.write_text('{"unit": "agent", "id": "nobody", "value": 1}\n')
    with pytest.raises(ConfigError, match="none of its 1 rows names a unit of trace"):
        ViewerState(a, credit=other)


def test_a_recording_being_written_is_read_again(tmp_path: Path) -> None:
    tr = generate_trace(agents=3, steps=30, seed=0)
    p = tmp_path / "live.jsonl"
    w = StreamWriter(p, trace_id=tr.trace_id, task_id=tr.task_id)
    for e in tr.events[:10]:
        w.event(e)
    c = client(p)
    assert c.get("/api/meta").json()["views"][0]["summary"]["n_events"] == 10
    v0 = c.get("/api/version").json()["version"]
    for e in tr.events[10:]:
        w.event(e)
    for e in tr.edges:
        w.edge(e)
    w.close(costs=tr.costs)
    v1 = c.get("/api/version").json()
    assert v1["version"] == v0 + 1 and v1["error"] is None
    assert c.get("/api/meta").json()["views"][0]["summary"]["n_events"] == 30
    # a damaged file: the last good version stays, the error line is reported
    with open(p, "ab") as fh:
        fh.write(b'{"event": {"id": 5}}\n')
    v2 = c.get("/api/version").json()
    assert v2["version"] == v1["version"]
    assert v2["error"].startswith("error: ") and str(p) in v2["error"]
    assert c.get("/api/meta").json()["views"][0]["summary"]["n_events"] == 30


def test_unreadable_files_raise_the_cli_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"trace_id": ')
    with pytest.raises(TraceFormatError, match=r"bad\.json"):
        ViewerState(bad)
    with pytest.raises(ConfigError, match="--trace-id takes one of"):
        ViewerState(_two(tmp_path), trace_id="nope")


def _two(tmp_path: Path) -> Path:
    p = tmp_path / "two.jsonl"
    dump([generate_trace(agents=2, steps=10, seed=s) for s in (1, 2)], p)
    return p


def test_several_traces_show_the_first_with_a_note(tmp_path: Path) -> None:
    p = _two(tmp_path)
    meta = client(p).get("/api/meta").json()
    assert "holds 2 traces; showing the first" in meta["views"][0]["summary"]["note"]
    second = generate_trace(agents=2, steps=10, seed=2).trace_id
    meta = client(p, trace_id=second).get("/api/meta").json()
    assert meta["views"][0]["summary"]["trace_id"] == second


def test_window_on_a_parquet_dataset_matches_json(tmp_path: Path) -> None:
    tr = generate_trace(agents=5, steps=200, seed=9)
    dump(tr, tmp_path / "t.parquet")
    dump(tr, tmp_path / "t.json")
    wa = client(tmp_path / "t.parquet").get("/api/window?t0=0&t1=1e9&px=300").json()
    wb = client(tmp_path / "t.json").get("/api/window?t0=0&t1=1e9&px=300").json()
    assert wa == wb
    assert json.dumps(wa)  # JSON-ready
    assert np.isfinite(wa["t"]).all()


@pytest.mark.parametrize("fmt", ["upstream", "jsonl"])
def test_survey_schema_and_jsonl_traces_display(tmp_path: Path, fmt: str) -> None:
    tr = generate_trace(agents=4, steps=50, seed=11)
    p = tmp_path / ("t.json" if fmt == "upstream" else "t.jsonl")
    dump(tr, p, format=fmt)
    c = client(p)
    s = c.get("/api/meta").json()["views"][0]["summary"]
    assert s["n_events"] == 50
    assert c.get(f"/api/window?t0=0&t1={s['t_end']}&px=100000").json()["total"] == 50
    assert c.get("/api/critical").json()["length"] == pytest.approx(tr.graph.critical_path().length)


def test_imported_otel_traces_display(tmp_path: Path) -> None:
    from orchestrace.io import export_bytes

    tr = generate_trace(agents=3, steps=30, seed=0)
    p = tmp_path / "spans.json"
    p.write_bytes(export_bytes([tr], format="otlp"))
    for kw in ({}, {"format": "otel"}):
        s = client(p, **kw).get("/api/meta").json()["views"][0]["summary"]
        assert s["n_events"] == 30


def test_a_busy_port_is_one_error(tmp_path: Path, gen_path: Path) -> None:
    import socket

    from orchestrace.viewer.server import serve

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"--port {port}: cannot listen on 127.0.0.1:{port}"):
            serve(ViewerState(gen_path), port=port)


def test_roles_and_agent_count_are_those_analyze_gives() -> None:
    from orchestrace.runtime import run
    from orchestrace.trace.analyze import summarize

    tr = run("debate", "arith", agents=3, seed=1, task_size=16).trace
    v = TraceView(tr, source="debate")
    by_role: dict[str, int] = {}
    for ln in v.lanes:
        if ln["role"] != "tool":
            by_role[ln["role"]] = by_role.get(ln["role"], 0) + 1
    a = summarize(tr)
    assert by_role == a["agents_by_role"]
    # the spawns carry the children's role: the spawner keeps its own (none here)
    assert next(ln["role"] for ln in v.lanes if ln["name"] == "orchestrator") == "unknown"
    assert v.summary()["n_agents"] == a["agents"]


def test_agent_count_leaves_tools_out() -> None:
    tr = generate_trace(agents=50, steps=400, seed=2)
    v = TraceView(tr, source="g")
    tools = [ln for ln in v.lanes if ln["role"] == "tool"]
    assert tools, "the generated trace has tools"
    agents = int(re.search(r"agents=(\d+)", repr(tr)).group(1))  # type: ignore[union-attr]
    assert v.summary()["n_agents"] == agents == 50
    assert v.summary()["n_lanes"] == agents + len(tools)
