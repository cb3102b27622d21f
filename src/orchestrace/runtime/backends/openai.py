"""Any OpenAI-compatible chat server: vLLM, SGLang, Ollama, llama.cpp server, OpenAI itself.

Configuration comes from arguments or the environment: ``ORCHESTRACE_OPENAI_BASE_URL`` (else
``OPENAI_BASE_URL``, else ``http://localhost:8000/v1``), ``ORCHESTRACE_OPENAI_API_KEY`` (else
``OPENAI_API_KEY``; local servers need none) and ``ORCHESTRACE_OPENAI_MODEL``. Calls are retried
with exponential backoff on connection errors, timeouts, 429 and 5xx; at most
``concurrency`` calls are in flight; every call has a timeout. A server that stays unreachable,
times out or answers garbage produces a :class:`BackendError`, which the runtime records as a
failed ``llm_call`` event: a run never hangs and never loses its trace.

Example:
    >>> b = OpenAIBackend(base_url="http://localhost:1/v1", model="m", retries=0)
    >>> b.endpoint
    'http://localhost:1/v1/chat/completions'
"""

from __future__ import annotations

import asyncio
import os
import random
from dataclasses import dataclass, field
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.runtime.backends.base import BackendError, LLMRequest, LLMResponse
from orchestrace.runtime.prompts import parse

__all__ = ["OpenAIBackend"]

_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def _env(*names: str, default: str | None = None) -> str | None:
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return default


@dataclass
class OpenAIBackend:
    """Chat completions over HTTP (``/chat/completions``).

    Args:
        base_url: Server URL ending in ``/v1``.
        api_key: Bearer token (optional for local servers).
        model: Model name the server knows.
        timeout_s: Per-request timeout.
        retries: Retries after the first attempt (connection errors, timeouts, 429, 5xx).
        backoff_s: First backoff; doubles each retry (with jitter).
        concurrency: Most requests in flight.
        price_in: Cost per prompt token.
        price_out: Cost per completion token.
        transport: An ``httpx`` transport (tests use ``httpx.MockTransport``).
    """

    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    timeout_s: float = 60.0
    retries: int = 3
    backoff_s: float = 0.5
    concurrency: int = 16
    price_in: float = 0.0
    price_out: float = 0.0
    transport: Any = None
    name: str = "openai"
    virtual: bool = False
    _client: Any = field(default=None, repr=False)
    _sem: asyncio.Semaphore | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.base_url = (
            self.base_url
            or _env(
                "ORCHESTRACE_OPENAI_BASE_URL", "OPENAI_BASE_URL", default="http://localhost:8000/v1"
            )
            or ""
        ).rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"base_url must start with http:// or https:// (got {self.base_url!r})"
            )
        self.api_key = self.api_key or _env("ORCHESTRACE_OPENAI_API_KEY", "OPENAI_API_KEY")
        self.model = self.model or _env("ORCHESTRACE_OPENAI_MODEL", default="default")
        if self.timeout_s <= 0 or self.retries < 0 or self.concurrency < 1 or self.backoff_s < 0:
            raise ConfigError(
                "timeout_s must be > 0, retries >= 0, backoff_s >= 0, concurrency >= 1"
            )

    @property
    def endpoint(self) -> str:
        """The chat completions URL."""
        return f"{self.base_url}/chat/completions"

    def _http(self) -> Any:
        if self._client is None:
            try:
                import httpx
            except ImportError:  # pragma: no cover - httpx is a core dependency
                raise ImportError(
                    "the openai backend needs httpx: pip install 'httpx>=0.27'"
                ) from None
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.AsyncClient(
                timeout=self.timeout_s, headers=headers, transport=self.transport
            )
            self._sem = asyncio.Semaphore(self.concurrency)
        return self._client

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Send one chat completion, retrying transient failures."""
        import httpx

        client = self._http()
        assert self._sem is not None
        body = {
            "model": self.model,
            "messages": request.messages,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        }
        last = "no attempt made"
        for attempt in range(self.retries + 1):
            if attempt:
                delay = self.backoff_s * 2 ** (attempt - 1) * random.uniform(0.8, 1.2)
                await asyncio.sleep(delay)
            try:
                async with self._sem:
                    resp = await client.post(self.endpoint, json=body)
            except httpx.TimeoutException:
                last = f"timed out after {self.timeout_s} s"
                continue
            except httpx.TransportError as err:
                last = f"cannot reach {self.base_url}: {type(err).__name__}: {err}"
                continue
            if resp.status_code in _RETRY_STATUS:
                last = f"server answered {resp.status_code}: {resp.text[:200]!r}"
                continue
            if resp.status_code >= 400:
                raise BackendError(
                    f"{self.endpoint} answered {resp.status_code}: "
                    f"{resp.text[:300]!r}; check the model name and key"
                )
            return self._parse(resp)
        raise BackendError(
            f"{self.endpoint}: {last} (after {self.retries + 1} attempt(s)); is "
            "the server running? set ORCHESTRACE_OPENAI_BASE_URL"
        )

    def _parse(self, resp: Any) -> LLMResponse:
        try:
            data = resp.json()
            choice = data["choices"][0]
            text = choice["message"]["content"] or ""
            if not isinstance(text, str):
                raise TypeError("content is not a string")
            usage = data.get("usage") or {}
            tin = int(usage.get("prompt_tokens", 0))
            tout = int(usage.get("completion_tokens", 0))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as err:
            raise BackendError(
                f"{self.endpoint} answered something that is not a chat "
                f"completion ({type(err).__name__}: {err}): "
                f"{resp.text[:200]!r}"
            ) from None
        return LLMResponse(
            text,
            parse(text),
            tin,
            tout,
            0.0,
            tin * self.price_in + tout * self.price_out,
            str(self.model),
        )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
