"""Law: every runtime-recorded trace round-trips through every format.

The traces are what the runtime records: every topology (``TOPOLOGIES``) on two tasks, episodes of
every learning environment (``ENV_IDS``, a seeded policy that continues a few rounds), and runs
under every attack with every defense on (signatures, capabilities, taint, spotlighting, the
detector, robust aggregation). Each goes through:

* the lossless formats (native JSON, JSONL, the survey's upstream schema, Parquet; the names in
  ``orchestrace.io.FORMATS``): read back equal, field for field, and byte-identical when dumped
  again; the upstream document also validates under the reference schema when it is present;
* the streams the runtime writes while it records (``run(output=...)``, JSONL and Parquet):
  read back equal to the trace the run returns;
* the exporters (``EXPORT_FORMATS``), with what each documents: OTLP imports back as the same
  trace; the Perfetto file is a valid trace-event file with one slice per event (its type,
  agent and exact times in ``args``, its ``ts``/``dur`` the times in whole microseconds) and
  one flow per edge, or the edge counted as not drawn.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from orchestrace import dumps
from orchestrace.errors import ConfigError
from orchestrace.io import EXPORT_FORMATS, FORMATS, dump, export_bytes, import_path, load_all
from orchestrace.learn.env import ENV_IDS, make_env
from orchestrace.runtime import TOPOLOGIES, run
from orchestrace.safety import Defenses
from orchestrace.safety.attacks import ATTACKS, make_attack, run_attacked
from orchestrace.trace.model import Trace

from conftest import ROOT, reference_dir

TASKS = ("arith-mapreduce-v0", "wide-search-v0")
SUFFIX = {"json": ".json", "jsonl": ".jsonl", "upstream": ".json", "parquet": ".parquet"}
GROUPS = ("topologies", "environments", "security")


def _episode(env_id: str, seed: int) -> Trace:
    """One episode: a seeded policy continues three rounds (random sub-decisions), then stops."""
    env = make_env(env_id, task="arith")
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    done, rounds = False, 0
    while not done:
        stop = rounds >= 3
        if env_id == "stop-v0":
            action: Any = int(stop)
        else:
            action = np.asarray([rng.integers(n) for n in env.action_space.nvec])
            action[-1] = int(stop)
        *_, terminated, truncated, _ = env.step(action)
        done, rounds = terminated or truncated, rounds + 1
    assert env.trace is not None
    return env.trace


def _attacked(name: str, seed: int) -> Trace:
    """A run under attack ``name`` with every defense on, on the first setting it applies to."""
    topos = sorted(TOPOLOGIES)
    topos = topos[seed % len(topos) :] + topos[: seed % len(topos)]  # spread over topologies
    for task in ("arith", "wide-search-v1", "multihop-v1"):
        for topo in topos:
            try:
                return run_attacked(
                    topo,
                    task,
                    make_attack(name),
                    defenses=Defenses.all(),
                    agents=3,
                    seed=seed,
                    task_size=6 if task == "arith" else 12,
                ).trace
            except ConfigError as err:
                assert "cannot apply" in str(err), str(err)
    raise AssertionError(f"attack {name} applies to no setting tried")


#: Every trace of the law, by name: ``group/what``.
NAMES = [
    *(f"topologies/{topo}-{task}" for topo in sorted(TOPOLOGIES) for task in TASKS),
    *(f"environments/{env_id}-s{seed}" for env_id in ENV_IDS for seed in (0, 1)),
    *(f"security/{name}" for name in sorted(ATTACKS)),
    "security/defenses-only",
]
#: A runtime trace that does not compare equal to itself read back (JSON types in memory).
NOT_JSON_TYPED: dict[str, str] = {}


def _build(name: str) -> Trace:
    group, what = name.split("/")
    if group == "topologies":
        topo = next(t for t in TOPOLOGIES if what.startswith(t + "-"))
        task = what.removeprefix(topo + "-")
        size = 6 if task.startswith("arith") else 12
        return run(topo, task, agents=3, seed=2, task_size=size).trace
    if group == "environments":
        env_id, seed = what.rsplit("-s", 1)
        return _episode(env_id, int(seed))
    if what == "defenses-only":
        return run("centralized", "arith", agents=3, seed=0, defenses=Defenses.all()).trace
    return _attacked(what, sorted(ATTACKS).index(what))


@pytest.fixture(scope="module")
def recorded() -> dict[str, Trace]:
    """The runtime's traces, by name."""
    out = {name: _build(name) for name in NAMES}
    assert len({t.trace_id for t in out.values()}) == len(out)
    return out


def _group(recorded: dict[str, Trace], group: str) -> list[Trace]:
    return [t for name, t in recorded.items() if name.startswith(group + "/")]


def _assert_same(
    back: list[Trace], traces: list[Trace], recorded: dict[str, Trace], fmt: str
) -> None:
    """``back`` equals ``traces`` (the few traces not JSON-typed in memory: their encoding)."""
    loose = {recorded[name].trace_id for name in NOT_JSON_TYPED}
    assert [t.trace_id for t in back] == [t.trace_id for t in traces]
    for b, t in zip(back, traces, strict=True):
        if t.trace_id in loose and fmt not in BYTES_DIFFER:
            assert dumps(b) == dumps(t), t.trace_id
    assert [t for t in back if t.trace_id not in loose] == [
        t for t in traces if t.trace_id not in loose
    ]


def test_the_traces_cover_what_the_runtime_records(recorded: dict[str, Trace]) -> None:
    types = {e.type for t in recorded.values() for e in t.events}
    assert {"llm_call", "tool_call", "tool_result", "message", "spawn", "safety_event"} <= types
    assert {t.topology for t in _group(recorded, "topologies")} >= {"swarm", "debate"}
    assert all(t.meta.get("runner") for t in recorded.values())
    assert all(t.n_events > 4 for t in _group(recorded, "environments"))
    security = _group(recorded, "security")
    assert all(t.meta["config"].get("defenses") for t in security)
    assert sum(bool(t.meta.get("interventions")) for t in security) == len(ATTACKS)


def _lossless_params() -> list[Any]:
    out = []
    for fmt in FORMATS:
        for name in NAMES:
            why = NOT_JSON_TYPED.get(name)
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            out.append(pytest.param(fmt, name, marks=marks, id=f"{fmt}-{name}"))
    return out


@pytest.mark.parametrize(("fmt", "name"), _lossless_params())
def test_lossless_formats_give_back_the_same_trace(
    recorded: dict[str, Trace], fmt: str, name: str, tmp_path: Path
) -> None:
    assert set(FORMATS) == set(SUFFIX), "a new format needs its place in this law"
    trace = recorded[name]
    path = tmp_path / f"t{SUFFIX[fmt]}"
    dump(trace, path, format=fmt)
    back = load_all(path, format=fmt)
    assert back == [trace], f"{fmt}: {trace.trace_id} changed in the round trip"
    again = tmp_path / f"again{SUFFIX[fmt]}"
    dump(back, again, format=fmt)
    if fmt != "parquet":  # a Parquet file records its writer's timestamps
        assert again.read_bytes() == path.read_bytes(), f"{fmt}: {trace.trace_id}"


#: Formats whose read-back trace encodes to other native JSON bytes, with why.
BYTES_DIFFER: dict[str, str] = {}


def _bytes_params() -> list[Any]:
    out = []
    for fmt in FORMATS:
        for group in GROUPS:
            why = BYTES_DIFFER.get(fmt)
            if fmt == "upstream" and group != "security":
                why = None
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            out.append(pytest.param(fmt, group, marks=marks, id=f"{fmt}-{group}"))
    return out


@pytest.mark.parametrize(("fmt", "group"), _bytes_params())
def test_read_back_traces_encode_to_the_same_bytes(
    recorded: dict[str, Trace], fmt: str, group: str, tmp_path: Path
) -> None:
    for i, trace in enumerate(_group(recorded, group)):
        path = tmp_path / f"t{i}{SUFFIX[fmt]}"
        dump(trace, path, format=fmt)
        (back,) = load_all(path, format=fmt)
        assert dumps(back) == dumps(trace), f"{fmt}: {trace.trace_id}"


def test_many_traces_in_one_file_round_trip(recorded: dict[str, Trace], tmp_path: Path) -> None:
    every = list(recorded.values())
    for fmt in ("jsonl", "parquet"):
        path = tmp_path / f"all{SUFFIX[fmt]}"
        dump(every, path, format=fmt)
        _assert_same(load_all(path, format=fmt), every, recorded, fmt)


def test_upstream_documents_validate_under_the_reference_schema(
    recorded: dict[str, Trace],
) -> None:
    ref = reference_dir()
    if ref is None:
        pytest.skip("shared reference files (trace_schema.json) not present")
    jsonschema = pytest.importorskip("jsonschema")
    from orchestrace.io import to_upstream

    schema = json.loads((ref / "trace_schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    for trace in recorded.values():
        errors = [e.message for e in validator.iter_errors(to_upstream(trace))]
        assert not errors, (trace.trace_id, errors[:3])


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_streams_written_while_recording_read_back_as_the_run(tmp_path: Path, suffix: str) -> None:
    for topo in sorted(TOPOLOGIES):
        out = tmp_path / f"{topo}{suffix}"
        res = run(topo, "wide-search-v0", agents=3, seed=5, task_size=12, output=out)
        assert load_all(out) == [res.trace], (topo, suffix)


@pytest.mark.parametrize("group", GROUPS)
def test_otlp_imports_back_as_the_same_trace(
    recorded: dict[str, Trace], group: str, tmp_path: Path
) -> None:
    assert set(EXPORT_FORMATS) == {"otlp", "perfetto"}, "a new exporter needs its law here"
    traces = _group(recorded, group)
    path = tmp_path / "otlp.json"
    path.write_bytes(export_bytes(traces, format="otlp"))
    _assert_same(import_path(path, format="otel").traces, traces, recorded, "otlp")
    assert export_bytes(traces, format="otlp") == path.read_bytes()  # same trace, same bytes


def _chrome_checker() -> Any:
    """``check_chrome_trace`` of the Perfetto tests: the format's rules and flow binding."""
    spec = importlib.util.spec_from_file_location(
        "perfetto_format", ROOT / "tests" / "io" / "test_perfetto_export.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.check_chrome_trace


@pytest.mark.parametrize("group", GROUPS)
def test_perfetto_export_keeps_every_event_and_edge(recorded: dict[str, Trace], group: str) -> None:
    check = _chrome_checker()
    traces = _group(recorded, group)
    doc = json.loads(export_bytes(traces, format="perfetto"))
    assert doc == msgspec.json.decode(export_bytes(traces, format="perfetto"))
    got = check(doc)
    info = doc["otherData"]["traces"]
    assert [t["trace_id"] for t in info] == [t.trace_id for t in traces]
    for pid, (trace, meta) in enumerate(zip(traces, info, strict=True), start=1):
        assert meta["pid"] == pid and (meta["events"], meta["edges"]) == (
            trace.n_events,
            len(trace.edges),
        )
        slices = {eid: rec for (p, eid), rec in got["slices"].items() if p == pid}
        assert set(slices) == {e.id for e in trace.events}, trace.trace_id
        for e in trace.events:
            rec = slices[e.id]
            args = rec["args"]
            assert (rec["cat"], args["type"], args["agent"]) == (e.type, e.type, e.agent)
            assert (args["t_s"], args["dur_s"]) == (e.t, e.dur), e.id
            assert rec["ts"] == round(e.t * 1e6), e.id
            assert rec["ph"] == ("X" if e.dur > 0 else "i"), e.id
            if e.dur > 0:
                assert rec["ts"] + rec["dur"] == round((e.t + e.dur) * 1e6), e.id
        drawn = Counter((s, d, t) for p, s, d, t in got["flows"] if p == pid)
        edges = Counter((e.src, e.dst, e.type) for e in trace.edges)
        assert drawn <= edges, trace.trace_id
        left = Counter(e.type for e in trace.edges) - Counter(t for _s, _d, t in drawn.elements())
        assert dict(left) == {k: v for k, v in meta["edges_not_drawn"].items() if v}, trace.trace_id
        assert meta["flows"] == dict(Counter(t for _s, _d, t in drawn.elements())), trace.trace_id
