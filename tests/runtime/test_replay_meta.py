"""Replaying a trace whose run meta was tampered with: one clear error, never a crash."""

from __future__ import annotations

import pytest

from orchestrace.errors import TraceError
from orchestrace.runtime import run
from orchestrace.runtime.replay import replay


@pytest.fixture(scope="module")
def trace():
    return run("centralized", "arith-mapreduce-v0", agents=2, seed=0).trace


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("config", "abc", "holds an unusable run config: meta.config is str, not an object"),
        ("config", [1, 2], "holds an unusable run config: meta.config is list, not an object"),
        ("runner", "x", "holds an unusable run config (TypeError: string indices"),
        ("task", [], "holds an unusable run config (TypeError: list indices"),
        ("runner", {"topology": 5}, "holds an unusable run config: unknown topology 5"),
    ],
)
def test_tampered_meta_is_one_clear_error(trace, key, value, message):
    meta = dict(trace.meta)
    meta[key] = value
    with pytest.raises(TraceError, match="record the run again") as err:
        replay(trace.replace(meta=meta))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("agents", "x", "agents must be >= 1 (got 'x')"),
        ("max_wall_s", "inf", "max_wall_s must be a finite number of seconds > 0 (got 'inf')"),
        ("options", 5, "options must be a mapping (got 5)"),
        ("seed", 2**70, "seed must be an integer from 0 to 2**63-1"),
    ],
)
def test_tampered_config_values_are_named(trace, field, value, message):
    meta = dict(trace.meta)
    meta["config"] = {**trace.meta["config"], field: value}
    with pytest.raises(TraceError, match="holds an unusable run config") as err:
        replay(trace.replace(meta=meta))
    assert message in str(err.value)
