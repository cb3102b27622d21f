"""The scale envelope: one swarm run per (team size, trace length) point.

Academic settings (2-5 agents, under 100 events) and production settings (hundreds of agents,
thousands of events) are points of one sweep; each records CPU time, virtual time, speedup,
efficiency and tokens.

Example:
    >>> row = envelope_point(10, 100)
    >>> row["agents"], 50 <= row["events"] <= 200, row["setting"]
    (10, True, 'between')
"""

from __future__ import annotations

import math
import time
from typing import Any

__all__ = ["envelope_point"]


def envelope_point(agents: int, length: int, seed: int = 0) -> dict[str, Any] | None:
    """A swarm of ``agents`` sized to about ``length`` events.

    Returns ``None`` when the run cannot be that short (every agent needs a few events).
    """
    from orchestrace.bench.metrics import run_metrics
    from orchestrace.runtime import run

    per_agent = length / agents
    if per_agent < 4:
        return None
    chunks = max(1, math.ceil((per_agent - 4) / 3))
    t0 = time.process_time()
    res = run(
        "swarm",
        "wide-search-v0",
        agents=agents,
        seed=seed,
        task_size=max(agents * chunks * 2, 4),
        chunks=chunks,
        patience=1e9,  # long runs: the aggregator waits for every report
    )
    cpu = time.process_time() - t0
    m = run_metrics(res.trace, credit_unit="agent")
    return {
        "agents": agents,
        "target_length": length,
        "events": res.trace.n_events,
        "cpu_s": cpu,
        "virtual_s": m["critical_path_s"],
        "speedup": m["speedup"],
        "efficiency": m["efficiency"],
        "tokens": m["tokens"],
        "success": m["success"],
        "messages": m["messages"],
        "shape": m["shape"],
        "setting": "academic"
        if agents <= 5 and res.trace.n_events < 100
        else ("production" if agents >= 100 and res.trace.n_events >= 1000 else "between"),
    }
