"""--agents is never capped silently: every topology says what it uses, records it, or refuses."""

from __future__ import annotations

from collections import Counter

import pytest

from orchestrace.cli import main
from orchestrace.errors import ConfigError
from orchestrace.runtime import TOPOLOGIES, run
from orchestrace.runtime.replay import replay
from orchestrace.runtime.topologies import team_use

# (topology, --agents, options) that the topology cannot use as asked, and what it uses instead
CAPPED = [
    ("centralized", 300, {}, 64, "workers"),
    ("swarm", 300, {}, 64, "workers"),
    ("hierarchical", 300, {}, 64, "workers"),
    ("hierarchical", 2, {"stages": 3}, 3, "workers"),
    ("debate", 300, {}, 7, "debaters"),
    ("critic_loop", 8, {}, 1, "workers"),
    ("pipeline", 8, {}, 1, "executors"),
    ("pipeline", 300, {}, 64, "parts"),
]


def _workers(trace) -> int:
    roles = Counter(e.role for e in trace.events if e.type == "spawn")
    return roles.get("worker", 0)


def test_every_topology_has_a_capped_case():
    assert {c[0] for c in CAPPED} == set(TOPOLOGIES)


@pytest.mark.parametrize("topology,agents,options,used,unit", CAPPED)
def test_capped_team_is_recorded_and_strict_refuses(topology, agents, options, used, unit):
    res = run(topology, "arith-mapreduce-v0", agents=agents, seed=1, **options)
    team = res.trace.meta["team"]
    assert team["requested"] == agents
    assert team["used"] == used and team["unit"] == unit
    assert team["note"].startswith("note: ")
    if topology in ("centralized", "swarm", "hierarchical") and unit == "workers":
        assert _workers(res.trace) == used  # the record says what really ran
    with pytest.raises(ConfigError) as err:
        run(topology, "arith-mapreduce-v0", agents=agents, seed=1, strict_agents=True, **options)
    msg = str(err.value)
    assert msg.startswith(f"--agents {agents}: ") and "leave out --strict-agents" in msg


@pytest.mark.parametrize(
    "topology,agents,options",
    [
        ("centralized", 8, {}),
        ("swarm", 8, {}),
        ("hierarchical", 8, {}),
        ("hierarchical", 30, {"depth": 2, "stages": 2}),
        ("debate", 5, {"debaters": 5}),
        ("critic_loop", 1, {}),
        ("pipeline", 1, {}),
    ],
)
def test_a_usable_team_has_no_note_and_runs_strictly(topology, agents, options):
    res = run(topology, "arith-mapreduce-v0", agents=agents, seed=1, strict_agents=True, **options)
    assert "team" not in res.trace.meta
    assert team_use(topology, "arith-mapreduce-v0", 64, agents, options) is None
    if topology in ("centralized", "swarm", "hierarchical"):
        assert _workers(res.trace) == agents


def test_replay_of_a_capped_run_is_exact():
    res = run("swarm", "arith-mapreduce-v0", agents=100, seed=2)
    assert "team" in res.trace.meta
    assert replay(res.trace).trace == res.trace


@pytest.mark.parametrize("topology", sorted(TOPOLOGIES))
def test_cli_warns_once_or_refuses(capsys, topology):
    argv = ["run", topology, "-k", "300", "--no-progress"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1, err
    assert main([*argv, "--strict-agents"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --agents 300: ") and err.count("\n") == 1
