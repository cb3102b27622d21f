"""Hashes of what the project computes on a fixed set of seeds (traces, forks, credit).

Used by ``tests/test_golden_traces.py`` to show that a change which should not alter behaviour
(a refactor, a speed-up) leaves every recorded trace byte-identical. Run it with ``--write`` only
when a change is meant to alter recorded traces, and say why in the commit message::

    python scripts/golden_hashes.py --write
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import orchestrace
from orchestrace.credit import make_assigner
from orchestrace.runtime import TOPOLOGIES, run

HERE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "golden_hashes.json"
TASKS = ("arith-mapreduce-v0", "wide-search-v2", "multihop-v2")


def _h(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def compute() -> dict[str, str]:
    """Every hash, keyed by what produced it."""
    out: dict[str, str] = {}
    tmp = Path(tempfile.mkdtemp(prefix="golden-"))
    for topo in sorted(TOPOLOGIES):
        for task in TASKS:
            for seed in (0, 7):
                trace = run(topo, task, agents=5, seed=seed).trace
                key = f"{topo}/{task}/{seed}"
                out[f"run/{key}"] = _h(orchestrace.dumps(trace))
                if task == "arith-mapreduce-v0" and seed == 0:
                    for fmt, suffix in (("jsonl", ".jsonl"), ("upstream", ".json")):
                        path = tmp / f"{topo}-{fmt}{suffix}"
                        orchestrace.dump(trace, path, format=fmt)
                        out[f"dump-{fmt}/{key}"] = _h(path.read_bytes())
                    pq = tmp / f"{topo}.parquet"
                    orchestrace.dump(trace, pq, format="parquet")
                    back = orchestrace.load_all(pq)
                    out[f"parquet-roundtrip/{key}"] = _h(
                        b"".join(orchestrace.dumps(t) for t in back)
                    )
                    out[f"summary/{key}"] = _h(
                        json.dumps(orchestrace.summarize(trace), sort_keys=True, default=str)
                    )
                    for method, unit in (("uniform", "agent"), ("counterfactual", "message")):
                        table = make_assigner(method).assign(trace, unit=unit)
                        out[f"credit-{method}-{unit}/{key}"] = _h(
                            json.dumps(table.to_json(), sort_keys=True)
                        )
    for seed in (0, 3):
        g = orchestrace.generate_trace(agents=12, steps=500, depth=2, seed=seed)
        out[f"generate/{seed}"] = _h(orchestrace.dumps(g))
    return out


def main() -> int:
    """Print the hashes, or write them with ``--write``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {HERE}")
    args = ap.parse_args()
    got = compute()
    if args.write:
        HERE.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(got)} hashes to {HERE}")
        return 0
    json.dump(got, sys.stdout, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
