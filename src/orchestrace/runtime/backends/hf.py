"""A local transformers causal LM (optional extra: ``pip install 'orchestrace[hf]'``).

The model is loaded from a local directory or hub id (``HF_HUB_OFFLINE=1`` is honoured), or
passed in already loaded. Concurrent requests from many agents are batched dynamically: a
collector on the event loop gathers the requests that arrive together (up to ``max_batch``,
waiting at most ``max_wait_ms`` for more) and answers them with one left-padded ``generate``
call in a worker thread, so the event loop stays responsive. Requests whose sampling settings
differ are generated in separate groups. The latency recorded is the real generation time of
the batch.

Every answer carries a token record (:mod:`orchestrace.trace.tokens`): prompt and completion
token ids, the behaviour log-probability of each completion token (under the distribution it
was drawn from) and the loss mask; the runtime stores it in the trace's token table.

Example (tiny model built from a config, no download)::

    backend = HFBackend(model="path/to/tiny-model", max_new_tokens=8, max_batch=16)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from orchestrace._safe import redact
from orchestrace.errors import ConfigError
from orchestrace.runtime.backends.base import BackendError, LLMRequest, LLMResponse
from orchestrace.runtime.prompts import parse

__all__ = ["HFBackend", "HFResponse", "require_transformers"]


def require_transformers() -> tuple[Any, Any]:
    """Import torch and transformers, or say how to install them."""
    try:
        import torch  # noqa: PLC0415  optional extra [learn] or [hf]
        import transformers  # noqa: PLC0415  optional extra [hf]
    except ImportError:
        raise ImportError(
            "the hf backend needs torch and transformers: pip install 'orchestrace[hf]' "
            "(CPU torch: pip install torch==2.13.0)"
        ) from None
    return torch, transformers


@dataclass(frozen=True)
class HFResponse(LLMResponse):
    """An answer with its token record (``prompt_ids``, ``completion_ids``, ``logprobs``, ``mask``).

    Example:
        >>> r = HFResponse("STOP", token_record={"prompt_ids": [1], "completion_ids": [4],
        ...     "logprobs": [-0.1], "mask": [1]})
        >>> r.token_record["completion_ids"]
        [4]
    """

    token_record: dict[str, list[Any]] | None = None


@dataclass
class HFBackend:
    """Generate with a local ``transformers`` model, batching concurrent requests.

    Args:
        model: A directory or hub id, or a loaded ``PreTrainedModel``.
        tokenizer: A tokenizer (default: loaded from ``model``).
        device: ``cpu``, ``cuda``, ``cuda:0``...
        max_new_tokens: Cap on generated tokens (the request's ``max_tokens`` may lower it).
        do_sample: Sample instead of greedy decoding (a request with ``temperature > 0``
            samples at that temperature whatever this says).
        temperature: Sampling temperature (with ``do_sample``; default: the model's).
        top_p: Nucleus sampling mass (with ``do_sample``; default: the model's).
        top_k: Keep the k most likely tokens when sampling (``0``: all; default: the model's).
        max_batch: Most requests answered by one ``generate`` call (1: one at a time).
        max_wait_ms: Longest wait for more requests once one is queued.
        seed: Seeds sampling (each batch draws from ``seed`` and its batch number).
        require_chat_template: Refuse a tokenizer without a chat template instead of
            rendering ``role: content`` lines.
        plain_sampling: Sample from exactly ``softmax(logits / temperature)``: every other
            logits processor or warper that the model's ``generation_config`` would add
            (repetition penalty, top-k, top-p, min-p, typical-p, minimum length, no-repeat
            n-grams, bad words, forced or suppressed tokens, beams...) is switched off, and a
            batch sampled from any other distribution is refused. A trainer that recomputes
            the log-probs from the logits needs it; the recorded ``logprobs`` are then those of
            the distribution each token was drawn from.
    """

    model: Any
    tokenizer: Any = None
    device: str = "cpu"
    max_new_tokens: int = 128
    do_sample: bool = False
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_batch: int = 8
    max_wait_ms: float = 5.0
    seed: int | None = None
    require_chat_template: bool = False
    plain_sampling: bool = False
    name: str = "hf"
    virtual: bool = False
    _batch_sizes: list[int] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _loaded: bool = field(default=False, repr=False)
    _queues: dict[Any, list[tuple[LLMRequest, Any]]] = field(default_factory=dict, repr=False)
    _workers: dict[Any, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1 (got {self.max_new_tokens})")
        if self.max_batch < 1:
            raise ConfigError(f"max_batch must be >= 1 (got {self.max_batch})")
        if not self.max_wait_ms >= 0:
            raise ConfigError(f"max_wait_ms must be >= 0 (got {self.max_wait_ms})")

    @property
    def generate_calls(self) -> int:
        """How many ``generate`` calls answered requests so far."""
        return len(self._batch_sizes)

    @property
    def batch_sizes(self) -> list[int]:
        """The number of requests each ``generate`` call answered, in order."""
        return list(self._batch_sizes)

    def load(self) -> None:
        """Load model and tokenizer (done on first use).

        Raises:
            ConfigError: The model or tokenizer cannot be loaded, or (with
                ``require_chat_template``) the tokenizer has no chat template.
        """
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
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ConfigError(
                redact(
                    f"cannot load model {source!r}: {str(err)[:300]}; pass a local directory "
                    "holding config, weights and tokenizer"
                )
            ) from None
        if self.require_chat_template and not getattr(self.tokenizer, "chat_template", None):
            raise ConfigError(
                f"the tokenizer of {source!r} has no chat template; set tokenizer.chat_template "
                "(a Jinja template) and save it, or use an instruct model's tokenizer"
            )
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

    def prompt_ids(self, request: LLMRequest) -> list[int]:
        """The token ids the model reads for ``request`` (its rendered chat prompt)."""
        self.load()
        ids = self.tokenizer(self._prompt(request), add_special_tokens=False)["input_ids"]
        return [int(x) for x in ids]

    def _sampling_of(self, request: LLMRequest) -> tuple[bool, float | None, float | None]:
        if request.temperature > 0:
            return True, float(request.temperature), self.top_p
        if not self.do_sample:
            return False, None, None
        return True, self.temperature, self.top_p

    def generate_batch(self, requests: list[LLMRequest]) -> list[HFResponse]:
        """Answer ``requests`` now, one ``generate`` call per group of equal sampling settings.

        Thread-safe (one batch generates at a time). Greedy answers do not depend on which
        other requests share the batch.

        Raises:
            ConfigError: The model cannot be loaded.
        """
        groups: dict[tuple[bool, float | None, float | None], list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(self._sampling_of(r), []).append(i)
        out: list[HFResponse | None] = [None] * len(requests)
        with self._lock:
            self.load()
            for key, idx in groups.items():
                for lo in range(0, len(idx), self.max_batch):
                    part = idx[lo : lo + self.max_batch]
                    for i, resp in zip(
                        part, self._generate(key, [requests[i] for i in part]), strict=True
                    ):
                        out[i] = resp
        return [r for r in out if r is not None]

    def _generate(
        self, sampling: tuple[bool, float | None, float | None], reqs: list[LLMRequest]
    ) -> list[HFResponse]:
        torch = self._torch
        tok = self.tokenizer
        do_sample, temperature, top_p = sampling
        prompts = [self.prompt_ids(r) for r in reqs]
        width = max(len(p) for p in prompts)
        pad = int(tok.pad_token_id)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], dtype=torch.long)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        budgets = [max(1, min(self.max_new_tokens, r.max_tokens)) for r in reqs]
        kw: dict[str, Any] = {"do_sample": do_sample}
        if self.plain_sampling:  # the model's own generation_config is set aside meanwhile
            kw["output_logits"] = True
            if do_sample:
                kw.update(temperature=float(temperature or 1.0), top_k=0, top_p=1.0)
        elif do_sample:
            if temperature is not None:
                kw["temperature"] = temperature
            if top_p is not None:
                kw["top_p"] = top_p
            if self.top_k is not None:
                kw["top_k"] = self.top_k
        if do_sample and self.seed is not None:
            torch.manual_seed(self.seed * 1_000_003 + self.generate_calls)  # per batch
        eos = tok.eos_token_id
        t0 = time.perf_counter()
        with torch.no_grad(), _plain_generation(self.model, self.plain_sampling):
            out = self.model.generate(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                max_new_tokens=max(budgets),
                pad_token_id=pad,
                eos_token_id=eos,
                return_dict_in_generate=True,
                output_scores=True,
                **kw,
            )
        self._batch_sizes.append(len(reqs))
        scores = torch.stack(out.scores, dim=1).float()  # [batch, steps, vocab], as sampled
        seq = out.sequences[:, width:]
        logp = torch.log_softmax(scores, dim=-1).gather(-1, seq.unsqueeze(-1)).squeeze(-1)
        if self.plain_sampling:
            raw = torch.stack(out.logits, dim=1).float() / (temperature or 1.0)
            plain = torch.log_softmax(raw, dim=-1).gather(-1, seq.unsqueeze(-1)).squeeze(-1)
            self._check_plain(logp, plain, seq, eos)
            logp = plain
        latency = time.perf_counter() - t0
        model_name = str(getattr(self.model, "name_or_path", "hf")) or "hf"
        answers = []
        for b, prompt in enumerate(prompts):
            row = [int(x) for x in seq[b].tolist()][: budgets[b]]
            if eos is not None and eos in row:
                row = row[: row.index(eos) + 1]  # the end token is generated; padding is not
            lps = [min(0.0, float(x)) for x in logp[b, : len(row)].tolist()]
            text = tok.decode(row, skip_special_tokens=True)
            answers.append(
                HFResponse(
                    text,
                    parse(text),
                    len(prompt),
                    len(row),
                    latency,
                    0.0,
                    model_name,
                    token_record={
                        "prompt_ids": prompt,
                        "completion_ids": row,
                        "logprobs": lps,
                        "mask": [1] * len(row),
                    },
                )
            )
        return answers

    def _check_plain(self, logp: Any, plain: Any, seq: Any, eos: int | None) -> None:
        """Refuse a batch whose tokens were not drawn from ``softmax(logits / temperature)``."""
        torch = self._torch
        live = torch.ones_like(seq, dtype=torch.bool)
        if eos is not None:  # steps after a row's end token are padding
            ended = (seq == eos).long().cumsum(-1) - (seq == eos).long()
            live = ended == 0
        gap = ((logp - plain).abs() * live).max().item() if seq.numel() else 0.0
        if not gap <= 1e-4:
            raise ConfigError(
                f"the model {self.describe()['model']!r} samples from a distribution other than "
                f"softmax(logits / temperature) (log-prob gap {gap:.3g}): its generation_config "
                "adds a logits processor that cannot be switched off; remove it from "
                "generation_config.json (or use an untouched model directory)"
            )

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
                "top_k": self.top_k,
                "max_batch": self.max_batch,
                "max_wait_ms": self.max_wait_ms,
                "seed": self.seed,
                "plain_sampling": self.plain_sampling,
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
        """Queue ``request``; the collector answers it within a batch of concurrent requests."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[LLMResponse] = loop.create_future()
        queue = self._queues.setdefault(loop, [])
        queue.append((request, fut))
        worker = self._workers.get(loop)
        if worker is None or worker.done():
            self._workers[loop] = loop.create_task(self._collect(loop))
        return await fut

    async def _collect(self, loop: asyncio.AbstractEventLoop) -> None:
        """Gather the requests that arrive together, answer them, repeat while any wait."""
        queue = self._queues[loop]
        while queue:
            t0 = time.monotonic()
            seen = -1
            # yield to the loop until no new request arrives (or the batch is full / time is up)
            while len(queue) != seen and len(queue) < self.max_batch:
                seen = len(queue)
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                if (time.monotonic() - t0) * 1000 >= self.max_wait_ms:
                    break
            batch = queue[: self.max_batch]
            del queue[: len(batch)]
            live = [(r, f) for r, f in batch if not f.done()]
            if not live:
                continue
            try:
                answers = await asyncio.to_thread(self.generate_batch, [r for r, _ in live])
            except Exception as err:  # every waiting caller gets an answer: never a hang
                failure = BackendError(f"generation failed: {type(err).__name__}: {err}")
                for _, f in live:
                    if not f.done():
                        f.set_exception(failure)
                continue
            for (_, f), resp in zip(live, answers, strict=True):
                if not f.done():
                    f.set_result(resp)
        self._workers.pop(loop, None)
        self._queues.pop(loop, None)

    async def aclose(self) -> None:
        """Nothing to close (the model stays loaded)."""


@contextlib.contextmanager
def _plain_generation(model: Any, on: bool) -> Iterator[None]:
    """With ``on``, the model generates under :func:`_plain_config` instead of its own config.

    ``generate`` fills every setting a call leaves unset from the model's
    ``generation_config`` (a shipped ``repetition_penalty``, ``no_repeat_ngram_size``,
    ``bad_words_ids``...); setting it aside leaves only what the call asks for.
    """
    if not on:
        yield
        return
    base = model.get_base_model() if callable(getattr(model, "get_base_model", None)) else model
    targets = [m for m in {id(model): model, id(base): base}.values()]
    saved = [m.__dict__.get("generation_config") for m in targets]
    try:
        for m in targets:
            if "generation_config" in m.__dict__:
                m.generation_config = _plain_config()
        yield
    finally:
        for m, g in zip(targets, saved, strict=True):
            if g is not None:
                m.generation_config = g


def _plain_config() -> Any:
    """A ``GenerationConfig`` with every logits processor and warper at its neutral value."""
    from transformers import GenerationConfig  # noqa: PLC0415  optional extra [hf]

    make: Any = GenerationConfig
    return make(
        top_k=0,
        top_p=1.0,
        typical_p=1.0,
        epsilon_cutoff=0.0,
        eta_cutoff=0.0,
        repetition_penalty=1.0,
        encoder_repetition_penalty=1.0,
        no_repeat_ngram_size=0,
        encoder_no_repeat_ngram_size=0,
        min_length=0,
        num_beams=1,
        num_beam_groups=1,
        diversity_penalty=0.0,
        length_penalty=1.0,
        renormalize_logits=False,
        remove_invalid_values=False,
    )
