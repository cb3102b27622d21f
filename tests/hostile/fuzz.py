"""Structure-aware mutation fuzzer of the trace readers and everything that uses a trace.

Each mutant is derived, deterministically from ``(seed, index)``, from one of a few seed inputs
(two generated traces, two recorded runs as native JSON, a survey-schema trace, a recorded JSONL
record stream, a JSONL file of one trace per line, and a Parquet dataset)
by one to three mutations:

* JSON mutations: set, delete or add a field anywhere; extreme numbers (``2**63``, ``1e308``,
  ``NaN``, negative, ...); values of the wrong type; duplicate or swapped event ids; random and
  self edges; shuffled, dropped or duplicated events, edges and stream lines;
* byte mutations: flip bits, insert, delete, duplicate or truncate spans;
* Parquet mutations: null or hostile cells, mutated JSON in ``attrs``/``meta`` cells, columns
  of another type or missing, duplicated or dropped rows.

The mutant is read as the command line reads it (``parse``/``loads`` for ``.json``,
``iter_jsonl``/``load_all`` for ``.jsonl``, ``read_graph``/``load_all`` for Parquet) and, when
accepted, analysed (``summarize``),
rewarded (every reward family), credited (uniform) and exported to the survey schema
(``to_upstream``); an accepted trace must also survive being written and read back.
Every exception must be one of the project's own (``OrchestraceError``); anything else, a run
over the time limit, or a written trace that does not read back is a failure.

Run more offline: ``python tests/hostile/fuzz.py --mutations 100000 [--seed N]``; replay one
mutant with ``--only INDEX`` (prints the input and the traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import json
import pickle
import random
import re
import shutil
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["FuzzReport", "Mutant", "fuzz", "make_mutant", "seed_inputs"]

Json = Any

EXTREMES: tuple[Any, ...] = (
    0,
    -1,
    1,
    2**31,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63) - 1,
    10**30,
    10**400,
    0.5,
    -0.0,
    1e-320,
    1e308,
    -1e308,
    float("nan"),
    float("inf"),
    float("-inf"),
    "",
    "x",
    "0",
    "1e999",
    "\x1b[31m\r\n",
    "A" * 10_000,
    None,
    True,
    False,
    [],
    {},
    [1],
    {"a": 1},
)
KEYS = (
    "id",
    "t",
    "type",
    "agent",
    "dur",
    "step",
    "to",
    "from",
    "src",
    "dst",
    "tokens_in",
    "tokens_out",
    "cost",
    "attrs",
    "content",
    "part",
    "lo",
    "hi",
    "size",
    "answer",
    "task",
    "trace_id",
    "events",
    "edges",
    "meta",
    "rewards",
    "result",
    "decision",
    "role",
    "zzz",
)
EVENT_TYPES = (
    "spawn",
    "delegate",
    "message",
    "tool_call",
    "tool_result",
    "llm_call",
    "return",
    "aggregate",
    "orchestrator_decision",
    "stop",
    "human_intervention",
    "teleport",
)
EDGE_TYPES = ("causal", "spawn", "message", "aggregate", "return", "wormhole")
TIME_LIMIT = 10.0


# ------------------------------------------------------------------ seeds
@dataclass(frozen=True)
class SeedInput:
    """One good input: its kind (``json`` or ``jsonl``) and bytes."""

    name: str
    kind: str
    data: bytes


def seed_inputs() -> list[SeedInput]:
    """Small good inputs made by the project (generated traces, recorded runs, a stream)."""
    import tempfile

    from orchestrace import dumps, generate_trace
    from orchestrace.io import to_upstream, write_parquet
    from orchestrace.runtime import run

    out = [
        SeedInput("generated-a", "json", dumps(generate_trace(4, 24, 2, seed=1))),
        SeedInput("generated-b", "json", dumps(generate_trace(3, 16, 1, seed=2))),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        stream = Path(tmp) / "run.jsonl"
        res = run("centralized", agents=3, output=stream)
        out.append(SeedInput("run-centralized", "json", dumps(res.trace)))
        out.append(SeedInput("stream-centralized", "jsonl", stream.read_bytes()))
        res2 = run("hierarchical", agents=4)
        out.append(SeedInput("run-hierarchical", "json", dumps(res2.trace)))
    up = to_upstream(generate_trace(3, 16, 1, seed=4))
    out.append(SeedInput("upstream", "json", json.dumps(up).encode()))
    lines = [dumps(generate_trace(2, 8, 1, seed=s)) for s in (5, 6)]
    out.append(SeedInput("trace-lines", "jsonl", b"\n".join(lines) + b"\n"))
    with tempfile.TemporaryDirectory() as tmp:
        ds = Path(tmp) / "run.parquet"
        write_parquet([res.trace], ds)
        files = {p.name: p.read_bytes() for p in sorted(ds.iterdir())}
    out.append(SeedInput("parquet-centralized", "parquet", pickle.dumps(files)))
    return out


# ------------------------------------------------------------------ mutations
def _containers(obj: Json, depth: int = 0) -> list[Json]:
    """The dicts and lists in ``obj`` down to depth 6 (a list's first 50 items), in pre-order.

    Iterative: the mutants' pool walks every seed document thousands of times.
    """
    out: list[Json] = []
    stack: list[tuple[Json, int]] = [(obj, depth)]
    pop, push, append = stack.pop, stack.extend, out.append
    while stack:
        o, d = pop()
        if isinstance(o, dict):
            append(o)
            kids: Any = o.values()
        elif isinstance(o, list):
            append(o)
            kids = o[:50]
        else:
            continue
        if d < 6:
            push([(v, d + 1) for v in reversed(list(kids)) if isinstance(v, (dict, list))])
    return out


def _value(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.7:
        return copy.deepcopy(rng.choice(EXTREMES))
    if r < 0.8:
        return rng.choice(EVENT_TYPES + EDGE_TYPES)
    if r < 0.9:
        return rng.uniform(-1e6, 1e6)
    return f"{_DEEP}{rng.choice((10, 1000, 5000, 100_000))}{_DEEP}"  # deep nesting, see _encode


def _events(obj: Json) -> list[Json]:
    ev = obj.get("events") if isinstance(obj, dict) else None
    return [e for e in ev if isinstance(e, dict)] if isinstance(ev, list) else []


def _ids(obj: Json) -> list[Any]:
    return [e.get("id") for e in _events(obj)] or ["e1"]


def mutate_json(obj: Json, rng: random.Random) -> tuple[Json, str]:
    """Apply one structure-aware mutation to a trace object; return it and a description."""
    op = rng.choice(
        (
            "set",
            "set",
            "set",
            "delete",
            "delete",
            "add",
            "extreme",
            "dup-id",
            "swap-ids",
            "random-edge",
            "self-edge",
            "shuffle",
            "drop",
            "duplicate",
            "retype",
            "nest",
            "attrs",
            "attrs",
            "attrs",
            "meta",
            "meta",
            "meta",
            "number",
            "number",
        )
    )
    nodes = list(_containers(obj))
    dicts = [n for n in nodes if isinstance(n, dict) and n]
    lists = [n for n in nodes if isinstance(n, list) and n]
    events = _events(obj)
    edges = obj.get("edges") if isinstance(obj, dict) else None
    if op == "set" and dicts:
        d = rng.choice(dicts)
        k = rng.choice(list(d))
        d[k] = _value(rng)
        return obj, f"set {k}"
    if op == "delete" and dicts:
        d = rng.choice(dicts)
        k = rng.choice(list(d))
        del d[k]
        return obj, f"delete {k}"
    if op == "add" and dicts:
        d = rng.choice(dicts)
        k = rng.choice(KEYS)
        d[k] = _value(rng)
        return obj, f"add {k}"
    if op == "extreme":
        nums = [(d, k) for d in dicts for k, v in d.items() if isinstance(v, (int, float))]
        if nums:
            d, k = rng.choice(nums)
            d[k] = rng.choice(EXTREMES[:19])
            return obj, f"extreme {k}"
    if op == "dup-id" and len(events) > 1:
        a, b = rng.sample(events, 2)
        a["id"] = b.get("id")
        return obj, "duplicate id"
    if op == "swap-ids" and len(events) > 1:
        a, b = rng.sample(events, 2)
        a["id"], b["id"] = b.get("id"), a.get("id")
        return obj, "swap ids"
    if op in ("random-edge", "self-edge") and isinstance(edges, list):
        ids = _ids(obj)
        src = rng.choice(ids)
        dst = src if op == "self-edge" else rng.choice(ids)
        edges.append({"src": src, "dst": dst, "type": rng.choice(EDGE_TYPES)})
        return obj, op
    if op == "shuffle" and lists:
        lst = rng.choice(lists)
        rng.shuffle(lst)
        return obj, "shuffle"
    if op == "drop" and lists:
        lst = rng.choice(lists)
        i = rng.randrange(len(lst))
        del lst[i : i + rng.choice((1, 1, 2, len(lst)))]
        return obj, "drop"
    if op == "duplicate" and lists:
        lst = rng.choice(lists)
        lst.append(copy.deepcopy(rng.choice(lst)))
        return obj, "duplicate item"
    if op == "retype" and events:
        e = rng.choice(events)
        e["type"] = rng.choice(EVENT_TYPES)
        return obj, f"retype {e['type']}"
    if op == "attrs":  # free-form fields the checks accept but rewards and credit read
        holders = [e for e in events if isinstance(e.get("attrs"), dict)]
        if holders:
            a = rng.choice(holders)["attrs"]
            inner = [n for n in _containers(a) if isinstance(n, dict)]
            d = rng.choice(inner)
            k = rng.choice([*d, "part", "lo", "hi", "answer", "value", "kind", "index", "size"])
            d[k] = _value(rng) if rng.random() < 0.8 else {}
            return obj, f"attrs {k}"
    if op == "meta" and isinstance(obj.get("meta"), dict):
        inner = [n for n in _containers(obj["meta"]) if isinstance(n, dict)]
        d = rng.choice(inner)
        k = rng.choice([*d, "task", "size", "name", "seed", "result", "answer", "runner"])
        d[k] = _value(rng)
        return obj, f"meta {k}"
    if op == "number":  # a valid-typed but hostile number: large, tiny, negative
        nums = [(d, k) for d in dicts for k, v in d.items() if isinstance(v, (int, float))]
        if nums:
            d, k = rng.choice(nums)
            v = d[k]
            d[k] = rng.choice(
                (2**63 - 1, 2**62, 10**18, 1e300, 1e-300, 0, -v, v * 10**9)
                if isinstance(v, int)
                else (1e300, 1e-300, 0.0, -v, v * 1e12, 5e-324)
            )
            return obj, f"number {k}"
    if op == "nest" and dicts:
        d = rng.choice(dicts)
        k = rng.choice(list(d))
        d[k] = rng.choice(([d[k]], {"x": d[k]}))
        return obj, f"nest {k}"
    return obj, "none"


def mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Apply one byte-level mutation."""
    if not data:
        return rng.randbytes(rng.randrange(1, 20)), "random"
    op = rng.choice(("flip", "insert", "delete", "truncate", "duplicate", "digits"))
    i = rng.randrange(len(data))
    n = rng.choice((1, 2, 8, 64, 512))
    if op == "flip":
        b = bytearray(data)
        b[i] ^= 1 << rng.randrange(8)
        return bytes(b), "flip"
    if op == "insert":
        junk = rng.choice((rng.randbytes(n), b"\n", b"\x00", b"{", b'"', b"\xff", b"\r\n"))
        return data[:i] + junk + data[i:], "insert"
    if op == "delete":
        return data[:i] + data[i + n :], "delete"
    if op == "truncate":
        return data[:i], "truncate"
    if op == "duplicate":
        return data[:i] + data[i : i + n] + data[i:], "duplicate span"
    digits = rng.choice((b"9" * 20, b"18446744073709551616", b"1e999", b"-0", b"NaN", b"1" * 400))
    return data[:i] + digits + data[i:], "digits"


def _decode_seed(data: bytes) -> Json:
    """A seed document, decoded (``msgspec`` is several times faster than ``json`` and gives
    the same values for the seeds, which our own encoder wrote)."""
    return msgspec.json.decode(data)


def _stream_records(data: bytes) -> list[Json]:
    return [_decode_seed(line) for line in data.splitlines() if line.strip()]


_DEEP = "\x00DEEP\x00"
_DEEP_RE = re.compile(r'"\\u0000DEEP\\u0000(\d+)\\u0000DEEP\\u0000"')


def _encode(obj: Json) -> bytes:
    text = json.dumps(obj, allow_nan=True, separators=(",", ":"))
    text = _DEEP_RE.sub(lambda m: "[" * int(m.group(1)) + "]" * int(m.group(1)), text)
    return text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class Mutant:
    """One mutated input."""

    index: int
    seed_name: str
    kind: str
    data: bytes
    ops: tuple[str, ...]


_STRINGS = (
    "",
    "x",
    "e1",
    "teleport",
    "{",
    "[1]",
    "null",
    "NaN",
    "\x1b[2J\r\n",
    "A" * 10_000,
    '{"part":{"lo":"x"}}',
    '{"task":{"name":"arith-mapreduce-v0","size":100000000}}',
)


def _cell(rng: random.Random, typ: Any) -> Any:
    """A hostile value that fits an Arrow column of type ``typ``."""
    import pyarrow as pa

    if pa.types.is_string(typ):
        return rng.choice(_STRINGS)
    if pa.types.is_integer(typ):
        return rng.choice((-1, 0, 2**31, 2**63 - 1, -(2**63)))
    if pa.types.is_floating(typ):
        return rng.choice((float("nan"), float("inf"), float("-inf"), -1.0, 1e308, 0.0))
    if pa.types.is_boolean(typ):
        return rng.choice((True, False))
    if pa.types.is_map(typ):
        return rng.choice(([("team", float("nan"))], [], [("x", 1e308)], [("team", -1.0)]))
    return None


def mutate_table(t: Any, rng: random.Random) -> tuple[Any, str]:
    """One mutation of an Arrow table: a cell (null, hostile value, mutated JSON), a column's
    type, a dropped column, or duplicated or dropped rows."""
    import pyarrow as pa

    if t.num_rows == 0 or t.num_columns == 0:
        return t, "none"
    col = rng.choice(t.column_names)
    i = t.schema.get_field_index(col)
    typ = t.schema.field(i).type
    op = rng.choice(("null", "value", "value", "json", "json", "retype", "drop-col", "rows"))
    if op == "drop-col":
        return t.remove_column(i), f"drop {col}"
    if op == "rows":
        k = rng.randrange(t.num_rows)
        parts = [t, t.slice(k, 1)] if rng.random() < 0.5 else [t.slice(0, k)]
        return pa.concat_tables(parts), f"rows {col}"
    vals = t.column(col).to_pylist()
    r = rng.randrange(len(vals))
    if op == "retype":
        arr = pa.array([None if v is None else str(v) for v in vals], pa.string())
        return t.set_column(i, pa.field(col, pa.string()), arr), f"retype {col}"
    if op == "json" and pa.types.is_string(typ) and isinstance(vals[r], str):
        try:
            obj = json.loads(vals[r])
        except ValueError:
            obj = None
        if isinstance(obj, (dict, list)):
            obj, what = mutate_json(obj if isinstance(obj, dict) else {"x": obj}, rng)
            vals[r] = _encode(obj).decode("utf-8", "surrogatepass")
            op = f"json {col}: {what}"
    if not op.startswith("json "):
        vals[r] = None if op == "null" else _cell(rng, typ)
        op = f"{op} {col}"
    try:
        arr = pa.array(vals, typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return t, "none"
    return t.set_column(i, t.schema.field(i), arr), op


@functools.lru_cache(maxsize=8)
def _read_dataset(data: bytes) -> tuple[dict[str, bytes], dict[str, Any]]:
    """A Parquet seed's other files and its tables (immutable: mutations make new ones)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = pickle.loads(data)
    other = {n: b for n, b in files.items() if not n.endswith(".parquet")}  # e.g. a marker
    tables = {
        n: pq.read_table(pa.BufferReader(b)) for n, b in files.items() if n.endswith(".parquet")
    }
    return other, tables


def _parquet_mutant(data: bytes, rng: random.Random) -> tuple[bytes, list[str]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    other, read = _read_dataset(data)
    tables = dict(read)
    ops = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        name = rng.choice(sorted(tables))
        tables[name], what = mutate_table(tables[name], rng)
        ops.append(f"{name.split('.')[0]}: {what}")
    out = dict(other)
    for n, t in tables.items():
        sink = pa.BufferOutputStream()
        pq.write_table(t, sink)
        out[n] = sink.getvalue().to_pybytes()
    return pickle.dumps(out), ops


def make_mutant(seeds: list[SeedInput], index: int, seed: int = 0) -> Mutant:
    """The ``index``-th mutant of the run with ``seed`` (the same every time)."""
    rng = random.Random(f"{seed}:{index}")
    base = rng.choice(seeds)
    if base.kind == "parquet" and rng.random() < 0.65:  # Parquet mutants cost 10x: fewer
        base = rng.choice([s for s in seeds if s.kind != "parquet"])
    ops: list[str] = []
    data = base.data
    if base.kind == "parquet":
        data, ops = _parquet_mutant(data, rng)
        return Mutant(index, base.name, base.kind, data, tuple(ops))
    if rng.random() < 0.6:  # structure-aware
        if base.kind == "json":
            obj = _decode_seed(data)
            for _ in range(rng.choice((1, 1, 2, 3))):
                obj, what = mutate_json(obj, rng)
                ops.append(what)
            data = _encode(obj)
        else:
            recs = _stream_records(data)
            for _ in range(rng.choice((1, 1, 2, 3))):
                r = rng.random()
                if r < 0.55:
                    k = rng.randrange(len(recs))
                    recs[k], what = mutate_json(recs[k], rng)
                    ops.append(f"line {k + 1}: {what}")
                elif r < 0.6:
                    evs = [x["event"] for x in recs if isinstance(x.get("event"), dict)]
                    if len(evs) > 1:
                        a, b = rng.sample(evs, 2)
                        a["id"] = b.get("id")
                        ops.append("duplicate id across lines")
                elif r < 0.7 and len(recs) > 1:
                    i, j = rng.sample(range(len(recs)), 2)
                    recs[i], recs[j] = recs[j], recs[i]
                    ops.append("swap lines")
                elif r < 0.8:
                    del recs[rng.randrange(len(recs))]
                    ops.append("drop line")
                elif r < 0.9:
                    recs.insert(rng.randrange(len(recs) + 1), copy.deepcopy(rng.choice(recs)))
                    ops.append("duplicate line")
                else:
                    a = rng.randrange(len(recs))
                    merged = {**recs[a], **rng.choice(recs)}
                    recs[a] = merged
                    ops.append("merge lines")
                if not recs:
                    break
            data = b"".join(_encode(r) + b"\n" for r in recs)
    if not ops or rng.random() < 0.3:
        for _ in range(rng.choice((1, 1, 2, 3))):
            data, what = mutate_bytes(data, rng)
            ops.append(what)
    return Mutant(index, base.name, base.kind, data, tuple(ops))


# ------------------------------------------------------------------ checking
class _Hang(BaseException):
    pass


@contextlib.contextmanager
def _limit(seconds: float) -> Iterator[None]:
    def on_alarm(signum: int, frame: Any) -> None:
        raise _Hang

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _readers(m: Mutant, path: Path) -> Iterator[tuple[str, Callable[[], list[Any]]]]:
    """(step name, call returning the traces it accepted) as each CLI command reads."""
    from orchestrace.io import iter_jsonl, load_all, parse, read_graph

    if m.kind == "parquet":

        def analyze_columns() -> list[Any]:
            from orchestrace.trace.analyze import summarize
            from orchestrace.trace.check import check_graph

            graph, _header = read_graph(path)
            if not any(p.severity == "error" for p in check_graph(graph)):
                summarize(graph)  # as analyze does: only a graph the checks accept
            return []

        yield "read_graph", analyze_columns
        yield "load_all", lambda: load_all(path, check=True)
        return
    if m.kind == "json":

        def validate_json() -> list[Any]:
            tr, problems = parse(m.data, source="m.json", partial=True)
            return (
                [tr] if tr is not None and not any(p.severity == "error" for p in problems) else []
            )

        yield "parse", validate_json
        yield "load_all", lambda: load_all(path, check=True)
    else:

        def validate_stream() -> list[Any]:
            out = []
            for item in iter_jsonl(path, keep_going=True, partial=True):
                if item.trace is not None and not any(p.severity == "error" for p in item.problems):
                    out.append(item.trace)
            return out

        yield "iter_jsonl", validate_stream
        yield "load_all", lambda: load_all(path, check=True)


def _use(trace: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
    """The steps applied to an accepted trace."""
    from orchestrace import dumps, loads
    from orchestrace.credit import check_credit, make_assigner
    from orchestrace.io import to_upstream
    from orchestrace.rewards import Composite
    from orchestrace.trace.analyze import summarize

    families = (
        "team", "agent", "role", "process", "tool", "verifier", "orchestration", "hybrid", "parl",
    )  # fmt: skip

    def reward(name: str) -> Callable[[], Any]:
        def score() -> Any:  # one family at a time: one refusing must not hide another's bug
            combo = Composite.from_spec({name: {"weight": 1.0}})
            return combo.total(combo.components([trace]))

        return score

    def credit() -> Any:
        table = make_assigner("uniform").assign(trace, "agent")
        return check_credit(table, trace)

    yield "summarize", lambda: summarize(trace)
    for name in families:
        yield f"reward {name}", reward(name)
    yield "credit", credit
    yield "to_upstream", lambda: json.dumps(to_upstream(trace), allow_nan=True)
    yield "write+read", lambda: loads(dumps(trace), check=False)


@dataclass
class FuzzReport:
    """Outcome of a fuzz run.

    Attributes:
        mutants: How many were tried.
        accepted: How many some reader accepted (and were then used).
        project_errors: Exceptions of the project's own types, by type name.
        failures: Signature -> (count, first mutant index, description, traceback).
        hangs: Mutant indices that ran past the time limit.
        seconds: Wall time.
    """

    mutants: int = 0
    accepted: int = 0
    project_errors: Counter[str] = field(default_factory=Counter)
    failures: dict[str, list[Any]] = field(default_factory=dict)
    hangs: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def fail(self, sig: str, m: Mutant, step: str, tb: str) -> None:
        """Record a failure (the first example of each signature is kept)."""
        if sig in self.failures:
            self.failures[sig][0] += 1
        else:
            what = f"mutant {m.index} of {m.seed_name} ({', '.join(m.ops)}), step {step}"
            self.failures[sig] = [1, m.index, what, tb]

    def lines(self) -> list[str]:
        """One line per failure signature."""
        return [
            f"{n}x {sig}  [first: {what}]"
            for sig, (n, _i, what, _tb) in sorted(self.failures.items())
        ]


def _signature(exc: BaseException, step: str) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if "orchestrace" in f.filename and "/tests/" not in f.filename]
    where = f"{Path(mine[-1].filename).name}:{mine[-1].lineno} {mine[-1].name}" if mine else "?"
    return f"{step}: {type(exc).__name__} at {where}: {str(exc)[:120]}"


def check_mutant(m: Mutant, workdir: Path, report: FuzzReport) -> None:
    """Read and use one mutant, recording every exception that is not the project's own."""
    from orchestrace.errors import OrchestraceError

    path = workdir / f"m.{m.kind}"
    if m.kind == "parquet":
        # the same directory, emptied: removing a directory costs a file-system commit on
        # some machines (ext4 with discard), more than checking the mutant
        if path.is_dir():
            for entry in path.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        else:
            path.mkdir()
        for name, blob in pickle.loads(m.data).items():
            (path / name).write_bytes(blob)
    else:
        # a new file each time: rewriting a file in place (truncate, write) can make the file
        # system flush it on close (ext4's auto_da_alloc), which costs more than the check
        path.unlink(missing_ok=True)
        path.write_bytes(m.data)
    accepted: list[Any] = []
    steps: list[tuple[str, Callable[[], Any]]] = list(_readers(m, path))
    try:
        with _limit(TIME_LIMIT):
            for step, fn in steps:
                try:
                    got = fn()
                    if step != "load_all" or not accepted:
                        accepted.extend(got)
                except OrchestraceError as exc:
                    report.project_errors[type(exc).__name__] += 1
                except Exception as exc:
                    report.fail(_signature(exc, step), m, step, traceback.format_exc())
            if accepted:
                report.accepted += 1
            for tr in accepted[:2]:
                for step, fn in _use(tr):
                    try:
                        fn()
                    except OrchestraceError as exc:
                        report.project_errors[type(exc).__name__] += 1
                    except Exception as exc:
                        report.fail(_signature(exc, step), m, step, traceback.format_exc())
                rt = _round_trip(tr)
                if rt:
                    report.fail(f"write+read: {rt}", m, "write+read", "")
    except _Hang:
        report.hangs.append(m.index)
        report.fail(f"hang: over {TIME_LIMIT:g} s", m, "?", "")
    except RecursionError as exc:  # escaped the per-step handlers
        report.fail(_signature(exc, "?"), m, "?", traceback.format_exc())


def _round_trip(trace: Any) -> str | None:
    """An accepted trace written as JSON must be accepted again (validate == what convert writes)."""
    from orchestrace import dumps
    from orchestrace.errors import OrchestraceError
    from orchestrace.io import parse

    try:
        data = dumps(trace)
    except OrchestraceError:
        return None  # refusing to write is fine
    except Exception as exc:
        return f"dumps raised {type(exc).__name__}: {str(exc)[:100]}"
    try:
        tr, problems = parse(data, source="roundtrip", partial=True)
    except OrchestraceError as exc:
        return f"written trace unreadable: {str(exc).splitlines()[0][:160]}"
    # an imported trace may break orchestrace's own rules ("semantic" problems, listed and
    # not fatal); written as a native trace they are errors, and only those may appear
    from orchestrace.trace.check import check_trace

    known = {p.code for p in check_trace(trace, partial=True, imported=True)}
    errors = [p for p in problems if p.severity == "error" and p.code not in known]
    if tr is None or errors:
        return f"written trace invalid: {errors[0].code if errors else 'unusable'}"
    return None


def fuzz(
    n: int,
    *,
    seed: int = 0,
    workdir: Path,
    seeds: list[SeedInput] | None = None,
    max_hangs: int = 5,
    only: int | None = None,
) -> FuzzReport:
    """Try ``n`` mutants (or just mutant ``only``); stop early after ``max_hangs`` hangs."""
    seeds = seeds or seed_inputs()
    report = FuzzReport()
    t0 = time.perf_counter()
    indices = [only] if only is not None else range(n)
    for i in indices:
        check_mutant(make_mutant(seeds, i, seed), workdir, report)
        report.mutants += 1
        if len(report.hangs) >= max_hangs:
            break
    report.seconds = time.perf_counter() - t0
    return report


def main() -> int:
    """Command line: run the fuzzer and print one line per failure signature."""
    import tempfile

    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mutations", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", type=int, help="run one mutant and show it with its tracebacks")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        seeds = seed_inputs()
        rep = fuzz(args.mutations, seed=args.seed, workdir=Path(tmp), seeds=seeds, only=args.only)
        if args.only is not None:
            m = make_mutant(seeds, args.only, args.seed)
            print(f"mutant {m.index} of {m.seed_name}: {', '.join(m.ops)}")
            print(m.data[:2000].decode("utf-8", "backslashreplace"))
            for _n, _i, what, tb in rep.failures.values():
                print(what, tb, sep="\n")
    print(
        f"{rep.mutants:,} mutants in {rep.seconds:.1f} s ({rep.accepted:,} accepted); "
        f"project errors {dict(rep.project_errors)}; {len(rep.hangs)} hang(s); "
        f"{sum(v[0] for v in rep.failures.values())} other exception(s) in "
        f"{len(rep.failures)} signature(s)"
    )
    for line in rep.lines():
        print("  " + line)
    return 1 if rep.failures else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
