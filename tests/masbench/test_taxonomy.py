"""Each detector on a trace that shows its failure mode and one that does not."""

import pytest

from orchestrace.masbench.taxonomy import CATEGORIES, DETECTORS, detect, taxonomy_counts
from orchestrace.trace.build import TraceBuilder


def base(
    *,
    stop=True,
    returns=True,
    verify=None,
    wrong_accept=False,
    repeat=1,
    late=False,
    unread=False,
    budget=False,
    silent=False,
    success=1.0,
):
    """Orchestrator spawns two workers; they solve (maybe repeat), return; it aggregates."""
    b = TraceBuilder(task_id="t", topology="centralized")
    plan = b.llm("lead", dur=1.0, content="plan", attrs={"kind": "plan"})
    rets = []
    for w in ("w1", "w2"):
        s = b.spawn("lead", w, role="worker", after=[plan])
        prev = s
        for _ in range(repeat):
            prev = b.llm(
                w,
                dur=1.0,
                after=[prev],
                content="ANSWER: 4",
                attrs={"kind": "solve", "answer": 4, "truth": 4},
            )
        if w == "w2" and silent:
            continue
        if returns or w == "w1":
            rets.append(b.ret(w, "lead", "4", after=[prev]))
    if unread:
        b.message("w2", "lead", "by the way: 5")
    agg_inputs = list(rets)
    if verify == "critic":
        c = b.spawn("lead", "critic", role="critic")
        cand = 5 if wrong_accept else 4
        crit = b.llm(
            "critic",
            dur=1.0,
            after=[c],
            content="ANSWER: accept",
            attrs={"kind": "critique", "answer": "accept", "candidate": cand, "truth": 4},
        )
        agg_inputs.append(b.ret("critic", "lead", "accept", after=[crit]))
    method = "vote" if verify == "vote" else "combine"
    agg = b.aggregate("lead", agg_inputs, "4", dur=1.0, attrs={"method": method, "value": 4})
    if stop:
        reason = "budget exceeded: max_steps (100)" if budget else "done"
        b.stop("lead", reason, after=[agg], attrs={"answer": 4})
    if late:
        b.llm("w1", dur=1.0, t=100.0, content="ANSWER: 9", attrs={"kind": "solve"})
    return b.build(metrics={"task_success": success})


CASES = {
    "step_repetition": (dict(repeat=3, verify="vote"), dict(repeat=1, verify="vote")),
    "unaware_of_termination": (dict(budget=True, verify="vote"), dict(verify="vote")),
    "information_withholding": (dict(silent=True, verify="vote"), dict(verify="vote")),
    "ignored_input": (dict(unread=True, verify="vote"), dict(verify="vote")),
    "premature_termination": (dict(returns=False, verify="vote"), dict(verify="vote")),
    "no_verification": (dict(verify=None), dict(verify="critic")),
    "incorrect_verification": (dict(verify="critic", wrong_accept=True), dict(verify="critic")),
}


@pytest.mark.parametrize("mode", sorted(DETECTORS))
def test_detector_fires_on_positive_and_not_on_negative(mode):
    pos, neg = CASES[mode]
    found = DETECTORS[mode](base(**pos))
    assert found and all(f.mode == mode and f.category == CATEGORIES[mode] for f in found)
    assert found[0].mast.startswith("FM-")
    assert DETECTORS[mode](base(**neg)) == []


def test_clean_trace_has_no_findings():
    assert detect(base(verify="critic")) == []


def test_late_actions_after_stop():
    found = DETECTORS["unaware_of_termination"](base(late=True, verify="vote"))
    assert found and "after the orchestrator stopped" in found[0].detail


def test_no_stop_at_all():
    found = DETECTORS["unaware_of_termination"](base(stop=False, verify="vote"))
    assert found and "never decided to stop" in found[0].detail


def test_counts_cover_every_mode():
    counts = taxonomy_counts(detect(base(repeat=3)))
    assert set(counts) == set(DETECTORS) and counts["step_repetition"] == 2


def test_runtime_critic_loop_that_overrides_rejections():
    from orchestrace.runtime import run

    opts = {"oracle_verifiers": True}  # this seed's critic rejects every attempt
    trace = run("critic_loop", "arith", agents=3, seed=1, backend_options=opts).trace
    modes = {f.mode for f in detect(trace)}
    assert "ignored_input" in modes  # the critic rejected the final answer, it was used anyway
