"""The OpenAI-compatible backend against mock transports and a real local HTTP server."""

import asyncio
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from orchestrace import ConfigError, check_trace
from orchestrace.runtime import run
from orchestrace.runtime.backends.base import BackendError, LLMRequest
from orchestrace.runtime.backends.openai import OpenAIBackend

REQ = LLMRequest("w1", "worker", "solve", [{"role": "user", "content": "2+2?"}])


def completion(text, tin=12, tout=3):
    return {
        "choices": [{"message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": tin, "completion_tokens": tout},
    }


def backend(handler, **kw):
    return OpenAIBackend(
        base_url="http://test/v1",
        model="m",
        backoff_s=0.0,
        transport=httpx.MockTransport(handler),
        **kw,
    )


def call(b, req=REQ):
    async def go():
        try:
            return await b.complete(req)
        finally:
            await b.aclose()

    return asyncio.run(go())


def test_happy_path_sends_messages_and_parses_usage():
    seen = []

    def handler(request):
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=completion("thinking... ANSWER: 4"))

    r = call(backend(handler, api_key="k"))
    assert (r.text, r.answer, r.tokens_in, r.tokens_out, r.model) == (
        "thinking... ANSWER: 4",
        4,
        12,
        3,
        "m",
    )
    assert seen[0]["messages"] == REQ.messages and seen[0]["model"] == "m"


def test_retries_transient_failures_then_succeeds():
    n = {"calls": 0}

    def handler(request):
        n["calls"] += 1
        if n["calls"] < 3:
            return httpx.Response(503, text="busy")
        return httpx.Response(200, json=completion("ANSWER: 1"))

    assert call(backend(handler, retries=3)).answer == 1
    assert n["calls"] == 3


@pytest.mark.parametrize(
    "response,msg",
    [
        (httpx.Response(200, text="<html>oops</html>"), "not a chat completion"),
        (httpx.Response(200, json={"choices": []}), "not a chat completion"),
        (
            httpx.Response(200, json={"choices": [{"message": {"content": 5}}]}),
            "not a chat completion",
        ),
        (httpx.Response(401, text="bad key"), "answered 401"),
        (httpx.Response(500, text="boom"), "server answered 500"),
    ],
)
def test_garbage_and_errors_raise_backend_error(response, msg):
    with pytest.raises(BackendError, match=msg):
        call(backend(lambda r: response, retries=1))


def test_timeouts_raise_after_retries():
    def handler(request):
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(BackendError, match=r"timed out after 1.0 s \(after 2 attempt"):
        call(backend(handler, retries=1, timeout_s=1.0))


def test_concurrency_limit():
    active = {"now": 0, "peak": 0}

    async def handler(request):
        active["now"] += 1
        active["peak"] = max(active["peak"], active["now"])
        await asyncio.sleep(0.01)
        active["now"] -= 1
        return httpx.Response(200, json=completion("ANSWER: 0"))

    b = backend(handler, concurrency=3)

    async def go():
        await asyncio.gather(*(b.complete(REQ) for _ in range(12)))
        await b.aclose()

    asyncio.run(go())
    assert active["peak"] == 3


def test_config_from_env_and_bad_values(monkeypatch):
    monkeypatch.setenv("ORCHESTRACE_OPENAI_BASE_URL", "http://gpu-box:8000/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ORCHESTRACE_OPENAI_MODEL", "qwen")
    b = OpenAIBackend()
    assert (b.endpoint, b.api_key, b.model) == (
        "http://gpu-box:8000/v1/chat/completions",
        "sk-test",
        "qwen",
    )
    with pytest.raises(ConfigError, match="must start with http"):
        OpenAIBackend(base_url="gpu-box:8000")
    with pytest.raises(ConfigError, match="concurrency must be an integer from 1"):
        OpenAIBackend(base_url="http://x/v1", concurrency=0)


class _Server(BaseHTTPRequestHandler):
    mode = "ok"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.mode == "garbage":
            payload, code = b"\x00\xffnot json", 200
        elif self.mode == "slow":
            time.sleep(2)
            payload, code = json.dumps(completion("ANSWER: 0")).encode(), 200
        else:
            text = "ANSWER: accept" if "accept" in body["messages"][-1]["content"] else "ANSWER: 3"
            payload, code = json.dumps(completion(text)).encode(), 200
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Quiet(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # the client gave up on a slow answer: expected in these tests


@pytest.fixture
def server():
    srv = _Quiet(("127.0.0.1", 0), _Server)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    _Server.mode = "ok"


def test_full_run_against_a_local_server(server):
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    res = run(
        "critic_loop",
        "arith",
        agents=2,
        task_size=4,
        backend="openai",
        backend_options={"base_url": url, "model": "local", "retries": 0},
    )
    tr = res.trace
    assert check_trace(tr) == []
    llm = [e for e in tr.events if e.type == "llm_call"]
    assert llm and all(e.tool == "local" and e.error is None for e in llm)
    assert all(e.dur > 0 for e in llm)  # real latency was measured
    spec = dict(tr.meta["backend"])
    options = spec.pop("options")
    assert spec == {"name": "openai", "virtual": False, "model": "local", "base_url": url}
    assert options["base_url"] == url and options["model"] == "local" and options["retries"] == 0


@pytest.mark.parametrize("mode,err", [("garbage", "not a chat completion"), ("slow", "timed out")])
def test_bad_server_is_recorded_not_hung(server, mode, err):
    _Server.mode = mode
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    t0 = time.perf_counter()
    res = run(
        "centralized",
        "arith",
        agents=2,
        task_size=4,
        backend="openai",
        backend_options={"base_url": url, "retries": 0, "timeout_s": 0.5},
    )
    assert time.perf_counter() - t0 < 10
    failed = [e for e in res.trace.events if e.type == "llm_call"]
    assert failed and all(err in e.error for e in failed)
    assert check_trace(res.trace) == [] and not res.success


def test_unreachable_server_is_recorded(tmp_path):
    out = tmp_path / "t.jsonl"
    res = run(
        "swarm",
        "arith",
        agents=2,
        task_size=4,
        backend="openai",
        output=out,
        backend_options={"base_url": "http://127.0.0.1:9/v1", "retries": 1, "backoff_s": 0.01},
    )
    errs = [e.error for e in res.trace.events if e.type == "llm_call"]
    assert errs and all("cannot reach http://127.0.0.1:9/v1" in e for e in errs)
    from orchestrace import load

    assert load(out) == res.trace  # the trace was streamed in full


def test_backends_share_one_tls_context_per_certificate_setting(monkeypatch, tmp_path):
    import certifi
    import httpx

    from orchestrace.runtime.backends import openai as mod

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setattr(mod, "_SSL_CONTEXTS", {})
    first = mod._ssl_context(httpx)
    assert mod._ssl_context(httpx) is first
    assert first.verify_mode == ssl.CERT_REQUIRED and first.check_hostname
    assert first.cert_store_stats()["x509_ca"] > 1  # certifi's bundle
    # httpx's own variable is honoured: a bundle of one authority gives a context trusting one
    bundle = Path(certifi.where()).read_text()
    end = "-----END CERTIFICATE-----"
    one = tmp_path / "one.pem"
    one.write_text(bundle[: bundle.index(end) + len(end)] + "\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(one))
    other = mod._ssl_context(httpx)
    assert other is not first and mod._ssl_context(httpx) is other
    assert other.cert_store_stats()["x509_ca"] == 1
