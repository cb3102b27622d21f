"""Credit tables and the units credit is assigned at.

A :class:`CreditTable` is a list of rows ``(unit, id, value)``. The eight units, coarsest first:

| unit | ids |
| --- | --- |
| ``team`` | the trace id |
| ``orchestrator`` | the root agent(s) |
| ``role`` | role names (``worker``, ``critic``...) |
| ``agent`` | agent names (tools excluded) |
| ``turn`` | ``agent@step`` (one LLM turn and the actions it emitted) |
| ``message`` | message event ids |
| ``action`` | tool call event ids |
| ``token`` | ``<llm_call event id>:<k>`` for each generated token |

:func:`unit_members` maps every unit id to the events it owns, so event-level credit (e.g.
discounted along causal paths) aggregates to any unit by summing.

Example:
    >>> from orchestrace.runtime import run
    >>> tr = run("swarm", "arith", agents=3, seed=0).trace
    >>> sorted(unit_members(tr, "role"))
    ['aggregator', 'orchestrator', 'worker']
    >>> len(unit_members(tr, "token")) == sum(e.tokens_out for e in tr.events if e.type == "llm_call")
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from orchestrace._safe import strict_json
from orchestrace.errors import ConfigError
from orchestrace.trace.model import CreditUnit, Trace
from orchestrace.trace.tokens import token_table

__all__ = [
    "UNITS",
    "Credit",
    "CreditAssigner",
    "CreditTable",
    "agent_roles",
    "root_agents",
    "unit_members",
]

#: The eight units, coarsest first.
UNITS: tuple[str, ...] = tuple(u.value for u in CreditUnit)


@dataclass(frozen=True)
class Credit:
    """One row of a credit table."""

    unit: str
    id: str
    value: float


@dataclass
class CreditTable:
    """Credit rows of one trace, with how they were computed.

    Attributes:
        rows: The rows.
        reward: The reward that was distributed (``None`` when not applicable).
        method: The assigner's name.
        efficient: Whether the method claims the rows of each unit sum to ``reward``.
        stats: Anything the method measured (backend calls, sample counts, error bounds).
    """

    rows: list[Credit] = field(default_factory=list)
    reward: float | None = None
    method: str = ""
    efficient: bool = False
    stats: dict[str, Any] = field(default_factory=dict)

    def by_unit(self, unit: str) -> dict[str, float]:
        """``id -> value`` for one unit."""
        return {r.id: r.value for r in self.rows if r.unit == unit}

    def total(self, unit: str) -> float:
        """Sum of the credit of one unit."""
        return sum(r.value for r in self.rows if r.unit == unit)

    def units(self) -> list[str]:
        """Units present, coarsest first."""
        present = {r.unit for r in self.rows}
        return [u for u in UNITS if u in present]

    def to_rows(self) -> list[dict[str, Any]]:
        """Rows as ``{unit, id, value}`` dicts (what ``--json`` prints)."""
        return [{"unit": r.unit, "id": r.id, "value": r.value} for r in self.rows]

    def to_json(self) -> str:
        """JSON lines, one row each (strict JSON: a NaN or infinite value is written as null)."""
        return "\n".join(strict_json(r)[0] for r in self.to_rows())


@runtime_checkable
class CreditAssigner(Protocol):
    """Assigns credit for a trace's reward at a unit."""

    name: str
    #: Whether credits of a unit sum to the distributed reward.
    efficient: bool

    def assign(self, trace: Trace, unit: str = "agent", reward: float | None = None) -> CreditTable:
        """Credit table of ``trace`` at ``unit``."""
        ...


def check_assign_args(trace: Any, unit: Any) -> str:
    """The unit of an ``assign`` call, after refusing a trace that is not one.

    Raises:
        ConfigError: ``trace`` is not a Trace, or ``unit`` is not a known unit.
    """
    if not isinstance(trace, Trace):
        raise ConfigError(
            f"credit is assigned on a Trace, not a {type(trace).__name__}; read one with "
            "orchestrace.io.load"
        )
    return check_unit(unit)


def check_unit(unit: str) -> str:
    """Validate a unit name.

    Raises:
        ConfigError: Unknown unit.
    """
    if not isinstance(unit, str):
        raise ConfigError(
            f"a credit unit is a name, not a {type(unit).__name__}; use one of: {', '.join(UNITS)}"
        )
    u = unit.lower()
    if u not in UNITS:
        raise ConfigError(f"unknown credit unit {unit!r}; use one of: {', '.join(UNITS)}")
    return u


def agent_roles(trace: Trace) -> dict[str, str]:
    """Agent -> role (from spawn events; the agent's own events otherwise)."""
    tools = _tools(trace)
    out: dict[str, str] = {}
    for e in trace.events:
        if e.type == "spawn" and e.to and e.role:
            out.setdefault(e.to, e.role)
    for e in trace.events:
        if e.agent not in tools and e.agent not in out:
            out[e.agent] = e.role or ("orchestrator" if e.agent in root_agents(trace) else "agent")
    return out


def _tools(trace: Trace) -> set[str]:
    results = {e.agent for e in trace.events if e.type == "tool_result"}
    acting = {e.agent for e in trace.events if e.type != "tool_result"}
    return results - acting


def root_agents(trace: Trace) -> list[str]:
    """Agents nobody spawned (tools excluded), in order of appearance."""
    spawned = {e.to for e in trace.events if e.type == "spawn" and e.to}
    tools = _tools(trace)
    seen: dict[str, None] = {}
    for e in trace.events:
        if e.agent not in spawned and e.agent not in tools:
            seen.setdefault(e.agent)
    return list(seen)


def unit_members(trace: Trace, unit: str) -> dict[str, list[int]]:
    """Each unit id with the indices of the events it owns (tokens: their llm_call).

    Token ids are ``<event id>:<k>``: for a call with a token record (see
    :mod:`orchestrace.trace.tokens`, also an orchestrator decision), ``k`` indexes its
    ``completion_ids``; otherwise it counts the call's ``tokens_out``.

    Tool results belong to the calling agent's turn and action.
    """
    unit = check_unit(unit)
    events = trace.events
    out: dict[str, list[int]] = {}
    if unit == "team":
        return {trace.trace_id: list(range(len(events)))}
    # a tool result belongs to the event that called it
    caller: dict[str, str] = {e.dst: e.src for e in trace.edges if e.type == "tool_dependency"}
    index = {e.id: i for i, e in enumerate(events)}

    def owner(i: int) -> int:
        e = events[i]
        if e.type == "tool_result" and e.id in caller and caller[e.id] in index:
            return index[caller[e.id]]
        return i

    if unit in ("orchestrator", "role", "agent", "turn"):
        roots = set(root_agents(trace))
        roles = agent_roles(trace)
        for i in range(len(events)):
            e = events[owner(i)]
            if unit == "orchestrator":
                if e.agent in roots:
                    out.setdefault(e.agent, []).append(i)
            elif unit == "role":
                out.setdefault(roles.get(e.agent, "agent"), []).append(i)
            elif unit == "agent":
                if e.agent in roles:
                    out.setdefault(e.agent, []).append(i)
            else:
                out.setdefault(f"{e.agent}@{e.step or 0}", []).append(i)
        return out
    if unit == "message":
        return {e.id: [i] for i, e in enumerate(events) if e.type == "message"}
    if unit == "action":
        for i in range(len(events)):
            j = owner(i)
            if events[j].type == "tool_call":
                out.setdefault(events[j].id, []).append(i)
        return out

    recorded = token_table(trace)  # real token ids of trainable calls, where recorded
    for i, e in enumerate(events):  # token
        if e.id in recorded:  # <id>:<k> is completion token k of its token record
            for k in range(len(recorded[e.id]["completion_ids"])):
                out[f"{e.id}:{k}"] = [i]
        elif e.type == "llm_call":
            for k in range(e.tokens_out):
                out[f"{e.id}:{k}"] = [i]
    return out


def table(
    unit: str,
    values: Mapping[str, float] | Iterable[tuple[str, float]],
    *,
    reward: float | None,
    method: str,
    efficient: bool,
    stats: dict[str, Any] | None = None,
) -> CreditTable:
    """Build a :class:`CreditTable` for one unit."""
    items = values.items() if isinstance(values, Mapping) else values
    return CreditTable(
        [Credit(unit, str(k), float(v)) for k, v in items],
        reward,
        method,
        efficient,
        dict(stats or {}),
    )
