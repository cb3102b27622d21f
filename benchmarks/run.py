"""Run every benchmark: `python benchmarks/run.py [--quick] [--only NAME ...]`.

Each benchmark prints its figures with ratios against baselines measured in the same run (same
repetitions, same process environment) and whether the target is met, and its checks
(invariants that hold by construction) as pass or FAIL; a failed check exits 1. A JSON summary
is written to benchmarks/.data/results.json.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common

BENCHMARKS = [
    "bench_trace",
    "bench_jsonio",
    "bench_runtime",
    "bench_credit",
    "bench_counterfactual",
    "bench_learn",
    "bench_import",
    "bench_security",
    "bench_envelope",
    "bench_viewer",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller inputs (minutes, not tens)")
    ap.add_argument("--only", nargs="*", choices=BENCHMARKS, help="run only these")
    args = ap.parse_args()
    t0 = time.perf_counter()
    for name in args.only or BENCHMARKS:
        importlib.import_module(name).main(quick=args.quick)
    out = _common.data_path("results.json")
    out.write_text(json.dumps(_common.RESULTS, indent=2))
    figures = [r for r in _common.RESULTS if r["kind"] == "figure"]
    checks = [r for r in _common.RESULTS if r["kind"] == "check"]
    missed = [r["name"] for r in figures if r["ok"] is False]
    failed = [r["name"] for r in checks if not r["passed"]]
    print(
        f"\n{len(figures)} figures and {len(checks)} checks in "
        f"{time.perf_counter() - t0:.0f} s; targets not met: {missed or 'none'}; "
        f"checks failed: {failed or 'none'}; summary in {out}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
