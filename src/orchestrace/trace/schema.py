"""The native trace JSON Schema (Draft 2020-12), generated from the typed model.

Example:
    >>> s = native_schema()
    >>> s["$schema"]
    'https://json-schema.org/draft/2020-12/schema'
    >>> sorted(s["$defs"]["Event"]["required"])
    ['agent', 'id', 't', 'type']
    >>> "schema_version" in s["$defs"]["Trace"]["required"]
    True
"""

from __future__ import annotations

from typing import Any

import msgspec

from orchestrace.trace.model import SCHEMA_VERSION, Trace

__all__ = ["SCHEMA_ID", "native_schema"]

SCHEMA_ID = f"https://orchestrace.dev/schema/trace-{SCHEMA_VERSION}.json"


def native_schema() -> dict[str, Any]:
    """The JSON Schema every native trace file validates against."""
    body = msgspec.json.schema(Trace)
    out: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "orchestrace native trace",
        "description": (
            "An orchestration trace: events (what agents did), edges (which event consumed "
            f"which), rewards, costs and metrics. Format version {SCHEMA_VERSION}."
        ),
    }
    out.update(body)
    defs = out["$defs"]
    for name, struct in defs.items():
        if struct.get("type") == "object":
            struct["additionalProperties"] = False
            if name == "Trace":  # always written; its presence marks a native file
                struct["required"] = [*struct.get("required", []), "schema_version"]
    return out
