"""Dynamic batching of the hf backend: batches form, and greedy answers do not depend on them."""

import asyncio

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

import torch

from orchestrace.learn.llm_policy import tiny_chat_lm
from orchestrace.runtime.backends.base import LLMRequest
from orchestrace.runtime.backends.hf import HFBackend

pytestmark = pytest.mark.slow  # builds and runs a tiny model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_chat_lm(tmp_path_factory.mktemp("m") / "tiny", seed=1)


def _requests(n):
    return [
        LLMRequest(
            f"w{i}",
            "worker",
            "solve",
            [{"role": "user", "content": "Answers so far: " + "3 " * i}],
            max_tokens=4,
        )
        for i in range(n)
    ]


def _backend(model_dir, **kw):
    b = HFBackend(model=str(model_dir), max_new_tokens=4, **kw)
    b.load()
    b.model.to(torch.float64)  # no padding round-off: greedy ties cannot flip
    return b


async def _concurrent(backend, reqs):
    return await asyncio.gather(*(backend.complete(r) for r in reqs))


def test_concurrent_requests_share_generate_calls_and_equal_serial_answers(model_dir):
    reqs = _requests(6)
    batched = _backend(model_dir, max_batch=4)
    got = asyncio.run(_concurrent(batched, reqs))
    assert batched.generate_calls == 2 and batched.batch_sizes == [4, 2]
    serial = _backend(model_dir, max_batch=1)
    want = [asyncio.run(serial.complete(r)) for r in reqs]
    assert serial.generate_calls == 6
    assert [r.token_record for r in got] == [r.token_record for r in want]
    assert [r.text for r in got] == [r.text for r in want]
    for r in got:
        rec = r.token_record
        assert r.tokens_in == len(rec["prompt_ids"]) and r.tokens_out == len(rec["completion_ids"])
        assert len(rec["logprobs"]) == len(rec["completion_ids"]) and all(
            x <= 0 for x in rec["logprobs"]
        )


def test_logprobs_are_the_models_own(model_dir):
    b = _backend(model_dir)
    (r,) = b.generate_batch(_requests(1))
    rec = r.token_record
    ids = torch.tensor([rec["prompt_ids"] + rec["completion_ids"]])
    with torch.no_grad():
        logp = torch.log_softmax(b.model(ids).logits[0], -1)
    n = len(rec["prompt_ids"])
    want = [float(logp[n - 1 + k, t]) for k, t in enumerate(rec["completion_ids"])]
    assert rec["logprobs"] == pytest.approx(want, abs=1e-6)


def test_requests_with_other_sampling_settings_are_grouped(model_dir):
    b = _backend(model_dir, seed=3)
    reqs = _requests(4)
    reqs[1] = LLMRequest("w1", "worker", "solve", reqs[1].messages, max_tokens=4, temperature=0.7)
    out = b.generate_batch(reqs)
    assert len(out) == 4 and b.generate_calls == 2 and sorted(b.batch_sizes) == [1, 3]


def test_bad_options_and_a_tokenizer_without_chat_template(tmp_path):
    from orchestrace.errors import ConfigError
    from orchestrace.testing import tiny_causal_lm

    with pytest.raises(ConfigError, match="max_batch must be >= 1"):
        HFBackend(model="x", max_batch=0)
    path = tiny_causal_lm(tmp_path / "plain")
    with pytest.raises(ConfigError, match="has no chat template"):
        HFBackend(model=str(path), require_chat_template=True).load()


def test_a_failing_batch_answers_every_waiting_caller(model_dir):
    from orchestrace.runtime.backends.base import BackendError

    b = HFBackend(model=str(model_dir), max_batch=3)

    def boom(requests):
        raise OSError("device lost")

    b.generate_batch = boom

    async def go():
        return await asyncio.wait_for(
            asyncio.gather(*(b.complete(r) for r in _requests(5)), return_exceptions=True), 10
        )

    out = asyncio.run(go())
    assert len(out) == 5 and all(isinstance(x, BackendError) for x in out)
    assert all("generation failed: OSError: device lost" in str(x) for x in out)
