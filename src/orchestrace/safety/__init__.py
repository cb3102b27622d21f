"""MAS security: defenses the runtime enforces, a prompt-injection detector, and trace audit.

* :mod:`~orchestrace.safety.defenses`: :class:`Defenses` (``RunConfig.defenses``);
* :mod:`~orchestrace.safety.policy`: :class:`CapabilityPolicy` per role;
* :mod:`~orchestrace.safety.detector`: the built-in heuristic injection detector and a local
  transformers classifier;
* :mod:`~orchestrace.safety.audit`: ``check_*`` functions over a recorded trace (also
  ``check_trace(trace, level="security")`` and ``orchestrace audit``).

Example:
    >>> from orchestrace.safety import Defenses, audit_trace
    >>> from orchestrace.runtime import run
    >>> res = run("centralized", "arith", agents=2, seed=0, defenses=Defenses.all())
    >>> audit_trace(res.trace)
    []
"""

from __future__ import annotations

from orchestrace.safety.audit import AUDIT_CHECKS, audit_trace
from orchestrace.safety.defenses import Defenses, Keyring, RunSecret
from orchestrace.safety.detector import (
    HeuristicDetector,
    InjectionDetector,
    TransformersDetector,
    make_detector,
)
from orchestrace.safety.policy import CapabilityPolicy, RolePolicy

__all__ = [
    "AUDIT_CHECKS",
    "CapabilityPolicy",
    "Defenses",
    "HeuristicDetector",
    "InjectionDetector",
    "Keyring",
    "RolePolicy",
    "RunSecret",
    "TransformersDetector",
    "audit_trace",
    "make_detector",
]
