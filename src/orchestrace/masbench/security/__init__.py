"""The security benchmark: attacks x defenses x topologies, AgentDojo-style report.

A security suite (``security-v1``; ``security-smoke-v1`` for tests) runs every topology on
every task, with no attack (benign) and under each attack of :mod:`orchestrace.safety.attacks`
that applies, once per defense setting and seed. Per run it records whether the task was
solved, whether the attack reached its goal (:meth:`Attack.succeeded`, read from the trace),
the safety events the defenses recorded, tokens, and the collusion detector's findings.

Figures (each rate with its 95% Wilson score interval, :func:`orchestrace.stats.wilson_interval`):

* **benign utility**: share of benign runs solved;
* **utility under attack**: share of attacked runs solved;
* **targeted ASR**: share of attacked runs where the attack reached its goal;
* **safety** (TAMAS-style): 1 - ASR pooled over the applicable attacks; **ERS**: the harmonic
  mean of safety and benign utility, ``2 S U / (S + U)``;
* **utility cost** of a defense: benign utility without defenses minus with it;
* **collusion and rewards**: how often the detector flags benign and colluded runs, and the
  consensus reward (:func:`~orchestrace.safety.collusion.agreement_reward`) before and after
  gating by the detector.

On the sim backend the victims' ``susceptibility`` (the suite's, recorded in every trace's
``meta.interventions``) is the same with and without defenses: a defense lowers ASR only by
what its code does to the run.

Example:
    >>> rep = run_security_suite("security-smoke-v1", jobs=1, progress=False, seeds=1)
    >>> rep["suite"]["id"], sorted(rep["summary"])[:2]
    ('security-smoke-v1', ['all', 'none'])
"""

from __future__ import annotations

from orchestrace.masbench.security.figures import aggregate_security
from orchestrace.masbench.security.report import (
    read_security_runs,
    security_markdown,
    write_security_report,
)
from orchestrace.masbench.security.suite import (
    ATTACK_SETTINGS,
    DEFENSE_SETTINGS,
    SECURITY_SUITES,
    SecuritySuite,
    get_security_suite,
    make_defenses,
    run_security_one,
    run_security_suite,
)

__all__ = [
    "ATTACK_SETTINGS",
    "DEFENSE_SETTINGS",
    "SECURITY_SUITES",
    "SecuritySuite",
    "aggregate_security",
    "get_security_suite",
    "make_defenses",
    "read_security_runs",
    "run_security_one",
    "run_security_suite",
    "security_markdown",
    "write_security_report",
]
