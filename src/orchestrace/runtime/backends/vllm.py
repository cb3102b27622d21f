"""vLLM rollouts with token ids and log-probabilities (optional extra: ``pip install vllm``).

Two modes serve the same contract as :class:`~orchestrace.runtime.backends.hf.HFBackend`:
every answer is an :class:`~orchestrace.runtime.backends.hf.HFResponse` whose token record
holds the prompt and completion token ids, the behaviour log-probability of each completion
token and the loss mask, which the runtime stores in the trace's token table
(:mod:`orchestrace.trace.tokens`).

``mode="server"`` (default) talks to a running ``vllm serve MODEL`` (OpenAI-compatible,
``/v1/chat/completions``) and asks, with every call, for vLLM's extensions to the OpenAI
request: ``logprobs: true`` with ``top_logprobs: 0`` (the sampled token's log-probability),
``return_token_ids: true`` (top-level ``prompt_token_ids`` and per-choice ``token_ids``,
vLLM 0.10.2 and later) and ``return_tokens_as_token_ids: true`` (each logprob entry's token
is ``"token_id:<id>"``, so the completion ids are exact even when ``token_ids`` is absent).
A server that answers without them is a failed call whose message names the missing field.
Retries, timeouts and credential handling are those of
:class:`~orchestrace.runtime.backends.openai.OpenAIBackend`.

``mode="engine"`` runs ``vllm.LLM`` in process (a GPU, vLLM 0.10 or later): the prompt is
rendered with the tokenizer's chat template, generated from its token ids with
``SamplingParams(logprobs=0)``, and the ids and log-probabilities are read from the
``RequestOutput``.

Weight updates between trainer steps (:meth:`VLLMBackend.load_weights`,
:meth:`VLLMBackend.load_lora_adapter`):

* engine mode: ``load_weights(model)`` hands the trainer's ``named_parameters()`` to the
  engine's model with ``LLM.apply_model(lambda m: m.load_weights(...))`` (vLLM 0.10+; run with
  ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` so the engine core shares the trainer's process), or,
  on older releases, through ``llm.llm_engine.model_executor.driver_worker`` (V0 engine); then
  ``LLM.reset_prefix_cache()`` drops cached prefixes computed with the old weights.
* server mode: a running server keeps its base weights. ``load_lora_adapter(name, path)``
  posts ``{"lora_name", "lora_path"}`` to vLLM's ``POST /v1/load_lora_adapter`` (start the
  server with ``--enable-lora`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``) and routes the
  following calls to the adapter (the request's ``model`` is its name). To serve full updated
  weights, save the checkpoint and restart ``vllm serve`` on it.

Example:
    >>> b = VLLMBackend(base_url="http://127.0.0.1:8000/v1", model="qwen")
    >>> b.name, b.spec()["options"]["mode"], b.spec()["options"]["model"]
    ('vllm', 'server', 'qwen')
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from orchestrace._safe import decimal, redact, redact_url
from orchestrace.errors import ConfigError
from orchestrace.runtime.backends.base import BackendError, LLMRequest, LLMResponse
from orchestrace.runtime.backends.hf import HFResponse
from orchestrace.runtime.backends.openai import OpenAIBackend
from orchestrace.runtime.prompts import parse

__all__ = ["VLLMBackend", "require_vllm", "token_record_of"]

_MODES = ("server", "engine")
_TOKEN_PREFIX = "token_id:"


def require_vllm() -> Any:
    """Import ``vllm``, or say how to install it."""
    try:
        import vllm  # type: ignore[import-not-found]  # noqa: PLC0415  optional dependency (vllm)
    except ImportError:
        raise ImportError(
            "the vllm backend's engine mode needs vLLM (a CUDA GPU): pip install vllm; "
            "or run `vllm serve MODEL` elsewhere and use mode='server' with its base_url"
        ) from None
    return vllm


def _ids(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value
    ):
        raise ValueError(f"{what} is not a list of token ids")
    return list(value)


def _token_id(token: Any) -> int | None:
    if isinstance(token, str) and token.startswith(_TOKEN_PREFIX):
        tail = token[len(_TOKEN_PREFIX) :]
        return decimal(tail)
    return None


def token_record_of(data: dict[str, Any]) -> dict[str, list[Any]]:
    """The token record of one vLLM chat completion (its first choice).

    Raises:
        ValueError: The answer lacks ``prompt_token_ids``, logprobs or token ids (the message
            names the field and the request flag that returns it).

    Example:
        >>> token_record_of({"prompt_token_ids": [1, 2], "choices": [{"token_ids": [7],
        ...     "logprobs": {"content": [{"token": "token_id:7", "logprob": -0.5}]}}]})
        {'prompt_ids': [1, 2], 'completion_ids': [7], 'logprobs': [-0.5], 'mask': [1]}
    """
    choice = data["choices"][0]
    content = (choice.get("logprobs") or {}).get("content")
    if not isinstance(content, list):
        raise ValueError(
            "the answer has no choices[0].logprobs.content; the server ignored 'logprobs': true "
            "(serve with vLLM, which honours logprobs, and do not set --max-logprobs 0)"
        )
    lps: list[float] = []
    from_tokens: list[int | None] = []
    for entry in content:
        lp = entry.get("logprob") if isinstance(entry, dict) else None
        if isinstance(lp, bool) or not isinstance(lp, int | float) or math.isnan(lp):
            raise ValueError(f"a logprobs.content entry has no numeric logprob: {entry!r:.80}")
        lps.append(min(0.0, float(lp)))
        from_tokens.append(_token_id(entry.get("token")))
    if choice.get("token_ids") is not None:
        completion = _ids(choice["token_ids"], "choices[0].token_ids")
    elif all(t is not None for t in from_tokens):
        completion = [int(t) for t in from_tokens if t is not None]
    else:
        raise ValueError(
            "the answer has neither choices[0].token_ids nor 'token_id:<id>' logprob tokens; "
            "the server ignored 'return_token_ids' and 'return_tokens_as_token_ids' "
            "(use vLLM 0.10.2 or later)"
        )
    if len(completion) != len(lps):
        raise ValueError(
            f"{len(completion)} completion token ids but {len(lps)} logprobs; the server's "
            "token ids and logprobs disagree"
        )
    if data.get("prompt_token_ids") is None:
        raise ValueError(
            "the answer has no prompt_token_ids; the server ignored 'return_token_ids': true "
            "(use vLLM 0.10.2 or later)"
        )
    prompt = _ids(data["prompt_token_ids"], "prompt_token_ids")
    return {
        "prompt_ids": prompt,
        "completion_ids": completion,
        "logprobs": lps,
        "mask": [1] * len(completion),
    }


@dataclass(repr=False)
class VLLMBackend(OpenAIBackend):
    """vLLM rollouts, from a server or an in-process engine, with token ids and logprobs.

    Args:
        mode: ``server`` (a running ``vllm serve``; ``base_url`` ends in ``/v1``) or
            ``engine`` (in-process ``vllm.LLM`` of ``model``, a local directory or hub id).
        model: Server: the served model (or LoRA adapter) name. Engine: the model to load.
        gpu_memory_utilization: Engine: share of GPU memory vLLM may take.
        dtype: Engine: weight dtype (``auto``, ``bfloat16``, ``float16``...).
        max_model_len: Engine: context length (default: the model's).
        **rest: Every option of :class:`~orchestrace.runtime.backends.openai.OpenAIBackend`
            (``base_url``, ``temperature``, ``top_p``, ``max_tokens``, ``seed``, retries...).

    Example:
        >>> b = VLLMBackend(mode="engine", model="/models/Qwen2.5-0.5B-Instruct")
        >>> b.describe()["mode"], b.virtual
        ('engine', False)
    """

    mode: str = "server"
    gpu_memory_utilization: float = 0.5
    dtype: str = "auto"
    max_model_len: int | None = None
    name: str = "vllm"
    _llm: Any = field(default=None, repr=False)
    _engine_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _generate_calls: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise ConfigError(f"mode must be server or engine (got {self.mode!r})")
        if self.mode == "engine" and not self.model:
            raise ConfigError("engine mode needs model=<local directory or hub id>")
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ConfigError(
                f"gpu_memory_utilization must be in (0, 1] (got {self.gpu_memory_utilization!r})"
            )
        super().__post_init__()

    def __repr__(self) -> str:
        where = (
            f"base_url={redact_url(str(self.base_url))!r}" if self.mode == "server" else "engine"
        )
        return f"VLLMBackend({where}, model={self.model!r})"

    def describe(self) -> dict[str, Any]:
        """What the trace header records about this backend (no credentials)."""
        return {**super().describe(), "mode": self.mode}

    def spec(self) -> dict[str, Any]:
        """Everything that rebuilds this backend (no API key, no URL credentials)."""
        out = super().spec()
        out["options"].update(
            {
                "mode": self.mode,
                "gpu_memory_utilization": self.gpu_memory_utilization,
                "dtype": self.dtype,
                "max_model_len": self.max_model_len,
            }
        )
        return out

    # ---- server mode -------------------------------------------------------------------

    async def _attempt(self, client: Any, body: dict[str, Any]) -> tuple[int, Any, bytes]:
        body = {
            **body,
            "logprobs": True,
            "top_logprobs": 0,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
        }
        return await super()._attempt(client, body)

    def _parse(self, resp: Any) -> LLMResponse:
        base = super()._parse(resp)
        try:
            record = token_record_of(resp.json())
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as err:
            raise BackendError(
                f"{self.shown_endpoint}: {self._safe(str(err))[:300]}; the vllm backend needs "
                "the token ids and logprobs of every call (use the openai backend for servers "
                "without them)"
            ) from None
        return HFResponse(
            base.text,
            base.answer,
            len(record["prompt_ids"]),
            len(record["completion_ids"]),
            base.latency,
            base.cost,
            base.model,
            token_record=record,
        )

    def load_lora_adapter(self, name: str, path: str) -> None:
        """Load a LoRA adapter into the running server and answer the next calls with it.

        Posts ``{"lora_name": name, "lora_path": path}`` to ``POST /v1/load_lora_adapter``
        (the server runs with ``--enable-lora`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``;
        ``path`` is a directory the server can read), then sets ``model`` to ``name``.

        Raises:
            ConfigError: Engine mode, or the server refused the adapter.
        """
        if self.mode != "server":
            raise ConfigError(
                "load_lora_adapter applies to mode='server'; use load_weights in engine mode"
            )
        import httpx  # noqa: PLC0415  httpx is heavy: loaded on first use

        url = f"{self.base_url}/load_lora_adapter"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            r = httpx.post(
                url,
                json={"lora_name": name, "lora_path": path},
                headers=headers,
                timeout=self.timeout_s,
            )
        except httpx.HTTPError as err:
            raise ConfigError(
                self._safe(f"cannot reach {redact_url(url)}: {type(err).__name__}: {err}")
            ) from None
        if r.status_code >= 300:
            raise ConfigError(
                f"{redact_url(url)} answered {r.status_code}: {self._excerpt(r.text, 200)}; "
                "start vllm serve with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
            )
        self.model = name

    # ---- engine mode -------------------------------------------------------------------

    def engine(self) -> Any:
        """The in-process ``vllm.LLM`` (loaded on first use; engine mode only).

        Raises:
            ConfigError: Server mode, or the engine cannot load the model.
            ImportError: vLLM is not installed.
        """
        if self.mode != "engine":
            raise ConfigError("engine() applies to mode='engine'")
        if self._llm is None:
            vllm = require_vllm()
            kw: dict[str, Any] = {
                "model": self.model,
                "gpu_memory_utilization": self.gpu_memory_utilization,
                "dtype": self.dtype,
            }
            if self.max_model_len is not None:
                kw["max_model_len"] = self.max_model_len
            if self.seed is not None:
                kw["seed"] = self.seed
            try:
                self._llm = vllm.LLM(**kw)
            except (OSError, ValueError, RuntimeError) as err:
                raise ConfigError(
                    redact(f"vLLM cannot load {self.model!r}: {str(err)[:300]}")
                ) from None
        return self._llm

    def load_weights(self, model: Any) -> None:
        """Copy a trainer's weights (a ``torch.nn.Module``) into the engine (engine mode).

        Uses ``LLM.apply_model`` (vLLM 0.10+, in process with
        ``VLLM_ENABLE_V1_MULTIPROCESSING=0``), else the V0 engine's
        ``llm_engine.model_executor.driver_worker.model_runner.model``; then resets the prefix
        cache.

        Raises:
            ConfigError: Server mode, or this vLLM exposes neither path.
        """
        if self.mode != "engine":
            raise ConfigError(
                "load_weights applies to mode='engine'; a server loads a LoRA adapter "
                "(load_lora_adapter) or restarts on the saved checkpoint"
            )
        llm = self.engine()
        weights = [(n, p.detach()) for n, p in model.named_parameters()]
        weights = [(n.removeprefix("base_model.model."), p) for n, p in weights]
        if hasattr(llm, "apply_model"):
            llm.apply_model(lambda m: m.load_weights(weights=weights))
        else:
            worker = getattr(llm.llm_engine.model_executor, "driver_worker", None)
            runner = getattr(worker, "model_runner", None)
            if runner is None:
                raise ConfigError(
                    "this vLLM exposes neither LLM.apply_model nor driver_worker.model_runner; "
                    "use vLLM 0.10 or later with VLLM_ENABLE_V1_MULTIPROCESSING=0"
                )
            runner.model.load_weights(weights=weights)
        if hasattr(llm, "reset_prefix_cache"):
            llm.reset_prefix_cache()

    def _engine_batch(self, requests: list[LLMRequest]) -> list[HFResponse]:
        vllm = require_vllm()
        with self._engine_lock:
            llm = self.engine()
            tok = llm.get_tokenizer()
            prompts = [
                [
                    int(x)
                    for x in tok.apply_chat_template(
                        r.messages, tokenize=True, add_generation_prompt=True
                    )
                ]
                for r in requests
            ]
            params = []
            for i, r in enumerate(requests):
                kw: dict[str, Any] = {
                    "temperature": r.temperature if self.temperature is None else self.temperature,
                    "max_tokens": r.max_tokens
                    if self.max_tokens is None
                    else min(r.max_tokens, self.max_tokens),
                    "logprobs": 0,
                }
                if self.top_p is not None:
                    kw["top_p"] = self.top_p
                if self.seed is not None:
                    kw["seed"] = self.seed * 1_000_003 + self._generate_calls * 4096 + i
                params.append(vllm.SamplingParams(**kw))
            t0 = time.perf_counter()
            outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
            self._generate_calls += 1
            latency = time.perf_counter() - t0
        answers = []
        for prompt, out in zip(prompts, outs, strict=True):
            comp = out.outputs[0]
            ids = [int(x) for x in comp.token_ids]
            lps = [
                min(0.0, float(step[t].logprob))
                for t, step in zip(ids, comp.logprobs or [], strict=False)
            ]
            if len(lps) != len(ids):
                raise BackendError("vLLM returned fewer logprobs than tokens; set logprobs=0")
            text = str(comp.text)
            answers.append(
                HFResponse(
                    text,
                    parse(text),
                    len(prompt),
                    len(ids),
                    latency,
                    0.0,
                    str(self.model),
                    token_record={
                        "prompt_ids": prompt,
                        "completion_ids": ids,
                        "logprobs": lps,
                        "mask": [1] * len(ids),
                    },
                )
            )
        return answers

    # ---- both modes --------------------------------------------------------------------

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer one request (server: one HTTP call; engine: one generate call)."""
        if self.mode == "engine":
            try:
                return (await asyncio.to_thread(self._engine_batch, [request]))[0]
            except (ConfigError, ImportError):
                raise
            except Exception as err:
                raise BackendError(f"vLLM generation failed: {type(err).__name__}: {err}") from None
        return await super().complete(request)

    def generate_batch(self, requests: list[LLMRequest]) -> list[HFResponse]:
        """Answer ``requests`` now, with their token records (called outside an event loop).

        Engine mode: one ``LLM.generate`` call. Server mode: concurrent HTTP calls (up to
        ``concurrency``). The trainer (:mod:`orchestrace.learn.algorithms.llm_grpo`) calls this.

        Raises:
            BackendError: A call failed.
        """
        if self.mode == "engine":
            return self._engine_batch(requests)

        async def _all() -> list[LLMResponse]:
            try:
                return list(await asyncio.gather(*(self.complete(r) for r in requests)))
            finally:
                await self.aclose()

        out = asyncio.run(_all())
        return [r for r in out if isinstance(r, HFResponse)]
