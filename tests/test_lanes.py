"""The lanes' bookkeeping (``tests/lanes.py``): what a test did in its lane, from its phases."""

from __future__ import annotations

import lanes


def _phases(nodeid: str, *phases: tuple[str, str], **extra: str) -> list[dict[str, str]]:
    return [{"id": nodeid, "when": when, "outcome": outcome, **extra} for when, outcome in phases]


def test_a_test_passes_only_once_its_call_passed_and_its_teardown_ran() -> None:
    lines = _phases("t::a", ("setup", "passed"), ("call", "passed"), ("teardown", "passed"))
    lines += _phases("t::b", ("setup", "passed"), ("call", "passed"))  # cut off: interrupted
    lines += _phases("t::c", ("setup", "passed"))  # cut off during its call
    got = lanes.outcomes(iter(lines))
    assert {k: v["outcome"] for k, v in got.items()} == {
        "t::a": "passed",
        "t::b": "incomplete",
        "t::c": "incomplete",
    }


def test_failures_skips_and_expected_failures_are_kept_apart() -> None:
    lines = _phases("t::teardown", ("setup", "passed"), ("call", "passed"))
    lines += [{"id": "t::teardown", "when": "teardown", "outcome": "failed", "text": "boom"}]
    lines += _phases("t::setup-skip", ("setup", "skipped"), ("teardown", "passed"), reason="no")
    lines += _phases("t::call-skip", ("setup", "passed"), ("teardown", "passed"))
    lines.insert(-1, {"id": "t::call-skip", "when": "call", "outcome": "skipped", "reason": "x"})
    lines += _phases("t::xfail", ("setup", "passed"), ("teardown", "passed"))
    lines.insert(-1, {"id": "t::xfail", "when": "call", "outcome": "skipped", "xfail": "bug"})
    lines += _phases("t::xpass-strict", ("setup", "passed"), ("teardown", "passed"))
    lines.insert(-1, {"id": "t::xpass-strict", "when": "call", "outcome": "failed", "text": "!"})
    got = lanes.outcomes(iter(lines))
    assert got["t::teardown"] == {"outcome": "failed", "text": "--- teardown\nboom\n"}
    assert got["t::setup-skip"] == {"outcome": "skipped", "reason": "no"}
    assert got["t::call-skip"] == {"outcome": "skipped", "reason": "x"}
    assert got["t::xfail"] == {"outcome": "xfailed", "reason": "bug"}
    assert got["t::xpass-strict"]["outcome"] == "failed"


def test_each_lane_file_exists_and_belongs_to_one_lane() -> None:
    from pathlib import Path

    here = Path(__file__).parent
    files = [f for _name, fs, _env in lanes.LANES for f in fs]
    assert files and len(files) == len(set(files))
    for f in files:
        assert (here / f).is_file(), f
        assert lanes.lane_of(f"tests/{f}::t") is not None
    assert lanes.lane_of("tests/test_lanes.py::t") is None
