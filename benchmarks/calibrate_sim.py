"""Calibration of the simulated backend: error correlation, verifier accuracy, confidence AUROC.

Runs debates (round-0 answers, revisers and judge) and critic loops on the sim backend over
seeds, with verifiers that solve for themselves (default) and with ``oracle_verifiers=True``,
and prints the figures quoted in docs/runtime.md ("Calibration of the simulator").

    python benchmarks/calibrate_sim.py [--seeds 100] [--error-correlation 0.5]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections import defaultdict
from typing import Any

import numpy as np

from orchestrace.runtime import run

#: (task, size): small enough that a whole-task solver is right more often than not.
TASKS = (("arith-mapreduce-v0", 8), ("wide-search-v1", 40), ("multihop-v1", 4), ("math-v0", None))


#: Further sim options (``--error-correlation``).
EXTRA: dict[str, Any] = {}


def _key(x: Any) -> str:
    return json.dumps(x, sort_keys=True)


def _auroc(right: list[float], wrong: list[float]) -> float | None:
    if not right or not wrong:
        return None
    r, w = np.asarray(right)[:, None], np.asarray(wrong)[None, :]
    return float(((r > w).sum() + 0.5 * (r == w).sum()) / (r.size * w.size))


def _rate(num: int, den: int) -> str:
    return f"{num / den:.3f} ({num}/{den})" if den else "n/a"


def debate_figures(task: str, size: int | None, seeds: int, oracle: bool) -> dict[str, Any]:
    """Round-0 error correlation, reviser and judge accuracy, success of debates."""
    c: dict[str, int] = defaultdict(int)
    errs: list[tuple[int, int]] = []
    conf_right: list[float] = []
    conf_wrong: list[float] = []
    for seed in range(seeds):
        kw = {"task_size": size} if size else {}
        res = run("debate", task, agents=5, seed=seed, backend_options={"oracle_verifiers": oracle, **EXTRA},
                  **kw)  # fmt: skip
        c["runs"] += 1
        c["solved"] += bool(res.success)
        calls = [e for e in res.trace.events if e.type == "llm_call"]
        first = [e for e in calls if e.attrs.get("kind") == "solve"]
        wrong = [int(_key(e.attrs.get("answer")) != _key(e.attrs.get("truth"))) for e in first]
        for e, w in zip(first, wrong, strict=True):
            if e.attrs.get("confidence") is not None:
                (conf_wrong if w else conf_right).append(float(e.attrs["confidence"]))
        for (a, wa), (b, wb) in itertools.combinations(list(zip(first, wrong, strict=True)), 2):
            errs.append((wa, wb))
            if wa and wb:
                c["both_wrong"] += 1
                c["same_wrong"] += _key(a.attrs.get("answer")) == _key(b.attrs.get("answer"))
        last: dict[str, Any] = {e.agent: e.attrs.get("answer") for e in first}
        for e in calls:
            kind, truth = e.attrs.get("kind"), _key(e.attrs.get("truth"))
            if kind == "revise":
                was_right = _key(last.get(e.agent)) == truth
                now_right = _key(e.attrs.get("answer")) == truth
                c["rev_from_right" if was_right else "rev_from_wrong"] += 1
                c["rev_keep_right" if was_right else "rev_fix"] += now_right
                last[e.agent] = e.attrs.get("answer")
            elif kind == "judge":
                cands = [_key(x) for x in e.attrs.get("candidates", [])]
                pick = e.attrs.get("answer")
                picked = cands[pick] if isinstance(pick, int) and 0 <= pick < len(cands) else None
                if truth in cands:
                    c["judge_has_right"] += 1
                    c["judge_right"] += picked == truth
                    top = max(cands.count(x) for x in cands)
                    if cands.count(truth) < top:
                        c["judge_minority"] += 1
                        c["judge_minority_right"] += picked == truth
    auroc = _auroc(conf_right, conf_wrong)
    e = np.asarray(errs, dtype=float)
    phi = (
        float(np.corrcoef(e[:, 0], e[:, 1])[0, 1])
        if len(e) and e[:, 0].std() > 0 and e[:, 1].std() > 0
        else None
    )
    return {
        "success": _rate(c["solved"], c["runs"]),
        "round0_error": f"{e[:, 0].mean():.3f}" if len(e) else "n/a",
        "error_phi": None if phi is None else round(phi, 3),
        "both_wrong_same_answer": _rate(c["same_wrong"], c["both_wrong"]),
        "revise_fixes_wrong": _rate(c["rev_fix"], c["rev_from_wrong"]),
        "revise_keeps_right": _rate(c["rev_keep_right"], c["rev_from_right"]),
        "judge_right_when_present": _rate(c["judge_right"], c["judge_has_right"]),
        "judge_right_minority": _rate(c["judge_minority_right"], c["judge_minority"]),
        "confidence_auroc": auroc if auroc is None else round(auroc, 3),
    }


def critic_figures(task: str, size: int | None, seeds: int, oracle: bool) -> dict[str, Any]:
    """How often the critic accepts right answers and rejects wrong ones."""
    c: dict[str, int] = defaultdict(int)
    for seed in range(seeds):
        kw = {"task_size": size} if size else {}
        res = run("critic_loop", task, agents=1, seed=seed,
                  backend_options={"oracle_verifiers": oracle, **EXTRA}, **kw)  # fmt: skip
        for e in res.trace.events:
            if e.type == "llm_call" and e.attrs.get("kind") == "critique":
                right = _key(e.attrs.get("candidate")) == _key(e.attrs.get("truth"))
                accept = e.attrs.get("answer") == "accept"
                c["right"] += right
                c["wrong"] += not right
                c["accept_right"] += right and accept
                c["reject_wrong"] += (not right) and not accept
    return {
        "critic_accepts_right": _rate(c["accept_right"], c["right"]),
        "critic_rejects_wrong": _rate(c["reject_wrong"], c["wrong"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--error-correlation", type=float, default=0.0)
    args = ap.parse_args()
    EXTRA["error_correlation"] = args.error_correlation
    t0 = time.perf_counter()
    for task, size in TASKS:
        for oracle in (False, True):
            row = {
                "task": task,
                "size": size,
                "oracle_verifiers": oracle,
                "error_correlation": args.error_correlation,
                **debate_figures(task, size, args.seeds, oracle),
                **critic_figures(task, size, args.seeds, oracle),
            }
            print(json.dumps(row))
    print(f"# {args.seeds} seeds per row, {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
