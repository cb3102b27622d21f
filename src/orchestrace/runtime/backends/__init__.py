"""LLM backends behind one protocol: ``sim`` (default), ``openai``, ``hf``.

Example:
    >>> make_backend("sim", seed=3).name
    'sim'
"""

from __future__ import annotations

from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.runtime.backends.base import (
    Backend,
    BackendError,
    LLMRequest,
    LLMResponse,
    request_key,
)
from orchestrace.runtime.backends.sim import SimBackend

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "LLMRequest",
    "LLMResponse",
    "SimBackend",
    "make_backend",
    "request_key",
]

BACKENDS = ("sim", "openai", "hf")


def make_backend(name: str, **kw: Any) -> Backend:
    """Build a backend by name (``sim``, ``openai``, ``hf``) with its keyword options.

    Raises:
        ConfigError: Unknown backend or bad options.
    """
    if name == "sim":
        return SimBackend(**kw)
    if name == "openai":
        from orchestrace.runtime.backends.openai import OpenAIBackend

        return OpenAIBackend(**kw)
    if name == "hf":
        from orchestrace.runtime.backends.hf import HFBackend

        return HFBackend(**kw)
    raise ConfigError(f"unknown backend {name!r}; use one of: {', '.join(BACKENDS)}")
