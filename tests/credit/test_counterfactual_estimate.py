"""Counterfactual message credit as a paired estimate with an error bar; the interventions."""

import json
import math

import pytest

from orchestrace import ConfigError
from orchestrace.cli import main
from orchestrace.credit import CounterfactualMessageCredit
from orchestrace.credit.counterfactual import deterministic_backend
from orchestrace.errors import TraceError
from orchestrace.io import dump
from orchestrace.runtime import run
from orchestrace.runtime.backends.openai import OpenAIBackend
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.replay import (
    RedrawDownstream,
    ReplaceMessage,
    ResampleMessage,
    backend_for,
    fork,
    sender_call,
)

K = 8


@pytest.fixture(scope="module")
def debate():
    return run("debate", "arith", agents=3, seed=5, rounds=1, task_size=64).trace


@pytest.fixture(scope="module")
def swarm():
    return run("swarm", "arith", agents=4, seed=0, task_size=64).trace


def messages(trace):
    return [e.id for e in trace.events if e.type == "message"]


def answered(trace):
    """``(key, content)`` of every call of a fork that reached the backend."""
    return [
        (e.attrs["key"], e.content)
        for e in trace.events
        if e.type == "llm_call" and "answered_by" in (e.attrs or {})
    ]


def test_rows_are_estimates_with_an_error_bar(debate):
    t = CounterfactualMessageCredit(samples=K).assign(debate, "message")
    assert set(t.estimates) == set(messages(debate))
    rows = t.to_rows()
    assert len(rows) == len(messages(debate))
    for row in rows:
        assert row["samples"] == K and row["se"] >= 0
        low, high = row["ci95"]
        assert low <= row["value"] <= high
        assert row["kept"] - row["intervened"] == pytest.approx(row["value"])
    assert t.stats["samples"] == K and t.stats["deterministic"] is False
    assert t.stats["paired"] is True
    assert t.stats["backend_calls"] == sum(r["backend_calls"] for r in rows) > 0
    assert t.stats["backend_calls"] < t.stats["naive_calls"]


def test_kept_arm_varies_across_samples_and_the_recorded_seed_reproduces_the_run(debate):
    mid = messages(debate)[0]
    iv = RedrawDownstream.of(debate, mid)
    assert iv.keys  # the message was read by an LLM call
    recorded_keys = {e.attrs["key"] for e in debate.events if e.type == "llm_call"}
    draws = []
    for k in range(1, K + 1):
        res = fork(debate, [iv], backend=backend_for(debate, seed_offset=k))
        keys = {key for key, _ in answered(res.trace)}
        assert res.backend_calls == len(answered(res.trace)) >= 1
        # only calls downstream of the message are drawn: no other recorded call is
        assert not keys & (recorded_keys - set(iv.keys))
        draws.append(tuple(answered(res.trace)))
    assert len(set(draws)) > 1  # the kept side is re-sampled, not the one recorded sample
    same = fork(debate, [iv])  # the recorded seed draws the recorded answers again
    recorded = {e.attrs["key"]: e.content for e in debate.events if e.type == "llm_call"}
    assert all(recorded[key] == text for key, text in answered(same.trace))
    assert same.trace.meta["result"]["answer"] == debate.meta["result"]["answer"]


def test_paired_seeds_make_the_estimate_deterministic(swarm):
    a = CounterfactualMessageCredit(samples=K, intervention="resample").assign(swarm, "message")
    b = CounterfactualMessageCredit(samples=K, intervention="resample").assign(swarm, "message")
    assert a.to_rows() == b.to_rows() and a.stats == b.stats
    assert any(r["se"] > 0 for r in a.to_rows())  # the resampled outcome is not certain


def test_one_sample_has_no_error_bar(swarm):
    t = CounterfactualMessageCredit(samples=1).assign(swarm, "message")
    assert all(r["se"] is None and r["ci95"] is None for r in t.to_rows())
    assert t.stats["deterministic"] is False and "no error bar" in t.stats["note"]


class _Greedy:
    """An OpenAI-like backend at temperature 0 (answered by the simulator, offline)."""

    name = "openai"
    virtual = True
    temperature = 0.0

    def __init__(self):
        self.sim = SimBackend(seed=0)

    def spec(self):
        return {"name": "openai", "options": {"model": "m", "temperature": self.temperature}}

    async def complete(self, request):
        return await self.sim.complete(request)

    async def aclose(self):
        return None


def test_deterministic_backend_is_said_not_given_an_error_bar(swarm):
    # a served model is stochastic even at temperature 0 unless the caller says otherwise
    assert not deterministic_backend(OpenAIBackend(model="m"))
    assert not deterministic_backend(OpenAIBackend(model="m", temperature=0.0))
    assert deterministic_backend(OpenAIBackend(model="m"), assume=True)
    assert not deterministic_backend(OpenAIBackend(model="m", temperature=0.7))
    assert not deterministic_backend(SimBackend(seed=1))
    t = CounterfactualMessageCredit(samples=3, backend=_Greedy()).assign(swarm, "message")
    assert t.stats["deterministic"] is False and t.stats["samples"] == 3
    assert all(r["samples"] == 3 and r["se"] is not None for r in t.to_rows())
    t = CounterfactualMessageCredit(samples=K, backend=_Greedy(), assume_deterministic=True).assign(
        swarm, "message"
    )
    assert t.stats["deterministic"] is True and t.stats["samples"] == 1
    assert "1 sample per message, not 8" in t.stats["note"]
    assert all(r["se"] == 0.0 and r["samples"] == 1 for r in t.to_rows())
    sampling = _Greedy()
    sampling.temperature = 0.7
    t = CounterfactualMessageCredit(samples=3, backend=sampling).assign(swarm, "message")
    assert t.stats["deterministic"] is False and t.stats["paired"] is False
    assert t.stats["samples"] == 3 and all(r["samples"] == 3 for r in t.to_rows())


def test_replace_changes_what_consumers_read(swarm, tmp_path, capsys):
    result = next(
        e
        for e in swarm.events
        if e.type == "message" and "value" in (e.attrs or {}).get("data", {})
    )
    iv = ReplaceMessage.parsed(swarm, result.id, "ANSWER: 0")
    assert iv.data == {**result.attrs["data"], "value": 0} and iv.content == "ANSWER: 0"
    res = fork(swarm, [iv])
    old = next(e for e in swarm.events if e.type == "aggregate")
    new = next(e for e in res.trace.events if e.type == "aggregate")
    assert new.attrs["value"] == old.attrs["value"] - result.attrs["data"]["value"]
    assert swarm.metrics["task_success"] == 1 and res.trace.metrics["task_success"] == 0
    path = tmp_path / "sw.jsonl"
    dump(swarm, path)
    assert main(["replay", str(path), "--replace-message", result.id, "ANSWER: 0"]) == 0
    assert "task success 1 -> 0" in capsys.readouterr().out


def test_replace_parses_the_value_into_the_data_the_message_carries(debate):
    mid = messages(debate)[0]
    recorded = debate.event(mid).attrs["data"]
    assert ReplaceMessage.parsed(debate, mid, "I now think ANSWER: 7").data == {
        **recorded,
        "answer": 7,
    }
    assert ReplaceMessage.parsed(debate, mid, " 12 ").data["answer"] == 12
    assert ReplaceMessage.parsed(debate, mid, "unsure").data["answer"] == "unsure"


def test_resample_draws_the_senders_call_once_per_sample(debate, swarm):
    mid = messages(debate)[0]
    iv = ResampleMessage.of(debate, mid)
    call = debate.event(sender_call(debate, mid))
    assert iv.keys[0] == call.attrs["key"] and call.agent == debate.event(mid).agent
    for k in range(1, 4):
        res = fork(debate, [iv], backend=backend_for(debate, seed_offset=k))
        keys = [key for key, _ in answered(res.trace)]
        assert keys.count(call.attrs["key"]) == 1
    # in a swarm nothing downstream of a worker's result calls an LLM: one call per sample
    t = CounterfactualMessageCredit(samples=4, intervention="resample").assign(swarm, "message")
    assert all(r["backend_calls"] == 4 for r in t.to_rows())


def test_resample_needs_a_message_an_llm_call_produced():
    tr = run("pipeline", "arith", agents=2, seed=1).trace
    delegated = next(e for e in tr.events if e.type == "message" and e.agent == "orchestrator")
    if any(e.type == "llm_call" and e.agent == "orchestrator" for e in tr.events):
        pytest.skip("this orchestrator plans with an LLM call")
    with pytest.raises(TraceError, match="was not produced by an LLM call of its sender"):
        ResampleMessage.of(tr, delegated.id)


def test_bad_options_are_one_clear_error():
    with pytest.raises(ConfigError, match="unknown intervention 'swap'"):
        CounterfactualMessageCredit(intervention="swap")
    with pytest.raises(ConfigError, match="needs the new text"):
        CounterfactualMessageCredit(intervention="replace")
    with pytest.raises(ConfigError, match="needs the new text"):
        CounterfactualMessageCredit(intervention="drop", replace_with="x")
    with pytest.raises(ConfigError, match="samples must be an integer >= 1"):
        CounterfactualMessageCredit(samples=0)


def test_cli_prints_estimates_and_json_carries_the_error_bar(swarm, tmp_path, capsys):
    path = tmp_path / "sw.jsonl"
    dump(swarm, path)
    argv = ["credit", str(path), "--unit", "message", "--method", "counterfactual"]
    assert main([*argv, "--samples", "4", "--intervention", "resample"]) == 0
    out = capsys.readouterr().out
    assert "samples: 4" in out and "deterministic: False" in out and " ± " in out
    assert "95% CI [" in out
    assert main([*argv, "--samples", "4", "--json", "--intervention", "resample"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows and all(
        {"se", "ci95", "samples", "backend_calls"} <= set(r) and r["samples"] == 4 for r in rows
    )
    assert all(math.isfinite(r["se"]) for r in rows)
    assert main([*argv, "--intervention", "replace"]) == 1
    assert "needs the new text" in capsys.readouterr().err
    assert main(["credit", str(path), "--method", "loo", "--intervention", "drop"]) == 1
    err = capsys.readouterr().err
    assert (
        err
        == "error: --intervention applies to --method counterfactual, not to loo; leave it out\n"
    )


def test_resample_at_temperature_zero_warns(swarm, tmp_path, capsys):
    t = CounterfactualMessageCredit(samples=2, backend=_Greedy(), intervention="resample").assign(
        swarm, "message"
    )
    assert "resampling at temperature 0 returns the same message" in t.stats["warning"]
    assert "--temperature" in t.stats["warning"]
    sampling = _Greedy()
    sampling.temperature = 0.7
    t = CounterfactualMessageCredit(samples=2, backend=sampling, intervention="resample").assign(
        swarm, "message"
    )
    assert "warning" not in t.stats
