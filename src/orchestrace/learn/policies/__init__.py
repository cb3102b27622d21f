"""Policies: heuristic baselines and (with the ``[learn]`` extra) torch policies."""

from orchestrace.learn.policies.heuristic import (
    ConfThreshold,
    FixedN,
    Heuristic,
    KAgree,
    MaxParallel,
    SizeAware,
    heuristics,
)

__all__ = [
    "ConfThreshold",
    "FixedN",
    "Heuristic",
    "KAgree",
    "MaxParallel",
    "SizeAware",
    "heuristics",
]
