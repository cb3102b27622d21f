"""Trace core: the typed model, JSON Schema, checks, graph analytics and the builder."""

from orchestrace.trace.build import TraceBuilder
from orchestrace.trace.graph import (
    CriticalPath,
    CycleError,
    TraceGraph,
    critical_path,
    critical_path_length,
    speedup,
    work,
)
from orchestrace.trace.model import (
    SCHEMA_VERSION,
    CreditUnit,
    Decision,
    Edge,
    EdgeType,
    Event,
    EventType,
    Topology,
    Trace,
)
from orchestrace.trace.steps import critical_steps

__all__ = [
    "SCHEMA_VERSION",
    "CreditUnit",
    "CriticalPath",
    "CycleError",
    "Decision",
    "Edge",
    "EdgeType",
    "Event",
    "EventType",
    "Topology",
    "Trace",
    "TraceBuilder",
    "TraceGraph",
    "critical_path",
    "critical_path_length",
    "critical_steps",
    "speedup",
    "work",
]
