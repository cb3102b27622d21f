"""MAS-native benchmark: E1-E4 metrics, scale envelope, failure taxonomy, versioned suites.

Example:
    >>> from orchestrace.masbench import SUITES
    >>> sorted(SUITES)
    ['envelope-v1', 'sim-v1', 'sim-v2', 'smoke-v1', 'smoke-v2']
"""

from orchestrace.masbench.envelope import envelope_point
from orchestrace.masbench.faults import DropMessages, WrongAnswers
from orchestrace.masbench.metrics import run_metrics
from orchestrace.masbench.report import write_report
from orchestrace.masbench.suite import SUITES, Suite, run_suite
from orchestrace.masbench.taxonomy import DETECTORS, Finding, detect

__all__ = [
    "DETECTORS",
    "SUITES",
    "DropMessages",
    "Finding",
    "Suite",
    "WrongAnswers",
    "detect",
    "envelope_point",
    "run_metrics",
    "run_suite",
    "write_report",
]
