"""The six ready topologies, by name.

Example:
    >>> sorted(TOPOLOGIES)
    ['centralized', 'critic_loop', 'debate', 'hierarchical', 'pipeline', 'swarm']
    >>> TOPOLOGIES["pipeline"].trace_topology
    'planner_executor_critic'
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrace.errors import ConfigError
from orchestrace.runtime.core import AgentFn
from orchestrace.runtime.topologies import (
    centralized,
    critic_loop,
    debate,
    hierarchical,
    pipeline,
    swarm,
)

__all__ = ["TOPOLOGIES", "TopologySpec", "get_topology"]


@dataclass(frozen=True)
class TopologySpec:
    """A topology: its orchestrator and how traces name it."""

    name: str
    root: AgentFn
    trace_topology: str
    description: str


TOPOLOGIES: dict[str, TopologySpec] = {
    s.name: s
    for s in (
        TopologySpec(
            "centralized", centralized.orchestrate, "centralized", "orchestrator + workers, combine"
        ),
        TopologySpec(
            "pipeline",
            pipeline.orchestrate,
            "planner_executor_critic",
            "planner, executor by delegation, critic",
        ),
        TopologySpec("debate", debate.orchestrate, "debate", "debaters revise, judge picks"),
        TopologySpec(
            "swarm", swarm.orchestrate, "swarm", "parallel workers report to an aggregator"
        ),
        TopologySpec(
            "hierarchical",
            hierarchical.orchestrate,
            "hierarchical",
            "orchestrator -> managers -> workers",
        ),
        TopologySpec(
            "critic_loop",
            critic_loop.orchestrate,
            "critic_loop",
            "worker retries until the critic accepts",
        ),
    )
}
_ALIASES = {
    "planner_executor_critic": "pipeline",
    "critic-loop": "critic_loop",
    "committee": "debate",
    "orchestrator": "centralized",
}


def get_topology(name: str) -> TopologySpec:
    """Look a topology up by name.

    Raises:
        ConfigError: Unknown name (the message lists the known ones).
    """
    spec = TOPOLOGIES.get(_ALIASES.get(name, name))
    if spec is None:
        raise ConfigError(f"unknown topology {name!r}; use one of: {', '.join(sorted(TOPOLOGIES))}")
    return spec
