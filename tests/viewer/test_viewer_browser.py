"""The viewer in a real browser (Playwright driving Chromium): it loads traces, draws lanes and the
critical path, inspects events, marks a fork's changes, never runs a trace's strings, follows a
recording as it is written, and draws a 100,000-event trace's first view within a budget.

Screenshots go to $ORCHESTRACE_TEST_ARTIFACTS/viewer when it is set.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from orchestrace.io import StreamWriter, dump, load
from orchestrace.trace.generate import generate_trace

if os.environ.get("ORCHESTRACE_REQUIRE_BROWSER") == "1":
    import playwright.sync_api  # noqa: F401  (required: fail rather than skip)
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
pytest.importorskip("playwright.sync_api", reason="the browser tests need playwright")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from playwright.sync_api import sync_playwright
from viewer_browser import (
    HOSTILE,
    answered,
    canvas_pixels,
    hex_colour,
    hold_back,
    keep_screenshot,
    launch,
    open_page,
    state,
    viewer,
    wait_for,
)

#: Time from navigation to the first drawn view of a 100,000-event trace, on a 2-core CI
#: machine (measured about 1.5 s there; the budget leaves room for a loaded machine).
FIRST_RENDER_BUDGET_S = 10.0


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_playwright() as pw:
        b = launch(pw)
        yield b
        b.close()


@pytest.fixture(autouse=True)
def _close_pages(browser: Any) -> Iterator[None]:
    """Each test's pages close after it: an open page keeps polling its (stopped) viewer."""
    yield
    for context in browser.contexts:
        context.close()


@pytest.fixture(scope="module")
def debate_url(debate_pair: tuple[Path, Path]) -> Iterator[str]:
    """One ``orchestrace view`` of the recorded debate, shared by the tests that only read it
    (each opens its own page: the filters, zoom and selection live in the page)."""
    with viewer(debate_pair[0]) as url:
        yield url


@pytest.mark.slow
def test_page_loads_a_trace_with_lanes_and_critical_path(
    browser: Any, debate_pair: tuple[Path, Path], debate_url: str, tmp_path: Path
) -> None:
    a, _ = debate_pair
    tr = load(a)
    page = open_page(browser, debate_url)
    wait_for(page, lambda: state(page, "s.graph && s.graph.nodes > 0"), what="the graph")
    wait_for(page, lambda: state(page, "s.criticalPath.shown > 0"), what="the critical path")
    s = state(page)
    agents = {e.agent for e in tr.events}
    assert {ln["name"] for ln in s["lanes"]} >= agents
    assert len(s["rows"]) == len(s["lanes"])
    assert s["summary"]["n_events"] == tr.n_events
    assert 0 < s["visibleEvents"] <= tr.n_events
    cp = tr.graph.critical_path()
    assert s["criticalPath"]["idx"] == list(cp.indices)
    assert s["criticalPath"]["shown"] > 0
    assert s["criticalPath"]["critical_steps"] == tr.graph.critical_steps()
    assert page.locator("#cp-speedup").inner_text().endswith("\u00d7")
    assert page.locator("svg.graph-svg g.g-node").count() == s["graph"]["nodes"]
    assert page.locator("svg.graph-svg g.g-node.critical").count() > 0
    assert page.locator("svg.graph-svg path.g-edge.critical").count() > 0
    # collapse the root: its subtree folds into one row
    page.evaluate("window.__orchestrace.toggleRow(0)")
    wait_for(page, lambda: len(state(page, "s.rows")) == 1, what="the collapsed tree")
    page.evaluate("window.__orchestrace.toggleRow(0)")
    page.evaluate("window.__orchestrace.setGroupBy('role')")
    wait_for(page, lambda: state(page, "s.rows[0].kind") == "group", what="role groups")
    page.evaluate("window.__orchestrace.setGroupBy('tree')")
    # filters: by agent name, by role, by event type
    page.locator("#filter-agent").fill("debater1")
    wait_for(page, lambda: [r["label"] for r in state(page, "s.rows")] == ["debater1"])
    page.locator("#filter-agent").fill("")
    page.locator("#filter-role").select_option("judge")
    wait_for(page, lambda: [r["label"] for r in state(page, "s.rows")] == ["judge1"])
    page.locator("#filter-role").select_option("")
    page.evaluate("window.__orchestrace.setFilter({types: ['llm_call']})")
    n_llm = sum(e.type == "llm_call" for e in tr.events)
    wait_for(page, lambda: state(page, "s.windowTotal") == n_llm, what="the type filter")
    page.evaluate("window.__orchestrace.setFilter({types: null})")
    wait_for(page, lambda: state(page, "s.windowTotal") == tr.n_events, what="all events")
    # a credit overlay computed on request: a colour scale over the agents' events
    page.evaluate("window.__orchestrace.setOverlay('credit:uniform', 'agent')")
    ov = wait_for(page, lambda: state(page, "s.overlay"), what="the overlay")
    assert ov["n"] == tr.n_events and ov["label"] == "credit (agent, uniform)"
    assert page.locator("#legend .scale .cell").count() == 11
    keep_screenshot(page, "debate.png")
    assert not page.errors


@pytest.mark.slow
def test_inspector_shows_the_clicked_event(
    browser: Any, debate_pair: tuple[Path, Path], debate_url: str, tmp_path: Path
) -> None:
    a, _ = debate_pair
    tr = load(a)
    page = open_page(browser, debate_url)
    idx = next(i for i, e in enumerate(tr.events) if e.type == "llm_call")
    # show only this event's agent and the first seconds, then click its bar
    e = tr.events[idx]
    page.evaluate(f"window.__orchestrace.zoomTo({e.t - 0.5}, {e.t + e.dur + 0.5})")
    span = e.dur + 1.0
    wait_for(page, lambda: state(page, "s.window[1] - s.window[0]") < span * 1.01, what="zoom")
    page.wait_for_timeout(300)  # the window for the new range arrives and is drawn
    pos = wait_for(
        page, lambda: page.evaluate(f"window.__orchestrace.locate('a', {idx})"), what="the bar"
    )
    page.mouse.click(pos["x"], pos["y"])
    sel = wait_for(page, lambda: state(page, "s.selected"), what="a selection")
    picked = tr.events[sel["idx"]]
    text = page.locator("#inspector").inner_text()
    for value in (picked.id, picked.type, picked.agent):
        assert value in text
    assert "incoming edges" in text and "outgoing edges" in text
    assert "tokens" in text
    keep_screenshot(page, "inspector.png")


#: The fork diff's colours (viewer-frontend/src/util.js DIFF_COLOURS).
DIFF = {"changed": "#f08c00", "appeared": "#2b8a3e", "disappeared": "#e03131", "retimed": "#74c0fc"}


def _graph_strokes(page: Any) -> dict[str, list[str]]:
    """The computed colour of every drawn graph node's diff ring ("none": no ring), by its
    diff class."""
    return page.evaluate(
        """() => {
            const out = {};
            for (const g of document.querySelectorAll("svg.graph-svg g.g-node")) {
                const st = [...g.classList].find((c) => c.startsWith("diff-")) || "none";
                const ring = g.querySelector("rect.g-diff");
                (out[st] = out[st] || []).push(ring ? getComputedStyle(ring).stroke : "none");
            }
            return out;
        }"""
    )


def _rgb(c: str) -> str:
    r, g, b = hex_colour(c)
    return f"rgb({r}, {g}, {b})"


@pytest.mark.slow
def test_fork_diff_draws_changed_retimed_and_disappeared_events(
    browser: Any, debate_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = debate_pair
    with viewer(a, b) as url:
        page = open_page(browser, url)
        # a paint can come before every layer of the merged window has arrived: wait until the
        # marks and the ghosts (what the fork lost) are both drawn; a view without ghosts times out
        wait_for(
            page,
            lambda: state(page, "s.diff && s.diff.marked > 0 && s.diff.ghosts > 0"),
            what="diff marks and ghosts",
        )
        d = state(page, "s.diff")
        counts = d["counts"]
        assert counts["changed"] >= 1 and counts["disappeared"] >= 1 and counts["retimed"] >= 1
        assert d["ghosts"] >= 1  # what the fork lost is drawn in the merged view
        bar = page.locator("#diff-bar").inner_text()
        assert f"changed {counts['changed']}" in bar
        # what the canvas shows: orange outlines (changed), light-blue ones (retimed), dashed
        # red ghosts (disappeared)
        # the canvas is drawn on the next frames: poll what it shows
        px = _drawn(page, lambda px: px["changed"] > 20 and px["retimed"] > 20)
        assert px["changed"] > 20, px
        assert px["retimed"] > 20, px
        assert px["disappeared"] > 5, px
        # the graph: outlines by status, the lost events as dashed ghosts
        wait_for(page, lambda: state(page, "s.graph && s.graph.nodes > 0"), what="the graph")
        wait_for(page, lambda: state(page, "s.graph.ghosts") >= 1, what="graph ghosts")
        strokes = _graph_strokes(page)
        for status in ("changed", "retimed", "disappeared"):
            assert strokes.get("diff-" + status), (status, strokes)
            assert set(strokes["diff-" + status]) == {_rgb(DIFF[status])}, (status, strokes)
        assert set(strokes.get("none", [])) <= {"none"}, strokes
        # inspect a changed event of the fork
        changed = page.evaluate(
            "fetch('/api/diff').then(r => r.json()).then(d => d.side_b.idx.find((i, k) => "
            "d.statuses[d.side_b.status[k]] === 'changed'))"
        )
        page.evaluate(f"window.__orchestrace.select('b', {changed})")
        wait_for(page, lambda: state(page, "s.selected && s.selected.idx") == changed)
        assert page.locator("#inspector .diff-box").inner_text().startswith("changed")
        keep_screenshot(page, "fork-diff.png")
        # "original only" and fit: the original's time range, its changes still outlined
        page.evaluate("window.__orchestrace.setDiffMode('a')")
        wait_for(
            page, lambda: state(page, "s.diff.mode") == "a" and state(page, "s.diff.marked") > 0
        )
        assert _drawn(page, lambda px: px["changed"] > 20)["changed"] > 20
        assert not page.errors and not page.console_errors, page.console_errors


@pytest.mark.slow
def test_fork_diff_draws_appeared_events(
    browser: Any, debate_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = debate_pair  # the other way round: the message the fork dropped appears
    with viewer(b, a) as url:
        page = open_page(browser, url)
        wait_for(page, lambda: state(page, "s.diff && s.diff.marked > 0"), what="diff marks")
        assert state(page, "s.diff.counts.appeared") >= 1
        assert _drawn(page, lambda px: px["appeared"] > 20)["appeared"] > 20
        wait_for(page, lambda: state(page, "s.graph && s.graph.nodes > 0"), what="the graph")
        strokes = _graph_strokes(page)
        assert set(strokes.get("diff-appeared", [])) == {_rgb(DIFF["appeared"])}, strokes
        assert not page.errors and not page.console_errors, page.console_errors


def _shift(path: Path, out: Path, by: float) -> Path:
    tr = load(path)
    events = tuple(msgspec.structs.replace(e, t=e.t + by) for e in tr.events)
    dump(tr.replace(events=events), out)
    return out


@pytest.mark.slow
def test_fit_shows_the_trace_the_diff_mode_shows(
    browser: Any, debate_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    a, _ = debate_pair
    ta = load(a)
    a_end = max(e.t + e.dur for e in ta.events)
    late = _shift(a, tmp_path / "late.json", by=10 * a_end)  # a "fork" far later in time
    tb = load(late)
    with viewer(a, late) as url:
        page = open_page(browser, url)
        for mode, tr in (("a", ta), ("b", tb)):
            page.evaluate(f"window.__orchestrace.setDiffMode('{mode}')")
            page.locator("#fit").click()
            t0, t1 = min(e.t for e in tr.events), max(e.t + e.dur for e in tr.events)
            span = t1 - t0
            wait_for(
                page,
                lambda t0=t0, t1=t1, span=span: (
                    abs(state(page, "s.window[0]") - t0) < 0.05 * span
                    and abs(state(page, "s.window[1]") - t1) < 0.05 * span
                ),
                what=f"the fit to {mode}",
            )
            # every event of the shown trace is in view, and bars are drawn
            wait_for(page, lambda tr=tr: state(page, "s.windowTotal") == tr.n_events, what="all")
            wait_for(page, lambda: state(page, "s.visibleEvents") > 0, what="bars")
        assert not page.errors and not page.console_errors, page.console_errors


@pytest.mark.slow
def test_an_empty_graph_draws_a_note_and_logs_no_error(
    browser: Any, debate_url: str, tmp_path: Path
) -> None:
    page = open_page(browser, debate_url)
    wait_for(page, lambda: state(page, "s.graph && s.graph.nodes > 0"), what="the graph")
    page.locator("#search").fill("no-such-text-anywhere-0x9f")
    wait_for(page, lambda: state(page, "s.filters.q") == "no-such-text-anywhere-0x9f")
    wait_for(page, lambda: state(page, "s.graph && s.graph.nodes === 0"), what="no nodes")
    note = page.locator("svg.graph-svg text.g-empty")
    assert note.count() == 1 and "no events" in (note.text_content() or "")
    page.locator("#search").fill("")
    wait_for(page, lambda: state(page, "s.filters.q") == "")
    wait_for(page, lambda: state(page, "s.graph.nodes") > 0, what="the graph again")
    # an event type the trace does not have, in the events graph
    page.evaluate("window.__orchestrace.setGraphMode('events')")
    page.evaluate("window.__orchestrace.setFilter({types: ['human_intervention']})")
    wait_for(page, lambda: state(page, "s.graph && s.graph.nodes === 0"), what="no nodes")
    page.wait_for_timeout(400)
    assert not page.errors and not page.console_errors, page.console_errors


def test_late_answers_do_not_replace_what_was_asked_for_since(
    browser: Any, debate_url: str
) -> None:
    """The graph, the selected event and the colour overlay are each asked for again as the
    user acts. An answer to an earlier request that arrives late (held back 600 ms here) does
    not replace the one asked for since."""
    page = open_page(browser, debate_url)
    wait_for(page, lambda: state(page, "s.graph && s.graph.nodes > 0"), what="the graph")
    hold_back(page, 600)

    def settled() -> None:
        page.wait_for_timeout(50)
        answered(page)
        page.wait_for_timeout(50)

    # the events graph answered after the agents graph was chosen
    page.evaluate(
        "window.__slow = /api[/]graph.*mode=events/;"
        "window.__orchestrace.setGraphMode('events'); window.__orchestrace.setGraphMode('agents')"
    )
    wait_for(page, lambda: state(page, "s.graph.mode === 'agents'"), what="the agents graph")
    settled()
    assert state(page, "s.graph.mode") == "agents"
    # the first of two selected events answered last
    page.evaluate(
        "window.__slow = /api[/]event[?].*i=3(&|$)/;"
        "window.__orchestrace.select('a', 3); window.__orchestrace.select('a', 5)"
    )
    wait_for(page, lambda: state(page, "s.selected && s.selected.idx === 5"), what="event 5")
    settled()
    assert state(page, "s.selected.idx") == 5
    assert state(page, "s.selected.id") in (page.locator("#inspector").text_content() or "")
    # an overlay chosen, then the plain colours chosen before its answer came
    overlays = page.evaluate("fetch('/api/meta').then((r) => r.json()).then((m) => m.overlays)")
    assert overlays, "the debate trace has an overlay"
    page.evaluate(
        f"window.__slow = /api[/]overlay/; window.__orchestrace.setOverlay({overlays[0]!r});"
        "window.__orchestrace.setOverlay(null)"
    )
    settled()
    assert state(page, "s.overlay") is None
    assert not page.errors and not page.console_errors, page.console_errors


def _drawn(page: Any, enough: Any, timeout: float = 5.0) -> dict[str, int]:
    """The timeline's pixel counts per diff colour once ``enough`` holds for them (or at the
    timeout: the caller's assertions then say what is missing)."""
    end = time.monotonic() + timeout
    while True:
        px = canvas_pixels(page, "canvas.tl-canvas", DIFF)
        if enough(px) or time.monotonic() > end:
            return px
        page.wait_for_timeout(25)


def _hex_ids(tr: Any) -> Any:
    """``tr`` with every event id replaced by 16 hex digits (as importers of span ids give)."""
    new = {
        e.id: f"{(k * 2654435761 + 0x9E3779B97F4A7C15) % 2**64:016x}"
        for k, e in enumerate(tr.events)
    }
    events = tuple(msgspec.structs.replace(e, id=new[e.id]) for e in tr.events)
    edges = tuple(msgspec.structs.replace(x, src=new[x.src], dst=new[x.dst]) for x in tr.edges)
    return tr.replace(events=events, edges=edges)


@pytest.mark.slow
def test_event_graph_of_long_ids_stays_readable_and_pans(browser: Any, tmp_path: Path) -> None:
    tr = _hex_ids(generate_trace(agents=4, steps=40, seed=5))
    p = tmp_path / "hex.json"
    dump(tr, p)
    with viewer(p) as url:
        page = open_page(browser, url, width=1200, height=800)
        page.evaluate("window.__orchestrace.setGraphMode('events')")
        wait_for(
            page, lambda: state(page, "s.graph && s.graph.mode === 'events' && s.graph.nodes > 30")
        )
        labels = page.evaluate(
            "[...document.querySelectorAll('svg.graph-svg g.g-node text')].map(t => "
            "[t.textContent, t.getBoundingClientRect().height, t.parentNode.querySelector('title').textContent])"
        )
        agents = {e.agent for e in tr.events}
        ids = {e.id for e in tr.events}
        for text, height, title in labels:
            assert not any(i in text for i in ids), text  # the id is in the tooltip
            assert any(a in text for a in agents), text
            assert any(i in title for i in ids), title
            assert height >= 9, (text, height)  # drawn at a readable size
        assert state(page, "s.graph.scale") >= 0.8
        keep_screenshot(page, "hex-graph.png")
        # drag pans the graph
        before = page.evaluate(
            "document.querySelector('svg.graph-svg > g').getAttribute('transform')"
        )
        box = page.locator("svg.graph-svg").bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.down()
        page.mouse.move(
            box["x"] + box["width"] / 2 - 150, box["y"] + box["height"] / 2 - 40, steps=10
        )
        page.mouse.up()
        # the pan is applied on the next frames: wait for it (a busy machine is slow)
        page.wait_for_function(
            "b => document.querySelector('svg.graph-svg > g').getAttribute('transform') !== b",
            arg=before,
            timeout=10_000,
        )
        panned = page.evaluate(
            "document.querySelector('svg.graph-svg > g').getAttribute('transform')"
        )
        # the same graph drawn again (a refresh of the same window) keeps the user's pan
        page.evaluate("window.__orchestrace.graph.drawnBefore = true")
        page.evaluate("window.__orchestrace.setGraphMode('events')")
        wait_for(page, lambda: state(page, "!s.graph.drawnBefore"), what="the graph drawn again")
        assert state(page, "s.graph.mode") == "events"
        assert (
            page.evaluate("document.querySelector('svg.graph-svg > g').getAttribute('transform')")
            == panned
        )
        # another graph is fitted anew
        page.evaluate("window.__orchestrace.setGraphMode('agents')")
        wait_for(page, lambda: state(page, "s.graph.mode === 'agents'"))
        assert (
            page.evaluate("document.querySelector('svg.graph-svg > g').getAttribute('transform')")
            != panned
        )
        assert not page.errors and not page.console_errors, page.console_errors


@pytest.mark.slow
def test_hostile_strings_never_run(browser: Any, hostile_path: Path, tmp_path: Path) -> None:
    with viewer(hostile_path) as url:
        page = open_page(browser, url)
        for i in (2, 3, 4):
            page.evaluate(f"window.__orchestrace.select('a', {i})")
            wait_for(page, lambda i=i: state(page, "s.selected && s.selected.idx") == i)
            text = page.locator("#inspector pre.content").first.inner_text()
            shown = "".join(
                f"\\u{ord(c):04x}" if c in "\x1b\u202e\u202c" else c for c in HOSTILE[i - 2]
            )
            assert shown in text
        assert "\\u001b[31m" in page.locator("#inspector").inner_text()  # ANSI made visible
        start = time.monotonic()
        page.evaluate("window.__orchestrace.select('a', 10)")
        wait_for(page, lambda: state(page, "s.selected && s.selected.idx") == 10)
        assert time.monotonic() - start < 10
        assert state(page, "s.selected.content_length") == 10**7 + len(HOSTILE[0])
        page.locator("#search").fill("<script>")
        wait_for(page, lambda: state(page, "s.windowTotal") == 2, what="search")
        keep_screenshot(page, "hostile.png")
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert page.dialogs == []
        assert page.locator("#inspector script, #inspector img").count() == 0
        assert not page.errors


def test_self_contained_html_opens_offline_and_runs_nothing(
    browser: Any, debate_pair: tuple[Path, Path], hostile_path: Path, tmp_path: Path
) -> None:
    from orchestrace.cli import main

    a, b = debate_pair
    out = tmp_path / "pair.html"
    assert main(["view", str(a), str(b), "--html", str(out)]) == 0
    context = browser.new_context(offline=True)
    requests: list[str] = []
    context.on("request", lambda r: requests.append(r.url))
    page = context.new_page()
    page.dialogs = []
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(out.as_uri())
    page.wait_for_selector("body[data-ready]", state="attached", timeout=30_000)
    wait_for(page, lambda: state(page, "s.diff && s.diff.marked > 0"), what="diff marks")
    assert state(page, "s.embedded") is True
    assert all(u.startswith("file:") for u in requests), requests
    page.evaluate("window.__orchestrace.select('a', 0)")
    wait_for(page, lambda: state(page, "s.selected"))
    assert not page.errors
    hostile = tmp_path / "hostile.html"
    assert main(["view", str(hostile_path), "--html", str(hostile)]) == 0
    page2 = context.new_page()
    page2.on("dialog", lambda d: (requests.append("DIALOG"), d.dismiss()))
    page2.goto(hostile.as_uri())
    page2.wait_for_selector("body[data-ready]", state="attached", timeout=30_000)
    for i in (2, 3, 10):
        page2.evaluate(f"window.__orchestrace.select('a', {i})")
        wait_for(page2, lambda i=i: state(page2, "s.selected && s.selected.idx") == i)
    assert "this file keeps the first 20,000 characters" in page2.locator("#inspector").inner_text()
    assert page2.evaluate("typeof window.__pwned") == "undefined"
    assert "DIALOG" not in requests
    context.close()


def _recording(tmp_path: Path, tr: Any, first: int) -> tuple[Path, StreamWriter]:
    """A JSONL recording of ``tr`` being written: its first ``first`` events, no footer yet."""
    p = tmp_path / "live.jsonl"
    w = StreamWriter(p, trace_id=tr.trace_id, task_id=tr.task_id)
    for e in tr.events[:first]:
        w.event(e)
    return p, w


@pytest.mark.slow
def test_a_recording_being_written_refreshes(browser: Any, tmp_path: Path) -> None:
    tr = generate_trace(agents=3, steps=40, seed=5)
    p, w = _recording(tmp_path, tr, 15)
    with viewer(p) as url:
        page = open_page(browser, url)
        assert state(page, "s.summary.n_events") == 15
        assert state(page, "s.summary.partial") is True
        for e in tr.events[15:]:
            w.event(e)
        for e in tr.edges:
            w.edge(e)
        w.close(costs=tr.costs)
        wait_for(page, lambda: state(page, "s.summary.n_events") == 40, what="the new events")
        with open(p, "ab") as fh:
            fh.write(b"{not json\n")
        wait_for(page, lambda: page.locator("#banner").is_visible(), what="the error banner")
        banner = page.locator("#banner").inner_text()
        assert banner.startswith("error: ") and str(p) in banner and "last version" in banner
        assert "fix or delete this line" in banner  # the command line's own words
        assert state(page, "s.summary.n_events") == 40
        keep_screenshot(page, "live-error.png")


def test_more_content_clicked_twice_is_shown_once_in_order(browser: Any, tmp_path: Path) -> None:
    """Two clicks on "show more" before the first answer came: the text continues once, in
    order (the second answer, for the same offset, is dropped). The text starts with
    characters beyond U+FFFF (two UTF-16 units each): pages are counted in characters."""
    tr = generate_trace(agents=2, steps=6, seed=1)
    # 200,100 characters, each place known
    text = "\U0001f600" * 100 + "".join(f"{k:07d}," for k in range(25_000))
    events = list(tr.events)
    events[0] = msgspec.structs.replace(events[0], content=text)
    p = tmp_path / "long.json"
    dump(tr.replace(events=tuple(events)), p)
    with viewer(p) as url:
        page = open_page(browser, url)
        page.evaluate("window.__orchestrace.select('a', 0)")
        wait_for(page, lambda: page.locator("#inspector button.more").count() == 1, what="more")
        hold_back(page, 400)
        page.evaluate(
            """() => {
              window.__slow = /offset=65536/;
              const more = document.querySelector("#inspector button.more");
              more.click();
              more.click();
            }"""
        )
        answered(page)
        page.wait_for_timeout(50)
        shown = page.evaluate("document.querySelector('#inspector pre.content').textContent")
        assert shown == text[: 2 * 65_536]
        assert not page.errors and not page.console_errors, page.console_errors


def test_a_slow_reload_of_a_recording_is_not_overlapped_by_the_next(
    browser: Any, tmp_path: Path
) -> None:
    """The page polls a recording every 1.5 s; a reload that takes longer (its analyses held
    back 1.8 s here) while the recording keeps growing is not overlapped by another one."""
    tr = generate_trace(agents=3, steps=60, seed=5)
    p, w = _recording(tmp_path, tr, 10)
    with viewer(p) as url:
        page = open_page(browser, url)
        hold_back(page, 1800)
        page.evaluate("window.__slow = /[/]api[/]critical/")
        end = time.monotonic() + 3.5
        k = 10
        while time.monotonic() < end and k < len(tr.events):
            for e in tr.events[k : k + 5]:
                w.event(e)
            k += 5
            page.wait_for_timeout(400)
        w.close(costs=tr.costs)
        wait_for(page, lambda: state(page, "s.summary.n_events") == k, what="every event")
        answered(page)
        log = page.evaluate("window.__log")
        reloads = critical = 0
        for kind, d in log:
            if kind == "/api/critical":
                critical += d
            elif kind == "/api/meta" and d == 1:
                reloads += 1
                assert critical == 0, "a reload started while the last one's analyses ran"
        assert reloads >= 2, log  # the recording was reloaded, more than once
        assert not page.errors and not page.console_errors, page.console_errors


@pytest.mark.slow
def test_hundred_thousand_events_first_view_within_budget(browser: Any, tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    dump(generate_trace(agents=50, steps=100_000, depth=3, seed=0), big)
    with viewer(big) as url:
        start = time.monotonic()
        page = open_page(browser, url)
        elapsed = time.monotonic() - start
        s = state(page)
        assert s["summary"]["n_events"] == 100_000
        assert s["visibleEvents"] > 1000
        # the server sent a window, not the trace: at most one bar per row and pixel pair
        assert s["visibleEvents"] < 100_000
        assert elapsed < FIRST_RENDER_BUDGET_S, f"first view took {elapsed:.1f} s"
        wait_for(page, lambda: state(page, "s.criticalPath.n") > 0, what="the critical path")
        # failure-mode detections arrive as markers (the generated workers ignore inputs)
        wait_for(page, lambda: state(page, "s.markers.shown") > 0, what="the markers")
        # zooming in stays responsive: a new window arrives and is drawn quickly
        t0 = time.monotonic()
        page.evaluate("window.__orchestrace.zoomTo(1000, 1010)")
        wait_for(page, lambda: state(page, "s.window[1]") < 1011, what="the zoomed window")
        wait_for(page, lambda: state(page, "s.windowTotal") < 5000, what="the zoomed events")
        assert time.monotonic() - t0 < 5
        keep_screenshot(page, "big.png")
