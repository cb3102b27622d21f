"""Any OpenAI-compatible chat server: vLLM, SGLang, Ollama, llama.cpp server, OpenAI itself.

Configuration comes from arguments or the environment: ``ORCHESTRACE_OPENAI_BASE_URL`` (else
``OPENAI_BASE_URL``, else ``http://localhost:8000/v1``), ``ORCHESTRACE_OPENAI_API_KEY`` (else
``OPENAI_API_KEY``; local servers need none) and ``ORCHESTRACE_OPENAI_MODEL``. Calls are retried
with exponential backoff on connection errors, timeouts, 429 and 5xx (waiting at least what a
``Retry-After`` header asks, up to ``max_retry_after_s``); at most ``concurrency`` calls are in
flight. ``timeout_s`` is a total deadline for each attempt, body included: a server that sends its
answer one byte at a time cannot hold a call longer. A server that stays unreachable, times out,
redirects, or answers garbage (including a ``usage`` that is missing, not an integer, negative or
absurd) produces a :class:`BackendError`, which the runtime records as a failed ``llm_call``
event: a run never hangs and never loses its trace. Secrets (the API key, ``Authorization``
values echoed by the server, credentials in the base URL) are redacted from every error.

Example:
    >>> b = OpenAIBackend(base_url="http://localhost:1/v1", model="m", retries=0)
    >>> b.endpoint
    'http://localhost:1/v1/chat/completions'
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from orchestrace._safe import redact, redact_url, remember_secret
from orchestrace.errors import ConfigError
from orchestrace.runtime.backends.base import BackendError, LLMRequest, LLMResponse
from orchestrace.runtime.prompts import parse

__all__ = ["MAX_USAGE_TOKENS", "OpenAIBackend"]

_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
#: Status codes whose ``Retry-After`` header is honoured.
_RETRY_AFTER_STATUS = {429, 503}
#: Largest token count one call may report; more is treated as a broken server.
MAX_USAGE_TOKENS = 10**9


def _env(*names: str, default: str | None = None) -> str | None:
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return default


#: One TLS context per certificate setting, shared by every client of this process: building
#: one (reading the CA bundle) costs more than a local call, and every backend makes a client.
_SSL_CONTEXTS: dict[tuple[str | None, str | None], Any] = {}


def _ssl_context(httpx: Any) -> Any:
    """The TLS context httpx makes by default, made once per certificate setting.

    That is certifi's CA bundle, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set.
    """
    key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    ctx = _SSL_CONTEXTS.get(key)
    if ctx is None:
        ctx = _SSL_CONTEXTS[key] = httpx.create_ssl_context()
    return ctx


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or HTTP-date form).

    Returns ``None`` when the header is absent or unreadable; never negative.

    Example:
        >>> retry_after_s("5"), retry_after_s("soon"), retry_after_s(None)
        (5.0, None, None)
        >>> retry_after_s("Thu, 01 Jan 1970 00:00:10 GMT", now=4.0)
        6.0
    """
    if not value:
        return None
    value = value.strip()
    try:
        secs = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        try:
            secs = when.timestamp() - (time.time() if now is None else now)
        except (OverflowError, OSError, ValueError):
            return None
    if not math.isfinite(secs):
        return None
    return max(0.0, secs)


def _usage(data: dict[str, Any], key: str) -> int:
    """One token count of ``usage``, checked (raises ``ValueError`` naming the field)."""
    usage = data.get("usage")
    if not isinstance(usage, dict):
        raise ValueError(
            "server returned no usage (the response has no 'usage' object with token counts)"
            if usage is None
            else f"server returned invalid usage {_clip(usage)} (expected an object)"
        )
    value = usage.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_USAGE_TOKENS:
        raise ValueError(
            f"server returned invalid usage {key}={_clip(value)} "
            f"(expected an integer from 0 to {MAX_USAGE_TOKENS})"
        )
    return value


def _clip(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class OpenAIBackend:
    """Chat completions over HTTP (``/chat/completions``).

    Args:
        base_url: Server URL ending in ``/v1``.
        api_key: Bearer token (optional for local servers).
        model: Model name the server knows.
        timeout_s: Total deadline of one attempt (connect, send, wait, read the whole body).
        retries: Retries after the first attempt (connection errors, timeouts, 429, 5xx).
        backoff_s: First backoff; doubles each retry (with jitter).
        concurrency: Most requests in flight.
        price_in: Cost per prompt token.
        price_out: Cost per completion token.
        transport: An ``httpx`` transport (tests use ``httpx.MockTransport``).
        max_retry_after_s: Longest wait a ``Retry-After`` header can impose (the run's wall
            budget still stops the run when it expires during a wait).
        max_body_bytes: Largest response body read; a longer one is a failed call.
        temperature: Sampling temperature of every call (default: the request's, 0.0 unless
            the harness asks otherwise).
        top_p: Nucleus sampling mass sent with every call (default: the server's).
        max_tokens: Cap on completion tokens (the request's ``max_tokens`` may lower it).
        seed: Sampling seed sent with every call, for servers that honour it.
    """

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    model: str | None = None
    timeout_s: float = 60.0
    retries: int = 3
    backoff_s: float = 0.5
    concurrency: int = 16
    price_in: float = 0.0
    price_out: float = 0.0
    transport: Any = None
    max_retry_after_s: float = 60.0
    max_body_bytes: int = 32 << 20
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    name: str = "openai"
    virtual: bool = False
    _client: Any = field(default=None, repr=False)
    _sem: asyncio.Semaphore | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.api_key = self.api_key or _env("ORCHESTRACE_OPENAI_API_KEY", "OPENAI_API_KEY")
        remember_secret(self.api_key)
        self.base_url = (
            self.base_url
            or _env(
                "ORCHESTRACE_OPENAI_BASE_URL", "OPENAI_BASE_URL", default="http://localhost:8000/v1"
            )
            or ""
        ).rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"base_url must start with http:// or https:// "
                f"(got {self._safe(redact_url(self.base_url))!r})"
            )
        self._check_url()
        if self.api_key and not all(
            c.isascii() and c.isprintable() and c != " " for c in self.api_key
        ):
            raise ConfigError(
                "the API key (api_key=, ORCHESTRACE_OPENAI_API_KEY or OPENAI_API_KEY) holds a "
                "space, a control or a non-ASCII character, which no HTTP header can carry: "
                "check it for a pasted quote, space or line end"
            )
        self.model = self.model or _env("ORCHESTRACE_OPENAI_MODEL", default="default")
        numbers = {
            "timeout_s": self.timeout_s,
            "backoff_s": self.backoff_s,
            "max_retry_after_s": self.max_retry_after_s,
            "price_in": self.price_in,
            "price_out": self.price_out,
        }
        for key, value in numbers.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{key} must be a number (got {value!r})")
            if not math.isfinite(value) or value < 0 or (key == "timeout_s" and value == 0):
                raise ConfigError(
                    f"{key} must be a finite number {'> 0' if key == 'timeout_s' else '>= 0'} "
                    f"(got {value!r})"
                )
        for key, low in (("retries", 0), ("concurrency", 1), ("max_body_bytes", 1)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 10**9:
                raise ConfigError(f"{key} must be an integer from {low} to 10**9 (got {value!r})")
        for key, top in (("temperature", 2.0), ("top_p", 1.0)):
            value = getattr(self, key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{key} must be a number (got {value!r})")
            if not 0.0 <= value <= top:
                raise ConfigError(f"{key} must be from 0 to {top:g} (got {value!r})")
        for key, low in (("max_tokens", 1), ("seed", 0)):
            value = getattr(self, key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value < 2**63:
                raise ConfigError(f"{key} must be an integer from {low} to 2**63-1 (got {value!r})")

    def __repr__(self) -> str:
        return (
            f"OpenAIBackend(base_url={redact_url(str(self.base_url))!r}, model={self.model!r}, "
            f"timeout_s={self.timeout_s!r}, retries={self.retries!r}, "
            f"concurrency={self.concurrency!r})"
        )

    def _check_url(self) -> None:
        """Refuse a base URL no request can go to, and certificates that cannot be read."""
        url = str(self.base_url)
        shown = self._safe(redact_url(url))
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018  (the port is checked when read)
        except ValueError as err:
            raise ConfigError(
                f"base_url {shown[:200]!r} is not a URL ({err}); e.g. http://localhost:8000/v1"
            ) from None
        if not parts.hostname:
            raise ConfigError(
                f"base_url {shown[:200]!r} names no host; e.g. http://localhost:8000/v1"
            )
        if parts.query or parts.fragment:
            bare = self._safe(redact_url(urlunsplit(parts._replace(query="", fragment=""))))
            raise ConfigError(
                f"base_url {bare[:200]!r} has a ?query or #fragment, which the requests "
                "(base_url + /chat/completions) cannot keep: give the URL up to /v1"
            )
        if parts.scheme == "https":
            import httpx  # noqa: PLC0415  httpx is heavy: loaded on first use

            try:
                _ssl_context(httpx)
            except OSError as err:  # ssl.SSLError included
                cert = {k: os.environ.get(k) for k in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
                given = ", ".join(f"{k}={v!r}" for k, v in cert.items() if v) or "certifi's bundle"
                raise ConfigError(
                    f"cannot read the TLS certificates ({given}): "
                    f"{getattr(err, 'strerror', None) or err}; unset SSL_CERT_FILE and "
                    "SSL_CERT_DIR to use certifi's bundle, or point SSL_CERT_FILE at a PEM file"
                ) from None

    def _safe(self, text: str) -> str:
        """``text`` with this backend's key and every credential-looking value removed."""
        return redact(text, (self.api_key,))

    @property
    def endpoint(self) -> str:
        """The chat completions URL."""
        return f"{self.base_url}/chat/completions"

    @property
    def shown_endpoint(self) -> str:
        """The chat completions URL without credentials (for messages and traces)."""
        return redact_url(self.endpoint)

    def describe(self) -> dict[str, Any]:
        """What the trace header records about this backend (no credentials)."""
        return {
            "name": self.name,
            "virtual": self.virtual,
            "model": str(self.model),
            "base_url": redact_url(str(self.base_url)),
        }

    def spec(self) -> dict[str, Any]:
        """Everything that rebuilds this backend, without the API key or URL credentials.

        ``options`` are constructor arguments; the key comes from the environment
        (``ORCHESTRACE_OPENAI_API_KEY``) when the backend is rebuilt.

        Example:
            >>> b = OpenAIBackend(base_url="http://u:pw@h:8/v1", model="m", api_key="sk-1")
            >>> s = b.spec()
            >>> s["options"]["base_url"], s["options"]["model"], "sk-1" in repr(s)
            ('http://h:8/v1', 'm', False)
        """
        options = {
            "base_url": redact_url(str(self.base_url)),
            "model": str(self.model),
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "timeout_s": self.timeout_s,
            "retries": self.retries,
            "backoff_s": self.backoff_s,
            "concurrency": self.concurrency,
            "price_in": self.price_in,
            "price_out": self.price_out,
            "max_retry_after_s": self.max_retry_after_s,
            "max_body_bytes": self.max_body_bytes,
        }
        return {**self.describe(), "options": options}

    def _http(self) -> Any:
        if self._client is None:
            try:
                import httpx  # noqa: PLC0415  httpx is heavy: loaded on first use
            except ImportError:  # pragma: no cover - httpx is a core dependency
                raise ImportError(
                    "the openai backend needs httpx: pip install 'httpx>=0.27'"
                ) from None
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.AsyncClient(
                timeout=self.timeout_s,
                headers=headers,
                transport=self.transport,
                follow_redirects=False,
                # no TLS over http:// (redirects are not followed): a bad certificate
                # setting cannot fail a plain-HTTP server's calls
                verify=_ssl_context(httpx) if str(self.base_url).startswith("https://") else False,
            )
            self._sem = asyncio.Semaphore(self.concurrency)
        return self._client

    async def _attempt(self, client: Any, body: dict[str, Any]) -> tuple[int, Any, bytes]:
        """One request, whole body read, under one deadline: (status, headers, body)."""
        assert self._sem is not None
        async with self._sem:
            async with asyncio.timeout(self.timeout_s):
                req = client.build_request("POST", self.endpoint, json=body)
                resp = await client.send(req, stream=True)
                try:
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in resp.aiter_bytes():
                        size += len(chunk)
                        if size > self.max_body_bytes:
                            raise BackendError(
                                f"{self.shown_endpoint} answered {resp.status_code} with a body "
                                f"over {self.max_body_bytes} bytes; check the server, or raise "
                                "max_body_bytes"
                            )
                        chunks.append(chunk)
                finally:
                    await resp.aclose()
        return resp.status_code, resp.headers, b"".join(chunks)

    @staticmethod
    def _decode(headers: Any, raw: bytes) -> Any:
        """The body as a response object (``.text``, ``.json()``) in its declared charset."""
        import httpx  # noqa: PLC0415  httpx is heavy: loaded on first use

        ctype = headers.get("content-type")
        return httpx.Response(200, headers={"content-type": ctype} if ctype else {}, content=raw)

    def _excerpt(self, text: str, limit: int) -> str:
        return repr(self._safe(text[: limit * 16])[:limit])

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Send one chat completion, retrying transient failures."""
        import httpx  # noqa: PLC0415  httpx is heavy: loaded on first use

        client = self._http()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "max_tokens": request.max_tokens
            if self.max_tokens is None
            else min(request.max_tokens, self.max_tokens),
            "temperature": request.temperature if self.temperature is None else self.temperature,
        }
        if self.top_p is not None:
            body["top_p"] = self.top_p
        if self.seed is not None:
            body["seed"] = self.seed
        last = "no attempt made"
        wait_at_least = 0.0
        for attempt in range(self.retries + 1):
            if attempt:
                delay = self.backoff_s * 2 ** (attempt - 1) * random.uniform(0.8, 1.2)
                await asyncio.sleep(max(delay, wait_at_least))
            wait_at_least = 0.0
            try:
                status, headers, raw = await self._attempt(client, body)
            except (TimeoutError, httpx.TimeoutException):
                last = f"timed out after {self.timeout_s} s"
                continue
            except httpx.TransportError as err:
                last = self._safe(
                    f"cannot reach {redact_url(str(self.base_url))}: {type(err).__name__}: {err}"
                )
                continue
            resp = self._decode(headers, raw)
            if status in _RETRY_STATUS:
                last = f"server answered {status}: {self._excerpt(resp.text, 200)}"
                if status in _RETRY_AFTER_STATUS:
                    asked = retry_after_s(headers.get("retry-after"))
                    if asked is not None:
                        wait_at_least = min(asked, self.max_retry_after_s)
                        last += f" (Retry-After {asked:g} s)"
                continue
            if 300 <= status < 400:
                where = headers.get("location")
                raise BackendError(
                    f"{self.shown_endpoint} answered {status} (redirect) to "
                    f"{redact_url(where)!r}; set the base URL to that address"
                    if where
                    else f"{self.shown_endpoint} answered {status} (redirect) without a Location; "
                    "check the base URL"
                )
            if status >= 400:
                raise BackendError(
                    f"{self.shown_endpoint} answered {status}: "
                    f"{self._excerpt(resp.text, 300)}; check the model name and key"
                )
            if not 200 <= status < 300:
                raise BackendError(
                    f"{self.shown_endpoint} answered {status}: {self._excerpt(resp.text, 200)}; "
                    "expected 200 with a chat completion"
                )
            return self._parse(resp)
        raise BackendError(
            f"{self.shown_endpoint}: {last} (after {self.retries + 1} attempt(s)); is "
            "the server running? set ORCHESTRACE_OPENAI_BASE_URL"
        )

    def _parse(self, resp: Any) -> LLMResponse:
        try:
            data = resp.json()
            choice = data["choices"][0]
            text = choice["message"]["content"] or ""
            if not isinstance(text, str):
                raise TypeError("content is not a string")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as err:
            raise BackendError(
                f"{self.shown_endpoint} answered something that is not a chat "
                f"completion ({type(err).__name__}: {self._safe(str(err))[:200]}): "
                f"{self._excerpt(resp.text, 200)}"
            ) from None
        try:
            tin = _usage(data, "prompt_tokens")
            tout = _usage(data, "completion_tokens")
        except ValueError as err:
            raise BackendError(
                f"{self.shown_endpoint}: {self._safe(str(err))}; the call is recorded as failed "
                "because its cost is unknown (check the server's OpenAI compatibility)"
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
