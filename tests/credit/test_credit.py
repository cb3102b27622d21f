"""Laws over every credit assigner, Shapley axioms on known games, counterfactual credit."""

import itertools
import math

import numpy as np
import pytest

from orchestrace import ConfigError
from orchestrace.credit import (
    UNITS,
    CounterfactualMessageCredit,
    DiscountedCredit,
    LeaveOneOutCredit,
    ShapleyCredit,
    UniformCredit,
    agentwise,
    by_task,
    check_credit,
    group_relative,
    llm_descendants,
    make_assigner,
    shapley_exact,
    shapley_mc,
    unit_members,
)
from orchestrace.credit.shapley import glove_game, hoeffding_bound, majority_game
from orchestrace.runtime import TOPOLOGIES, Runtime, make_task, run
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.clock import run_virtual


@pytest.fixture(scope="module")
def traces():
    return [run(t, "search", agents=5, seed=7).trace for t in sorted(TOPOLOGIES)]


@pytest.mark.parametrize(
    "assigner", [UniformCredit(), DiscountedCredit(0.9)], ids=["uniform", "discounted"]
)
@pytest.mark.parametrize("unit", UNITS)
def test_efficient_assigners_sum_to_the_reward_at_every_unit(traces, assigner, unit):
    for tr in traces:
        t = assigner.assign(tr, unit, reward=0.7)
        members = unit_members(tr, unit)
        assert {r.id for r in t.rows} == set(members)
        if members:
            assert t.total(unit) == pytest.approx(0.7)
        assert check_credit(t, tr) == []


def test_discounted_prefers_events_near_the_outcome():
    tr = run("centralized", "arith", agents=4, seed=1).trace
    near = DiscountedCredit(0.5).assign(tr, "turn", reward=1.0).by_unit("turn")
    last = f"{tr.events[-1].agent}@{tr.events[-1].step}"
    assert max(near, key=near.get) == last


# ---------------------------------------------------------------- Shapley on known games
def brute_shapley(players, v):
    """Average marginal contribution over every ordering (independent of shapley_exact)."""
    out = dict.fromkeys(players, 0.0)
    perms = list(itertools.permutations(players))
    for order in perms:
        s = frozenset()
        for p in order:
            out[p] += v(s | {p}) - v(s)
            s = s | {p}
    return {p: x / len(perms) for p, x in out.items()}


def test_glove_game_known_values():
    v = glove_game({"a"}, {"b", "c"})
    phi = shapley_exact(["a", "b", "c"], v)
    assert phi == pytest.approx({"a": 2 / 3, "b": 1 / 6, "c": 1 / 6})


def test_majority_game_axioms():
    players = ["a", "b", "c", "d", "null"]
    w = {"a": 3, "b": 2, "c": 2, "d": 1, "null": 0}
    v = majority_game(players, quota=5, weights=w)
    phi = shapley_exact(players, v)
    assert phi == pytest.approx(brute_shapley(players, v))
    assert phi["null"] == 0.0  # null player
    assert phi["b"] == pytest.approx(phi["c"])  # symmetry
    assert sum(phi.values()) == pytest.approx(v(frozenset(players)) - v(frozenset()))  # efficiency
    simple = shapley_exact(["x", "y", "z"], majority_game(["x", "y", "z"]))
    assert simple == pytest.approx({"x": 1 / 3, "y": 1 / 3, "z": 1 / 3})


def test_monte_carlo_shapley_converges_at_root_n():
    players = list(range(10))
    rng = np.random.default_rng(0)
    w = {p: float(rng.uniform(0, 2)) for p in players}
    v = majority_game(players, quota=int(sum(w.values()) / 2), weights=w)
    # the error is measured against the exact values (10 players: 1,024 coalitions)
    ref = shapley_exact(players, v)
    errs = []
    for m in (50, 500, 5000):
        trials = [shapley_mc(players, v, samples=m, seed=s)[0] for s in range(5)]
        errs.append(
            np.mean([np.sqrt(np.mean([(t[p] - ref[p]) ** 2 for p in players])) for t in trials])
        )
        est = trials[0]
        assert sum(est.values()) == pytest.approx(v(frozenset(players)) - v(frozenset()))
    ratio = errs[0] / errs[1], errs[1] / errs[2]
    assert all(2.0 < r < 5.0 for r in ratio), ratio  # ~sqrt(10) = 3.16 per 10x samples
    assert hoeffding_bound(400, 1.0, 0.05) == pytest.approx(math.sqrt(math.log(40) / 800))


def test_shapley_on_a_trace_is_efficient():
    tr = run("centralized", "arith", agents=3, seed=2, task_size=6).trace
    t = ShapleyCredit().assign(tr, "agent")
    assert t.total("agent") == pytest.approx(t.reward)
    assert t.reward == tr.metrics["task_success"]
    assert t.stats["forks"] == 2**3 - 1
    assert check_credit(t, tr) == []
    with pytest.raises(ConfigError, match="too many for exact"):
        ShapleyCredit(exact_limit=2).assign(tr, "agent")
    mc = ShapleyCredit(samples=20).assign(tr, "agent")
    assert mc.total("agent") == pytest.approx(mc.reward)


# ---------------------------------------------------------------- counterfactual
def test_counterfactual_credit_of_unread_message_is_exactly_zero():
    tr = run("swarm", "arith", agents=6, seed=2, gossip=1.0).trace
    consumed = {e.src for e in tr.edges if e.type == "message"}
    t = CounterfactualMessageCredit(samples=3).assign(tr, "message")
    unread = [e.id for e in tr.events if e.type == "message" and e.id not in consumed]
    assert unread
    for mid in unread:
        assert t.by_unit("message")[mid] == 0.0
    d = llm_descendants(tr)
    assert all(d[m] == 0 for m in unread)


def test_counterfactual_cost_bounds():
    tr = run("debate", "arith", agents=4, seed=3, rounds=2, task_size=16).trace
    t = CounterfactualMessageCredit().assign(tr, "message")
    s = t.stats
    assert s["backend_calls"] <= s["descendant_calls"] * 2
    assert s["backend_calls"] < s["naive_calls"] * 0.5
    with pytest.raises(ConfigError, match="defined for messages"):
        CounterfactualMessageCredit().assign(tr, "agent")


def _planted(seed):
    """A helper sends the worker the input it needs (decisive) and a chatty note (useless)."""
    task = make_task("multihop", seed=seed, size=2)
    part = task.split(task.whole(), 2)[1]

    async def worker(ctx):
        msgs = []
        while len(msgs) < 2:
            m = await ctx.receive(timeout=50)
            if m is None:
                break
            msgs.append(m)
        given = next((m.data for m in msgs if m.data is not None), None)
        r = await ctx.generate(
            "solve", ctx.payload(part, input=given, expected_input=part.data["start"])
        )
        return r.answer

    async def helper(ctx, target):
        await ctx.send(target, "the previous hop", data=part.data["start"])  # decisive
        await ctx.send(target, "good luck!")  # useless

    async def root(ctx):
        w = await ctx.spawn("worker", worker)
        h = await ctx.spawn("helper", helper, target=w.name)
        (r, _) = await ctx.wait([w, h])
        return r.value

    rt = Runtime(task=task, backend=SimBackend(seed=seed), topology="centralized")
    tr = run_virtual(rt.run(root))
    return tr, root, task


def test_planted_decisive_message_ranks_first():
    from orchestrace.credit.target import reward_of
    from orchestrace.runtime.replay import DropMessage, cache_from_trace

    wins = 0
    seeds = range(40)
    for seed in seeds:
        tr, root, task = _planted(seed)

        def check(trace, answer, task=task):
            return answer == task.span_truth(1, 2)

        base = reward_of(tr, lambda ts: [float(check(ts[0], ts[0].meta["result"]["answer"]))])
        msgs = [e for e in tr.events if e.type == "message"]
        decisive, useless = msgs
        credits = []
        for m in (decisive, useless):
            # the planted run is not a registered topology: fork it through its runtime
            cache = cache_from_trace(tr)
            rt = Runtime(
                task=task,
                backend=SimBackend(seed=seed),
                topology="centralized",
                cache=cache,
                interventions=[DropMessage.of(tr, m.id)],
            )
            new = run_virtual(rt.run(root))
            credits.append(base - float(check(new, new.meta["result"]["answer"])))
        wins += credits[0] > credits[1]
        assert credits[1] == 0.0
    assert wins / len(seeds) >= 0.95


def test_leave_one_out_and_normalisation():
    trs = [run("centralized", "arith", agents=3, seed=s, task_size=6).trace for s in range(4)]
    tables = [LeaveOneOutCredit().assign(tr, "agent") for tr in trs]
    for t in tables:
        assert set(t.by_unit("agent")) == {"worker1", "worker2", "worker3"}
    norm = agentwise(tables)
    for agent in ("worker1", "worker2"):
        vals = [t.by_unit("agent")[agent] for t in norm]
        assert abs(np.mean(vals)) < 1e-6
    adv = by_task(trs, [tr.rewards["team"] for tr in trs])
    assert len(adv) == 4 and abs(sum(adv)) < 1e-6
    assert group_relative([1, 1, 1]) == [0.0, 0.0, 0.0]
    assert group_relative([2.0, 0.0], scale="none") == [1.0, -1.0]
    with pytest.raises(ConfigError, match="unknown credit method"):
        make_assigner("magic")
    with pytest.raises(ConfigError, match="unknown credit unit"):
        UniformCredit().assign(trs[0], "planet")
