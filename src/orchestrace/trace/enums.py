"""The trace vocabulary: event, edge, decision, credit-unit and topology names.

Each enumeration is a ``StrEnum`` (for the API) with a matching ``Literal`` type (how records
store the value: a plain string). The ``*_CODE`` tables give each value's integer code, its
position in the enumeration, as held by the columns of a compiled
:class:`~orchestrace.trace.graph.TraceGraph`. This module is the bottom of ``trace/``: the
records (:mod:`orchestrace.trace.model`), the graph and Critical Steps all import it and it
imports none of them. :mod:`orchestrace.trace.model` re-exports the enumerations.

Example:
    >>> EventType.SPAWN == "spawn", EVENT_CODE["spawn"], EVENT_TYPES[1] is EventType.SPAWN
    (True, 1, True)
    >>> Decision.from_code("O2") is Decision.DELEGATE
    True
"""

from __future__ import annotations

import enum
from typing import Literal

__all__ = [
    "DECISIONS",
    "DECISION_CODE",
    "EDGE_CODE",
    "EDGE_TYPES",
    "EVENT_CODE",
    "EVENT_TYPES",
    "CreditUnit",
    "Decision",
    "DecisionName",
    "EdgeType",
    "EdgeTypeName",
    "EventType",
    "EventTypeName",
    "Topology",
    "TopologyName",
]


class EventType(enum.StrEnum):
    """What an event records. The first ten are the public survey schema's types."""

    ORCHESTRATOR_DECISION = "orchestrator_decision"
    SPAWN = "spawn"
    DESPAWN = "despawn"
    MESSAGE = "message"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    RETURN = "return"
    AGGREGATE = "aggregate"
    HUMAN_INTERVENTION = "human_intervention"
    SAFETY_EVENT = "safety_event"
    #: One LLM generation (prompt in, completion out); native only, exported as ``tool_call``.
    LLM_CALL = "llm_call"


class EdgeType(enum.StrEnum):
    """Why one event depends on another (the survey schema's eight edge types)."""

    TEMPORAL = "temporal"
    CAUSAL = "causal"
    SPAWN = "spawn"
    MESSAGE = "message"
    TOOL_DEPENDENCY = "tool_dependency"
    RETURN = "return"
    AGGREGATE = "aggregate"
    SAFETY_FLOW = "safety_flow"


class Decision(enum.StrEnum):
    """The five orchestration sub-decisions O1-O5.

    Example:
        >>> Decision.STOP.code
        'O5'
        >>> Decision.from_code("O2") is Decision.DELEGATE
        True
    """

    SPAWN = "spawn"
    DELEGATE = "delegate"
    COMMUNICATE = "communicate"
    AGGREGATE = "aggregate"
    STOP = "stop"

    @property
    def code(self) -> str:
        """The survey's name for this decision, ``"O1"`` to ``"O5"``."""
        return f"O{list(Decision).index(self) + 1}"

    @classmethod
    def from_code(cls, code: str) -> Decision:
        """Return the decision named ``"O1"`` to ``"O5"``."""
        found = {f"O{k}": d for k, d in enumerate(cls, start=1)}.get(code.upper())
        if found is None:
            raise ValueError(f"unknown decision code {code!r}; use O1..O5")
        return found


class CreditUnit(enum.StrEnum):
    """The eight units credit can be assigned at, coarsest first."""

    TEAM = "team"
    ORCHESTRATOR = "orchestrator"
    ROLE = "role"
    AGENT = "agent"
    TURN = "turn"
    MESSAGE = "message"
    ACTION = "action"
    TOKEN = "token"


class Topology(enum.StrEnum):
    """How the agents of a run are organised. A superset of the survey schema's values."""

    CENTRALIZED = "centralized"
    PLANNER_EXECUTOR_CRITIC = "planner_executor_critic"
    DEBATE = "debate"
    SWARM = "swarm"
    HIERARCHICAL = "hierarchical"
    HARNESS = "harness"
    MIXED = "mixed"
    UNKNOWN = "unknown"
    #: Native only: a worker and a critic iterate until the critic accepts.
    CRITIC_LOOP = "critic_loop"


#: Event type names as stored on :class:`Event` (plain strings equal to :class:`EventType`).
EventTypeName = Literal[
    "orchestrator_decision",
    "spawn",
    "despawn",
    "message",
    "tool_call",
    "tool_result",
    "return",
    "aggregate",
    "human_intervention",
    "safety_event",
    "llm_call",
]
#: Edge type names as stored on :class:`Edge`.
EdgeTypeName = Literal[
    "temporal",
    "causal",
    "spawn",
    "message",
    "tool_dependency",
    "return",
    "aggregate",
    "safety_flow",
]
#: Decision names as stored on :class:`Event` (O1..O5).
DecisionName = Literal["spawn", "delegate", "communicate", "aggregate", "stop"]
#: Topology names as stored on :class:`Trace`.
TopologyName = Literal[
    "centralized",
    "planner_executor_critic",
    "debate",
    "swarm",
    "hierarchical",
    "harness",
    "mixed",
    "unknown",
    "critic_loop",
]

#: Event types in code order (``EVENT_TYPES[code]``).
EVENT_TYPES: list[EventType] = list(EventType)
#: Edge types in code order.
EDGE_TYPES: list[EdgeType] = list(EdgeType)
#: Decisions in code order.
DECISIONS: list[Decision] = list(Decision)
#: Code of each event type name.
EVENT_CODE: dict[str, int] = {t.value: i for i, t in enumerate(EVENT_TYPES)}
#: Code of each edge type name.
EDGE_CODE: dict[str, int] = {t.value: i for i, t in enumerate(EDGE_TYPES)}
#: Code of each decision name.
DECISION_CODE: dict[str, int] = {d.value: i for i, d in enumerate(DECISIONS)}
