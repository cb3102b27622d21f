"""Capability policies: what each role may do, read from TOML.

A policy file::

    side_effect_tools = ["send_email"]

    [roles.orchestrator]
    may_spawn = true
    may_delegate = true
    may_stop = true
    may_aggregate = true
    tools = ["*"]

    [roles.worker]
    tools = ["search", "lookup"]

    [default]          # every role not listed
    tools = []

Roles not listed get ``default`` (nothing but messages, returns and the listed tools). A role
with ``trusted = false`` has its messages tainted. No agent may spawn an ``orchestrator``.
Malformed files, unknown keys, and (at the start of a run) roles or tools the run does not
have are one-line :class:`~orchestrace.errors.ConfigError` messages.

Example:
    >>> from orchestrace.safety.policy import CapabilityPolicy
    >>> p = CapabilityPolicy.default_policy()
    >>> p.allows("orchestrator", "stop"), p.allows("worker", "stop"), p.allows("manager", "spawn")
    (True, False, True)
"""

from __future__ import annotations

from orchestrace.runtime.security import ACTIONS, ROOT_ROLE, CapabilityPolicy, RolePolicy

__all__ = ["ACTIONS", "ROOT_ROLE", "CapabilityPolicy", "RolePolicy"]
