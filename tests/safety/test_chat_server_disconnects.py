"""The test chat server stays quiet when a client goes away, and still reports real errors."""

from __future__ import annotations

import socket
import struct
import time

import httpx
import pytest

from orchestrace.testing import ChatServer


def _reset_mid_request(url: str) -> None:
    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    s = socket.create_connection((host, int(port)))
    s.sendall(
        b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"mess'
    )
    time.sleep(0.1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()  # linger 0: the peer sees a reset, as when a run ends with a call in flight


def test_client_reset_prints_no_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    with ChatServer(lambda body: "ANSWER: 1") as srv:
        for _ in range(3):
            _reset_mid_request(srv.url)
        time.sleep(0.3)
        r = httpx.post(srv.url + "/chat/completions", json={"messages": []})
        assert r.status_code == 200  # still serving
    err = capfd.readouterr().err
    assert "ConnectionResetError" not in err
    assert "Traceback" not in err


def test_a_real_error_is_still_reported(capfd: pytest.CaptureFixture[str]) -> None:
    def broken(body: dict[str, object]) -> str:
        raise ValueError("respond is broken")

    with ChatServer(broken) as srv:
        with pytest.raises(httpx.HTTPError):
            httpx.post(srv.url + "/chat/completions", json={"messages": []}, timeout=5)
        time.sleep(0.2)
    err = capfd.readouterr().err
    assert "ValueError: respond is broken" in err
