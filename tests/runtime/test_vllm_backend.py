"""The vllm backend's server mode against a local server answering in vLLM's shape."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from orchestrace.errors import ConfigError
from orchestrace.runtime import run
from orchestrace.runtime.backends import BACKENDS, backend_from_spec, make_backend
from orchestrace.runtime.backends.base import BackendError, LLMRequest
from orchestrace.runtime.backends.vllm import VLLMBackend, token_record_of
from orchestrace.testing import SeededArithmeticModel
from orchestrace.trace.tokens import token_problem, token_table

ROOT = Path(__file__).parents[2]


class VLLMStub:
    """``/v1/chat/completions`` with vLLM's token ids and logprobs (byte-level "tokens")."""

    def __init__(self, *, logprobs: bool = True, token_ids: bool = True) -> None:
        self.bodies: list[dict[str, Any]] = []
        model = SeededArithmeticModel(error=0.0)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append(body)
                text = model(body)
                prompt = "".join(m["content"] for m in body["messages"])
                pids = list(prompt.encode())[:50]
                cids = list(text.encode())
                lps = [-0.01 * (1 + i % 7) for i in range(len(cids))]
                as_ids = body.get("return_tokens_as_token_ids") and token_ids
                choice: dict[str, Any] = {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
                data: dict[str, Any] = {
                    "choices": [choice],
                    "usage": {"prompt_tokens": len(pids), "completion_tokens": len(cids)},
                }
                if logprobs and body.get("logprobs"):
                    choice["logprobs"] = {
                        "content": [
                            {"token": f"token_id:{t}" if as_ids else chr(t), "logprob": lp}
                            for t, lp in zip(cids, lps, strict=True)
                        ]
                    }
                if token_ids and body.get("return_token_ids"):
                    choice["token_ids"] = cids
                    data["prompt_token_ids"] = pids
                raw = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def stub() -> Iterator[VLLMStub]:
    s = VLLMStub()
    yield s
    s.close()


def _req(content: str = "Compute the sum of (2*x + 1) mod 7 for x in [1, 2].") -> LLMRequest:
    return LLMRequest("a", "worker", "solve", [{"role": "user", "content": content}])


def test_registered_and_rebuilt_from_spec() -> None:
    assert "vllm" in BACKENDS
    b = make_backend("vllm", base_url="http://127.0.0.1:9/v1", model="m", temperature=0.7)
    assert isinstance(b, VLLMBackend)
    again = backend_from_spec(b.spec())
    assert isinstance(again, VLLMBackend) and again.temperature == 0.7 and again.mode == "server"
    with pytest.raises(ConfigError, match="mode must be server or engine"):
        make_backend("vllm", mode="gpu")
    with pytest.raises(ConfigError, match="has no option 'nope'"):
        make_backend("vllm", nope=1)


def test_generate_batch_returns_ids_and_logprobs(stub: VLLMStub) -> None:
    b = VLLMBackend(base_url=stub.url, model="m", retries=0)
    out = b.generate_batch([_req(), _req("Compute the sum of (3*x + 1) mod 5 for x in [4].")])
    assert [r.answer for r in out] == [8, 3]
    body = stub.bodies[0]
    assert body["logprobs"] is True and body["return_token_ids"] is True
    assert body["return_tokens_as_token_ids"] is True and body["top_logprobs"] == 0
    rec = out[0].token_record
    assert rec is not None and token_problem(rec) is None
    assert rec["completion_ids"] == list(out[0].text.encode())
    assert rec["logprobs"][:2] == [-0.01, -0.02] and rec["mask"] == [1] * len(out[0].text)
    assert out[0].tokens_out == len(rec["completion_ids"])


def test_run_stores_token_table(stub: VLLMStub) -> None:
    res = run(
        "debate",
        "arith",
        agents=2,
        seed=1,
        task_size=3,
        rounds=1,
        backend="vllm",
        backend_options={"base_url": stub.url, "retries": 0},
    )
    calls = [e for e in res.trace.events if e.type == "llm_call"]
    table = token_table(res.trace)
    assert calls and set(table) == {e.id for e in calls}
    for rec in table.values():
        assert token_problem(rec) is None and len(rec["logprobs"]) == len(rec["completion_ids"])
    assert res.trace.meta["backend"]["name"] == "vllm"


def test_token_ids_from_logprob_tokens_when_token_ids_absent() -> None:
    rec = token_record_of(
        {
            "prompt_token_ids": [3],
            "choices": [{"logprobs": {"content": [{"token": "token_id:9", "logprob": -1.5}]}}],
        }
    )
    assert rec["completion_ids"] == [9] and rec["logprobs"] == [-1.5]


@pytest.mark.parametrize(
    ("kw", "flag"),
    [({"logprobs": False}, "'logprobs': true"), ({"token_ids": False}, "return_token_ids")],
)
def test_server_without_logprobs_is_one_clear_error(kw: dict[str, bool], flag: str) -> None:
    s = VLLMStub(**kw)
    try:
        b = VLLMBackend(base_url=s.url, model="m", retries=0)
        with pytest.raises(BackendError) as info:
            b.generate_batch([_req()])
        msg = str(info.value)
        assert flag in msg and "\n" not in msg and s.url in msg
    finally:
        s.close()


def test_engine_mode_needs_vllm_and_weight_sync_by_mode() -> None:
    b = VLLMBackend(mode="engine", model="/nonexistent")
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install vllm"):
            b.engine()
    server = VLLMBackend(base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(ConfigError, match="load_lora_adapter"):
        server.load_weights(object())
    with pytest.raises(ConfigError, match="engine mode needs model"):
        VLLMBackend(mode="engine", model="")


def test_recipe_help_runs_without_vllm() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_grpo_recipe.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "--model" in out.stdout and "vLLM" in out.stdout


def test_fork_rebuild_never_sends_the_key_to_a_traced_url(
    stub: VLLMStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrace.runtime.fork_backend import backend_for

    res = run(
        "debate",
        "arith",
        agents=2,
        seed=1,
        task_size=3,
        rounds=1,
        backend="vllm",
        backend_options={"base_url": stub.url, "retries": 0},
    )
    monkeypatch.setenv("ORCHESTRACE_OPENAI_API_KEY", "sk-secret")
    monkeypatch.delenv("ORCHESTRACE_OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    rebuilt = backend_for(res.trace)
    assert isinstance(rebuilt, VLLMBackend) and rebuilt.api_key is None
    assert backend_for(res.trace, base_url=stub.url).api_key == "sk-secret"


def test_cli_run_backend_vllm(stub: VLLMStub, tmp_path: Path) -> None:
    from orchestrace.cli import main
    from orchestrace.io import load

    out = tmp_path / "run.json"
    argv = ["run", "centralized", "--agents", "2", "--backend", "vllm", "--base-url", stub.url]
    rc = main([*argv, "--retries", "0", "-o", str(out), "--no-progress"])
    assert rc == 0 and stub.bodies
    trace = load(out)
    assert trace.meta["backend"]["name"] == "vllm" and token_table(trace)
