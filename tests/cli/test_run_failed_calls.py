"""A run whose LLM calls fail says so on stderr; when every call failed it exits 1."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from orchestrace.cli import main
from orchestrace.io import load


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens


def test_an_unreachable_server_is_an_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("httpx")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "r.jsonl"
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    code = main(
        [
            "run",
            "centralized",
            "-k",
            "2",
            "--backend",
            "openai",
            "--model",
            "m",
            "--base-url",
            url,
            "--retries",
            "0",
            "--timeout",
            "2",
            "--no-progress",
            "-o",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("error: every LLM call failed (")
    assert f"cannot reach {url}" in err and err.rstrip().endswith(f"the run is recorded in {out}")
    assert len(err.strip().splitlines()) == 1
    assert load(out).n_events > 0  # the run is kept as recorded
