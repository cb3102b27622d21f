"""`validate --schema upstream` gives exactly the survey schema's verdict.

A fuzzed corpus of mutants of the reference example trace and of generated traces (type
changes, missing and extra fields, enum violations, nulls, wrong nesting, numbers out of range,
empty strings...) is judged by orchestrace and by the `jsonschema` package; the verdicts must
agree on every document, and every schema-valid document must import.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest

from orchestrace.io import to_upstream
from orchestrace.io.upstream import from_upstream, schema_problems
from orchestrace.trace.generate import generate_trace

REFERENCE = Path(__file__).parents[2] / ".." / "shared" / "reference"
N_EXAMPLE_MUTANTS = 1200
N_GENERATED_MUTANTS = 400


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    path = REFERENCE / "trace_schema.json"
    if not path.exists():
        pytest.skip("../shared/reference/trace_schema.json not present")
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    path = REFERENCE / "example_trace.json"
    if not path.exists():
        pytest.skip("../shared/reference/example_trace.json not present")
    return json.loads(path.read_text())


_ODD_VALUES: list[Any] = [
    None, True, False, 0, -1, -0.0, 1.5, -2.5, 1e308, -1e308, 2**64, -(2**63), "", "x",
    "spawn", "llm_call", "critic_loop", "Spawn", "mixed ", "é", [], [1], {}, {"a": 1},
    [{"id": "e1"}], {"tokens": 1},
]  # fmt: skip
_KEYS = [
    "id", "t", "type", "agent", "role", "from", "to", "tool", "content_ref", "trusted", "src",
    "dst", "trace_id", "task_id", "system", "topology", "events", "edges", "rewards", "costs",
    "metrics", "tokens", "wall_clock_s", "tool_calls", "messages", "dur", "attrs", "meta",
    "schema_version", "extra", "",
]  # fmt: skip
_ENUM_VALUES = [
    "spawn", "message", "causal", "centralized", "unknown", "llm_call", "critic_loop",
    "SPAWN", "tool-call", "", "temporal", "safety_flow", "harness", "return ",
]  # fmt: skip


def _containers(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every object and array in ``doc``."""
    out: list[tuple[Any, ...]] = []
    if isinstance(doc, dict):
        out.append(path)
        for k, v in doc.items():
            out += _containers(v, (*path, k))
    elif isinstance(doc, list):
        out.append(path)
        for i, v in enumerate(doc):
            out += _containers(v, (*path, i))
    return out


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _mutate(doc: Any, rng: random.Random) -> None:
    """Apply one random mutation in place."""
    paths = _containers(doc)
    where = rng.choice(paths)
    node = _get(doc, where)
    kind = rng.choice(
        ["retype", "delete", "add", "enum", "null", "nest", "number", "empty", "swap", "clear"]
    )
    if isinstance(node, list):
        if not node or kind in ("add", "clear"):
            if kind == "clear":
                node.clear()
            else:
                node.append(copy.deepcopy(rng.choice(_ODD_VALUES)))
            return
        i = rng.randrange(len(node))
        if kind == "delete":
            del node[i]
        elif kind == "nest":
            node[i] = [node[i]] if rng.random() < 0.5 else {"value": node[i]}
        elif kind == "swap" and len(paths) > 1:
            other = _get(doc, rng.choice(paths))
            node[i] = copy.deepcopy(other)
        else:
            node[i] = copy.deepcopy(rng.choice(_ODD_VALUES))
        return
    keys = list(node)
    if kind == "add" or not keys:
        node[rng.choice(_KEYS)] = copy.deepcopy(rng.choice(_ODD_VALUES))
        return
    key = rng.choice(keys)
    if kind == "delete":
        del node[key]
    elif kind == "retype":
        node[key] = copy.deepcopy(rng.choice(_ODD_VALUES))
    elif kind == "enum":
        node[rng.choice(["type", "topology", key])] = rng.choice(_ENUM_VALUES)
    elif kind == "null":
        node[key] = None
    elif kind == "nest":
        node[key] = [node[key]] if rng.random() < 0.5 else {"value": node[key]}
    elif kind == "number":
        node[rng.choice(["t", "tokens", "wall_clock_s", "tool_calls", "messages", key])] = (
            rng.choice([-1, -0.0, -1e-9, 0, 3, 1e308, 2**70, -(2**70), True, "1"])
        )
    elif kind == "empty":
        node[rng.choice(["id", "agent", "src", "dst", "trace_id", "task_id", key])] = ""
    elif kind == "swap":
        node[key] = copy.deepcopy(_get(doc, rng.choice(paths)))
    else:
        node.clear()


def _corpus(example: dict[str, Any]) -> list[Any]:
    rng = random.Random(20261203)
    docs: list[Any] = [copy.deepcopy(example)]
    for _ in range(N_EXAMPLE_MUTANTS):
        doc = copy.deepcopy(example)
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            _mutate(doc, rng)
        docs.append(doc)
    bases = [
        to_upstream(generate_trace(agents=a, steps=s, seed=seed))
        for a, s, seed in ((2, 8, 1), (4, 20, 2), (3, 12, 3), (6, 30, 4))
    ]
    docs += bases
    for _ in range(N_GENERATED_MUTANTS):
        doc = copy.deepcopy(rng.choice(bases))
        for _ in range(rng.choice([1, 1, 2])):
            _mutate(doc, rng)
        docs.append(doc)
    return docs


@pytest.mark.slow
def test_verdict_agrees_with_jsonschema_on_a_fuzzed_corpus(schema, example):
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    corpus = _corpus(example)
    assert len(corpus) >= 1000
    verdicts = []
    for n, doc in enumerate(corpus):
        # judged as `validate` judges a file: from its bytes
        obj = msgspec.json.decode(json.dumps(doc).encode())
        ours = schema_problems(obj)
        theirs = validator.is_valid(doc)
        assert (ours == []) == theirs, (
            n,
            json.dumps(doc)[:400],
            [str(p) for p in ours[:3]],
            [e.message for e in list(validator.iter_errors(doc))[:3]],
        )
        if theirs:  # a schema-valid trace always imports; orchestrace's rules are not fatal
            trace, problems = from_upstream(obj)
            assert trace is not None, n
            assert [p for p in problems if p.severity == "error"] == [], (n, problems[:3])
        verdicts.append(theirs)
    # the corpus exercises both verdicts
    assert 0.1 < sum(verdicts) / len(verdicts) < 0.9


def test_cli_gives_the_schema_verdict_and_lists_semantic_problems(
    schema, example, tmp_path, capsys
):
    from orchestrace.cli import main

    good = copy.deepcopy(example)
    good["edges"].append({"src": "e8", "dst": "e1", "type": "causal"})  # a cycle: schema-valid
    good["events"].append({"id": "e9", "t": 8, "type": "return", "agent": "ghost"})
    (tmp_path / "good.json").write_text(json.dumps(good))
    bad = copy.deepcopy(example)
    bad["events"][2]["t"] = -1
    bad["topology"] = "critic_loop"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    out = tmp_path / "out.json"
    assert main(["validate", "--schema", "upstream", str(tmp_path / "good.json")]) == 0
    assert main(["validate", "--schema", "upstream", str(tmp_path / "bad.json")]) == 1
    capsys.readouterr()
    assert main(["convert", "--from", "upstream", str(tmp_path / "good.json"), "-o", str(out)]) == 0
    assert out.exists()
    err = capsys.readouterr().err
    assert "semantic: causal cycle" in err and "semantic: agent 'ghost' returns" in err


def test_cli_output_names_levels(example, tmp_path, capsys):
    from orchestrace.cli import main

    doc = copy.deepcopy(example)
    doc["edges"].append({"src": "e8", "dst": "e1", "type": "causal"})
    doc["topology"] = "critic_loop"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert main(["validate", "--schema", "upstream", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{path}: $.topology: 'critic_loop' is not a survey topology; use one of: centralized, "
        "debate, harness, hierarchical, mixed, planner_executor_critic, swarm, unknown",
        f"{path}: $.events[0]: semantic: causal cycle through events 'e1' -> 'e2' -> 'e4' -> "
        "'e5' -> 'e6' -> 'e7' -> 'e8' -> 'e1'; remove or reverse one edge of the cycle: an event "
        "cannot depend on itself",
        f"{path}: $.edges[8]: warning: 'e1' starts before 'e8', which it depends on; check the "
        "timestamps of both events or the edge direction",
    ]
    doc["topology"] = "debate"
    path.write_text(json.dumps(doc))
    assert main(["validate", "--upstream", str(path)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == (
        f"{path}: valid under the survey schema with 1 semantic problem(s), 1 warning(s) "
        "(8 events, 9 edges)"
    )
