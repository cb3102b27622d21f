"""The shapes of trace records a :class:`~orchestrace.trace.graph.TraceGraph` compiles.

Structural protocols: :class:`~orchestrace.trace.model.Trace`, :class:`~orchestrace.trace.model.Event`
and :class:`~orchestrace.trace.model.Edge` satisfy them, and so does anything else with the same
read-only fields. They let the graph compile records without importing the model (the model
imports the graph for its cached ``Trace.graph``).

Example:
    >>> from types import SimpleNamespace
    >>> from orchestrace.trace.graph import TraceGraph
    >>> ev = [SimpleNamespace(id="e1", t=0.0, dur=2.0, type="message", agent="a")]
    >>> TraceGraph.from_trace(SimpleNamespace(events=ev, edges=[])).critical_path().length
    2.0
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["EdgeRecord", "EventRecord", "TraceRecords"]


class EventRecord(Protocol):
    """The fields of an event a :class:`TraceGraph` reads (an :class:`~orchestrace.Event`)."""

    @property
    def id(self) -> str:
        """Event id."""

    @property
    def t(self) -> float:
        """Start time."""

    @property
    def dur(self) -> float:
        """Duration."""

    @property
    def type(self) -> str:
        """Event type name."""

    @property
    def agent(self) -> str:
        """Producing agent."""

    @property
    def to(self) -> str | None:
        """Receiver or spawned child."""

    @property
    def role(self) -> str | None:
        """Agent role."""

    @property
    def tool(self) -> str | None:
        """Tool (or model) name."""

    @property
    def decision(self) -> str | None:
        """Decision name."""

    @property
    def step(self) -> int | None:
        """Agent-local step."""

    @property
    def tokens_in(self) -> int:
        """Prompt tokens."""

    @property
    def tokens_out(self) -> int:
        """Completion tokens."""

    @property
    def cost(self) -> float:
        """Cost."""


class EdgeRecord(Protocol):
    """The fields of an edge a :class:`TraceGraph` reads (an :class:`~orchestrace.Edge`)."""

    @property
    def src(self) -> str:
        """Source event id."""

    @property
    def dst(self) -> str:
        """Destination event id."""

    @property
    def type(self) -> str:
        """Edge type name."""


class TraceRecords(Protocol):
    """What :meth:`TraceGraph.from_trace` compiles (a :class:`~orchestrace.Trace`)."""

    @property
    def events(self) -> Sequence[EventRecord]:
        """The events, in recording order."""

    @property
    def edges(self) -> Sequence[EdgeRecord]:
        """The edges."""
