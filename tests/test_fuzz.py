"""Fuzzing: no input makes `orchestrace validate` crash or print a traceback."""

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import orchestrace.cli
from orchestrace import dumps, generate_trace
from orchestrace.cli import main

BASE = json.loads(dumps(generate_trace(6, 60, 2, seed=1)))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


@pytest.fixture(autouse=True, scope="module")
def _one_parser():
    """Build the command line's parser once for the module (half the cost of a short call)."""
    parser = orchestrace.cli.build_parser()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(orchestrace.cli, "build_parser", lambda: parser)
        yield


def mutate(doc, rng, value):
    """Replace, delete or add one field somewhere in the trace."""
    parts = [doc.get("events"), doc.get("edges")]
    items = [x for p in parts if isinstance(p, list) for x in p if isinstance(x, dict)]
    costs = doc.get("costs")
    target = rng.choice([doc, *items, *([costs] if isinstance(costs, dict) else [])])
    keys = list(target)
    action = rng.random()
    if keys and action < 0.4:
        target[rng.choice(keys)] = value
    elif keys and action < 0.6:
        del target[rng.choice(keys)]
    else:
        target[rng.choice(["id", "src", "dst", "t", "type", "x", "to", "events"])] = value
    return doc


def check_cli(tmp_path, data, capsys):
    """``validate`` reads ``data`` as a JSON file and as a JSONL recording (with ``--partial
    --keep-going``): exit 0 or 1, never a traceback."""
    for name, flags in (("f.json", []), ("f.jsonl", ["--partial", "--keep-going"])):
        p = tmp_path / name
        p.write_bytes(data)
        code = main(["validate", *flags, str(p)])
        out = capsys.readouterr()
        assert code in (0, 1), out
        assert "Traceback" not in out.out + out.err, out


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.integers(0, 2**32), json_values)
def test_mutated_traces(tmp_path, capsys, seed, value):
    rng = random.Random(seed)
    doc = json.loads(json.dumps(BASE))
    for _ in range(rng.randint(1, 3)):
        doc = mutate(doc, rng, value)
    check_cli(tmp_path, json.dumps(doc).encode(), capsys)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=300))
def test_random_bytes(tmp_path, capsys, data):
    check_cli(tmp_path, data, capsys)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.integers(0, len(dumps(generate_trace(6, 60, 2, seed=1)))), st.binary(max_size=5))
def test_truncated_and_spliced(tmp_path, capsys, cut, junk):
    data = dumps(generate_trace(6, 60, 2, seed=1))
    check_cli(tmp_path, data[:cut] + junk, capsys)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.binary(max_size=80), max_size=6))
def test_jsonl_garbage(tmp_path, capsys, lines):
    p = tmp_path / "f.jsonl"
    good = [dumps(generate_trace(3, 12, 1, seed=0))]
    p.write_bytes(b"\n".join(good + lines))
    for flags in ([], ["--keep-going"], ["--partial"]):
        code = main(["validate", *flags, str(p)])
        out = capsys.readouterr()
        assert code in (0, 1) and "Traceback" not in out.out + out.err
