"""The OpenAI backend against a misbehaving local HTTP server: one fault per test.

Every server runs on 127.0.0.1 in a daemon thread, is shut down after its test, and bounds how
long any one response can take, so a broken client cannot keep a test alive.
"""

import asyncio
import email.utils
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from orchestrace.cli import main
from orchestrace.runtime.backends.base import BackendError, LLMRequest
from orchestrace.runtime.backends.openai import OpenAIBackend, retry_after_s

REQ = LLMRequest("w1", "worker", "solve", [{"role": "user", "content": "2+2?"}])
SECRET = "sk-FAKE-SECRET-0123456789abcdef"
PASSWORD = "s3cretPW"


def completion(text="ANSWER: 4", usage=None):
    body = {"choices": [{"message": {"role": "assistant", "content": text}}]}
    if usage is not ...:
        body["usage"] = usage or {"prompt_tokens": 12, "completion_tokens": 3}
    return body


class Server:
    """A threaded server whose handler calls ``behave(handler, n)`` for the n-th request."""

    def __init__(self, behave):
        self.times: list[float] = []
        self.headers: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 10  # a stuck client cannot hold a server thread for long

            def do_POST(self):
                n = len(outer.times)
                outer.times.append(time.monotonic())
                outer.headers.append(dict(self.headers))
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                behave(self, n)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def serve():
    servers = []

    def start(behave):
        s = Server(behave)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


def send_json(h, status, obj, headers=()):
    raw = json.dumps(obj).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(raw)))
    for k, v in headers:
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(raw)


def call(b, req=REQ):
    async def go():
        try:
            return await b.complete(req)
        finally:
            await b.aclose()

    return asyncio.run(go())


def run_cli(argv, capsys):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def llm_errors(path):
    return [
        r["event"]["error"]
        for r in records(path)
        if "event" in r and r["event"].get("type") == "llm_call" and r["event"].get("error")
    ]


# ------------------------------------------------------------------------------ deadline
@pytest.mark.slow
def test_slow_drip_cannot_hold_a_request_past_its_timeout(serve):
    def drip(h, n):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", "1000")
        h.end_headers()
        try:
            for _ in range(160):  # at most 32 s, one byte every 0.2 s (within any read timeout)
                h.wfile.write(b" ")
                h.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass  # the client gave up: that is the point

    s = serve(drip)
    b = OpenAIBackend(base_url=s.url, model="m", timeout_s=0.5, retries=1, backoff_s=0.0)
    t0 = time.monotonic()
    with pytest.raises(BackendError, match=r"timed out after 0.5 s \(after 2 attempt\(s\)\)"):
        call(b)
    elapsed = time.monotonic() - t0
    assert elapsed < 0.5 * 2 + 1.5, elapsed
    assert len(s.times) == 2


# ---------------------------------------------------------------------------- Retry-After
def test_retry_after_seconds_is_honoured(serve):
    def busy_once(h, n):
        if n == 0:
            send_json(h, 429, {"error": "slow down"}, [("Retry-After", "1")])
        else:
            send_json(h, 200, completion())

    s = serve(busy_once)
    b = OpenAIBackend(base_url=s.url, model="m", timeout_s=5, retries=2, backoff_s=0.01)
    assert call(b).answer == 4
    assert len(s.times) == 2
    assert s.times[1] - s.times[0] >= 1.0


def test_retry_after_http_date_is_honoured(serve):
    def busy_once(h, n):
        if n == 0:
            when = email.utils.formatdate(time.time() + 2, usegmt=True)
            send_json(h, 503, {"error": "maintenance"}, [("Retry-After", when)])
        else:
            send_json(h, 200, completion())

    s = serve(busy_once)
    b = OpenAIBackend(base_url=s.url, model="m", timeout_s=5, retries=1, backoff_s=0.01)
    assert call(b).answer == 4
    assert s.times[1] - s.times[0] >= 1.0  # the date has one-second resolution


def test_retry_after_is_capped(serve):
    def busy(h, n):
        send_json(h, 429, {"error": "come back tomorrow"}, [("Retry-After", "86400")])

    s = serve(busy)
    b = OpenAIBackend(
        base_url=s.url, model="m", timeout_s=5, retries=1, backoff_s=0.01, max_retry_after_s=0.3
    )
    t0 = time.monotonic()
    with pytest.raises(BackendError, match=r"server answered 429: .*\(Retry-After 86400 s\)"):
        call(b)
    assert 0.3 <= time.monotonic() - t0 < 3.0


@pytest.mark.parametrize(
    "value,now,expected",
    [
        ("5", None, 5.0),
        (" 2.5 ", None, 2.5),
        ("-3", None, 0.0),
        ("nan", None, None),
        ("inf", None, None),
        ("tomorrow", None, None),
        ("", None, None),
        ("Thu, 01 Jan 1970 00:01:00 GMT", 30.0, 30.0),
        ("Thu, 01 Jan 1970 00:01:00 GMT", 90.0, 0.0),
    ],
)
def test_retry_after_parsing(value, now, expected):
    assert retry_after_s(value, now=now) == expected


# ---------------------------------------------------------------------------------- usage
@pytest.mark.parametrize(
    "usage,message",
    [
        (
            {"prompt_tokens": -50, "completion_tokens": 3},
            "server returned invalid usage prompt_tokens=-50 (expected an integer from 0 to",
        ),
        (
            {"prompt_tokens": 12, "completion_tokens": 10**30},
            "server returned invalid usage completion_tokens=1000000000000000000000000000000",
        ),
        (..., "server returned no usage"),
        (
            {"prompt_tokens": 1.5, "completion_tokens": 3},
            "server returned invalid usage prompt_tokens=1.5",
        ),
        (
            {"prompt_tokens": "12", "completion_tokens": 3},
            "server returned invalid usage prompt_tokens='12'",
        ),
        (
            {"prompt_tokens": 1e300, "completion_tokens": 3},
            "server returned invalid usage prompt_tokens=1e+300",
        ),
        ({"completion_tokens": 3}, "server returned invalid usage prompt_tokens=None"),
        ([1, 2], "server returned invalid usage [1, 2] (expected an object)"),
    ],
)
def test_bad_usage_is_a_failed_call(serve, usage, message):
    s = serve(lambda h, n: send_json(h, 200, completion(usage=usage)))
    b = OpenAIBackend(base_url=s.url, model="m", timeout_s=5, retries=3, backoff_s=0.0)
    with pytest.raises(BackendError) as info:
        call(b)
    assert message in str(info.value)
    assert len(s.times) == 1  # a broken answer is not retried


@pytest.mark.parametrize(
    "usage,message",
    [
        ({"prompt_tokens": -50, "completion_tokens": 3}, "invalid usage prompt_tokens=-50"),
        ({"prompt_tokens": 10**30, "completion_tokens": 3}, "invalid usage prompt_tokens=1000"),
        (..., "server returned no usage"),
    ],
)
def test_bad_usage_run_records_failed_calls_and_a_readable_trace(
    serve, tmp_path, capsys, usage, message
):
    s = serve(lambda h, n: send_json(h, 200, completion(usage=usage)))
    out = tmp_path / "run.jsonl"
    rc, _, err = run_cli(
        [
            "run",
            "centralized",
            "--agents",
            "2",
            "--backend",
            "openai",
            "--base-url",
            s.url,
            "--timeout",
            "5",
            "--retries",
            "0",
            "-o",
            str(out),
            "--no-progress",
        ],
        capsys,
    )
    assert rc == 1 and err.startswith("error: every LLM call failed"), err  # (the run kept)
    errors = llm_errors(out)
    assert errors and all(message in e for e in errors)
    assert run_cli(["validate", str(out)], capsys)[0] == 0
    assert run_cli(["analyze", str(out)], capsys)[0] == 0


# -------------------------------------------------------------------------------- secrets
def test_echoed_authorization_never_reaches_trace_or_output(serve, tmp_path, capsys, monkeypatch):
    def echo_401(h, n):
        send_json(h, 401, {"error": "bad key", "you_sent": dict(h.headers)})

    s = serve(echo_401)
    monkeypatch.setenv("ORCHESTRACE_OPENAI_API_KEY", SECRET)
    out = tmp_path / "run.jsonl"
    rc, stdout, stderr = run_cli(
        [
            "run",
            "centralized",
            "--agents",
            "2",
            "--backend",
            "openai",
            "--base-url",
            s.url,
            "--timeout",
            "5",
            "--retries",
            "0",
            "-o",
            str(out),
            "--no-progress",
        ],
        capsys,
    )
    assert rc == 1  # every LLM call failed: one error line, the run kept
    assert s.headers[0]["Authorization"] == f"Bearer {SECRET}"  # the key was sent...
    errors = llm_errors(out)
    assert errors and all("answered 401" in e for e in errors)
    raw = out.read_bytes()
    for text in (raw.decode(), stdout, stderr):  # ...and is found nowhere
        assert SECRET not in text
        assert SECRET[:12] not in text
    assert b"***" in raw


def test_key_echoed_in_a_successful_answer_never_reaches_the_trace(
    serve, tmp_path, capsys, monkeypatch
):
    def echo_in_answer(h, n):
        send_json(h, 200, completion("ANSWER: 42 your key is " + h.headers["Authorization"]))

    s = serve(echo_in_answer)
    monkeypatch.setenv("ORCHESTRACE_OPENAI_API_KEY", SECRET)
    out = tmp_path / "run.jsonl"
    argv = ["run", "centralized", "--agents", "2", "--backend", "openai", "--model", "m"]
    argv += ["--base-url", s.url, "--timeout", "5", "--retries", "0", "-o", str(out)]
    rc, stdout, stderr = run_cli([*argv, "--no-progress"], capsys)
    assert rc == 0
    assert s.headers and s.headers[0]["Authorization"] == f"Bearer {SECRET}"
    raw = out.read_bytes().decode()
    assert "your key is Bearer ***" in raw  # the answer was recorded, the key masked
    for text in (raw, stdout, stderr):
        assert SECRET not in text


def test_credentials_in_base_url_never_reach_trace_or_output(serve, tmp_path, capsys):
    def echo_500(h, n):
        send_json(h, 500, {"error": "oops", "you_sent": dict(h.headers), "path": h.path})

    s = serve(echo_500)
    url = f"http://alice:{PASSWORD}@127.0.0.1:{s.port}/v1"
    out = tmp_path / "run.jsonl"
    rc, stdout, stderr = run_cli(
        [
            "run",
            "centralized",
            "--agents",
            "2",
            "--backend",
            "openai",
            "--base-url",
            url,
            "--timeout",
            "5",
            "--retries",
            "0",
            "-o",
            str(out),
            "--no-progress",
        ],
        capsys,
    )
    assert rc == 1  # every LLM call failed: one error line, the run kept
    raw = out.read_text()
    for text in (raw, stdout, stderr):
        assert PASSWORD not in text
        assert "YWxpY2U6czNjcmV0UFc" not in text  # base64 of alice:s3cretPW (Basic auth echo)
    header = records(out)[0]["header"]
    spec = dict(header["meta"]["backend"])
    assert spec.pop("options")["base_url"] == f"http://127.0.0.1:{s.port}/v1"
    assert spec == {
        "name": "openai",
        "virtual": False,
        "model": "default",
        "base_url": f"http://127.0.0.1:{s.port}/v1",
    }
    assert llm_errors(out)


def test_credentials_in_unreachable_base_url_are_redacted(tmp_path, capsys):
    out = tmp_path / "run.jsonl"
    rc, stdout, stderr = run_cli(
        [
            "run",
            "centralized",
            "--agents",
            "2",
            "--backend",
            "openai",
            "--base-url",
            f"http://alice:{PASSWORD}@127.0.0.1:9/v1",
            "--timeout",
            "2",
            "--retries",
            "0",
            "-o",
            str(out),
            "--no-progress",
        ],
        capsys,
    )
    raw = out.read_text()
    assert rc == 1  # every LLM call failed: one error line, the run kept
    errors = llm_errors(out)
    assert errors and all("cannot reach http://127.0.0.1:9/v1" in e for e in errors)
    for text in (raw, stdout, stderr):
        assert PASSWORD not in text
    # a base URL with a query (no request could keep it) is refused without showing it
    url = f"http://alice:{PASSWORD}@127.0.0.1:9/v1?api_key=sk-QUERYSECRET123456"
    rc, stdout, stderr = run_cli(
        ["run", "centralized", "--backend", "openai", "--base-url", url], capsys
    )
    assert rc == 1 and "has a ?query or #fragment" in stderr
    assert PASSWORD not in stdout + stderr and "QUERYSECRET" not in stdout + stderr


def test_bad_base_url_error_is_redacted(capsys):
    rc, stdout, stderr = run_cli(
        ["run", "centralized", "--backend", "openai", "--base-url", f"ftp://bob:{PASSWORD}@h/v1"],
        capsys,
    )
    assert rc == 1
    assert "base_url must start with http:// or https://" in stderr
    assert PASSWORD not in stdout + stderr


# ------------------------------------------------------------------------------ redirects
def test_redirect_is_reported_with_status_and_location(serve):
    def moved(h, n):
        h.send_response(307)
        h.send_header("Location", "http://other.example:8000/v1/chat/completions")
        h.send_header("Content-Length", "0")
        h.end_headers()

    s = serve(moved)
    b = OpenAIBackend(base_url=s.url, model="m", timeout_s=5, retries=2, backoff_s=0.0)
    with pytest.raises(BackendError) as info:
        call(b)
    msg = str(info.value)
    assert "answered 307 (redirect) to 'http://other.example:8000/v1/chat/completions'" in msg
    assert "set the base URL to that address" in msg
    assert len(s.times) == 1


def test_oversized_body_is_a_failed_call(serve):
    s = serve(lambda h, n: send_json(h, 200, completion(text="x" * 5000)))
    b = OpenAIBackend(base_url=s.url, model="m", timeout_s=5, retries=0, max_body_bytes=1000)
    with pytest.raises(BackendError, match="with a body over 1000 bytes"):
        call(b)


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"timeout_s": float("nan")}, "timeout_s must be a finite number > 0"),
        ({"timeout_s": float("inf")}, "timeout_s must be a finite number > 0"),
        ({"timeout_s": 0}, "timeout_s must be a finite number > 0"),
        ({"backoff_s": -1}, "backoff_s must be a finite number >= 0"),
        ({"retries": 10**30}, "retries must be an integer from 0 to 10**9"),
        ({"concurrency": 0}, "concurrency must be an integer from 1 to 10**9"),
        ({"max_retry_after_s": float("inf")}, "max_retry_after_s must be a finite number"),
    ],
)
def test_bad_numbers_are_config_errors(kw, message):
    from orchestrace.errors import ConfigError

    with pytest.raises(ConfigError, match=message.replace("*", r"\*")):
        OpenAIBackend(base_url="http://h/v1", **kw)


def test_errors_from_any_backend_are_redacted_in_the_trace(tmp_path):
    from orchestrace.runtime import run
    from orchestrace.runtime.backends.base import LLMResponse

    class Leaky:
        name = "leaky"
        virtual = True

        async def complete(self, request):
            return LLMResponse("", error=f"upstream said Authorization: Bearer {SECRET}")

        async def aclose(self):
            pass

    class Raising(Leaky):
        async def complete(self, request):
            raise BackendError(f"GET http://bob:{PASSWORD}@h/v1?api_key={SECRET} failed")

    for backend in (Leaky(), Raising()):
        out = tmp_path / f"{type(backend).__name__}.jsonl"
        run("centralized", agents=2, backend=backend, output=out, on_error="stop")
        raw = out.read_text()
        assert SECRET not in raw and PASSWORD not in raw
        assert llm_errors(out) and "***" in llm_errors(out)[0]


def test_repr_holds_no_credentials():
    b = OpenAIBackend(base_url=f"http://alice:{PASSWORD}@h/v1", api_key=SECRET, model="m")
    text = repr(b) + str(b)
    assert PASSWORD not in text and SECRET not in text
    assert "http://h/v1" in text


def test_bench_reports_show_backend_options_without_credentials():
    from orchestrace.masbench.suite import public_options

    shown = public_options(
        {"base_url": f"http://alice:{PASSWORD}@h/v1", "model": "m", "api_key": SECRET}
    )
    assert shown == {"base_url": "http://***@h/v1", "model": "m"}
    assert public_options(None) is None


def test_retry_after_never_outlasts_the_wall_budget(serve, tmp_path):
    from orchestrace.runtime import run

    s = serve(lambda h, n: send_json(h, 429, {"error": "busy"}, [("Retry-After", "30")]))
    t0 = time.monotonic()
    res = run(
        "centralized",
        agents=2,
        backend="openai",
        backend_options={"base_url": s.url, "model": "m", "retries": 3, "timeout_s": 5},
        max_wall_s=1.0,
        output=tmp_path / "t.jsonl",
    )
    assert time.monotonic() - t0 < 5.0
    assert res.trace.meta["result"]["stop_reason"] == "budget exceeded: max_wall_s (1.0)"
