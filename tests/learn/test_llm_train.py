"""The LLM orchestrator trainer: strict text actions, bad input, a run end to end, learning."""

import pytest

from orchestrace.learn.env import make_env
from orchestrace.learn.llm_policy import ActionError, action_of, parse_action


@pytest.mark.parametrize(
    "text", ["", "stop", "STOP now", "SPAWN 3", "SPAWN 2 boss", "STOP\nSTOP", "CONTINUE  ", "[UNK]"]
)
def test_garbage_is_an_action_error_and_a_default_decision(text):
    if text == "CONTINUE  ":
        assert parse_action(text) == {"stop": False}
        return
    with pytest.raises(ActionError, match="is not an action; answer one line"):
        parse_action(text)
    env = make_env("stop-v0", task="arith")
    action, error = action_of(env, text)
    assert action == 0 and error is not None


@pytest.mark.slow
def test_bad_model_dir_and_missing_chat_template_are_config_errors(tmp_path):
    pytest.importorskip("transformers")
    from orchestrace.errors import ConfigError
    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig, train_llm
    from orchestrace.testing import tiny_causal_lm

    with pytest.raises(ConfigError, match=r"--policy .*nope: no such directory"):
        train_llm(LLMTrainConfig(policy=str(tmp_path / "nope"), iterations=1))
    plain = tiny_causal_lm(tmp_path / "plain")
    with pytest.raises(ConfigError, match="has no chat template"):
        train_llm(LLMTrainConfig(policy=str(plain), iterations=1))
    with pytest.raises(ConfigError, match="GRPO needs group >= 2"):
        LLMTrainConfig(policy="x", group=1)


@pytest.mark.slow
def test_a_run_writes_csv_plot_and_a_loadable_checkpoint_with_token_tables(tmp_path):
    transformers = pytest.importorskip("transformers")
    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig, train_llm
    from orchestrace.learn.llm_policy import tiny_chat_lm
    from orchestrace.trace.tokens import token_table

    model = tiny_chat_lm(tmp_path / "tiny")
    res = train_llm(
        LLMTrainConfig(
            policy=str(model),
            iterations=2,
            tasks=1,
            group=3,
            out=str(tmp_path / "o"),
            keep_traces=True,
            kl_coef=0.1,
        )
    )
    assert len(res.log) == 2 and (tmp_path / "o" / "train.csv").read_text().count("\n") == 3
    assert transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "o") is not None
    tr = res.traces[0]
    decisions = [e for e in tr.events if e.type == "orchestrator_decision" and "text" in e.attrs]
    assert decisions and set(token_table(tr)) == {e.id for e in decisions}
    bad = [e for e in decisions if "parse_error" in e.attrs]
    assert all("is not an action" in e.attrs["parse_error"] for e in bad)


@pytest.mark.slow
def test_grpo_raises_mean_reward_on_the_stopping_task(tmp_path):
    """Stop-v0 on arith, tiny Llama, seed 0: reward of the last 3 iterations beats the first 3."""
    pytest.importorskip("transformers")
    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig, train_llm
    from orchestrace.learn.llm_policy import tiny_chat_lm

    model = tiny_chat_lm(tmp_path / "tiny", seed=0)
    log = train_llm(LLMTrainConfig(policy=str(model), iterations=10, seed=0)).log
    first = sum(r["reward"] for r in log[:3]) / 3
    last = sum(r["reward"] for r in log[-3:]) / 3
    assert last > first + 0.3, (first, last)
    assert log[-1]["invalid_rate"] < log[0]["invalid_rate"]


@pytest.mark.slow
def test_ctrl_c_leaves_a_loadable_checkpoint_and_the_csv_so_far(tmp_path):
    transformers = pytest.importorskip("transformers")
    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig, train_llm
    from orchestrace.learn.llm_policy import tiny_chat_lm

    calls = []

    def reward(traces, step=0):
        calls.append(step)
        if len(calls) > 3:  # the second iteration's episodes: Ctrl-C
            raise KeyboardInterrupt
        return [1.0 for _ in traces]

    model = tiny_chat_lm(tmp_path / "tiny")
    out = tmp_path / "o"
    cfg = LLMTrainConfig(
        policy=str(model), iterations=5, tasks=1, group=3, out=str(out), reward_fn=reward
    )
    with pytest.raises(KeyboardInterrupt):
        train_llm(cfg)
    assert (out / "train.csv").read_text().count("\n") == 2  # header and the finished iteration
    assert transformers.AutoModelForCausalLM.from_pretrained(out) is not None


@pytest.mark.slow
def test_cli_trains_a_policy_and_refuses_a_bad_one(tmp_path, capsys):
    pytest.importorskip("transformers")
    import json

    from orchestrace.cli import main
    from orchestrace.learn.llm_policy import tiny_chat_lm

    model = tiny_chat_lm(tmp_path / "tiny")
    out = tmp_path / "o"
    args = ["train", "--policy", str(model), "--algo", "ppo", "--env", "stop-v0", "--steps", "1"]
    code = main([*args, "--tasks", "1", "--group", "2", "--no-progress", "-o", str(out)])
    assert code == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["iterations"] == 1 and (out / "train.csv").is_file()
    bad = ["train", "--policy", str(tmp_path / "nope"), "--no-progress", "-o", str(tmp_path / "b")]
    assert main(bad) == 1
    assert "nope: no such directory" in capsys.readouterr().err
