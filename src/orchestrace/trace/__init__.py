"""Trace core: the typed model, JSON Schema, checks, graph analytics and the builder.

Example:
    >>> from orchestrace.trace import TraceBuilder, check_ids, critical_steps
    >>> b = TraceBuilder(task_id="demo")
    >>> s = b.spawn("lead", "w1", step=0)
    >>> r = b.ret("w1", "lead", after=[s], step=0)
    >>> check_ids(b.build()), critical_steps(b.build())
    ([], 2)
"""

from orchestrace.trace.build import TraceBuilder
from orchestrace.trace.check import (
    CHECKS,
    CheckInternalError,
    check_acyclic,
    check_edge_times,
    check_edges,
    check_fields,
    check_graph,
    check_header,
    check_ids,
    check_nonempty,
    check_numbers,
    check_partial,
    check_spawns,
    check_totals,
    check_trace,
)
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
    "CHECKS",
    "SCHEMA_VERSION",
    "CheckInternalError",
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
    "check_acyclic",
    "check_edge_times",
    "check_edges",
    "check_fields",
    "check_graph",
    "check_header",
    "check_ids",
    "check_nonempty",
    "check_numbers",
    "check_partial",
    "check_spawns",
    "check_totals",
    "check_trace",
    "critical_path",
    "critical_path_length",
    "critical_steps",
    "speedup",
    "work",
]
