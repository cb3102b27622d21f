"""A benchmark on a backend that fails: no metrics from failed runs, exit 1, early stop."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from orchestrace.cli import main
from orchestrace.errors import ConfigError
from orchestrace.masbench.suite import Suite, run_suite

SUITE = Suite(
    "test-v1",
    topologies=("centralized",),
    tasks=("math-v0",),
    agents=2,
    seeds=2,
    faults=(),
)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _FirstOnly(BaseHTTPRequestHandler):
    """Answers the first request, then a 400 to every other one."""

    served = 0
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        with _FirstOnly.lock:
            first = _FirstOnly.served == 0
            _FirstOnly.served += 1
        if first:
            status, payload = (
                200,
                {
                    "choices": [{"message": {"role": "assistant", "content": "OK"}}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 1},
                },
            )
        else:
            status, payload = 400, {"error": {"message": "model overloaded"}}
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def flaky_server():
    _FirstOnly.served = 0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _FirstOnly)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_an_unreachable_backend_stops_the_suite_before_the_grid():
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    with pytest.raises(ConfigError, match=r"--base-url http://127\.0\.0\.1:\d+/v1: the backend"):
        run_suite(
            SUITE,
            backend="openai",
            backend_options={"model": "x", "base_url": url, "retries": 0},
            jobs=1,
            progress=False,
        )


def test_runs_whose_llm_calls_failed_are_missing_not_measured(flaky_server):
    rep = run_suite(
        SUITE,
        backend="openai",
        backend_options={"model": "x", "base_url": flaky_server, "retries": 0},
        jobs=1,
        progress=False,
    )
    assert rep["runs"] == [] and rep["cells"] == []  # nothing measured from failed runs
    lost = rep["missing"]["runs"]
    assert [m["seed"] for m in lost] == [0, 1]
    assert all("backend failed on" in m["error"] and "LLM calls" in m["error"] for m in lost)
    assert rep["missing"]["cells"][0]["missing_runs"] == 2


def test_bench_cli_exits_1_on_a_closed_port(tmp_path, capsys):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    rc = main(
        [
            "bench",
            "--suite",
            "smoke-v2",
            "--backend",
            "openai",
            "--base-url",
            url,
            "--model",
            "x",
            "--retries",
            "1",
            "--timeout",
            "5",
            "--no-envelope",
            "--no-progress",
            "-o",
            str(tmp_path / "out"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1
    assert f"--base-url {url}" in err and len(err.strip().splitlines()) == 1
    assert "(after 2 attempt(s))" in err  # --retries 1 reached the backend
    assert not (tmp_path / "out" / "report.json").exists()


@pytest.mark.parametrize("flag", ["--retries", "--timeout"])
def test_bench_refuses_openai_options_for_the_simulator(tmp_path, capsys, flag):
    rc = main(["bench", "--suite", "smoke-v2", flag, "1", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.strip() == f"error: {flag} is an option of --backend openai or vllm; leave it out"
    assert not (tmp_path / "out").exists()
