"""Helpers for the browser tests: find Chromium, start ``orchestrace view``, wait on page state."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

#: Strings that must display as text and never run.
HOSTILE = (
    "<script>window.__pwned = 1; alert('x')</script>",
    '<img src=x onerror="window.__pwned=2;alert(2)">',
    "\x1b[31mred\x1b[0m \u202eevil\u202c </pre></div><b>bold</b>",
)


def chromium_path() -> str | None:
    """The Chromium binary: $ORCHESTRACE_CHROMIUM, the Debian package's, or one on PATH."""
    candidates = [
        os.environ.get("ORCHESTRACE_CHROMIUM"),
        "/usr/lib/chromium/chromium",  # Debian: /usr/bin/chromium is a shell wrapper
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
        shutil.which("google-chrome"),
    ]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def launch(pw: Any) -> Any:
    """A headless Chromium (the system one when present, else Playwright's own)."""
    args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    path = chromium_path()
    try:
        return pw.chromium.launch(executable_path=path, headless=True, args=args)
    except Exception as err:  # no browser at all: skip, the other tests still run
        why = f"Chromium cannot be started ({str(err).splitlines()[0][:200]})"
        if os.environ.get("ORCHESTRACE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{why}; ORCHESTRACE_REQUIRE_BROWSER=1 requires the browser tests to run")
        pytest.skip(why)


def keep_screenshot(page: Any, name: str) -> None:
    """A screenshot for a person to look at, in $ORCHESTRACE_TEST_ARTIFACTS/viewer; nothing
    when that is not set (no check reads it; the pixel checks use :func:`canvas_pixels`)."""
    env = os.environ.get("ORCHESTRACE_TEST_ARTIFACTS")
    if env:
        d = Path(env) / "viewer"
        d.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(d / name))


@contextmanager
def viewer(*args: object) -> Iterator[str]:
    """Run ``orchestrace view ARGS`` and yield its URL; stop it afterwards."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.Popen(
        [sys.executable, "-m", "orchestrace", "view", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = p.stdout.readline() if p.stdout else ""
        m = re.match(r"orchestrace viewer: (http://\S+)", line)
        if not m:
            err = p.stderr.read() if p.stderr else ""
            raise AssertionError(f"the viewer did not start: {line!r} {err[-2000:]!r}")
        yield m.group(1)
    finally:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def state(page: Any, expr: str = "") -> Any:
    """``window.__orchestrace`` (or an expression over it, as ``s``) read from the page."""
    body = f"(s) => ({expr or 's'})"
    return page.evaluate(f"(() => {{ const s = window.__orchestrace; return ({body})(s); }})()")


def wait_for(page: Any, cond: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    """Poll ``cond`` (reading the page) until it is truthy; fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what or 'the page'}")
        page.wait_for_timeout(25)  # each poll is one evaluate round trip (about 1 ms)


def hold_back(page: Any, ms: int) -> None:
    """Wrap the page's ``fetch``: answers to URLs matching ``window.__slow`` (a RegExp the test
    sets, none at first) arrive ``ms`` later; ``window.__log`` gets ``[path, 1]`` as each
    request starts and ``[path, -1]`` as it ends. For tests of answers that come late."""
    page.evaluate(
        """(ms) => {
          const fetch0 = window.fetch;
          window.__slow = null;
          window.__log = [];
          window.fetch = async (url, opts) => {
            const path = new URL(String(url), location.href).pathname;
            window.__log.push([path, 1]);
            try {
              const res = await fetch0(url, opts);
              if (window.__slow && window.__slow.test(String(url)))
                await new Promise((ok) => setTimeout(ok, ms));
              return res;
            } finally { window.__log.push([path, -1]); }
          };
        }""",
        ms,
    )


def answered(page: Any) -> None:
    """Wait until none of the page's requests is in flight (after :func:`hold_back`)."""
    wait_for(
        page,
        lambda: page.evaluate("window.__log.reduce((n, [, d]) => n + d, 0) === 0"),
        what="the answers",
    )


def hex_colour(c: str) -> tuple[int, int, int]:
    """``"#f08c00"`` -> ``(240, 140, 0)``."""
    return (int(c[1:3], 16), int(c[3:5], 16), int(c[5:7], 16))


def canvas_pixels(
    page: Any, selector: str, colours: dict[str, str], tol: int = 6
) -> dict[str, int]:
    """How many pixels of the canvas ``selector`` have each colour (within ``tol`` per channel),
    read back from what is drawn (``getImageData``)."""
    rgb = {k: hex_colour(v) for k, v in colours.items()}
    return page.evaluate(
        """([sel, rgb, tol]) => {
            const c = document.querySelector(sel);
            const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
            const out = {};
            for (const k of Object.keys(rgb)) out[k] = 0;
            for (let i = 0; i < d.length; i += 4) {
                if (d[i + 3] < 250) continue;
                for (const [k, [r, g, b]] of Object.entries(rgb)) {
                    if (Math.abs(d[i] - r) <= tol && Math.abs(d[i + 1] - g) <= tol
                        && Math.abs(d[i + 2] - b) <= tol) out[k]++;
                }
            }
            return out;
        }""",
        [selector, rgb, tol],
    )


def open_page(browser: Any, url: str, *, width: int = 1500, height: int = 950) -> Any:
    """A page on ``url`` once its first view is drawn; dialogs are recorded in ``page.dialogs``."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.dialogs = []
    page.errors = []
    page.console_errors = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
    page.goto(url)
    page.wait_for_selector("body[data-ready]", state="attached", timeout=60_000)
    return page
