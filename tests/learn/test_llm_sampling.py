"""The policy samples from exactly the distribution the update recomputes."""

import json
import shutil

import pytest


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra",
    [
        {"repetition_penalty": 1.5},
        {"no_repeat_ngram_size": 1, "min_new_tokens": 3},
        {"bad_words_ids": [[7], [8]], "top_k": 3, "top_p": 0.5, "temperature": 0.3},
        {"suppress_tokens": [9], "sequence_bias": [[[10], 5.0]]},
    ],
)
def test_first_pass_ratio_is_one_whatever_the_models_generation_config(tmp_path, extra):
    pytest.importorskip("transformers")
    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig, train_llm
    from orchestrace.learn.llm_policy import tiny_chat_lm

    model = tiny_chat_lm(tmp_path / "tiny")
    shipped = model / "generation_config.json"
    gen = json.loads(shipped.read_text())
    gen.update(extra)
    shipped.write_text(json.dumps(gen))
    res = train_llm(
        LLMTrainConfig(policy=str(model), iterations=1, tasks=1, group=3, max_new_tokens=4, seed=1)
    )
    assert res.log[0]["approx_kl"] == 0.0
    assert res.log[0]["clip_frac"] == 0.0


@pytest.mark.slow
def test_plain_sampling_records_the_raw_log_probs_and_is_in_the_spec(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from orchestrace.learn.llm_policy import tiny_chat_lm
    from orchestrace.runtime.backends.base import LLMRequest
    from orchestrace.runtime.backends.hf import HFBackend

    model = tiny_chat_lm(tmp_path / "tiny")
    gen = json.loads((model / "generation_config.json").read_text())
    (model / "generation_config.json").write_text(json.dumps({**gen, "repetition_penalty": 3.0}))
    req = LLMRequest(
        agent="o",
        role="orchestrator",
        kind="decide",
        messages=[{"role": "user", "content": "STOP STOP STOP"}],
        max_tokens=6,
        temperature=0.7,
    )
    plain = HFBackend(model=str(model), max_new_tokens=6, seed=3, plain_sampling=True)
    rec = plain.generate_batch([req])[0].token_record
    assert plain.spec()["options"]["plain_sampling"] is True
    assert plain.model.generation_config.repetition_penalty == 3.0  # restored afterwards
    ids = torch.tensor([rec["prompt_ids"] + rec["completion_ids"]])
    with torch.no_grad():
        logits = plain.model(input_ids=ids).logits[0].float() / 0.7
    n = len(rec["completion_ids"])
    lp = torch.log_softmax(logits[-n - 1 : -1], -1).gather(
        -1, torch.tensor(rec["completion_ids"]).unsqueeze(-1)
    )
    assert lp.squeeze(-1).tolist() == pytest.approx(rec["logprobs"], abs=1e-5)
    shutil.rmtree(model)
