"""Forks, replays and counterfactual credit re-execute on the backend that recorded the trace.

A run is recorded through the OpenAI-compatible backend against a local test server on
127.0.0.1; every changed call of a fork must reach that server (counted server-side) and none
the simulator. One fault per test: the server gone, the server failing, no recorded backend.
"""

import json

import msgspec
import pytest
from test_openai_faults import SECRET, Server, completion, run_cli, send_json

from orchestrace import ConfigError, TraceError, dump, load
from orchestrace.runtime import run
from orchestrace.runtime.backends import backend_from_spec, make_backend
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.replay import (
    DropMessage,
    ForceStop,
    ReplaceMessage,
    backend_for,
    fork,
    replay,
    spawn_one_more,
)


@pytest.fixture
def serve():
    servers = []

    def start(behave):
        servers.append(Server(behave))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def ok(h, n):
    send_json(h, 200, completion("ANSWER: 3"))


def record(server, tmp_path, **kw):
    """A 3-agent, 2-round debate answered by ``server``; its trace and file."""
    out = tmp_path / "real.jsonl"
    res = run(
        "debate",
        "arith",
        agents=3,
        seed=1,
        task_size=4,
        rounds=2,
        backend="openai",
        backend_options={"base_url": server.url, "model": "local", "retries": 0, **kw},
        output=out,
    )
    assert all(e.error is None for e in res.trace.events if e.type == "llm_call")
    return res.trace, out


def changed_calls(trace):
    return [e for e in trace.events if e.type == "llm_call" and "answered_by" in e.attrs]


def first_message(trace):
    """A message some later call consumes (its drop changes at least one call)."""
    return next(e.id for e in trace.events if e.type == "message" and e.agent != "orchestrator")


@pytest.fixture
def recorded(serve, tmp_path):
    server = serve(ok)
    trace, path = record(server, tmp_path)
    return server, trace, path


def test_the_header_records_a_complete_secret_free_spec(serve, tmp_path, monkeypatch):
    monkeypatch.setenv("ORCHESTRACE_OPENAI_API_KEY", SECRET)
    server = serve(ok)
    trace, path = record(server, tmp_path, temperature=0.7, top_p=0.9, seed=5, max_tokens=64)
    spec = trace.meta["backend"]
    assert spec["name"] == "openai" and spec["model"] == "local"
    opts = spec["options"]
    assert (opts["temperature"], opts["top_p"], opts["seed"], opts["max_tokens"]) == (
        0.7,
        0.9,
        5,
        64,
    )
    assert opts["base_url"] == server.url and opts["timeout_s"] == 60.0
    assert SECRET not in path.read_text()
    # the key comes back from the environment, for a server the caller names
    n = len(server.times)
    mid = first_message(trace)
    res = fork(trace, [DropMessage.of(trace, mid)], backend_options={"base_url": server.url})
    assert res.backend_calls > 0 and len(server.times) - n == res.backend_calls
    assert all(h["Authorization"] == f"Bearer {SECRET}" for h in server.headers[n:])
    n = len(server.times)
    monkeypatch.setenv("ORCHESTRACE_OPENAI_BASE_URL", server.url)
    fork(trace, [DropMessage.of(trace, mid)])
    assert all(h["Authorization"] == f"Bearer {SECRET}" for h in server.headers[n:])


def test_the_api_key_never_goes_to_a_server_read_from_the_trace(serve, tmp_path, monkeypatch):
    server = serve(ok)
    trace, _ = record(server, tmp_path)  # a trace could name any server
    monkeypatch.setenv("ORCHESTRACE_OPENAI_API_KEY", SECRET)
    n = len(server.times)
    res = fork(trace, [DropMessage.of(trace, first_message(trace))])
    assert res.backend_calls > 0 and len(server.times) - n == res.backend_calls
    assert all("Authorization" not in h for h in server.headers[n:])


def test_a_server_refusing_the_withheld_key_says_how_to_send_it(serve, tmp_path, monkeypatch):
    recording = 10**9

    def key_after_recording(h, n):
        if n < recording or h.headers.get("Authorization") == f"Bearer {SECRET}":
            ok(h, n)
        else:
            send_json(h, 401, {"error": "no key"})

    server = serve(key_after_recording)
    trace, _ = record(server, tmp_path)
    recording = len(server.times)
    monkeypatch.setenv("ORCHESTRACE_OPENAI_API_KEY", SECRET)
    mid = first_message(trace)
    with pytest.raises(ConfigError, match=r"answered 401.*never to one read from a trace"):
        fork(trace, [DropMessage.of(trace, mid)])
    res = fork(trace, [DropMessage.of(trace, mid)], backend_options={"base_url": server.url})
    assert res.backend_calls > 0 and not any(e.error for e in changed_calls(res.trace))


def test_sim_spec_rebuilds_every_option():
    sim = SimBackend(seed=3, fail_rate=0.25, role_tokens={"expert": 2.0}, ttft_s=0.1)
    again = backend_from_spec(sim.spec())
    assert again == sim
    assert backend_from_spec(sim.spec(), seed=9).seed == 9


def test_env_style_sim_options_survive_a_fork():
    tr = run(
        "debate",
        "arith",
        agents=3,
        seed=2,
        task_size=8,
        backend_options={"role_tokens": {"debater": 2.0}, "ttft_s": 0.2},
    ).trace
    assert tr.meta["backend"]["options"]["role_tokens"] == {"debater": 2.0}
    res = fork(tr, [DropMessage.of(tr, first_message(tr))])
    assert res.trace.meta["backend"] == tr.meta["backend"]
    assert res.trace.meta["fork"]["backend"] == tr.meta["backend"]
    # the same fork on a default simulator differs: the options mattered
    other = fork(tr, [DropMessage.of(tr, first_message(tr))], backend=SimBackend(seed=2))
    assert [e.tokens_out for e in changed_calls(res.trace)] != [
        e.tokens_out for e in changed_calls(other.trace)
    ]
    assert replay(tr).trace == tr  # sim traces still replay exactly


def test_fork_calls_reach_the_recorded_server_not_the_simulator(recorded):
    server, trace, _ = recorded
    n = len(server.times)
    res = fork(trace, [DropMessage.of(trace, first_message(trace))])
    assert res.backend_calls > 0
    assert len(server.times) - n == res.backend_calls  # counted server-side
    calls = changed_calls(res.trace)
    assert len(calls) == res.backend_calls
    assert {json.dumps(e.attrs["answered_by"]) for e in calls} == {
        json.dumps({"name": "openai", "model": "local"})
    }
    assert all(e.tool == "local" for e in res.trace.events if e.type == "llm_call")
    meta = res.trace.meta
    assert meta["backend"]["name"] == "openai" and meta["backend"]["base_url"] == server.url
    assert meta["fork"]["of"] == trace.trace_id
    assert meta["fork"]["interventions"][0]["kind"] == "DropMessage"
    assert meta["fork"]["backend"]["options"]["base_url"] == server.url


def test_cli_replay_fork_reaches_the_server(recorded, tmp_path, capsys):
    server, trace, path = recorded
    n = len(server.times)
    out = tmp_path / "fork.json"
    rc, stdout, stderr = run_cli(
        ["replay", str(path), "--drop-message", first_message(trace), "-o", str(out)], capsys
    )
    assert rc == 0, stderr
    forked = load(out)
    calls = changed_calls(forked)
    assert calls and len(server.times) - n == len(calls)
    assert f"{len(calls)} backend call(s)" in stdout
    assert "answered by openai (local)" in stdout


@pytest.mark.parametrize(
    "method,unit", [("counterfactual", "message"), ("loo", "agent"), ("shapley", "agent")]
)
def test_cli_reexecuting_credit_reaches_the_server(recorded, capsys, method, unit):
    server, _, path = recorded
    n = len(server.times)
    rc, stdout, stderr = run_cli(["credit", str(path), "--unit", unit, "--method", method], capsys)
    assert rc == 0, stderr
    calls = int(next(ln for ln in stdout.splitlines() if "backend_calls:" in ln).split()[-1])
    assert calls > 0 and len(server.times) - n == calls


def test_server_gone_is_one_clear_error_naming_backend(recorded, capsys):
    server, trace, path = recorded
    server.close()
    mid = first_message(trace)
    with pytest.raises(ConfigError, match=r"cannot be reached.*--backend sim"):
        fork(trace, [DropMessage.of(trace, mid)])
    for argv in (
        ["replay", str(path), "--drop-message", mid],
        ["credit", str(path), "--unit", "message", "--method", "counterfactual"],
        ["credit", str(path), "--unit", "agent", "--method", "loo"],
    ):
        rc, _, stderr = run_cli(argv, capsys)
        assert rc == 1
        assert stderr.startswith(f"error: trace {trace.trace_id!r} was recorded with backend ")
        assert stderr.count("\n") == 1
        assert f"openai (model 'local' at {server.url}), which cannot be reached (" in stderr
        assert "--backend sim" in stderr and "--base-url URL" in stderr


def test_server_failing_every_changed_call_is_refused(serve, tmp_path):
    recording = 10**9

    def fail_after_recording(h, n):
        if n < recording:
            ok(h, n)
        else:
            send_json(h, 503, {"error": "overloaded"})

    server = serve(fail_after_recording)
    trace, _ = record(server, tmp_path)
    recording = len(server.times)
    with pytest.raises(
        ConfigError, match=r"answered none of the \d+ changed call\(s\).*server answered 503"
    ):
        fork(trace, [DropMessage.of(trace, first_message(trace))])


def test_explicit_sim_backend_works_and_says_so(recorded, tmp_path, capsys):
    server, trace, path = recorded
    server.close()
    res = fork(trace, [DropMessage.of(trace, first_message(trace))], backend="sim")
    calls = changed_calls(res.trace)
    assert calls and all(e.attrs["answered_by"] == {"name": "sim", "model": "sim"} for e in calls)
    assert all(e.tool == "sim" for e in calls)
    assert res.trace.meta["backend"]["name"] == "sim"  # the truth, not the recorded backend
    assert res.trace.meta["fork"]["recorded_backend"]["name"] == "openai"
    out = tmp_path / "f.json"
    mid = first_message(trace)
    argv = ["replay", str(path), "--drop-message", mid, "--backend", "sim", "-o", str(out)]
    rc, stdout, stderr = run_cli(argv, capsys)
    assert rc == 0, stderr
    assert "answered by sim" in stdout
    assert {e.attrs["answered_by"]["name"] for e in changed_calls(load(out))} == {"sim"}
    argv = ["credit", str(path), "--unit", "message", "--method", "counterfactual"]
    rc, stdout, stderr = run_cli([*argv, "--backend", "sim"], capsys)
    assert rc == 0, stderr
    assert "backend_calls:" in stdout


def test_base_url_flag_points_a_fork_at_another_server(recorded, serve, capsys):
    old, trace, path = recorded
    old.close()
    new = serve(ok)
    rc, stdout, stderr = run_cli(
        ["replay", str(path), "--drop-message", first_message(trace), "--base-url", new.url],
        capsys,
    )
    assert rc == 0, stderr
    assert len(new.times) > 0 and f"{len(new.times)} backend call(s)" in stdout


def without_backend(trace):
    meta = {k: v for k, v in trace.meta.items() if k != "backend"}
    return msgspec.structs.replace(trace, meta=meta)


@pytest.fixture
def sim_trace():
    return run("debate", "arith", agents=3, seed=2, task_size=8).trace


def test_trace_without_backend_spec_names_backend(sim_trace, tmp_path, capsys):
    tr = without_backend(sim_trace)
    mid = first_message(tr)
    with pytest.raises(ConfigError) as err:
        fork(tr, [DropMessage.of(tr, mid)])
    assert str(err.value) == (
        f"trace {tr.trace_id!r} does not record which backend produced it (no meta.backend); "
        "pass --backend sim to fork it on the simulator, or --backend openai --base-url URL "
        "(backend= in Python)"
    )
    path = tmp_path / "old.json"
    dump(tr, path)
    for argv in (
        ["replay", str(path), "--drop-message", mid],
        ["credit", str(path), "--unit", "agent", "--method", "shapley"],
    ):
        rc, _, stderr = run_cli(argv, capsys)
        assert rc == 1 and "no meta.backend" in stderr and "--backend sim" in stderr
    rc, _, stderr = run_cli(
        ["replay", str(path), "--drop-message", mid, "--backend", "sim"], capsys
    )
    assert rc == 0, stderr


def test_older_spec_without_options_names_backend(sim_trace):
    meta = {**sim_trace.meta, "backend": {"name": "sim", "virtual": True}}
    tr = msgspec.structs.replace(sim_trace, meta=meta)
    with pytest.raises(ConfigError, match=r"records backend sim but not the options.*--backend"):
        fork(tr, [DropMessage.of(tr, first_message(tr))])


def test_hostile_spec_options_are_one_clear_error(sim_trace):
    meta = {**sim_trace.meta, "backend": {"name": "sim", "options": {"skills": [1, 2]}}}
    tr = msgspec.structs.replace(sim_trace, meta=meta)
    with pytest.raises(ConfigError, match=r"bad option skills=\[1, 2\].*--backend"):
        backend_for(tr)
    meta = {**sim_trace.meta, "backend": {"name": "sim", "options": {"sed": 1}}}
    with pytest.raises(ConfigError, match=r"has no option 'sed'"):
        backend_for(msgspec.structs.replace(sim_trace, meta=meta))


def test_interventions_on_missing_or_non_message_ids_name_the_id(sim_trace, tmp_path, capsys):
    with pytest.raises(TraceError, match=r"no event 'e9999' in trace"):
        DropMessage.of(sim_trace, "e9999")
    spawn = next(e.id for e in sim_trace.events if e.type == "spawn")
    with pytest.raises(TraceError, match=rf"event '{spawn}' of trace .* is a spawn, not a message"):
        ReplaceMessage.of(sim_trace, spawn, "x")
    path = tmp_path / "t.json"
    dump(sim_trace, path)
    rc, _, stderr = run_cli(["replay", str(path), "--replace-message", "e9999", "x"], capsys)
    assert rc == 1
    assert stderr == (
        f"error: no event 'e9999' in trace {sim_trace.trace_id}; pick the id of a message "
        "event from the trace\n"
    )
    rc, _, stderr = run_cli(["replay", str(path), "--drop-message", "e\x1b[2J" + "x" * 500], capsys)
    assert rc == 1 and "\x1b" not in stderr and len(stderr) < 300
    bad = msgspec.structs.replace(sim_trace, meta={**sim_trace.meta, "config": {"agents": "3"}})
    with pytest.raises(TraceError, match=r"no usable team size \(meta.config.agents = '3'\)"):
        spawn_one_more(bad)


def test_backend_flags_without_a_fork_are_refused(sim_trace, tmp_path, capsys):
    path = tmp_path / "t.json"
    dump(sim_trace, path)
    rc, _, stderr = run_cli(["replay", str(path), "--backend", "sim"], capsys)
    assert rc == 1 and "exact replay calls no backend" in stderr
    rc, _, stderr = run_cli(
        ["credit", str(path), "--method", "uniform", "--backend", "sim"], capsys
    )
    assert rc == 1 and "not to uniform" in stderr
    rc, _, stderr = run_cli(
        ["replay", str(path), "--stop-at", "1", "--backend", "sim", "--model", "m"], capsys
    )
    assert rc == 1 and "--model does not apply to --backend sim" in stderr


def test_make_backend_names_an_unknown_option():
    with pytest.raises(ConfigError, match=r"the openai backend has no option 'modle'"):
        make_backend("openai", modle="x")


@pytest.mark.slow  # imports transformers
def test_hf_model_that_does_not_load_names_the_flags(sim_trace, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    missing = str(tmp_path / "no-model")
    options = make_backend("hf", model=missing).spec()["options"]  # (loads on first call)
    spec = {"name": "hf", "virtual": False, "model": missing, "options": options}
    tr = msgspec.structs.replace(sim_trace, meta={**sim_trace.meta, "backend": spec})
    with pytest.raises(ConfigError, match=r"which cannot be loaded \(.*--model DIR.*--backend sim"):
        fork(tr, [DropMessage.of(tr, first_message(tr))])


def test_a_fork_that_changes_no_call_needs_no_server(recorded):
    server, trace, _ = recorded
    server.close()
    last = max(e.step for e in trace.events if e.agent == "orchestrator" and e.step is not None)
    res = fork(trace, [ForceStop(last)])  # the run stops early: every call comes from the trace
    assert res.backend_calls == 0 and not changed_calls(res.trace)
    assert res.cache_hits == sum(e.type == "llm_call" for e in trace.events)


def test_a_backend_that_is_not_one_is_refused(sim_trace):
    with pytest.raises(ConfigError, match=r"backend must be None .* \(got 42\)"):
        fork(sim_trace, [ForceStop(1)], backend=42)
    with pytest.raises(ConfigError, match=r"unknown backend 'gpt'"):
        fork(sim_trace, [ForceStop(1)], backend="gpt")


@pytest.mark.parametrize("field", ["agents", "seed"])
def test_a_run_setting_missing_from_the_trace_is_refused_not_defaulted(sim_trace, field):
    """A 3-agent run forked as a default 8-agent one would answer another question."""
    config = {k: v for k, v in sim_trace.meta["config"].items() if k != field}
    tr = msgspec.structs.replace(sim_trace, meta={**sim_trace.meta, "config": config})
    with pytest.raises(TraceError, match=rf"config keys \['{field}'\] are missing"):
        fork(tr, [DropMessage.of(tr, first_message(tr))])


@pytest.mark.parametrize("option", ["seed", "fail_rate"])
def test_a_backend_option_every_version_records_is_refused_when_missing(sim_trace, option):
    """A simulator without its seed: a default in its place would answer as another one."""
    import warnings

    backend = dict(sim_trace.meta["backend"])
    backend["options"] = {k: v for k, v in backend["options"].items() if k != option}
    tr = msgspec.structs.replace(sim_trace, meta={**sim_trace.meta, "backend": backend})
    with pytest.raises(ConfigError, match=rf"options of backend 'sim' lack {option}, which every"):
        fork(tr, [DropMessage.of(tr, first_message(tr))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # given explicitly, or added later: nothing to say
        backend_from_spec(backend, **{option: sim_trace.meta["backend"]["options"][option]})
        older = dict(sim_trace.meta["backend"])
        later = ("error_correlation", "oracle_verifiers")
        older["options"] = {k: v for k, v in older["options"].items() if k not in later}
        assert backend_from_spec(older).error_correlation == 0.0


def test_options_an_older_version_did_not_record_are_said_with_the_values_used(tmp_path):
    """The transformers backend recorded no batching or seed before: defaults, said."""
    spec = make_backend("hf", model=str(tmp_path / "m")).spec()
    old = {k: v for k, v in spec["options"].items() if k not in ("max_batch", "seed")}
    with pytest.warns(UserWarning, match=r"lack max_batch, seed \(recorded by an older version\)"):
        built = backend_from_spec({**spec, "options": old})
    assert built.max_batch == 8 and built.seed is None
