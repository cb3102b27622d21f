"""Interval helpers: known values, edge cases, and coverage of the binomial intervals."""

import math
import subprocess
import sys

import numpy as np
import pytest

from orchestrace.stats import clopper_pearson, mean_ci, t95, wilson_interval


def test_wilson_known_values():
    # Reference values from the closed form (Wilson 1927), z = 1.96.
    assert wilson_interval(15, 20) == pytest.approx((0.5313, 0.8881), abs=1e-4)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)


def test_wilson_never_zero_width_at_the_edges():
    for n in (1, 5, 100):
        low, high = wilson_interval(n, n)
        assert high == 1.0 and low < 1.0
        low, high = wilson_interval(0, n)
        assert low == 0.0 and high > 0.0


def test_clopper_pearson_known_values():
    # Exact endpoints: 0.025 ** (1 / 10) for 10 of 10; beta quantiles for 15 of 20.
    assert clopper_pearson(10, 10) == pytest.approx((0.025 ** (1 / 10), 1.0), abs=1e-6)
    assert clopper_pearson(0, 10) == pytest.approx((0.0, 1 - 0.025 ** (1 / 10)), abs=1e-6)
    assert clopper_pearson(15, 20) == pytest.approx((0.5090, 0.9134), abs=1e-4)


def test_clopper_pearson_contains_wilson_point():
    for k in range(0, 21):
        cl, ch = clopper_pearson(k, 20)
        assert cl <= k / 20 <= ch


def test_intervals_cover_at_least_nominal_for_exact():
    rng = np.random.default_rng(0)
    p, n, hits = 0.9, 30, 0
    draws = rng.binomial(n, p, size=400)
    for k in draws:
        low, high = clopper_pearson(int(k), n)
        hits += low <= p <= high
    assert hits / len(draws) >= 0.93


@pytest.mark.parametrize("fn", [wilson_interval, clopper_pearson])
def test_bad_counts_raise(fn):
    with pytest.raises(ValueError, match="need 0 <= successes <= n, got successes=3, n=2"):
        fn(3, 2)
    assert all(math.isnan(v) for v in fn(0, 0))


def test_mean_ci_and_t95():
    assert mean_ci([1.0, 2.0, 3.0]) == pytest.approx((2.0, 4.303 / math.sqrt(3)))
    assert math.isnan(mean_ci([1.0])[1])
    assert t95(4) == 2.776 and math.isnan(t95(0))


def test_old_import_path_still_works():
    from orchestrace.learn import evaluate

    assert evaluate.mean_ci is mean_ci and evaluate.t95 is t95


def test_bench_does_not_import_learn():
    code = (
        "import sys, orchestrace.masbench, orchestrace.masbench.suite, orchestrace.masbench.report\n"
        "print(sorted(m for m in sys.modules if m.startswith('orchestrace.learn')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
