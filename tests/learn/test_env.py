import numpy as np
import pytest

from orchestrace.errors import ConfigError
from orchestrace.learn.env import AGGREGATES, COMMS, ROLES, SPAWNS, EnvConfig, make_env
from orchestrace.learn.spaces import Discrete, MultiDiscrete
from orchestrace.trace.check import check_trace


def play(env, actions, seed=0):
    obs, info = env.reset(seed=seed)
    assert env.observation_space.contains(obs)
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        if term or trunc:
            return r, term, trunc, info
    raise AssertionError("episode did not end")


def test_stop_env_spaces_and_episode():
    env = make_env("stop-v0", task="arith")
    assert isinstance(env.action_space, Discrete) and env.action_space.n == 2
    r, term, trunc, info = play(env, [0, 0, 1])
    assert term and not trunc
    assert info["answers"] == 2
    trace = info["trace"]
    assert check_trace(trace) == []
    decisions = [
        e
        for e in trace.events
        if e.type == "orchestrator_decision" and e.attrs and "prompt" in e.attrs
    ]
    assert [e.decision for e in decisions] == ["spawn", "spawn", "stop"]
    assert isinstance(r, float) and np.isfinite(r)


def test_truncated_when_never_stopping():
    env = make_env("stop-v0", task="multihop", max_rounds=3)
    _r, term, trunc, info = play(env, [0] * 10)
    assert trunc and not term
    assert info["rounds"] == 3 and info["answers"] == 3


def test_truncated_when_out_of_workers():
    env = make_env("orchestrate-v0", task="multihop", max_workers=5)
    spawn8 = env.encode(
        {"spawn": 8, "role": "worker", "comm": "none", "aggregate": "vote", "stop": False}
    )
    _r, _term, trunc, info = play(env, [spawn8, spawn8])
    assert trunc and info["answers"] == 5


def test_same_seed_same_episode():
    env = make_env("stop-v0", task="search")
    a = play(env, [0, 0, 0, 1], seed=11)
    b = play(env, [0, 0, 0, 1], seed=11)
    assert a[0] == b[0]
    ta, tb = a[3]["trace"], b[3]["trace"]
    assert [(e.type, e.agent, e.t, e.content) for e in ta.events] == [
        (e.type, e.agent, e.t, e.content) for e in tb.events
    ]


def test_full_action_space_drives_all_five_decisions():
    env = make_env("orchestrate-v0", task="arith")
    assert isinstance(env.action_space, MultiDiscrete)
    assert list(env.action_space.nvec) == [len(SPAWNS), len(ROLES), len(COMMS), len(AGGREGATES), 2]
    first = env.encode(
        {"spawn": 2, "role": "expert", "comm": "none", "aggregate": "judge", "stop": False}
    )
    second = env.encode(
        {"spawn": 2, "role": "novice", "comm": "broadcast", "aggregate": "judge", "stop": False}
    )
    stop = env.encode(
        {"spawn": 0, "role": "novice", "comm": "none", "aggregate": "judge", "stop": True}
    )
    _, term, _, info = play(env, [first, second, stop])
    assert term
    trace = info["trace"]
    spawns = [e for e in trace.events if e.type == "spawn"]
    assert [e.role for e in spawns] == ["expert", "expert", "novice", "novice"]
    # broadcast: the second round's workers heard the first round's answers and revised
    revise = [
        e for e in trace.events if e.type == "llm_call" and (e.attrs or {}).get("kind") == "revise"
    ]
    assert len(revise) == 2
    agg = [e for e in trace.events if e.type == "aggregate"]
    assert agg and "judge" in str(agg[-1].content) + str(agg[-1].attrs)
    assert check_trace(trace) == []


def test_expert_costs_more_tokens_than_novice():
    env = make_env("orchestrate-v0", task="arith")
    tokens = {}
    for role in ("novice", "expert"):
        act = env.encode(
            {"spawn": 4, "role": role, "comm": "none", "aggregate": "vote", "stop": False}
        )
        stop = env.encode(
            {"spawn": 0, "role": role, "comm": "none", "aggregate": "vote", "stop": True}
        )
        tokens[role] = play(env, [act, stop], seed=3)[3]["tokens"]
    assert tokens["expert"] > 2 * tokens["novice"]


def test_bad_actions_and_calls_are_clear_errors():
    env = make_env("stop-v0")
    with pytest.raises(ConfigError, match="reset"):
        env.step(0)
    env.reset(seed=0)
    with pytest.raises(ConfigError, match="not in Discrete"):
        env.step(5)
    with pytest.raises(ConfigError, match="unknown environment"):
        make_env("stop-v9")
    with pytest.raises(ConfigError, match="learn"):
        EnvConfig(learn=("O7",))
    with pytest.raises(ConfigError, match="token_cost"):
        EnvConfig(token_cost=-1)


def test_custom_reward_replaces_parl():
    env = make_env("stop-v0", task="multihop", reward_fn=lambda traces, step: [42.0])
    r, *_ = play(env, [1])
    assert r == 42.0


def test_parl_lambdas_anneal_to_zero():
    env = make_env("stop-v0", task="multihop")
    env.train_step = 0
    r0, _, _, info0 = play(env, [0, 1], seed=5)
    env.train_step = 10**6
    r1, _, _, info1 = play(env, [0, 1], seed=5)
    assert r1 == pytest.approx(info1["r_perf"])
    assert r0 != pytest.approx(r1) or info0["r_parallel"] == info0["r_finish"] == 0


def test_composite_reward_spec_drives_the_env():
    from orchestrace.rewards.compose import Composite

    combo = Composite.from_spec({"team": {"weight": 1.0}, "tools": {"family": "R5", "weight": 0.1}})
    env = make_env("stop-v0", task="multihop", reward_fn=combo)
    r, term, _, info = play(env, [0, 1], seed=4)
    expected = combo([info["trace"]])[0]
    assert term and r == pytest.approx(expected)


def test_env_on_an_openai_compatible_server():
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Model(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps(
                {
                    "choices": [{"message": {"content": "ANSWER: entity_3"}}],
                    "usage": {"prompt_tokens": 30, "completion_tokens": 5},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    try:
        env = make_env(
            "stop-v0",
            task="multihop",
            backend="openai",
            backend_options={"model": "m", "base_url": url},
        )
        for seed in (0, 1):  # the backend and its loop serve several episodes
            _r, term, _, info = play(env, [0, 0, 1], seed=seed)
            assert term and info["answers"] == 2 and info["top"] == 2
            assert info["tokens"] == 2 * 35
            assert check_trace(info["trace"]) == []
        env.close()
    finally:
        srv.shutdown()
        srv.server_close()
    with pytest.raises(ConfigError, match="unknown backend"):
        EnvConfig(backend="gpt")
