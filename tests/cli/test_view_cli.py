"""``orchestrace view``: the HTML file, its refusal to overwrite, one-line errors, the server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from orchestrace.cli import main
from orchestrace.io import dump
from orchestrace.trace.generate import generate_trace


def cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    p = tmp_path / "t.json"
    dump(generate_trace(agents=4, steps=60, seed=1), p)
    return p


def _embedded(page: str) -> dict:  # type: ignore[type-arg]
    m = re.search(
        r'<script id="orchestrace-data" type="application/json">(.*?)</script>', page, re.S
    )
    assert m is not None
    return json.loads(m.group(1))


def test_html_is_one_self_contained_file(
    capsys: pytest.CaptureFixture[str], trace_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "share.html"
    code, _, err = cli(capsys, "view", trace_file, "--html", out)
    assert code == 0, err
    assert re.fullmatch(r"wrote .*share.html: 1 trace\(s\), 60 events, [\d,]+ bytes\n", err)
    page = out.read_text()
    # nothing is fetched from anywhere: no external script, style, image or font
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert 'src="static/' not in page and 'href="static/' not in page
    assert "Content-Security-Policy" in page and "script-src 'sha256-" in page
    data = _embedded(page)
    assert len(data["views"]["a"]["events"]["id"]) == 60
    assert data["meta"]["live"] is False


def test_html_escapes_everything_in_the_data_block(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import msgspec

    tr = generate_trace(agents=3, steps=20, seed=2)
    hostile = "</script><script>alert(1)</script><!-- \u2028"
    ev = list(tr.events)
    ev[4] = msgspec.structs.replace(ev[4], content=hostile, attrs={"x": hostile})
    src = tmp_path / "h.json"
    dump(tr.replace(events=tuple(ev)), src)
    out = tmp_path / "h.html"
    assert cli(capsys, "view", src, "--html", out)[0] == 0
    page = out.read_text()
    assert page.count("</script>") == 2  # the data block's and the script's own
    assert "<script>alert(1)" not in page
    assert _embedded(page)["views"]["a"]["events"]["content"][4] == hostile


def test_html_refuses_to_overwrite_without_force(
    capsys: pytest.CaptureFixture[str], trace_file: Path, tmp_path: Path, marked_outputs: None
) -> None:
    out = tmp_path / "share.html"
    out.write_text("precious")
    code, _, err = cli(capsys, "view", trace_file, "--html", out)
    assert code == 1 and out.read_text() == "precious"
    assert err.startswith("error: ") and "--force" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli(capsys, "view", trace_file, "--html", out, "--force")
    assert code == 1 and out.read_text() == "precious"  # not a page orchestrace wrote
    assert "orchestrace did not write it" in err
    out.unlink()
    assert cli(capsys, "view", trace_file, "--html", out)[0] == 0
    code, _, err = cli(capsys, "view", trace_file, "--html", out, "--force")
    assert code == 0 and out.read_text().startswith("<!doctype html>")
    code, _, err = cli(capsys, "view", trace_file, "--html", trace_file, "--force")
    assert code == 1 and trace_file.read_text().startswith("{")


def test_unloadable_file_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"trace_id": "x", "events": [')
    code, out, err = cli(capsys, "view", bad)
    assert code == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}:")
    # the same line as another command gives for the file
    code, _, other = cli(capsys, "convert", bad, "-o", tmp_path / "out.jsonl")
    assert code == 1 and other.strip() == lines[0]
    code, _, err = cli(capsys, "view", tmp_path / "missing.json", "--html", tmp_path / "o.html")
    assert code == 1 and err.startswith("error: ") and "missing.json" in err
    assert not (tmp_path / "o.html").exists()


def test_option_errors(
    capsys: pytest.CaptureFixture[str], trace_file: Path, tmp_path: Path
) -> None:
    code, _, err = cli(capsys, "view", trace_file, "--force")
    assert (code, err) == (1, "error: --force applies to --html OUT; leave it out\n")
    code, _, err = cli(capsys, "view", trace_file, "--html", tmp_path / "x.html", "--open")
    assert (code, err) == (1, "error: --open applies to the server, not to --html; leave it out\n")
    for bad in ("70000", "65536"):
        code, _, err = cli(capsys, "view", trace_file, "--port", bad)
        assert (code, err) == (
            1,
            f"error: --port must be between 1 and 65535, or 0 for a free port (got {bad}); "
            "e.g. --port 8765\n",
        )


@pytest.mark.slow
def test_server_prints_its_url_and_serves_the_page(trace_file: Path) -> None:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.Popen(
        [sys.executable, "-m", "orchestrace", "view", str(trace_file), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = p.stdout.readline() if p.stdout else ""
        m = re.match(r"orchestrace viewer: (http://127\.0\.0\.1:(\d+)/)", line)
        assert m, line
        assert int(m.group(2)) > 0  # --port 0: a free port, as the message says
        with urllib.request.urlopen(m.group(1) + "api/meta", timeout=10) as r:
            meta = json.loads(r.read())
            assert r.headers["Content-Security-Policy"].startswith("default-src 'none'")
        assert meta["views"][0]["summary"]["n_events"] == 60
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
    assert "Traceback" not in (p.stderr.read() if p.stderr else "")
    time.sleep(0)


def test_html_of_an_invalid_trace_warns(
    capsys: pytest.CaptureFixture[str], trace_file: Path, tmp_path: Path
) -> None:
    doc = json.loads(trace_file.read_text())
    doc["events"].append(dict(doc["events"][0]))  # a duplicate id
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    code, _, err = cli(capsys, "view", bad, "--html", tmp_path / "bad.html")
    assert code == 0  # the page is how the broken trace is inspected
    first = err.splitlines()[0]
    assert first.startswith(f"warning: {bad}: 1 problem(s), first: $.events[60].id: duplicate")
    assert first.endswith("the page shows the trace as recorded and lists them")
    code, _, err = cli(capsys, "view", trace_file, "--html", tmp_path / "good.html")
    assert code == 0 and "warning" not in err
