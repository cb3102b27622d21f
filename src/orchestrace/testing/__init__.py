"""Helpers for tests (yours and ours): traces, a scripted model, a tiny LM and a chat server.

Quick traces, a scripted model, a tiny local LM, and a local OpenAI-compatible chat server
(:class:`ChatServer`) with a seeded model behind it.

Example:
    >>> import asyncio
    >>> from orchestrace.runtime.backends.base import LLMRequest
    >>> m = MockModel(["ANSWER: 1", "ANSWER: 2"], latency=0.5)
    >>> r = asyncio.run(m.complete(LLMRequest("a", "worker", "solve", [])))
    >>> r.answer, r.latency, m.calls
    (1, 0.5, 1)
    >>> make_trace(agents=3, steps=20).n_events
    20
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrace.runtime.backends.base import BackendError, LLMRequest, LLMResponse
from orchestrace.runtime.backends.hf import require_transformers
from orchestrace.runtime.prompts import parse
from orchestrace.testing.server import ChatServer, SeededArithmeticModel
from orchestrace.trace.generate import generate_trace
from orchestrace.trace.model import Trace

__all__ = ["ChatServer", "MockModel", "SeededArithmeticModel", "make_trace", "tiny_causal_lm"]


def make_trace(agents: int = 4, steps: int = 40, depth: int = 1, seed: int = 0) -> Trace:
    """A valid synthetic trace (see :func:`orchestrace.generate_trace`)."""
    return generate_trace(agents, steps, depth, seed)


@dataclass
class MockModel:
    """A backend answering from a script: a list of texts (cycled) or ``fn(request) -> text``.

    A text that is an ``Exception`` instance is raised as a :class:`BackendError`.
    """

    script: Sequence[Any] | Callable[[LLMRequest], Any]
    latency: float = 0.0
    virtual: bool = True
    name: str = "mock"
    calls: int = 0
    requests: list[LLMRequest] = field(default_factory=list)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer from the script."""
        self.requests.append(request)
        if callable(self.script):
            text = self.script(request)
        else:
            text = self.script[self.calls % len(self.script)]
        self.calls += 1
        if not self.virtual and self.latency:
            await asyncio.sleep(self.latency)  # real time passes on a real-time run
        if isinstance(text, BaseException):
            raise BackendError(str(text))
        text = str(text)
        return LLMResponse(
            text, parse(text), 10, max(1, len(text) // 4), self.latency, 0.0, self.name
        )

    async def aclose(self) -> None:
        """Nothing to release."""
        return None


def tiny_causal_lm(path: str | Path, *, vocab: Sequence[str] | None = None, seed: int = 0) -> Path:
    """Build and save a tiny GPT-2 model and word-level tokenizer (no download).

    Needs the ``[hf]`` extra. Returns ``path``, loadable by ``HFBackend(model=path)``.
    """
    torch, transformers = require_transformers()
    from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: PLC0415  optional extra [hf]

    path = Path(path)
    words = list(
        vocab
        or [
            "ANSWER:",
            "accept",
            "reject",
            *map(str, range(50)),
            "the",
            "is",
            "system",
            "user",
            "assistant:",
            "a",
            "of",
            "to",
        ]
    )
    table = {"[UNK]": 0, "[PAD]": 1, "[EOS]": 2}
    for w in words:
        table.setdefault(w, len(table))
    tk = Tokenizer(models.WordLevel(table, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", eos_token="[EOS]"
    )
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(
        vocab_size=len(table),
        n_positions=512,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=2,
        eos_token_id=2,
        pad_token_id=1,
    )
    model = transformers.GPT2LMHeadModel(cfg)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    fast.save_pretrained(path)
    return path
