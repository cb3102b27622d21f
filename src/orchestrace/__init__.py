"""orchestrace: reinforcement learning of LLM multi-agent systems through orchestration traces.

The orchestration trace is the first-class object: a temporal interaction graph of spawn,
delegate, message, tool call/result, return, aggregate and stop events with causal edges,
rewards and costs.

Example:
    >>> import orchestrace as ot
    >>> b = ot.TraceBuilder(task_id="demo")
    >>> s = b.spawn("lead", "w1", dur=0.5)
    >>> r = b.ret("w1", "lead", after=[s], dur=2.0)
    >>> tr = b.build()
    >>> ot.check_trace(tr), ot.critical_path(tr).length, ot.speedup(tr)
    ([], 2.5, 1.0)
"""

import orchestrace._startup  # noqa: F401  (first: a Ctrl-C while the command line loads)
from orchestrace._version import __version__
from orchestrace.errors import (
    ConfigError,
    OrchestraceError,
    Problem,
    TraceError,
    TraceFormatError,
    TraceValidationError,
)
from orchestrace.io import dump, dumps, iter_traces, load, load_all, loads
from orchestrace.trace.analyze import summarize
from orchestrace.trace.build import TraceBuilder
from orchestrace.trace.check import check_trace, is_valid, validate
from orchestrace.trace.generate import generate_trace
from orchestrace.trace.graph import (
    CriticalPath,
    CycleError,
    TraceGraph,
    critical_path,
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
from orchestrace.trace.schema import native_schema
from orchestrace.trace.steps import critical_steps

__all__ = [
    "SCHEMA_VERSION",
    "ConfigError",
    "CreditUnit",
    "CriticalPath",
    "CycleError",
    "Decision",
    "Edge",
    "EdgeType",
    "Event",
    "EventType",
    "OrchestraceError",
    "Problem",
    "Topology",
    "Trace",
    "TraceBuilder",
    "TraceError",
    "TraceFormatError",
    "TraceGraph",
    "TraceValidationError",
    "__version__",
    "check_trace",
    "critical_path",
    "critical_steps",
    "dump",
    "dumps",
    "generate_trace",
    "is_valid",
    "iter_traces",
    "load",
    "load_all",
    "loads",
    "native_schema",
    "speedup",
    "summarize",
    "validate",
    "work",
]
