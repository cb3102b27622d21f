"""Viewer figures: time to the first drawn view and page memory in Chromium (via Playwright), for
1,000 and 100,000 events, against loading the same trace's JSON into a page and drawing it naively
(one DOM element per event), measured in the same run with the same browser.

Ours: ``orchestrace view`` serves the page; the page asks for the lanes, the summary and a window
of the events on screen (at most one per row and pixel pair) and draws them on a canvas.
Naive: a static server hands the page the trace's JSON file; the page parses it and appends one
absolutely positioned ``div`` per event. Both are timed from navigation start to the first frame
after the view is drawn (``performance.now()``); memory is the page's JS heap and DOM node count
(Chrome DevTools ``Performance.getMetrics``) and the unique memory (USS, psutil) of the page's
renderer process once drawn. ``REPEAT`` fresh pages per side, the two sides alternated; the
median of each measure is reported, with the spread of the times. The first page after the server starts also waits for
the analyses the server then caches (critical path, detections): it is reported apart.

    python benchmarks/bench_viewer.py            # 1,000 and 100,000 events
    python benchmarks/bench_viewer.py --quick    # 1,000 and 20,000 events
"""

from __future__ import annotations

import argparse
import functools
import http.server
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from _common import cached_trace_file, data_path, median, report, spread

#: Fresh pages per side.
REPEAT = 3

NAIVE_PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
#c { position: relative; } .ev { position: absolute; height: 14px; background: #5c7cfa;
font: 9px sans-serif; overflow: hidden; color: #fff; }</style></head><body><div id="c"></div>
<script>
(async () => {
  const tr = await (await fetch("trace.json")).json();
  const lanes = new Map();
  let t1 = 0;
  for (const e of tr.events) { if (!lanes.has(e.agent)) lanes.set(e.agent, lanes.size);
    t1 = Math.max(t1, e.t + (e.dur || 0)); }
  const W = 1200, c = document.getElementById("c");
  c.style.height = (lanes.size * 18) + "px";
  const frag = document.createDocumentFragment();
  for (const e of tr.events) {
    const d = document.createElement("div");
    d.className = "ev";
    d.style.left = (e.t / t1 * W) + "px";
    d.style.width = Math.max(1, (e.dur || 0) / t1 * W) + "px";
    d.style.top = (lanes.get(e.agent) * 18) + "px";
    d.textContent = e.type;
    d.title = e.id;
    frag.appendChild(d);
  }
  c.appendChild(frag);
  requestAnimationFrame(() => requestAnimationFrame(() => {
    window.__naiveMs = performance.now(); document.body.dataset.ready = "1"; }));
})();
</script></body></html>"""


def _browser(pw: Any) -> Any:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "viewer"))
    from viewer_browser import chromium_path

    return pw.chromium.launch(executable_path=chromium_path(), headless=True, args=["--no-sandbox"])


def _renderers() -> dict[int, Any]:
    """Chromium renderer processes on this machine, by pid."""
    import psutil

    out = {}
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info.get("cmdline") or []
        if any("--type=renderer" in c for c in cmd):
            out[p.info["pid"]] = p
    return out


def _measure(browser: Any, url: str, expr: str) -> dict[str, float]:
    before = set(_renderers())
    page = browser.new_page(viewport={"width": 1500, "height": 950})
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    page.goto(url)
    page.wait_for_selector("body[data-ready]", state="attached", timeout=600_000)
    ms = float(page.evaluate(expr))
    page.wait_for_timeout(300)
    cdp.send("HeapProfiler.collectGarbage")
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    # the page's own renderer process: its unique memory (JS heap, DOM, layout, canvas)
    uss = sum(p.memory_full_info().uss for pid, p in _renderers().items() if pid not in before)
    page.close()
    return {
        "ms": ms,
        "heap_mb": metrics["JSHeapUsedSize"] / 2**20,
        "nodes": metrics["Nodes"],
        "uss_mb": uss / 2**20,
    }


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    """The median of each measure over ``runs``."""
    return {k: median([r[k] for r in runs]) for k in runs[0]}


def bench(n: int, browser: Any) -> None:
    agents = 50 if n >= 10_000 else 8
    path = cached_trace_file(f"viewer-{n}.json", agents, n, 3, seed=0)
    # ours
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrace", "view", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # naive, served as static files from the same machine
    site = data_path(f"viewer-naive-{n}")
    site.mkdir(exist_ok=True)
    (site / "index.html").write_text(NAIVE_PAGE)
    target = site / "trace.json"
    if not target.exists():
        target.symlink_to(path.resolve())
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        m = re.match(r"orchestrace viewer: (http://\S+)", line)
        if not m:
            raise RuntimeError(f"the viewer did not start: {line!r}")
        # the first page after start computes the analyses the server then caches
        cold = _measure(browser, m.group(1), "window.__orchestrace.firstRenderMs")
        url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
        ours_runs, naive_runs = [], []
        for _ in range(REPEAT):  # alternated: a change of load falls on both sides alike
            ours_runs.append(_measure(browser, m.group(1), "window.__orchestrace.firstRenderMs"))
            naive_runs.append(_measure(browser, url, "window.__naiveMs"))
    finally:
        proc.terminate()
        proc.wait()
        server.shutdown()
    ours, naive = _median(ours_runs), _median(naive_runs)
    times = (
        f"ours {spread([r['ms'] for r in ours_runs])} ms, "
        f"naive {spread([r['ms'] for r in naive_runs])} ms"
    )
    report(
        f"viewer: first view, server just started, {n:,} events (ms)",
        cold["ms"],
        "ms",
        baseline="JSON + one DOM element per event",
        baseline_value=naive["ms"],
    )
    report(
        f"viewer: first view, {n:,} events (ms)",
        ours["ms"],
        "ms",
        baseline="JSON + one DOM element per event",
        baseline_value=naive["ms"],
        note=times,
    )
    report(
        f"viewer: page JS heap once drawn, {n:,} events",
        ours["heap_mb"],
        "MB",
        baseline="JSON + one DOM element per event",
        baseline_value=naive["heap_mb"],
    )
    report(
        f"viewer: renderer process memory (USS) once drawn, {n:,} events",
        ours["uss_mb"],
        "MB",
        baseline="JSON + one DOM element per event",
        baseline_value=naive["uss_mb"],
    )
    report(
        f"viewer: DOM nodes once drawn, {n:,} events",
        ours["nodes"],
        "nodes",
        baseline="JSON + one DOM element per event",
        baseline_value=naive["nodes"],
    )


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


def main(quick: bool = False) -> None:
    """Run the viewer figures; without Playwright or Chromium, say so and skip."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("viewer: skipped (Playwright is not installed: pip install playwright)")
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "viewer"))
    from viewer_browser import chromium_path

    if chromium_path() is None:
        print(
            "viewer: skipped (no Chromium: apt-get install chromium, or set ORCHESTRACE_CHROMIUM)"
        )
        return
    sizes = (1_000, 20_000) if quick else (1_000, 100_000)
    print(f"viewer (Chromium via Playwright; medians of {REPEAT} fresh pages per side)")
    with sync_playwright() as pw:
        browser = _browser(pw)
        try:
            for n in sizes:
                bench(n, browser)
        finally:
            browser.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1,000 and 20,000 events")
    main(quick=ap.parse_args().quick)
