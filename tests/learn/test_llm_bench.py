"""The LLM learning benchmark prints valid JSON, also for a single seed."""

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).parents[2] / "benchmarks" / "bench_llm_learning.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_llm_learning", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_one_seed_has_a_null_interval_with_a_note_and_strict_json():
    ci = _bench()._ci([0.5])
    text = json.dumps(ci, allow_nan=False)
    assert json.loads(text) == {"gain_mean": 0.5, "ci95": None, "note": "one seed: no interval"}


def test_several_seeds_have_a_t_interval():
    ci = _bench()._ci([1.0, 2.0, 3.0])
    # mean 2, sd 1, t(2) = 4.303: half-width 4.303 / sqrt(3) = 2.484
    assert ci["gain_mean"] == 2.0 and ci["ci95"] == [-0.484, 4.484]
