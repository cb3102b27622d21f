"""One task instance checks every run of a spec, with the verdicts fresh instances give."""

import pytest

from orchestrace import ConfigError
from orchestrace.rewards import base
from orchestrace.rewards.base import outcome, prepare_outcome
from orchestrace.runtime import run
from orchestrace.runtime.replay import DropMessage, backend_for, fork
from orchestrace.tasks import _checking, make_task, task_class

RUNS = [
    ("swarm", "wide-search", {"agents": 5, "seed": 1, "task_size": 20, "gossip": 0.5}),
    ("debate", "arith", {"agents": 3, "seed": 2, "rounds": 2, "task_size": 16}),
    ("centralized", "multihop", {"agents": 3, "seed": 4}),
]


def _traces(topology, task, kw):
    tr = run(topology, task, **kw).trace
    b = backend_for(tr, seed_offset=1)
    msgs = [e.id for e in tr.events if e.type == "message"][:6]
    return [tr] + [fork(tr, [DropMessage.of(tr, m)], backend=b).trace for m in msgs]


@pytest.mark.parametrize(("topology", "task", "kw"), RUNS, ids=[r[1] for r in RUNS])
def test_a_shared_instance_gives_the_verdicts_of_fresh_ones(topology, task, kw):
    traces = _traces(topology, task, kw)
    spec = traces[0].meta["task"]
    _checking._CHECKING.clear()
    prepare_outcome(traces[0])
    cls = task_class(spec["name"])
    key = (cls.name, spec["seed"], spec["size"])
    shared = _checking._CHECKING[key]
    got = [outcome(t) for t in traces]
    assert _checking._CHECKING[key] is shared  # built once, for every trace of the spec

    want = []
    for t in traces:
        answer = base.answer_of(t)
        raw = make_task(spec["name"], seed=spec["seed"], size=spec["size"]).verdict(answer)[
            "passed"
        ]
        want.append(None if raw is None else bool(raw))
    assert got == want


def test_a_bad_spec_is_refused_every_time():
    tr = run("debate", "arith", agents=2, seed=1, task_size=8).trace
    tr.meta["task"] = {**tr.meta["task"], "size": -3}
    prepare_outcome(tr)  # says nothing: the error comes when a run is scored
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"meta\.task"):
            outcome(tr)


def test_tasks_that_run_code_are_not_kept():
    cls = task_class("humaneval-v0")
    assert cls.executes_code
    _checking._CHECKING.clear()
    task = _checking.checking_task(cls, {"name": "humaneval-v0", "seed": 0, "size": None}, "t")
    assert task is not None
    assert _checking._CHECKING == {}
