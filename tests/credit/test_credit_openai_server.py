"""Credit of a trace recorded through the OpenAI-compatible backend against a local server.

Every changed call of every fork must reach that server (counted server-side), none the
simulator (its calls counted by instrumentation), and each changed call in the forks must say
the server's backend answered it.
"""

import json

import httpx
import pytest

import orchestrace.runtime.replay as replay
from orchestrace.credit import CounterfactualMessageCredit, LeaveOneOutCredit, ShapleyCredit
from orchestrace.runtime import run
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.testing import ChatServer, SeededArithmeticModel

PROMPT = "Compute the sum of (24*x + 47) mod 499 for x in [908, 317, 417]. Reply with ANSWER: <n>."
TRUTH = sum((24 * x + 47) % 499 for x in (908, 317, 417))


@pytest.fixture
def server():
    with ChatServer() as srv:
        yield srv


@pytest.fixture
def spy(monkeypatch):
    """Counts simulator calls and keeps every fork's result."""
    seen = {"sim": 0, "forks": []}
    complete = SimBackend.complete
    real_fork = replay._fork_with  # every fork re-executed in full goes through it

    async def counted(self, request):
        seen["sim"] += 1
        return await complete(self, request)

    def forked(*args, **kw):
        res = real_fork(*args, **kw)
        seen["forks"].append(res)
        return res

    monkeypatch.setattr(SimBackend, "complete", counted)
    monkeypatch.setattr(replay, "_fork_with", forked)
    return seen


def record(srv, **options):
    res = run(
        "debate",
        "arith",
        agents=3,
        seed=1,
        task_size=16,
        rounds=2,
        backend="openai",
        backend_options={"base_url": srv.url, "model": "local", "retries": 0, **options},
    )
    calls = [e for e in res.trace.events if e.type == "llm_call"]
    assert calls and all(e.error is None for e in calls)
    assert srv.calls == len(calls)
    return res.trace


def changed(forks):
    return [
        e
        for f in forks
        for e in f.trace.events
        if e.type == "llm_call" and "answered_by" in (e.attrs or {})
    ]


@pytest.mark.parametrize("intervention", ["drop", "resample"])
def test_counterfactual_credit_reaches_only_the_recorded_server(server, spy, intervention):
    trace = record(server, temperature=0.7)
    before = server.calls
    t = CounterfactualMessageCredit(samples=2, intervention=intervention).assign(trace, "message")
    served = server.calls - before
    assert served == t.stats["backend_calls"] > 0
    assert sum(e["backend_calls"] for e in t.estimates.values()) == served
    calls = changed(spy["forks"])
    assert len(calls) == served  # each changed call of each fork is one request to the server
    assert {json.dumps(e.attrs["answered_by"]) for e in calls} == {
        json.dumps({"name": "openai", "model": "local"})
    }
    assert spy["sim"] == 0
    # a server sampling afresh: two draws per arm, unpaired, each row with an error bar
    assert t.stats["deterministic"] is False and t.stats["paired"] is False
    assert all(e["samples"] == 2 and e["se"] is not None for e in t.estimates.values())


@pytest.mark.parametrize(
    "method,unit",
    [
        (LeaveOneOutCredit, "agent"),
        pytest.param(ShapleyCredit, "agent", marks=pytest.mark.slow),
        pytest.param(LeaveOneOutCredit, "message", marks=pytest.mark.slow),
    ],
)
def test_loo_and_shapley_draws_reach_only_the_server(server, spy, method, unit):
    trace = record(server, temperature=0.7)
    before = server.calls
    t = method(samples=2).assign(trace, unit)
    served = server.calls - before
    assert served == t.stats["backend_calls"] > 0
    assert len(changed(spy["forks"])) == served and spy["sim"] == 0
    assert t.stats["samples"] == 2 and t.stats["paired"] is False
    assert all(e["se"] is not None for e in t.estimates.values())


def test_a_deterministic_server_is_drawn_once(server, spy):
    trace = record(server)  # temperature 0: the server answers a prompt the same way
    before = server.calls
    t = LeaveOneOutCredit(samples=4, assume_deterministic=True).assign(trace, "agent")
    assert t.stats["samples"] == 1 and t.stats["deterministic"] is True
    assert "1 draw, not 4" in t.stats["note"]
    assert all(e["se"] == 0.0 for e in t.estimates.values())
    assert server.calls - before == t.stats["backend_calls"] > 0 and spy["sim"] == 0


@pytest.fixture
def http():
    """One HTTP client for a test's requests (a client per request costs tens of ms)."""
    with httpx.Client() as client:
        yield client


def completion(http, srv, content, **body):
    r = http.post(
        srv.url + "/chat/completions",
        json={"model": "local", "messages": [{"role": "user", "content": content}], **body},
    )
    assert r.status_code == 200
    data = r.json()
    assert data["usage"]["prompt_tokens"] > 0 and data["usage"]["completion_tokens"] > 0
    return data["choices"][0]["message"]["content"]


def test_the_model_samples_like_a_server(server, http):
    assert completion(http, server, PROMPT) == completion(http, server, PROMPT)  # temperature 0
    seeded = {completion(http, server, PROMPT, temperature=1.0, seed=s) for s in range(12)}
    assert len(seeded) > 1  # the seed changes the draw...
    assert completion(http, server, PROMPT, temperature=1.0, seed=3) == completion(
        http, server, PROMPT, temperature=1.0, seed=3
    )  # ...and fixes it
    fresh = {completion(http, server, PROMPT, temperature=1.0) for _ in range(12)}
    assert len(fresh) > 1  # no seed: every call draws afresh
    assert server.calls == 2 + 12 + 2 + 12


def test_the_model_reads_the_prompt():
    exact = SeededArithmeticModel(error=0.0, resolve=0.0, judge_error=0.0)
    rng = exact._draws({"messages": []})
    assert exact.answer(PROMPT, rng)[1] == TRUTH
    judge = f"{PROMPT}\nCandidates:\n[0] {TRUTH + 1}\n[1] {TRUTH}\nReply with ANSWER: <index>."
    assert exact.answer(judge, rng)[1] == 1
    revise = f"{PROMPT}\nYour answer: 7. Other agents answered: 9; 9.\nGive your final answer."
    assert exact.answer(revise, rng)[1] == 9
    critique = f"{PROMPT}\nProposed answer: {TRUTH}\nIs it correct? ANSWER: accept|reject"
    assert exact.answer(critique, rng)[1] == "accept"
    wrong = SeededArithmeticModel(error=1.0)
    assert wrong.answer(PROMPT, rng)[1] != TRUTH


def test_bad_requests_are_refused(server, http):
    assert http.post(server.url + "/completions", json={}).status_code == 404
    r = http.post(server.url + "/chat/completions", content=b"{not json")
    assert r.status_code == 400 and "bad request" in r.json()["error"]
    assert server.calls == 0


def test_a_server_honouring_seeds_gets_paired_draws(server, spy):
    trace = record(server, temperature=0.7, seed=5)
    before = server.calls
    t = LeaveOneOutCredit(samples=3).assign(trace, "agent")
    assert t.stats["paired"] is True and t.stats["samples"] == 3
    sent = {body.get("seed") for body in server.requests[before:]}
    assert sent == {5, 6, 7}  # draw k sends the recorded seed plus k, in both arms
    assert server.calls - before == t.stats["backend_calls"] and spy["sim"] == 0


def test_counterfactual_draws_on_a_seeded_server_are_paired(server, spy):
    trace = record(server, temperature=0.7, seed=5)
    before = server.calls
    t = CounterfactualMessageCredit(samples=3, intervention="resample").assign(trace, "message")
    assert t.stats["paired"] is True and t.stats["samples"] == 3
    sent = {body.get("seed") for body in server.requests[before:]}
    # sample k (1..K, fresh draws in both arms) sends the recorded seed plus k
    assert sent == {6, 7, 8}
    assert server.calls - before == t.stats["backend_calls"] and spy["sim"] == 0
