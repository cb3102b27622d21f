"""Per-call credit of the LLM trainer (uniform, discounted, turn, message, c3), PPO's critic,
and the workers (simulator, frozen model, the policy itself)."""

import math

import pytest

from orchestrace.learn.algorithms.llm_credit import discounted_weights, gae, spread

FIXED_BROADCAST = {"fixed": {"O1": 2, "O2": "worker", "O3": "broadcast", "O4": "vote", "O5": None}}


def test_gae_and_discounted_weights_by_hand():
    # gamma 1, lambda 1: the advantage is the return minus the value
    assert gae([0.0, 0.0, 1.0], [0.2, 0.5, 0.8], gamma=1.0, lam=1.0) == pytest.approx(
        [0.8, 0.5, 0.2]
    )
    # lambda 0: one-step TD errors
    got = gae([0.0, 2.0], [1.0, 0.5], gamma=0.9, lam=0.0)
    assert got == pytest.approx([0.9 * 0.5 - 1.0, 2.0 - 0.5])
    got = gae([0.0, 2.0], [1.0, 0.5], gamma=0.9, lam=0.5)
    assert got == pytest.approx([(0.9 * 0.5 - 1.0) + 0.9 * 0.5 * 1.5, 1.5])
    assert discounted_weights(3, 0.5) == [0.25, 0.5, 1.0]
    assert spread([1.0, 1.0]) == 1.0 and spread([0.0, 2.0]) == pytest.approx(1.0)


def test_bad_credit_and_workers_are_config_errors():
    from orchestrace.errors import ConfigError
    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig

    with pytest.raises(ConfigError, match="credit must be one of uniform, discounted, turn"):
        LLMTrainConfig(policy="x", credit="shapley")
    with pytest.raises(ConfigError, match="workers must be sim, self or frozen:PATH"):
        LLMTrainConfig(policy="x", workers="frozen:")
    with pytest.raises(ConfigError, match="env_options may not set backend"):
        LLMTrainConfig(policy="x", env_options={"backend": "hf"})


def _run(tmp_path, **kw):
    pytest.importorskip("transformers")
    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig, train_llm
    from orchestrace.learn.llm_policy import tiny_chat_lm

    path = tmp_path / "tiny"
    model = path if path.exists() else tiny_chat_lm(path)
    kw = {"iterations": 1, "tasks": 1, "group": 3, "keep_traces": True, **kw}
    return train_llm(LLMTrainConfig(policy=str(model), **kw))


def _long(res):
    return [(ep, tr) for ep, tr in zip(res.calls, res.traces, strict=True) if len(ep) >= 2]


@pytest.mark.slow
def test_uniform_discounted_and_turn_credit_give_the_documented_per_call_advantages(tmp_path):
    from orchestrace.credit import DiscountedCredit

    uni = _run(tmp_path, credit="uniform")
    dis = _run(tmp_path, credit="discounted", gamma=0.5)
    turn = _run(tmp_path, credit="turn", gamma=0.9)
    # the same seed draws the same episodes: only the advantages differ
    assert [[c["text"] for c in ep] for ep in uni.calls] == [
        [c["text"] for c in ep] for ep in turn.calls
    ]
    assert _long(uni), "no episode with two calls"
    for ep_u, ep_d, ep_t, tr in zip(uni.calls, dis.calls, turn.calls, turn.traces, strict=True):
        n = len(ep_u)
        base = ep_u[0]["advantage"]
        assert all(c["advantage"] == base for c in ep_u)
        for t in range(n):
            assert ep_d[t]["advantage"] == pytest.approx(base * 0.5 ** (n - 1 - t))
        # turn: base times n * the call's share of the turn credit among the policy's turns
        shares = DiscountedCredit(gamma=0.9).assign(tr, "turn", reward=1.0).by_unit("turn")
        decisions = [
            e for e in tr.events if e.type == "orchestrator_decision" and "turn" in e.attrs
        ]
        raw = [shares[f"{e.agent}@{e.step}"] for e in decisions]
        for t in range(n):
            w = n * raw[t] / sum(raw)
            assert ep_t[t]["credit"] == pytest.approx(w)
            assert ep_t[t]["advantage"] == pytest.approx(base * w)
        assert sum(c["credit"] for c in ep_t) == pytest.approx(n)
    assert any(abs(c["credit"] - 1.0) > 0.05 for ep, _ in _long(turn) for c in ep), (
        "turn credit equals uniform credit everywhere"
    )


@pytest.mark.slow
def test_message_credit_is_the_counterfactual_credit_of_the_messages_a_call_sent(tmp_path):
    def calls_made(traces, step=0):  # one revision call per message a worker reads
        return [sum(e.type == "llm_call" for e in tr.events) / 10 for tr in traces]

    res = _run(
        tmp_path,
        credit="message",
        env_options=FIXED_BROADCAST,
        reward_fn=calls_made,
        latency_weight=0.0,
        invalid_penalty=0.0,
        group=4,
    )
    seen = 0
    scales = []
    for ep, tr in zip(res.calls, res.traces, strict=True):
        decisions = [
            e for e in tr.events if e.type == "orchestrator_decision" and "turn" in e.attrs
        ]
        for t, (c, d) in enumerate(zip(ep, decisions, strict=False)):
            sent = [m for m in tr.events if m.type == "message" and m.step == d.step]
            # dropping a message removes the revision that read it: the reward loses 0.1 each
            assert c["credit"] == pytest.approx(0.1 * len(sent)), (t, c)
            seen += bool(sent)
        # advantage = the episode's advantage + credit / s, one positive s for the batch
        for c in ep[1:]:
            if abs(c["credit"] - ep[0]["credit"]) > 1e-9:
                scales.append(
                    (c["credit"] - ep[0]["credit"]) / (c["advantage"] - ep[0]["advantage"])
                )
            else:
                assert c["advantage"] == pytest.approx(ep[0]["advantage"])
    assert scales and min(scales) > 0
    assert max(scales) == pytest.approx(min(scales))
    assert scales[0] == pytest.approx(spread(calls_made(res.traces)))  # the rewards' spread
    assert seen, "no call sent a message"


@pytest.mark.slow
def test_c3_credit_is_the_return_minus_the_siblings_mean_and_zero_where_nothing_changes(tmp_path):
    def continued_first(traces, step=0):  # 1 when the first decision continued, else 0
        out = []
        for tr in traces:
            turns = [
                e for e in tr.events if e.type == "orchestrator_decision" and "turn" in e.attrs
            ]
            out.append(1.0 if len(turns) >= 2 else 0.0)
        return out

    res = _run(
        tmp_path,
        credit="c3",
        credit_samples=3,
        reward_fn=continued_first,
        latency_weight=0.0,
        invalid_penalty=0.0,
        group=4,
    )
    firsts = 0
    for ep, tr in zip(res.calls, res.traces, strict=True):
        ret = continued_first([tr])[0]
        for t, c in enumerate(ep):
            sib = c["siblings"]
            assert len(sib) == 3
            assert c["credit"] == pytest.approx(ret - sum(s["return"] for s in sib) / 3)
            if t >= 1:  # the first decision is taken already: no sibling changes the outcome
                assert c["credit"] == 0.0 and c["advantage"] == 0.0
                assert all(s["return"] == 1.0 for s in sib)
            else:  # a sibling that stops ends the run at once; anything else continues
                for s in sib:
                    assert s["return"] == (0.0 if s["text"].strip() == "STOP" else 1.0), s
                firsts += 1
                if c["credit"]:
                    assert math.copysign(1, c["advantage"]) == math.copysign(1, c["credit"])
    assert firsts == 4


@pytest.mark.slow
def test_c3_sibling_replay_reproduces_the_recorded_episode(tmp_path):
    """A sibling taking the recorded action at the last call returns the recorded reward."""

    def kind(text):  # stop-v0: STOP, CONTINUE, or refused (the default decision, penalised)
        return text.strip() if text.strip() in ("STOP", "CONTINUE") else "refused"

    res = _run(tmp_path, credit="c3", credit_samples=4, group=4, latency_weight=0.0)
    checked = 0
    for ep in res.calls:
        last = ep[-1]
        ret = last["credit"] + sum(x["return"] for x in last["siblings"]) / 4
        for s in last["siblings"]:
            if kind(s["text"]) == kind(last["text"]):
                assert s["return"] == pytest.approx(ret)
                checked += 1
    assert checked, "no sibling repeated the recorded action"


@pytest.mark.slow
def test_ppo_has_a_value_head_trained_on_gae_returns(tmp_path):
    import torch

    res = _run(tmp_path, algo="ppo", iterations=4, out=str(tmp_path / "o"))
    assert all(row["value_loss"] > 0 for row in res.log)
    assert res.log[-1]["value_loss"] < res.log[0]["value_loss"]
    head = torch.load(tmp_path / "o" / "value_head.pt")
    assert set(head) == {"weight", "bias"} and float(head["weight"].abs().sum()) > 0
    # GAE: calls of one episode get different advantages (the critic tells states apart)
    assert any(len({round(c["advantage"], 6) for c in ep}) > 1 for ep, _ in _long(res))


@pytest.mark.slow
def test_frozen_workers_answer_the_workers_and_never_change(tmp_path):
    transformers = pytest.importorskip("transformers")
    from orchestrace.learn.llm_policy import tiny_chat_lm
    from orchestrace.trace.tokens import token_table

    frozen = tiny_chat_lm(tmp_path / "frozen", seed=7)
    res = _run(tmp_path, workers=f"frozen:{frozen}", iterations=2, worker_max_tokens=4)
    fresh = transformers.AutoModelForCausalLM.from_pretrained(frozen)
    got = dict(res.worker_model.named_parameters())
    for name, p in fresh.named_parameters():
        assert (got[name] == p).all(), name
    tr = res.traces[0]
    assert tr.meta["backend"]["name"] == "hf"
    worker_calls = [e for e in tr.events if e.type == "llm_call" and e.agent != "orchestrator"]
    assert worker_calls and all(e.id in token_table(tr) for e in worker_calls)


@pytest.mark.slow
def test_self_workers_are_the_policy_with_role_prompts(tmp_path):
    from orchestrace.credit.base import agent_roles
    from orchestrace.trace.tokens import token_table

    res = _run(tmp_path, workers="self", worker_max_tokens=4)
    tr = res.traces[0]
    assert tr.meta["backend"]["name"] == "hf" and res.worker_model is None
    worker_calls = [e for e in tr.events if e.type == "llm_call" and e.agent != "orchestrator"]
    roles = agent_roles(tr)
    assert worker_calls and all(roles[e.agent] == "worker" for e in worker_calls)
    table = token_table(tr)  # answered by the policy's backend: every call has a token record
    assert all(e.id in table for e in worker_calls)


@pytest.mark.slow
def test_cli_takes_credit_and_workers_and_refuses_bad_ones(tmp_path, capsys):
    pytest.importorskip("transformers")
    import json

    from orchestrace.cli import main
    from orchestrace.learn.llm_policy import tiny_chat_lm

    model = tiny_chat_lm(tmp_path / "tiny")
    out = tmp_path / "o"
    args = ["train", "--policy", str(model), "--steps", "1", "--tasks", "1", "--group", "2"]
    args += ["--credit", "c3", "--credit-samples", "1", "--workers", "self", "--no-progress"]
    assert main([*args, "-o", str(out)]) == 0
    settings = json.loads((out / "train-config.json").read_text())
    assert (settings["credit"], settings["credit_samples"], settings["workers"]) == (
        "c3",
        1,
        "self",
    )
    capsys.readouterr()
    bad = [*args[:-5], "--workers", "frozen:", "--no-progress", "-o", str(tmp_path / "b")]
    assert main(bad) == 1
    assert "workers must be sim, self or frozen:PATH (--workers)" in capsys.readouterr().err
    bad = [*args[:-5], "--workers", f"frozen:{tmp_path / 'nope'}", "--no-progress"]
    assert main([*bad, "-o", str(tmp_path / "c")]) == 1
    assert f"--workers frozen:{tmp_path / 'nope'}: no such directory" in capsys.readouterr().err
