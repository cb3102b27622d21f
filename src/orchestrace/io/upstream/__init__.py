"""Import from and export to the public survey's trace schema (``trace_schema.json``).

The survey schema ("LLM-MAS Orchestration Trace") has the native top-level fields minus
``schema_version`` and ``meta``; its events allow extra properties, its edges and top level do
not. A JSON object is read as a *native* trace when its top level has ``schema_version`` or
``meta`` (what the native writer always writes), else as a survey trace: the decision is made on
the parsed structure, never on text found somewhere in the file.

**Import is exact**: exporting an imported survey trace gives back the same JSON value.

* Survey-defined event properties (``id``, ``t``, ``type``, ``agent``, ``role``, ``from``, ``to``,
  ``tool``, ``content_ref``, ``trusted``) become the native fields.
* An extra property that names a native field (``dur``, ``tokens_in``, ``decision``...) becomes
  that field when its value fits and differs from the field's default. Every other extra
  property, including one holding an explicit default (``"cost": 0``, ``"step": null``) or a
  value of the wrong type, is kept verbatim in ``attrs`` under its own name. A survey event's own
  ``attrs`` property is such an extra property too: it is kept as ``attrs["attrs"]`` and never
  merged with the others, so no key can shadow another.
* Top-level fields the native trace has no place for (unknown fields, an empty ``metrics``
  object, ``null`` for ``system``/``topology``) are kept in ``meta["upstream"]["fields"]`` and
  written back at the top level on export.

**Export** writes native-only event fields as extra event properties and flattens ``attrs``
into the event, except where that would be read back differently. Those keys, and what the
survey schema cannot say, ride in a reserved ``attrs`` object on the event, recognised by its
``x_orchestrace_*`` keys:

* ``x_orchestrace_type``: the native type of an event exported under a survey type (an
  ``llm_call`` is exported as a ``tool_call``);
* ``x_orchestrace_trace`` (on the first event): trace-level native data: a native-only
  ``topology`` (exported as ``mixed``), ``meta``, and the ``costs`` the export filled in because
  the schema requires them;
* ``x_orchestrace_attrs``: ``attrs`` keys that could not be flattened;
* ``x_orchestrace_fields``: native fields written with their default value (``"dur": 0.0``),
  which the native writer keeps and an event property would not carry (see above).

**An edited field wins over a stale marker.** A marker only restores a value while the field it
stands behind still holds what the export wrote there: a ``tool_call`` marked ``llm_call`` whose
type was edited to ``message`` stays a ``message``; a ``mixed`` topology edited to ``debate``
stays ``debate``; a filled-in ``costs.tokens`` that was edited is kept. A warning names the
place, and the stale marker itself is kept verbatim (an event's in ``attrs["x_orchestrace_kept"]``,
the trace's in ``meta["upstream"]["stale"]``), so exporting again writes the same document back.

Example:
    >>> from orchestrace.trace.build import TraceBuilder
    >>> b = TraceBuilder(task_id="t", topology="critic_loop")
    >>> _ = b.llm("w", tokens_in=5, dur=1.0)
    >>> tr = b.build()
    >>> doc = to_upstream(tr)
    >>> doc["topology"], doc["events"][0]["type"], doc["events"][0]["attrs"]["x_orchestrace_type"]
    ('mixed', 'tool_call', 'llm_call')
    >>> back, problems = from_upstream(doc)
    >>> problems, back == tr
    ([], True)
    >>> doc["events"][0]["type"] = "message"  # edited after export: the edit wins
    >>> back, problems = from_upstream(doc)
    >>> back.events[0].type, problems[0].code, back.events[0].attrs
    ('message', 'stale-marker', {'x_orchestrace_kept': {'x_orchestrace_type': 'llm_call'}})
    >>> to_upstream(back) == doc
    True
"""

from __future__ import annotations

from orchestrace.io.upstream._export import to_upstream
from orchestrace.io.upstream._import import from_typed as from_typed  # importable here too
from orchestrace.io.upstream._import import from_upstream
from orchestrace.io.upstream._names import IMPORT_WARNINGS as IMPORT_WARNINGS  # importable here too
from orchestrace.io.upstream._names import (
    UPSTREAM_EDGE_TYPES,
    UPSTREAM_EVENT_TYPES,
    UPSTREAM_TOPOLOGIES,
    is_native_object,
)
from orchestrace.io.upstream._schema import (
    MAX_SCHEMA_PROBLEMS as MAX_SCHEMA_PROBLEMS,  # importable here too
)
from orchestrace.io.upstream._schema import schema_problems

__all__ = [
    "UPSTREAM_EDGE_TYPES",
    "UPSTREAM_EVENT_TYPES",
    "UPSTREAM_TOPOLOGIES",
    "from_upstream",
    "is_native_object",
    "schema_problems",
    "to_upstream",
]
