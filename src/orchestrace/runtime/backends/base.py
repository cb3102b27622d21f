"""The backend protocol: one LLM call in (:class:`LLMRequest`), one answer out (:class:`LLMResponse`).

Every backend (simulated, OpenAI-compatible server, local transformers model) implements
``async complete(request) -> LLMResponse``. The harness renders prompts into ``messages``;
``payload`` carries the structured form of the same request (the simulator reads it, real models
read the messages). ``latency`` is the time the call took (virtual seconds for the simulator).

Example:
    >>> req = LLMRequest(agent="w1", role="worker", kind="solve", messages=[
    ...     {"role": "user", "content": "2+2?"}], payload={"truth": 4})
    >>> len(request_key(req, 0)), request_key(req, 0) == request_key(req, 0) != request_key(req, 1)
    (32, True)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import msgspec

from orchestrace._safe import redact

__all__ = [
    "Backend",
    "BackendError",
    "LLMRequest",
    "LLMResponse",
    "backend_spec",
    "redact",
    "request_key",
]

_ENC = msgspec.json.Encoder(order="deterministic")


@dataclass(frozen=True)
class LLMRequest:
    """One LLM call.

    Attributes:
        agent: Calling agent.
        role: Its role (the simulator's skill and latency depend on it).
        kind: What is asked: ``solve``, ``plan``, ``judge``, ``critique``, ``revise``, ...
        messages: Chat messages (``{"role", "content"}``) rendered by the harness.
        payload: Structured form of the request (JSON-serialisable).
        max_tokens: Completion budget.
        temperature: Sampling temperature (real backends).
    """

    agent: str
    role: str
    kind: str
    messages: list[dict[str, str]]
    payload: dict[str, Any] = field(default_factory=dict)
    max_tokens: int = 512
    temperature: float = 0.0

    def fingerprint(self) -> bytes:
        """Canonical bytes of everything that determines the answer."""
        return _ENC.encode(
            [self.role, self.kind, self.messages, self.payload, self.max_tokens, self.temperature]
        )


@dataclass(frozen=True)
class LLMResponse:
    """One LLM answer.

    Attributes:
        text: The completion.
        answer: The parsed answer (``None`` when the text held none).
        tokens_in: Prompt tokens.
        tokens_out: Completion tokens.
        latency: Seconds the call took.
        cost: Monetary or abstract cost.
        model: Model name.
        error: Set when the call failed (the text is then empty).
        confidence: The model's confidence in its answer, in [0, 1], when it reports one.
    """

    text: str
    answer: Any = None
    tokens_in: int = 0
    tokens_out: int = 0
    latency: float = 0.0
    cost: float = 0.0
    model: str = ""
    error: str | None = None
    confidence: float | None = None


class BackendError(Exception):
    """A backend call failed after its retries (recorded as a failed ``llm_call``).

    The message is redacted (see :func:`orchestrace._safe.redact`): it never holds an API key,
    an ``Authorization`` value or a password, whatever the server echoed back.
    """

    def __init__(self, message: str) -> None:
        super().__init__(redact(str(message)))


def backend_spec(backend: Any) -> dict[str, Any]:
    """What a trace header records about ``backend`` (``meta.backend``), never a credential.

    A backend that defines ``spec() -> dict`` records it: name, ``virtual`` flag, what it is
    (model, server address) and ``options``, the constructor arguments that rebuild it
    (see :func:`orchestrace.runtime.backends.backend_from_spec`). Any other backend records
    its name, ``virtual`` flag and ``describe()``; without ``options`` it cannot be rebuilt.

    Example:
        >>> from orchestrace.runtime.backends.openai import OpenAIBackend
        >>> s = backend_spec(OpenAIBackend(base_url="http://u:pw@h:8/v1", model="m", api_key="k"))
        >>> s["name"], s["virtual"], s["model"], s["base_url"], s["options"]["retries"]
        ('openai', False, 'm', 'http://h:8/v1', 3)
    """
    spec: dict[str, Any] = {"name": str(backend.name), "virtual": bool(backend.virtual)}
    for method in ("spec", "describe"):
        fn = getattr(backend, method, None)
        extra = fn() if callable(fn) else None
        if isinstance(extra, dict):
            spec.update({str(k): _scrub(v) for k, v in extra.items()})
            break
    return spec


def _scrub(value: Any) -> Any:
    """``value`` with every string redacted (recursively)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {str(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


@runtime_checkable
class Backend(Protocol):
    """An LLM backend."""

    name: str
    #: True when ``latency`` is simulated (the run uses virtual time).
    virtual: bool

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer one request. Raises :class:`BackendError` when it cannot."""
        ...

    async def aclose(self) -> None:
        """Release connections and models."""
        ...


def request_key(request: LLMRequest, occurrence: int, *, fingerprint: bytes | None = None) -> str:
    """Replay key of a call: agent, hash of its inputs, and how often it made this call before.

    Counting repeats of the same inputs (instead of a global call index) keeps the keys of
    unchanged calls stable when a counterfactual fork changes other calls. ``fingerprint``,
    when given, must be ``request.fingerprint()`` (a caller that has it saves encoding again).
    """
    h = hashlib.blake2b(digest_size=16)
    h.update(request.agent.encode("utf-8", "surrogatepass"))
    h.update(b"\x00")
    h.update(request.fingerprint() if fingerprint is None else fingerprint)
    h.update(occurrence.to_bytes(8, "little"))
    return h.hexdigest()
