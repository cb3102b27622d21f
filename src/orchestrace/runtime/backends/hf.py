"""A local transformers causal LM (optional extra: ``pip install 'orchestrace[hf]'``).

The model is loaded from a local directory or hub id (``HF_HUB_OFFLINE=1`` is honoured), or
passed in already loaded. Generation runs in a worker thread, one request at a time, so the
event loop stays responsive; the latency recorded is the real generation time.

Example (tiny model built from a config, no download)::

    backend = HFBackend(model="path/to/tiny-model", max_new_tokens=8)
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from orchestrace._safe import redact
from orchestrace.errors import ConfigError
from orchestrace.runtime.backends.base import BackendError, LLMRequest, LLMResponse
from orchestrace.runtime.prompts import parse

__all__ = ["HFBackend", "require_transformers"]


def require_transformers() -> tuple[Any, Any]:
    """Import torch and transformers, or say how to install them."""
    try:
        import torch
        import transformers
    except ImportError:
        raise ImportError(
            "the hf backend needs torch and transformers: pip install 'orchestrace[hf]' "
            "(CPU torch: pip install torch==2.13.0)"
        ) from None
    return torch, transformers


@dataclass
class HFBackend:
    """Generate with a local ``transformers`` model.

    Args:
        model: A directory or hub id, or a loaded ``PreTrainedModel``.
        tokenizer: A tokenizer (default: loaded from ``model``).
        device: ``cpu``, ``cuda``, ``cuda:0``...
        max_new_tokens: Cap on generated tokens (the request's ``max_tokens`` may lower it).
        do_sample: Sample instead of greedy decoding.
        temperature: Sampling temperature (with ``do_sample``; default: the model's).
        top_p: Nucleus sampling mass (with ``do_sample``; default: the model's).
    """

    model: Any
    tokenizer: Any = None
    device: str = "cpu"
    max_new_tokens: int = 128
    do_sample: bool = False
    temperature: float | None = None
    top_p: float | None = None
    name: str = "hf"
    virtual: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _loaded: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1 (got {self.max_new_tokens})")

    def load(self) -> None:
        """Load model and tokenizer (done on first use)."""
        if self._loaded:
            return
        torch, transformers = require_transformers()
        source = self.model
        try:
            if isinstance(source, str):
                self.model = transformers.AutoModelForCausalLM.from_pretrained(source)
            if self.tokenizer is None:
                self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                    source if isinstance(source, str) else source.name_or_path
                )
        except (OSError, ValueError) as err:
            raise ConfigError(
                redact(
                    f"cannot load model {source!r}: {err}; pass a local directory "
                    "holding config, weights and tokenizer"
                )
            ) from None
        self.model.to(self.device)
        self.model.eval()
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        self._torch = torch
        self._loaded = True

    def _prompt(self, request: LLMRequest) -> str:
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            return str(
                tok.apply_chat_template(
                    request.messages, tokenize=False, add_generation_prompt=True
                )
            )
        return "\n".join(f"{m['role']}: {m['content']}" for m in request.messages) + "\nassistant:"

    def _generate(self, request: LLMRequest) -> LLMResponse:
        with self._lock:
            self.load()
            torch = self._torch
            enc = self.tokenizer(self._prompt(request), return_tensors="pt").to(self.device)
            n_in = int(enc["input_ids"].shape[1])
            t0 = time.perf_counter()
            with torch.no_grad():
                out = self.model.generate(
                    **enc,
                    max_new_tokens=min(self.max_new_tokens, request.max_tokens),
                    do_sample=self.do_sample,
                    **self._sampling(),
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            new = out[0, n_in:]
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            latency = time.perf_counter() - t0
        return LLMResponse(
            text,
            parse(text),
            n_in,
            int(new.shape[0]),
            latency,
            0.0,
            str(getattr(self.model, "name_or_path", "hf")) or "hf",
        )

    def _sampling(self) -> dict[str, Any]:
        if not self.do_sample:
            return {}
        out: dict[str, Any] = {}
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.top_p is not None:
            out["top_p"] = self.top_p
        return out

    def spec(self) -> dict[str, Any]:
        """Everything that rebuilds this backend: the model's directory or hub id and options.

        A model passed already loaded is recorded by its ``name_or_path``; without one the
        spec has no ``options`` (the backend cannot be rebuilt from the trace).
        """
        out = self.describe()
        if out["model"]:
            out["options"] = {
                "model": out["model"],
                "device": str(self.device),
                "max_new_tokens": self.max_new_tokens,
                "do_sample": self.do_sample,
                "temperature": self.temperature,
                "top_p": self.top_p,
            }
        return out

    def describe(self) -> dict[str, Any]:
        """What the trace header records about this backend (model and device)."""
        model = (
            self.model if isinstance(self.model, str) else getattr(self.model, "name_or_path", "")
        )
        return {
            "name": self.name,
            "virtual": self.virtual,
            "model": redact(str(model)),
            "device": str(self.device),
        }

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Generate in a worker thread."""
        try:
            return await asyncio.to_thread(self._generate, request)
        except (RuntimeError, ValueError) as err:
            raise BackendError(f"generation failed: {type(err).__name__}: {err}") from None

    async def aclose(self) -> None:
        """Nothing to close (the model stays loaded)."""
