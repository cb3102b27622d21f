"""Run every benchmark: `python benchmarks/run.py [--quick] [--only NAME ...]`.

Each benchmark prints its figures with ratios against baselines measured in the same run and
whether the target is met; a JSON summary is written to benchmarks/.data/results.json.
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

BENCHMARKS = ["bench_trace", "bench_runtime", "bench_credit", "bench_learn"]


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
    missed = [r["name"] for r in _common.RESULTS if r["ok"] is False]
    print(
        f"\n{len(_common.RESULTS)} figures in {time.perf_counter() - t0:.0f} s; "
        f"targets not met: {missed or 'none'}; summary in {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
