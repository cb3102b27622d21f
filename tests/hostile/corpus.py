"""A corpus of hostile inputs for every command that reads a trace file.

Every input is made at run time, deterministically from a seed: the project itself generates a
trace (``generate_trace``), records runs (``orchestrace.runtime.run``, one of them on
``humaneval-v0``) and writes a Parquet dataset (``write_parquet``); the builders below then
corrupt copies of those. Nothing large is stored in the repository.

Each :class:`Case` says what a correct reader must conclude about it (``expect``):

* ``"valid"``: a good trace; ``validate`` must say so.
* ``"invalid"``: every command must refuse it (exit 1 or 2, one clear line).
* ``"truncated"``: a recording cut off by a crash: ``validate`` refuses it, ``validate --partial``
  may accept it, any other command may use it only with a visible warning.
* ``"any"``: either outcome is acceptable; only crashes, tracebacks, hangs, damaged outputs and
  changed inputs count against it.

``special`` cases (FIFOs, ``/dev/zero``, pipes, unreadable files) can block or exhaust memory,
so they must be run in a child process with a time limit (see :mod:`hostile.runner`).

Usage::

    seeds = make_seeds(workdir)
    for case in CASES:
        path = case.materialize(seeds, workdir / "cases")
"""

# ruff: noqa: PLW0108 (lambdas keep the case table readable)
from __future__ import annotations

import copy
import gzip
import json
import os
import random
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CASES",
    "MARKER",
    "OUTPUT_CASES",
    "Case",
    "OutputCase",
    "Seeds",
    "cases_by_name",
    "make_seeds",
]

#: Name of the file that code planted in a trace would create; it must never appear.
MARKER = "CODE_FROM_TRACE_RAN"

Json = Any


# --------------------------------------------------------------------------- seeds
@dataclass
class Seeds:
    """The good inputs every hostile case is derived from.

    Attributes:
        root: Directory holding the seed files.
        seed: Seed of every random corruption.
        trace: ``generate_trace(5, 40, 2, seed=1)`` as a JSON object.
        run: A recorded ``centralized`` run (4 workers) as a native JSON object.
        run_lines: The same run as its recorded JSONL record stream, one bytes per line.
        he_lines: A recorded ``humaneval-v0`` run as a record stream (or a stand-in built from
            ``run`` when that task cannot be run here).
        he_answer: The answer string recorded in ``he_lines``.
        multi: Three small generated traces as JSON objects (for trace-per-line JSONL).
        parquet: A Parquet dataset of ``run`` written by the project.
    """

    root: Path
    seed: int
    trace: Json
    run: Json
    run_lines: list[bytes]
    he_lines: list[bytes]
    he_answer: str
    multi: list[Json]
    parquet: Path

    def rng(self, name: str) -> random.Random:
        """A random generator for one case, fixed by the corpus seed and the case name."""
        return random.Random(f"{self.seed}:{name}")


def make_seeds(root: Path, seed: int = 0) -> Seeds:
    """Generate, record and write the seed inputs into ``root`` (about a second)."""
    from orchestrace import dumps, generate_trace
    from orchestrace.io import load, write_parquet
    from orchestrace.runtime import run

    root.mkdir(parents=True, exist_ok=True)
    trace = json.loads(dumps(generate_trace(5, 40, 2, seed=1)))
    run_path = root / "RUN.jsonl"
    res = run("centralized", agents=4, output=run_path)
    run_lines = run_path.read_bytes().splitlines()
    run_obj = json.loads(dumps(res.trace))
    he_path = root / "HE.jsonl"
    try:
        he = run("centralized", "humaneval-v0", agents=1, output=he_path)
        he_lines = he_path.read_bytes().splitlines()
        he_answer = he.trace.meta["result"]["answer"]
        if not isinstance(he_answer, str) or not he_answer:
            raise ValueError("no answer recorded")
    except Exception:  # the task cannot run here: plant the same fields in the arith run
        he_answer = "    pass\n"
        he_lines = []
        for line in run_lines:
            rec = json.loads(line)
            if "header" in rec:
                rec["header"]["task_id"] = "humaneval-v0:s0:n7"
                rec["header"]["meta"]["task"] = {
                    "name": "humaneval-v0",
                    "seed": 0,
                    "size": 7,
                    "problem": "HumanEval/0",
                }
            if "footer" in rec:
                rec["footer"]["meta"]["result"]["answer"] = he_answer
            ev = rec.get("event")
            if ev and ev.get("type") in ("return", "aggregate"):
                ev["content"] = he_answer
            he_lines.append(json.dumps(rec).encode())
    multi = [json.loads(dumps(generate_trace(3, 12, 1, seed=s))) for s in range(3)]
    pq_path = root / "RUN.parquet"
    write_parquet([load(run_path)], pq_path)
    return Seeds(root, seed, trace, run_obj, run_lines, he_lines, he_answer, multi, pq_path)


# --------------------------------------------------------------------------- cases
Builder = Callable[[Seeds, Path], Path]


@dataclass(frozen=True)
class Case:
    """One hostile input.

    Attributes:
        name: Unique id, ``family/what``.
        expect: ``"valid"``, ``"invalid"``, ``"truncated"`` or ``"any"`` (see the module doc).
        build: Writes the input into the given (empty) directory and returns its path.
        special: Must run in a child process (may block or exhaust memory in-process).
        feed: For pipe cases: ``"stdin"`` or ``"fd"``; the bytes come from ``pipe_data``.
        pipe_data: Produces the bytes written into the pipe.
        marker: Executing content of this input would create ``MARKER`` next to it.
        unprivileged: Run the commands without the power to read any file (unreadable-file
            cases: under root they run in a user namespace of their own).
        multi: Holds several traces (commands that take one trace may refuse it).
        commands: Run only these commands (by name) on it; all when empty.
        note: What the case probes.
    """

    name: str
    expect: str
    build: Builder
    special: bool = False
    feed: str | None = None
    pipe_data: Callable[[Seeds], bytes] | None = None
    marker: bool = False
    unprivileged: bool = False
    multi: bool = False
    commands: tuple[str, ...] = ()
    note: str = ""

    def materialize(self, seeds: Seeds, parent: Path) -> Path:
        """Build the input in a fresh directory under ``parent``; return the path to pass."""
        d = parent / self.name.replace("/", "__")
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        return self.build(seeds, d)


CASES: list[Case] = []


def _case(name: str, expect: str, build: Builder, **kw: Any) -> None:
    assert expect in ("valid", "invalid", "truncated", "any"), expect
    assert all(c.name != name for c in CASES), name
    CASES.append(Case(name, expect, build, **kw))


def cases_by_name() -> dict[str, Case]:
    """``{case.name: case}``."""
    return {c.name: c for c in CASES}


# --------------------------------------------------------------------------- helpers
_RAW = "\x00RAW\x00"


class Raw:
    """A JSON token written verbatim (``1e999``, ``NaN``...)."""

    def __init__(self, text: str) -> None:
        self.text = text


def _encode(obj: Json) -> bytes:
    """JSON bytes of ``obj``; :class:`Raw` values are written verbatim."""
    raws: list[str] = []

    def swap(x: Json) -> Json:
        if isinstance(x, Raw):
            raws.append(x.text)
            return f"{_RAW}{len(raws) - 1}{_RAW}"
        if isinstance(x, dict):
            return {k: swap(v) for k, v in x.items()}
        if isinstance(x, list):
            return [swap(v) for v in x]
        return x

    text = json.dumps(swap(obj), allow_nan=True, ensure_ascii=False, separators=(",", ":"))
    for i, r in enumerate(raws):
        text = text.replace(json.dumps(f"{_RAW}{i}{_RAW}"), r)
    return text.encode("utf-8", "surrogatepass")


def _write(d: Path, name: str, data: bytes) -> Path:
    p = d / name
    p.write_bytes(data)
    return p


def _json_case(
    name: str, expect: str, make: Callable[[Seeds], Json], base: str = "trace", fname: str = ""
) -> None:
    """A ``.json`` case: ``make`` gets a deep copy of the seed object to edit (or replace)."""

    def build(s: Seeds, d: Path) -> Path:
        obj = copy.deepcopy(getattr(s, base))
        out = make_obj(obj, s)
        return _write(d, fname or "trace.json", out if isinstance(out, bytes) else _encode(out))

    def make_obj(obj: Json, s: Seeds) -> Json:
        r = make(obj) if make.__code__.co_argcount == 1 else make(obj, s)  # type: ignore[call-arg]
        return obj if r is None else r

    _case(name, expect, build)


def _bytes_case(name: str, expect: str, make: Callable[[Seeds], bytes], fname: str) -> None:
    _case(name, expect, lambda s, d: _write(d, fname, make(s)))


def _trace_bytes(s: Seeds) -> bytes:
    return _encode(s.trace)


def _run_bytes(s: Seeds) -> bytes:
    return b"\n".join(s.run_lines) + b"\n"


def _deep(n: int = 100_000) -> Raw:
    return Raw("[" * n + "]" * n)


def _deep_obj(n: int = 100_000) -> Raw:
    return Raw('{"a":' * n + "1" + "}" * n)


def _ev(obj: Json, i: int = 3) -> Json:
    return obj["events"][i]


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Json], None]:
    def f(obj: Json) -> None:
        cur = obj
        for k in path[:-1]:
            cur = cur[k]
        cur[path[-1]] = value

    return f


def _delete(path: tuple[Any, ...]) -> Callable[[Json], None]:
    def f(obj: Json) -> None:
        cur = obj
        for k in path[:-1]:
            cur = cur[k]
        del cur[path[-1]]

    return f


def _rename_event(obj: Json, i: int, new: str) -> None:
    old = obj["events"][i]["id"]
    obj["events"][i]["id"] = new
    for e in obj.get("edges", []):
        for end in ("src", "dst"):
            if e[end] == old:
                e[end] = new


def _code(marker: Path) -> str:
    return (
        "    return False\n"
        f"open({str(marker)!r}, 'w').write('code from a trace file ran')\n"
        "import os\n"
        f"os.makedirs({str(marker.parent / (MARKER + '.dir'))!r}, exist_ok=True)\n"
    )


def _plant(obj: Json, old: str, new: str) -> Json:
    """Replace every string equal to ``old`` anywhere in ``obj`` by ``new``."""
    if isinstance(obj, dict):
        return {k: _plant(v, old, new) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plant(v, old, new) for v in obj]
    return new if obj == old else obj


def _he_trace(s: Seeds, d: Path) -> Json:
    """The humaneval run as one native JSON object, with code planted in every answer."""
    from orchestrace import dumps
    from orchestrace.io import load

    p = d / ".he.jsonl"
    p.write_bytes(b"\n".join(s.he_lines) + b"\n")
    obj = json.loads(dumps(load(p, check=False)))
    p.unlink()
    return _plant(obj, s.he_answer, _code(d / MARKER))


def _he_lines(s: Seeds, d: Path) -> list[bytes]:
    return [
        _encode(_plant(json.loads(line), s.he_answer, _code(d / MARKER))) for line in s.he_lines
    ]


# ============================================================== JSON (.json) cases
# -- bytes, syntax, encodings
_bytes_case("json/empty", "invalid", lambda s: b"", "trace.json")
_bytes_case("json/whitespace", "invalid", lambda s: b"   \t  ", "trace.json")
_bytes_case("json/newlines", "invalid", lambda s: b"\n\n\r\n\n", "trace.json")
for _pct in (1, 10, 25, 50, 75, 90, 99):
    _bytes_case(
        f"json/truncated-{_pct}pct",
        "invalid",
        lambda s, p=_pct: _trace_bytes(s)[: len(_trace_bytes(s)) * p // 100],
        "trace.json",
    )
_bytes_case("json/truncated-last-byte", "invalid", lambda s: _trace_bytes(s)[:-1], "trace.json")
_bytes_case("json/bom", "any", lambda s: b"\xef\xbb\xbf" + _trace_bytes(s), "trace.json")
_bytes_case(
    "json/utf16", "invalid", lambda s: _trace_bytes(s).decode().encode("utf-16"), "trace.json"
)
_bytes_case(
    "json/utf32", "invalid", lambda s: _trace_bytes(s).decode().encode("utf-32"), "trace.json"
)
for _n, _size in ((0, 64), (1, 4096), (2, 100_000)):
    _bytes_case(
        f"json/binary-{_size}",
        "invalid",
        lambda s, n=_n, size=_size: s.rng(f"bin{n}").randbytes(size),
        "trace.json",
    )
_bytes_case("json/nul-bytes", "invalid", lambda s: b"\0" * 1000, "trace.json")
_bytes_case("json/gzip", "invalid", lambda s: gzip.compress(_trace_bytes(s), mtime=0), "trace.json")
_bytes_case(
    "json/nul-inside",
    "invalid",
    lambda s: _trace_bytes(s).replace(b'"e5"', b'"e\x005"', 1),
    "trace.json",
)
_bytes_case(
    "json/non-utf8-in-string",
    "invalid",
    lambda s: _trace_bytes(s).replace(b'"synthetic', b'"\xff\xfesynthetic', 1),
    "trace.json",
)
_bytes_case(
    "json/latin1-content",
    "invalid",
    lambda s: _trace_bytes(s).replace(b'"orchestrator"', b'"orchestr\xe9tor"'),
    "trace.json",
)
_bytes_case(
    "json/overlong-utf8",
    "invalid",
    lambda s: _trace_bytes(s).replace(b'"agent_1"', b'"agent_\xc0\xb1"'),
    "trace.json",
)
_bytes_case(
    "json/lone-surrogate-escape",
    "any",
    lambda s: _trace_bytes(s).replace(b'"synthetic', b'"\\ud800synthetic', 1),
    "trace.json",
)
_bytes_case("json/trailing-garbage", "invalid", lambda s: _trace_bytes(s) + b"xyz", "trace.json")
_bytes_case("json/two-documents", "invalid", lambda s: _trace_bytes(s) * 2, "trace.json")
_bytes_case("json/trailing-comma", "invalid", lambda s: _trace_bytes(s)[:-1] + b",}", "trace.json")
_bytes_case(
    "json/single-quotes",
    "invalid",
    lambda s: _trace_bytes(s).replace(b'"', b"'"),
    "trace.json",
)
_bytes_case("json/comment", "invalid", lambda s: b"// trace\n" + _trace_bytes(s), "trace.json")
_bytes_case(
    "json/crlf-pretty",
    "valid",
    lambda s: json.dumps(s.trace, indent=2).replace("\n", "\r\n").encode(),
    "trace.json",
)
_bytes_case(
    "json/jsonl-named-json", "any", lambda s: _run_bytes(s), "trace.json"
)  # a record stream with the wrong suffix
# -- wrong top level
for _nm, _doc in {
    "array": b"[]",
    "array-of-trace": None,
    "string": b'"trace"',
    "number": b"42",
    "null": b"null",
    "true": b"true",
    "empty-object": b"{}",
}.items():
    if _doc is None:
        _bytes_case(
            f"json/top-{_nm}", "invalid", lambda s: b"[" + _trace_bytes(s) + b"]", "trace.json"
        )
    else:
        _bytes_case(f"json/top-{_nm}", "invalid", lambda s, b=_doc: b, "trace.json")
# -- nesting, sizes
_json_case("json/deep-top", "invalid", lambda o: _deep())
_json_case("json/deep-object-top", "invalid", lambda o: _deep_obj())
_json_case("json/deep-attrs", "invalid", _set(("events", 3, "attrs"), {"x": _deep()}))
_json_case("json/deep-meta", "invalid", _set(("meta",), {"x": _deep_obj()}))
_json_case("json/deep-1000-attrs", "any", _set(("events", 3, "attrs"), {"x": _deep(1000)}))
_json_case("json/long-trace-id", "valid", _set(("trace_id",), "T" * 1_000_000))
_json_case("json/long-content", "valid", _set(("events", 3, "content"), "C" * 1_000_000))
_json_case("json/long-agent", "any", _set(("events", 3, "agent"), "A" * 1_000_000))
_json_case("json/long-event-id", "valid", lambda o: _rename_event(o, 3, "E" * 1_000_000))
_json_case("json/long-type", "invalid", _set(("events", 3, "type"), "X" * 1_000_000))
_json_case("json/long-attr-key", "any", _set(("events", 3, "attrs"), {"K" * 1_000_000: 1}))
_json_case(
    "json/many-attrs", "any", _set(("events", 3, "attrs"), {f"k{i}": i for i in range(100_000)})
)
_json_case("json/ansi-trace-id", "valid", _set(("trace_id",), "\x1b[31mRED\x1b[0m\x07\r\nFAKE: ok"))
_json_case("json/ansi-agent", "any", _set(("events", 3, "agent"), "\x1b[2J\x1b[Hagent\r"))
_json_case("json/ansi-event-id", "valid", lambda o: _rename_event(o, 3, "e\x1b[31m\x08\r\n3"))
_json_case("json/rtl-override-trace-id", "valid", _set(("trace_id",), "abc\u202edef\u2066"))
_json_case("json/nul-trace-id", "valid", _set(("trace_id",), "a\x00b"))
_json_case("json/empty-trace-id", "any", _set(("trace_id",), ""))
# -- duplicate keys
_bytes_case(
    "json/dup-key-events",
    "invalid",
    lambda s: _trace_bytes(s)[:-1] + b',"events":[]}',
    "trace.json",
)
_bytes_case(
    "json/dup-key-trace-id",
    "any",
    lambda s: b'{"trace_id":"first",' + _trace_bytes(s)[1:],
    "trace.json",
)
_bytes_case(
    "json/dup-key-event-id",
    "any",
    lambda s: _trace_bytes(s).replace(b'{"id":"e4",', b'{"id":"e4","id":"e5",', 1),
    "trace.json",
)
# -- wrong-typed fields
_WRONG: dict[str, tuple[tuple[Any, ...], Any]] = {
    "event-id-int": (("events", 3, "id"), 5),
    "event-id-null": (("events", 3, "id"), None),
    "event-t-string": (("events", 3, "t"), "0"),
    "event-t-null": (("events", 3, "t"), None),
    "event-t-bool": (("events", 3, "t"), True),
    "event-type-int": (("events", 3, "type"), 7),
    "event-type-null": (("events", 3, "type"), None),
    "event-agent-list": (("events", 3, "agent"), []),
    "event-agent-null": (("events", 3, "agent"), None),
    "event-dur-string": (("events", 3, "dur"), "1"),
    "event-step-float": (("events", 3, "step"), 1.5),
    "event-step-string": (("events", 3, "step"), "1"),
    "event-step-bool": (("events", 3, "step"), True),
    "event-tokens-string": (("events", 0, "tokens_in"), "10"),
    "event-tokens-float": (("events", 0, "tokens_in"), 1.5),
    "event-tokens-1e20": (("events", 0, "tokens_in"), 1e20),
    "event-cost-string": (("events", 0, "cost"), "x"),
    "event-attrs-list": (("events", 3, "attrs"), [1, 2]),
    "event-attrs-string": (("events", 3, "attrs"), "x"),
    "event-content-object": (("events", 3, "content"), {"a": 1}),
    "event-to-int": (("events", 1, "to"), 5),
    "event-trusted-string": (("events", 3, "trusted"), "yes"),
    "event-role-int": (("events", 3, "role"), 5),
    "event-decision-list": (("events", 1, "decision"), ["spawn"]),
    "event-item-string": (("events", 3), "e4"),
    "event-item-null": (("events", 3), None),
    "event-item-list": (("events", 3), [1, 2]),
    "events-object": (("events",), {"e1": {}}),
    "events-string": (("events",), "events"),
    "events-null": (("events",), None),
    "events-empty": (("events",), []),
    "edges-object": (("edges",), {}),
    "edges-ints": (("edges",), [1, 2]),
    "edge-src-int": (("edges", 0, "src"), 5),
    "edge-dst-null": (("edges", 0, "dst"), None),
    "edge-type-int": (("edges", 0, "type"), 3),
    "edge-item-string": (("edges", 0), "e1->e2"),
    "trace-id-int": (("trace_id",), 5),
    "trace-id-null": (("trace_id",), None),
    "task-id-list": (("task_id",), []),
    "rewards-list": (("rewards",), [1.0]),
    "rewards-string-value": (("rewards",), {"team": "x"}),
    "costs-string": (("costs",), "x"),
    "metrics-nested": (("metrics",), {"a": [1]}),
    "meta-list": (("meta",), [1, 2]),
    "meta-string": (("meta",), "x"),
    "schema-version-int": (("schema_version",), 5),
    "schema-version-future": (("schema_version",), "99.0"),
    "topology-int": (("topology",), 5),
    "topology-unknown": (("topology",), "ring"),
    "system-list": (("system",), ["a"]),
}
for _nm, (_path, _val) in _WRONG.items():
    _json_case(f"json/wrong-{_nm}", "invalid", _set(_path, _val))
# -- missing fields
for _nm, _path in {
    "event-id": ("events", 3, "id"),
    "event-type": ("events", 3, "type"),
    "event-t": ("events", 3, "t"),
    "event-agent": ("events", 3, "agent"),
    "edge-src": ("edges", 0, "src"),
    "trace-id": ("trace_id",),
    "events": ("events",),
}.items():
    _json_case(f"json/missing-{_nm}", "invalid", _delete(_path))
_json_case("json/missing-edges", "any", _delete(("edges",)))
_json_case("json/missing-task-id", "any", _delete(("task_id",)))
# -- unknown names
_json_case("json/unknown-event-type", "invalid", _set(("events", 3, "type"), "teleport"))
_json_case("json/unknown-edge-type", "invalid", _set(("edges", 0, "type"), "wormhole"))
_json_case("json/unknown-top-field", "invalid", _set(("zzz",), 1))
_json_case("json/unknown-event-field", "invalid", _set(("events", 3, "zzz"), 1))
_json_case("json/unknown-edge-field", "invalid", _set(("edges", 0, "zzz"), 1))
_json_case("json/unknown-decision", "invalid", _set(("events", 1, "decision"), "explode"))
# -- graph damage
_json_case("json/dangling-src", "invalid", _set(("edges", 0, "src"), "nope"))
_json_case("json/dangling-dst", "invalid", _set(("edges", 0, "dst"), "nope"))
_json_case(
    "json/self-edge",
    "invalid",
    lambda o: o["edges"].append({"src": "e5", "dst": "e5", "type": "causal"}),
)
_json_case(
    "json/cycle-2",
    "invalid",
    lambda o: o["edges"].append(
        {"src": o["edges"][0]["dst"], "dst": o["edges"][0]["src"], "type": "causal"}
    ),
)
_json_case(
    "json/cycle-long",
    "invalid",
    lambda o: o["edges"].append({"src": o["events"][-1]["id"], "dst": "e1", "type": "causal"}),
)
_json_case("json/dup-event-id", "invalid", _set(("events", 5, "id"), "e5"))
_json_case("json/all-dup-ids", "invalid", lambda o: [e.update(id="e1") for e in o["events"]])
_json_case("json/dup-edge", "any", lambda o: o["edges"].append(dict(o["edges"][0])))
_json_case("json/no-edges", "any", _set(("edges",), []))
_json_case("json/events-shuffled", "any", lambda o, s: s.rng("shuffle").shuffle(o["events"]))
_json_case("json/events-reversed", "any", lambda o: o["events"].reverse())
_json_case("json/edges-reversed", "any", lambda o: o["edges"].reverse())
_json_case("json/time-backwards", "any", _set(("events", -1, "t"), 0.0))
_json_case(
    "json/1000-dangling",
    "invalid",
    lambda o: o["edges"].extend(
        {"src": f"x{i}", "dst": "e1", "type": "causal"} for i in range(1000)
    ),
)
# -- numbers
_NUM: dict[str, tuple[tuple[Any, ...], Any, str]] = {
    "negative-t": (("events", 3, "t"), -1.0, "invalid"),
    "negative-dur": (("events", 3, "dur"), -1.0, "invalid"),
    "negative-step": (("events", 3, "step"), -1, "invalid"),
    "negative-tokens-in": (("events", 0, "tokens_in"), -50, "invalid"),
    "negative-tokens-out": (("events", 0, "tokens_out"), -1, "invalid"),
    "negative-cost": (("events", 0, "cost"), -0.5, "invalid"),
    "nan-t": (("events", 3, "t"), Raw("NaN"), "invalid"),
    "nan-dur": (("events", 3, "dur"), Raw("NaN"), "invalid"),
    "nan-cost": (("events", 0, "cost"), Raw("NaN"), "invalid"),
    "nan-reward": (("rewards",), {"team": Raw("NaN")}, "invalid"),
    "nan-costs": (("costs",), {"tokens": Raw("NaN")}, "invalid"),
    "nan-metric": (("metrics",), {"x": Raw("NaN")}, "invalid"),
    "inf-t": (("events", 3, "t"), Raw("Infinity"), "invalid"),
    "inf-dur": (("events", 3, "dur"), Raw("Infinity"), "invalid"),
    "neg-inf-t": (("events", 3, "t"), Raw("-Infinity"), "invalid"),
    "inf-reward": (("rewards",), {"team": Raw("Infinity")}, "invalid"),
    "1e999-t": (("events", 3, "t"), Raw("1e999"), "invalid"),
    "1e999-dur": (("events", 3, "dur"), Raw("1e999"), "invalid"),
    "1e999-tokens": (("events", 0, "tokens_in"), Raw("1e999"), "invalid"),
    "1e999-reward": (("rewards",), {"team": Raw("1e999")}, "invalid"),
    "minus-1e999-t": (("events", 3, "t"), Raw("-1e999"), "invalid"),
    "1e308-t": (("events", -1, "t"), 1e308, "any"),
    "1e308-dur": (("events", 3, "dur"), 1e308, "any"),
    "1e-320-dur": (("events", 3, "dur"), 1e-320, "any"),
    "step-2p63": (("events", 3, "step"), 2**63, "any"),
    "step-2p63-minus-1": (("events", 3, "step"), 2**63 - 1, "any"),
    "step-2p64": (("events", 3, "step"), 2**64, "any"),
    "step-10p30": (("events", 3, "step"), 10**30, "any"),
    "step-minus-2p63-minus-1": (("events", 3, "step"), -(2**63) - 1, "invalid"),
    "tokens-in-2p63": (("events", 0, "tokens_in"), 2**63, "any"),
    "tokens-in-2p63-minus-1": (("events", 0, "tokens_in"), 2**63 - 1, "any"),
    "tokens-out-2p64": (("events", 0, "tokens_out"), 2**64, "any"),
    "tokens-both-2p62": (("events", 0), None, "any"),  # set below
    "tokens-10p400": (("events", 0, "tokens_in"), Raw("1" + "0" * 400), "any"),
    "cost-1e308": (("events", 0, "cost"), 1e308, "any"),
    "reward-1e308": (("rewards",), {"team": 1e308}, "any"),
}
for _nm, (_path, _val, _exp) in _NUM.items():
    if _nm == "tokens-both-2p62":
        _json_case(
            f"json/{_nm}",
            _exp,
            lambda o: [e.update(tokens_in=2**62, tokens_out=2**62) for e in o["events"]],
        )
    else:
        _json_case(f"json/{_nm}", _exp, _set(_path, _val))
_json_case("json/valid", "valid", lambda o: None)
_json_case("json/run-valid", "valid", lambda o: None, base="run")
_json_case("json/upstream", "any", lambda o, s: _upstream(s))


def _upstream(s: Seeds) -> Json:
    from orchestrace import loads
    from orchestrace.io import to_upstream

    return to_upstream(loads(_encode(s.trace)))


_json_case("json/upstream-no-events", "invalid", lambda o, s: {**_upstream(s), "events": []})
_json_case(
    "json/upstream-bad-edge",
    "invalid",
    lambda o, s: {**_upstream(s), "edges": [{"source": "x", "target": "y"}]},
)


def _upstream_marker(key: str, value: Any) -> Callable[[Json, Seeds], Json]:
    """A survey-schema trace whose export marker (``attrs.x_orchestrace_*``) is hostile."""

    def make(o: Json, s: Seeds) -> Json:
        up = _upstream(s)
        ev = up["events"][0 if key == "x_orchestrace_trace" else 1]
        ev["attrs"] = {**(ev.get("attrs") or {}), key: value}
        return up

    return make


for _nm, (_key, _val) in {
    "type-dict": ("x_orchestrace_type", {}),
    "type-list": ("x_orchestrace_type", [1]),
    "type-int": ("x_orchestrace_type", 5),
    "type-unknown": ("x_orchestrace_type", "teleport"),
    "trace-string": ("x_orchestrace_trace", "x"),
    "trace-meta-list": ("x_orchestrace_trace", {"meta": [1], "topology": 5}),
    "trace-deep": ("x_orchestrace_trace", {"meta": {"x": _deep()}}),
}.items():
    _json_case(f"json/upstream-marker-{_nm}", "any", _upstream_marker(_key, _val))


# -- recorded-run specific fields: attrs.part, meta.task, meta.result
def _spawn_index(o: Json) -> int:
    return next(i for i, e in enumerate(o["events"]) if (e.get("attrs") or {}).get("part"))


def _part(value: Any) -> Callable[[Json], None]:
    def f(o: Json) -> None:
        o["events"][_spawn_index(o)]["attrs"]["part"] = value

    return f


def _part_field(key: str, value: Any) -> Callable[[Json], None]:
    def f(o: Json) -> None:
        part = o["events"][_spawn_index(o)]["attrs"]["part"]
        if value is _DEL:
            del part[key]
        else:
            part[key] = value

    return f


_DEL = object()
_PARTS: dict[str, Callable[[Json], None]] = {
    "part-no-lo": _part_field("lo", _DEL),
    "part-no-hi": _part_field("hi", _DEL),
    "part-lo-string": _part_field("lo", "x"),
    "part-hi-float": _part_field("hi", 1.5),
    "part-lo-negative": _part_field("lo", -5),
    "part-lo-gt-hi": _part_field("lo", 10_000),
    "part-hi-huge": _part_field("hi", 10**30),
    "part-hi-2p63": _part_field("hi", 2**63),
    "part-hi-list": _part_field("hi", [1]),
    "part-index-null": _part_field("index", None),
    "part-string": _part("x"),
    "part-list": _part([0, 16]),
    "part-null": _part(None),
    "part-empty": _part({}),
}
for _nm, _fn in _PARTS.items():
    _json_case(f"json/run-{_nm}", "any", _fn, base="run")


def _task(key: str, value: Any) -> Callable[[Json], None]:
    def f(o: Json) -> None:
        if value is _DEL:
            del o["meta"]["task"][key]
        else:
            o["meta"]["task"][key] = value

    return f


_TASKS: dict[str, Callable[[Json], None]] = {
    "task-size-1e8": _task("size", 100_000_000),
    "task-size-10p30": _task("size", 10**30),
    "task-size-string": _task("size", "x"),
    "task-size-object": _task("size", {}),
    "task-size-negative": _task("size", -1),
    "task-size-zero": _task("size", 0),
    "task-size-float": _task("size", 1.5),
    "task-size-null": _task("size", None),
    "task-size-1e999": _task("size", Raw("1e999")),
    "task-seed-huge": _task("seed", 2**70),
    "task-seed-negative": _task("seed", -1),
    "task-seed-string": _task("seed", "x"),
    "task-name-unknown": _task("name", "nope-v0"),
    "task-name-int": _task("name", 5),
    "task-no-name": _task("name", _DEL),
    "task-string": _set(("meta", "task"), "x"),
    "task-list": _set(("meta", "task"), [1]),
    "result-answer-huge-int": _set(("meta", "result", "answer"), 10**400),
    "result-answer-object": _set(("meta", "result", "answer"), {"a": [1]}),
    "result-string": _set(("meta", "result"), "x"),
    "config-string": _set(("meta", "config"), "x"),
    "config-agents-huge": _set(("meta", "config", "agents"), 10**9),
    "config-options-bad": _set(("meta", "config", "options"), {"rounds": -1, "gossip": "nan"}),
}
for _nm, _fn in _TASKS.items():
    _json_case(f"json/run-{_nm}", "any", _fn, base="run")
_json_case(
    "json/run-worker-stop",
    "any",
    lambda o: (
        o["meta"].pop("result", None),
        o["events"].append(
            {
                "id": "ex",
                "t": o["events"][-1]["t"],
                "type": "orchestrator_decision",
                "agent": "worker1",
                "dur": 0.0,
                "decision": "stop",
                "step": 9,
                "content": "done",
                "attrs": {"answer": 16385},
            }
        ),
    ),
    base="run",
)
_case(
    "json/humaneval-code",
    "any",
    lambda s, d: _write(d, "he.json", _encode(_he_trace(s, d))),
    marker=True,
    note="code planted in every recorded answer must never run",
)

# ============================================================== JSONL record streams


def _stream_case(
    name: str,
    expect: str,
    make: Callable[[list[bytes]], list[bytes] | bytes],
    fname: str = "run.jsonl",
    **kw: Any,
) -> None:
    def build(s: Seeds, d: Path) -> Path:
        out = make(list(s.run_lines))
        data = out if isinstance(out, bytes) else b"\n".join(out) + b"\n"
        return _write(d, fname, data)

    _case(name, expect, build, **kw)


def _edit_line(
    kind: str, n: int, fn: Callable[[Json], Any]
) -> Callable[[list[bytes]], list[bytes]]:
    """Edit the ``n``-th record of ``kind`` (``header``, ``event``, ``edge``, ``footer``)."""

    def f(lines: list[bytes]) -> list[bytes]:
        idx = [i for i, ln in enumerate(lines) if ln.startswith(b'{"' + kind.encode())][n]
        rec = json.loads(lines[idx])
        r = fn(rec[kind])
        if r is not None:
            rec[kind] = r
        lines[idx] = _encode(rec)
        return lines

    return f


def _upd(**kw: Any) -> Callable[[Json], None]:
    return lambda x: x.update(kw)


def _cut(frac: float) -> Callable[[list[bytes]], bytes]:
    def f(lines: list[bytes]) -> bytes:
        data = b"\n".join(lines) + b"\n"
        return data[: int(len(data) * frac)]

    return f


def _cut_in(kind: str) -> Callable[[list[bytes]], bytes]:
    def f(lines: list[bytes]) -> bytes:
        idx = [i for i, ln in enumerate(lines) if ln.startswith(b'{"' + kind.encode())][-1]
        head = b"\n".join(lines[:idx]) + (b"\n" if idx else b"")
        return head + lines[idx][: len(lines[idx]) // 2]

    return f


_stream_case("stream/valid", "valid", lambda ls: ls)
_stream_case("stream/valid-ndjson", "valid", lambda ls: ls, fname="run.ndjson")
_stream_case("stream/valid-no-suffix", "any", lambda ls: ls, fname="run")
_stream_case("stream/valid-txt-suffix", "any", lambda ls: ls, fname="run.txt")
_stream_case("stream/named-json", "any", lambda ls: ls, fname="run.json")
_stream_case("stream/crlf", "any", lambda ls: b"\r\n".join(ls) + b"\r\n")
_stream_case("stream/bom", "any", lambda ls: b"\xef\xbb\xbf" + b"\n".join(ls))
_stream_case("stream/blank-lines", "any", lambda ls: b"\n\n".join(ls))
_stream_case("stream/whitespace-lines", "any", lambda ls: b"\n  \t \n".join(ls))
_stream_case("stream/no-final-newline", "valid", lambda ls: b"\n".join(ls))
_stream_case("stream/header-only", "truncated", lambda ls: ls[:1])
_stream_case("stream/no-footer", "truncated", lambda ls: ls[:-1])
_stream_case("stream/cut-in-header", "invalid", _cut_in("header"))
_stream_case("stream/cut-in-event", "truncated", _cut_in("event"))
_stream_case("stream/cut-in-edge", "truncated", _cut_in("edge"))
_stream_case("stream/cut-in-footer", "truncated", _cut_in("footer"))
for _f in (0.3, 0.5, 0.8):
    _stream_case(f"stream/cut-{int(_f * 100)}pct", "truncated", _cut(_f))
_stream_case(
    "stream/event-and-edge",
    "invalid",
    lambda ls: [
        *ls[:3],
        ls[3][:-1] + b',"edge":{"src":"e1","dst":"e2","type":"causal"}}',
        *ls[4:],
    ],
)
_stream_case("stream/bad-header-trace-id", "invalid", _edit_line("header", 0, _upd(trace_id=1)))
_stream_case("stream/bad-header-meta", "invalid", _edit_line("header", 0, _upd(meta=[1])))
_stream_case("stream/bad-header-unknown-field", "invalid", _edit_line("header", 0, _upd(zzz=1)))
_stream_case("stream/bad-header-syntax", "invalid", lambda ls: [ls[0][:-3] + b"}", *ls[1:]])
_stream_case("stream/no-header", "invalid", lambda ls: ls[1:])
_stream_case("stream/dup-header", "invalid", lambda ls: [ls[0], *ls[1:5], ls[0], *ls[5:]])
_stream_case("stream/two-footers", "invalid", lambda ls: [*ls, ls[-1]])
_stream_case("stream/footer-first", "invalid", lambda ls: [ls[0], ls[-1], *ls[1:-1]])
_stream_case("stream/footer-twice-mid", "invalid", lambda ls: [*ls[:5], ls[-1], *ls[5:]])
_stream_case("stream/two-runs", "any", lambda ls: [*ls, *ls], multi=True)
for _nm, _junk in {
    "garbage": b"this is not json",
    "binary": bytes(range(256)).replace(b"\n", b""),
    "non-utf8": b'{"event":{"id":"\xff\xfe"}}',
    "nul": b"\0" * 50,
    "array": b"[1,2]",
    "number": b"5",
    "null": b"null",
    "empty-object": b"{}",
    "unknown-record": b'{"foo":{}}',
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "long-string": b'{"event":"' + b"x" * 1_000_000 + b'"}',
}.items():
    _stream_case(f"stream/line-{_nm}", "invalid", lambda ls, j=_junk: [*ls[:4], j, *ls[4:]])
_stream_case("stream/garbage-last-line", "invalid", lambda ls: [*ls, b"garbage"])
_EV = {
    "event-unknown-field": _upd(zzz=1),
    "event-unknown-type": _upd(type="teleport"),
    "event-t-string": _upd(t="x"),
    "event-step-2p63": _upd(step=2**63),
    "event-step-10p30": _upd(step=10**30),
    "event-tokens-2p64": _upd(tokens_in=2**64),
    "event-tokens-negative": _upd(tokens_in=-50),
    "event-nan-t": _upd(t=Raw("NaN")),
    "event-1e999-dur": _upd(dur=Raw("1e999")),
    "event-inf-cost": _upd(cost=Raw("Infinity")),
    "event-deep-attrs": _upd(attrs={"x": _deep()}),
    "event-long-content": _upd(content="C" * 1_000_000),
    "event-ansi-agent": _upd(agent="\x1b[31mred\x1b[0m\r\nFAKE"),
    "event-dup-id": _upd(id="e1"),
    "event-id-null": _upd(id=None),
}
for _nm, _fn in _EV.items():
    _exp = (
        "any"
        if _nm in ("event-step-2p63", "event-step-10p30", "event-tokens-2p64")
        else ("valid" if _nm in ("event-long-content",) else "invalid")
    )
    if _nm == "event-ansi-agent":
        _exp = "any"
    _stream_case(f"stream/{_nm}", _exp, _edit_line("event", 2, _fn))
_stream_case("stream/dangling-edge", "invalid", _edit_line("edge", 0, _upd(src="nope")))
_stream_case("stream/self-edge", "invalid", _edit_line("edge", 0, lambda e: e.update(dst=e["src"])))
_stream_case(
    "stream/cycle",
    "invalid",
    lambda ls: [
        *ls[:-1],
        b'{"edge":{"src":"e'
        + str(sum(1 for x in ls if x.startswith(b'{"event"'))).encode()
        + b'","dst":"e1","type":"causal"}}',
        ls[-1],
    ],
)
_stream_case("stream/edge-unknown-type", "invalid", _edit_line("edge", 0, _upd(type="wormhole")))
_stream_case(
    "stream/edges-first",
    "any",
    lambda ls: [ls[0], *sorted(ls[1:-1], key=lambda x: not x.startswith(b'{"edge"')), ls[-1]],
)
_stream_case(
    "stream/long-trace-id", "valid", _edit_line("header", 0, _upd(trace_id="T" * 1_000_000))
)
_stream_case(
    "stream/ansi-trace-id",
    "valid",
    _edit_line("header", 0, _upd(trace_id="\x1b[31mRED\x1b[0m\x07\r\nFAKE: ok")),
)


def _hdr_task(key: str, value: Any) -> Callable[[Json], None]:
    return lambda h: h["meta"]["task"].__setitem__(key, value)


for _nm, _val in {
    "1e8": 100_000_000,
    "10p30": 10**30,
    "string": "x",
    "object": {},
    "negative": -1,
}.items():
    _stream_case(f"stream/task-size-{_nm}", "any", _edit_line("header", 0, _hdr_task("size", _val)))
for _nm, _fn in {
    "part-no-lo": lambda e: e["attrs"]["part"].pop("lo"),
    "part-lo-string": lambda e: e["attrs"]["part"].update(lo="x"),
    "part-hi-float": lambda e: e["attrs"]["part"].update(hi=1.5),
}.items():
    _stream_case(f"stream/{_nm}", "any", _edit_line("event", 1, _fn))
_stream_case(
    "stream/footer-rewards-nan",
    "invalid",
    _edit_line("footer", 0, _upd(rewards={"team": Raw("NaN")})),
)
_stream_case(
    "stream/interleaved-writers",
    "invalid",
    lambda ls: [
        *ls[:6],
        ls[6][: len(ls[6]) // 2] + ls[0],
        *ls[7:],
    ],
)
_case(
    "stream/humaneval-code",
    "any",
    lambda s, d: _write(d, "he.jsonl", b"\n".join(_he_lines(s, d)) + b"\n"),
    marker=True,
)
_case(
    "stream/humaneval-code-no-footer",
    "truncated",
    lambda s, d: _write(d, "he.jsonl", b"\n".join(_he_lines(s, d)[:-1]) + b"\n"),
    marker=True,
)

# ============================================================== JSONL, one trace per line


def _lines_case(
    name: str, expect: str, make: Callable[[list[bytes]], list[bytes] | bytes], **kw: Any
) -> None:
    def build(s: Seeds, d: Path) -> Path:
        out = make([_encode(t) for t in s.multi])
        return _write(d, "traces.jsonl", out if isinstance(out, bytes) else b"\n".join(out) + b"\n")

    _case(name, expect, build, **kw)


_lines_case("lines/valid", "valid", lambda ls: ls, multi=True)
_lines_case("lines/single", "valid", lambda ls: ls[:1])
_lines_case("lines/blank-lines", "any", lambda ls: b"\n\n\n".join(ls) + b"\n\n")
_lines_case("lines/crlf", "any", lambda ls: b"\r\n".join(ls) + b"\r\n")
_lines_case("lines/dup-trace-ids", "any", lambda ls: [ls[0], ls[0]])
_lines_case("lines/last-cut", "truncated", lambda ls: b"\n".join(ls)[:-40])
_lines_case("lines/first-cut", "invalid", lambda ls: [ls[0][:100], *ls[1:]])
_lines_case("lines/garbage-middle", "invalid", lambda ls: [ls[0], b"garbage", *ls[1:]])
_lines_case("lines/binary-middle", "invalid", lambda ls: [ls[0], b"\x80\x81\xff\x00", *ls[1:]])
_lines_case(
    "lines/wrong-typed-middle",
    "invalid",
    lambda ls: [ls[0], ls[1].replace(b'"t":0.0', b'"t":"0"', 1), ls[2]],
)
_lines_case(
    "lines/dangling-middle",
    "invalid",
    lambda ls: [ls[0], ls[1].replace(b'"src":"e1"', b'"src":"nope"', 1), ls[2]],
)
_lines_case(
    "lines/step-2p63",
    "any",
    lambda ls: [ls[0], ls[1].replace(b'"step":0', b'"step":9223372036854775808', 1)],
)
_lines_case(
    "lines/header-after-trace", "invalid", lambda ls: [ls[0], b'{"header":{"trace_id":"x"}}']
)
_lines_case("lines/array-line", "invalid", lambda ls: [ls[0], b"[" + ls[1] + b"]"])
_lines_case("lines/deep-line", "invalid", lambda ls: [ls[0], b"[" * 100_000 + b"]" * 100_000])
_lines_case("lines/empty-trace", "invalid", lambda ls: [ls[0], b'{"trace_id":"x","events":[]}'])

# ============================================================== Parquet datasets


def _pq_case(name: str, expect: str, edit: Callable[[Path, Seeds], None], **kw: Any) -> None:
    """A dataset copied from the seed, then edited in place by ``edit(dir, seeds)``."""

    def build(s: Seeds, d: Path) -> Path:
        out = d / "data.parquet"
        shutil.copytree(s.parquet, out)
        edit(out, s)
        return out

    _case(name, expect, build, **kw)


def _table(name: str, fn: Callable[[Any], Any]) -> Callable[[Path, Seeds], None]:
    """Rewrite ``name`` (``events``, ``edges`` or ``traces``) with ``fn(table) -> table``."""

    def edit(d: Path, s: Seeds) -> None:
        import pyarrow.parquet as pq

        p = d / f"{name}.parquet"
        pq.write_table(fn(pq.read_table(p)), p)

    return edit


def _drop(col: str) -> Callable[[Any], Any]:
    return lambda t: t.drop_columns([col])


def _col(
    col: str, values: Callable[[list[Any]], list[Any]], typ: Any = None
) -> Callable[[Any], Any]:
    def f(t: Any) -> Any:
        import pyarrow as pa

        i = t.schema.get_field_index(col)
        vals = values(t.column(col).to_pylist())
        arr = pa.array(vals, type=typ if typ is not None else t.schema.field(col).type)
        return t.set_column(i, pa.field(col, arr.type), arr)

    return f


def _at(i: int, v: Any) -> Callable[[list[Any]], list[Any]]:
    def f(vals: list[Any]) -> list[Any]:
        vals[i] = v
        return vals

    return f


def _pa_type(name: str) -> Any:
    import pyarrow as pa

    return getattr(pa, name)()


def _col_typed(
    col: str, values: Callable[[list[Any]], list[Any]], typ: str
) -> Callable[[Any], Any]:
    return lambda t: _col(col, values, _pa_type(typ))(t)


_pq_case("parquet/valid", "valid", lambda d, s: None)


def _multi(d: Path, s: Seeds) -> None:
    from orchestrace import loads
    from orchestrace.io import read_parquet, write_parquet

    traces = [*read_parquet(d), loads(_encode(s.trace))]
    shutil.rmtree(d)
    write_parquet(traces, d)


_pq_case("parquet/valid-two-traces", "valid", _multi, multi=True)
for _c in ("agent", "id", "type", "t", "trace_id", "step", "attrs", "dur"):
    _pq_case(f"parquet/events-missing-{_c}", "invalid", _table("events", _drop(_c)))
_pq_case("parquet/edges-missing-src", "invalid", _table("edges", _drop("src")))
_pq_case("parquet/traces-missing-meta", "invalid", _table("traces", _drop("meta")))
_pq_case("parquet/traces-missing-trace-id", "invalid", _table("traces", _drop("trace_id")))
for _c in ("id", "type", "t", "agent", "trace_id"):
    _pq_case(f"parquet/events-null-{_c}", "invalid", _table("events", _col(_c, _at(2, None))))
_pq_case(
    "parquet/events-null-step", "any", _table("events", _col("step", _at(2, None)))
)  # optional
_pq_case("parquet/edges-null-dst", "invalid", _table("edges", _col("dst", _at(0, None))))
_pq_case(
    "parquet/events-t-string",
    "invalid",
    _table("events", _col_typed("t", lambda v: [str(x) for x in v], "string")),
)
_pq_case(
    "parquet/events-step-string",
    "invalid",
    _table("events", _col_typed("step", lambda v: [str(x) for x in v], "string")),
)
_pq_case(
    "parquet/events-type-int",
    "invalid",
    _table("events", _col_typed("type", lambda v: list(range(len(v))), "int64")),
)
_pq_case("parquet/events-step-negative", "invalid", _table("events", _col("step", _at(2, -4))))
_pq_case(
    "parquet/events-step-2p63",
    "any",
    _table(
        "events",
        _col_typed("step", lambda v: [2**63 if i == 2 else x for i, x in enumerate(v)], "uint64"),
    ),
)
_pq_case(
    "parquet/events-tokens-uint64-max",
    "any",
    _table("events", _col_typed("tokens_in", lambda v: [2**64 - 1 for _ in v], "uint64")),
)
_pq_case(
    "parquet/events-tokens-negative", "invalid", _table("events", _col("tokens_in", _at(0, -5)))
)
_pq_case("parquet/events-dur-nan", "invalid", _table("events", _col("dur", _at(2, float("nan")))))
_pq_case("parquet/events-t-inf", "invalid", _table("events", _col("t", _at(2, float("inf")))))
_pq_case("parquet/events-t-negative", "invalid", _table("events", _col("t", _at(2, -1.0))))
_pq_case("parquet/events-attrs-bad-json", "invalid", _table("events", _col("attrs", _at(0, "{"))))
_pq_case("parquet/events-attrs-list", "invalid", _table("events", _col("attrs", _at(0, "[1]"))))
_pq_case(
    "parquet/events-attrs-deep",
    "invalid",
    _table("events", _col("attrs", _at(0, '{"x":' + "[" * 100_000 + "]" * 100_000 + "}"))),
)
_pq_case(
    "parquet/events-unknown-type", "invalid", _table("events", _col("type", _at(2, "teleport")))
)
_pq_case("parquet/events-dup-id", "invalid", _table("events", _col("id", _at(2, "e1"))))
_pq_case("parquet/events-long-id", "any", _table("events", _col("agent", _at(2, "A" * 1_000_000))))
_pq_case(
    "parquet/events-extra-column",
    "any",
    _table("events", lambda t: t.append_column("zzz", _pa_array([1] * t.num_rows))),
)
_pq_case("parquet/events-zero-rows", "invalid", _table("events", lambda t: t.slice(0, 0)))
_pq_case(
    "parquet/events-other-trace-id",
    "invalid",
    _table("events", _col("trace_id", lambda v: ["other"] * len(v))),
)
_pq_case("parquet/events-attrs-list-type", "invalid", _table("events", lambda t: _list_attrs(t)))
_pq_case("parquet/edges-dangling", "invalid", _table("edges", _col("src", _at(0, "nope"))))
_pq_case(
    "parquet/edges-self",
    "invalid",
    _table("edges", lambda t: _col("dst", lambda v: t.column("src").to_pylist())(t)),
)
_pq_case("parquet/edges-unknown-type", "invalid", _table("edges", _col("type", _at(0, "wormhole"))))
_pq_case("parquet/edges-zero-rows", "any", _table("edges", lambda t: t.slice(0, 0)))
_pq_case("parquet/traces-meta-list", "invalid", _table("traces", _col("meta", _at(0, "[1,2]"))))
_pq_case("parquet/traces-meta-bad-json", "invalid", _table("traces", _col("meta", _at(0, "{"))))
_pq_case("parquet/traces-meta-null", "any", _table("traces", _col("meta", _at(0, None))))
_pq_case(
    "parquet/traces-topology-ring", "invalid", _table("traces", _col("topology", _at(0, "ring")))
)
_pq_case(
    "parquet/traces-costs-nan",
    "invalid",
    _table("traces", _col("costs", _at(0, [("tokens", float("nan"))]))),
)
_pq_case(
    "parquet/traces-rewards-inf",
    "invalid",
    _table("traces", _col("rewards", _at(0, [("team", float("inf"))]))),
)
_pq_case("parquet/traces-n-events-wrong", "any", _table("traces", _col("n_events", _at(0, 999))))
_pq_case("parquet/traces-zero-rows", "invalid", _table("traces", lambda t: t.slice(0, 0)))
_pq_case("parquet/traces-two-rows-same-id", "invalid", _table("traces", lambda t: _concat(t, t)))
_pq_case(
    "parquet/traces-schema-future",
    "invalid",
    _table("traces", _col("schema_version", _at(0, "99.0"))),
)
_pq_case(
    "parquet/traces-ansi-id", "any", lambda d, s: _retrace(d, "\x1b[31mRED\x1b[0m\r\nFAKE: ok")
)
_pq_case("parquet/traces-long-id", "any", lambda d, s: _retrace(d, "T" * 1_000_000))


def _pa_array(vals: list[Any]) -> Any:
    import pyarrow as pa

    return pa.array(vals)


def _concat(a: Any, b: Any) -> Any:
    import pyarrow as pa

    return pa.concat_tables([a, b])


def _list_attrs(t: Any) -> Any:
    import pyarrow as pa

    i = t.schema.get_field_index("attrs")
    arr = pa.array([[1, 2] for _ in range(t.num_rows)])
    return t.set_column(i, pa.field("attrs", arr.type), arr)


def _retrace(d: Path, new: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for name in ("events", "edges", "traces"):
        p = d / f"{name}.parquet"
        t = pq.read_table(p)
        i = t.schema.get_field_index("trace_id")
        t = t.set_column(i, t.schema.field(i), pa.array([new] * t.num_rows, pa.string()))
        pq.write_table(t, p)


def _meta_edit(fn: Callable[[Json], None]) -> Callable[[Path, Seeds], None]:
    def f(vals: list[Any]) -> list[Any]:
        m = json.loads(vals[0])
        fn(m)
        return [_encode(m).decode("utf-8", "surrogatepass"), *vals[1:]]

    return _table("traces", _col("meta", f))


_pq_case("parquet/task-size-1e8", "any", _meta_edit(lambda m: m["task"].update(size=100_000_000)))
_pq_case("parquet/task-size-10p30", "any", _meta_edit(lambda m: m["task"].update(size=10**30)))
_pq_case("parquet/task-size-string", "any", _meta_edit(lambda m: m["task"].update(size="x")))


def _pq_attrs_part(vals: list[Any]) -> list[Any]:
    for i, v in enumerate(vals):
        a = json.loads(v) if v else {}
        if "part" in a:
            a["part"] = {"index": 0, "lo": "x"}
            vals[i] = json.dumps(a)
            break
    return vals


_pq_case("parquet/attrs-part-malformed", "any", _table("events", _col("attrs", _pq_attrs_part)))


def _pq_he(d: Path, s: Seeds) -> None:
    from orchestrace import loads
    from orchestrace.io import write_parquet

    obj = _he_trace(s, d.parent)
    shutil.rmtree(d)
    write_parquet([loads(_encode(obj), check=False)], d)


_pq_case("parquet/humaneval-code", "any", _pq_he, marker=True)


def _replace_file(name: str, make: Callable[[Path], None]) -> Callable[[Path, Seeds], None]:
    def edit(d: Path, s: Seeds) -> None:
        p = d / name
        p.unlink()
        make(p)

    return edit


_pq_case(
    "parquet/events-is-directory", "invalid", _replace_file("events.parquet", lambda p: p.mkdir())
)
_pq_case(
    "parquet/events-empty-file",
    "invalid",
    _replace_file("events.parquet", lambda p: p.write_bytes(b"")),
)
_pq_case(
    "parquet/events-garbage",
    "invalid",
    _replace_file("events.parquet", lambda p: p.write_bytes(b"PAR1" + b"\x00" * 100 + b"PAR1")),
)
_pq_case(
    "parquet/events-json",
    "invalid",
    _replace_file("events.parquet", lambda p: p.write_bytes(b'{"a":1}')),
)


def _truncate_file(name: str) -> Callable[[Path, Seeds], None]:
    def edit(d: Path, s: Seeds) -> None:
        p = d / name
        data = p.read_bytes()
        p.write_bytes(data[: len(data) // 2])

    return edit


def _flip_file(name: str) -> Callable[[Path, Seeds], None]:
    def edit(d: Path, s: Seeds) -> None:
        p = d / name
        data = bytearray(p.read_bytes())
        rng = s.rng(f"flip-{name}")
        for _ in range(20):
            i = rng.randrange(4, len(data) - 4)
            data[i] ^= 1 << rng.randrange(8)
        p.write_bytes(bytes(data))

    return edit


_pq_case("parquet/events-truncated", "invalid", _truncate_file("events.parquet"))
_pq_case("parquet/traces-truncated", "invalid", _truncate_file("traces.parquet"))
_pq_case("parquet/events-bit-flips", "any", _flip_file("events.parquet"))
_pq_case("parquet/edges-bit-flips", "any", _flip_file("edges.parquet"))
_pq_case("parquet/missing-traces", "invalid", lambda d, s: (d / "traces.parquet").unlink())
_pq_case("parquet/missing-edges", "invalid", lambda d, s: (d / "edges.parquet").unlink())
_pq_case("parquet/missing-events", "invalid", lambda d, s: (d / "events.parquet").unlink())
_pq_case("parquet/extra-file", "any", lambda d, s: (d / "notes.txt").write_text("mine"))
_pq_case(
    "parquet/events-symlink-dangling",
    "invalid",
    _replace_file("events.parquet", lambda p: p.symlink_to(p.parent / "gone")),
)
_pq_case(
    "parquet/events-symlink-dev-null",
    "invalid",
    _replace_file("events.parquet", lambda p: p.symlink_to("/dev/null")),
)
_case("parquet/empty-dir", "invalid", lambda s, d: _mkdir(d / "empty.parquet"))
_case("parquet/regular-file", "invalid", lambda s, d: _write(d, "file.parquet", _trace_bytes(s)))
_case("parquet/dir-no-suffix", "valid", lambda s, d: _copytree(s.parquet, d / "dataset"))


def _mkdir(p: Path) -> Path:
    p.mkdir()
    return p


def _copytree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


# ============================================================== odd paths (safe in-process)
_case("path/missing.json", "invalid", lambda s, d: d / "missing.json")
_case("path/missing.jsonl", "invalid", lambda s, d: d / "missing.jsonl")
_case("path/missing.parquet", "invalid", lambda s, d: d / "missing.parquet")
_case("path/missing-no-suffix", "invalid", lambda s, d: d / "missing")
_case("path/missing-parent", "invalid", lambda s, d: d / "nodir" / "t.json")
_case("path/parent-is-file", "invalid", lambda s, d: _write(d, "afile", b"x") / "t.json")


def _symlink(d: Path, name: str, target: str | Path) -> Path:
    p = d / name
    p.symlink_to(target)
    return p


_case("path/dangling-symlink.json", "invalid", lambda s, d: _symlink(d, "t.json", d / "gone.json"))
_case("path/dangling-symlink.jsonl", "invalid", lambda s, d: _symlink(d, "t.jsonl", d / "gone"))
_case(
    "path/symlink-loop.json",
    "invalid",
    lambda s, d: (_symlink(d, "b.json", d / "a.json"), _symlink(d, "a.json", d / "b.json"))[1],
)
_case(
    "path/symlink-to-valid.json",
    "valid",
    lambda s, d: _symlink(d, "link.json", _write(d, "real.json", _trace_bytes(s))),
)
_case("path/dir.json", "invalid", lambda s, d: _mkdir(d / "dir.json"))
_case("path/dir.jsonl", "invalid", lambda s, d: _mkdir(d / "dir.jsonl"))
_case("path/dir-empty", "invalid", lambda s, d: _mkdir(d / "somedir"))
_case(
    "path/dir-with-files",
    "invalid",
    lambda s, d: (_mkdir(d / "mine"), _write(d / "mine", "notes.txt", b"precious"))[0],
)
_case("path/dot", "invalid", lambda s, d: Path("."))
_case("path/root", "invalid", lambda s, d: Path("/"))
_case("path/no-suffix-json", "any", lambda s, d: _write(d, "trace", _trace_bytes(s)))
_case("path/txt-suffix", "any", lambda s, d: _write(d, "trace.txt", _trace_bytes(s)))
_case("path/upper-suffix", "any", lambda s, d: _write(d, "TRACE.JSON", _trace_bytes(s)))
_case("path/spaces-unicode", "valid", lambda s, d: _write(d, "tr ace é 日本.json", _trace_bytes(s)))
_case(
    "path/newline-in-name", "valid", lambda s, d: _write(d, "a\nFAKE: ok\rb.json", _trace_bytes(s))
)
_case("path/long-name", "valid", lambda s, d: _write(d, "n" * 245 + ".json", _trace_bytes(s)))
_case(
    "path/json-holding-binary-no-suffix",
    "invalid",
    lambda s, d: _write(d, "blob", s.rng("blob").randbytes(5000)),
)
_case("path/jsonl-holding-json", "any", lambda s, d: _write(d, "trace.jsonl", _trace_bytes(s)))
_case(
    "path/jsonl-holding-pretty-json",
    "any",
    lambda s, d: _write(d, "trace.jsonl", json.dumps(s.trace, indent=2).encode()),
)
_case(
    "path/proc-file.json", "invalid", lambda s, d: _symlink(d, "status.json", "/proc/self/status")
)

# ============================================================== special paths (child process)


def _fifo(d: Path, name: str) -> Path:
    p = d / name
    os.mkfifo(p)
    return p


for _nm in ("fifo.json", "fifo.jsonl", "fifo", "fifo.parquet"):
    _case(f"special/{_nm}", "invalid", lambda s, d, n=_nm: _fifo(d, n), special=True)
for _nm in ("zero.json", "zero.jsonl", "zero", "zero.ndjson"):
    _case(
        f"special/{_nm}", "invalid", lambda s, d, n=_nm: _symlink(d, n, "/dev/zero"), special=True
    )
_case("special/dev-zero-direct", "invalid", lambda s, d: Path("/dev/zero"), special=True)
_case(
    "special/urandom.json",
    "invalid",
    lambda s, d: _symlink(d, "r.json", "/dev/urandom"),
    special=True,
)
_case(
    "special/urandom.jsonl",
    "invalid",
    lambda s, d: _symlink(d, "r.jsonl", "/dev/urandom"),
    special=True,
)
_case("special/null.json", "invalid", lambda s, d: _symlink(d, "n.json", "/dev/null"), special=True)
_case(
    "special/null.jsonl", "invalid", lambda s, d: _symlink(d, "n.jsonl", "/dev/null"), special=True
)
_case("special/fifo-in-dataset", "invalid", lambda s, d: _fifo_dataset(s, d), special=True)


def _fifo_dataset(s: Seeds, d: Path) -> Path:
    out = _copytree(s.parquet, d / "data.parquet")
    (out / "events.parquet").unlink()
    os.mkfifo(out / "events.parquet")
    return out


_PIPES: dict[str, tuple[str, Callable[[Seeds], bytes], str]] = {
    "stdin-json": ("stdin", _trace_bytes, "any"),
    "stdin-jsonl": ("stdin", _run_bytes, "any"),
    "stdin-empty": ("stdin", lambda s: b"", "invalid"),
    "stdin-garbage": ("stdin", lambda s: b"garbage\n" * 10, "invalid"),
    "fd-json": ("fd", _trace_bytes, "any"),
    "fd-jsonl": ("fd", _run_bytes, "any"),
    "fd-truncated-jsonl": ("fd", lambda s: _run_bytes(s)[:-100], "truncated"),
}
for _nm, (_via, _data, _exp) in _PIPES.items():
    _case(
        f"special/pipe-{_nm}",
        _exp,
        lambda s, d: Path("/dev/stdin"),
        special=True,
        feed=_via,
        pipe_data=_data,
    )


def _unreadable(name: str, data: Callable[[Seeds], bytes]) -> Builder:
    def build(s: Seeds, d: Path) -> Path:
        p = _write(d, name, data(s))
        p.chmod(0)
        return p

    return build


def _unreadable_dataset(inner: str | None) -> Builder:
    def build(s: Seeds, d: Path) -> Path:
        out = _copytree(s.parquet, d / "data.parquet")
        (out / inner if inner else out).chmod(0)
        return out

    return build


_case(
    "special/unreadable.json",
    "invalid",
    _unreadable("t.json", _trace_bytes),
    special=True,
    unprivileged=True,
)
_case(
    "special/unreadable.jsonl",
    "invalid",
    _unreadable("t.jsonl", _run_bytes),
    special=True,
    unprivileged=True,
)
_case(
    "special/unreadable-no-suffix",
    "invalid",
    _unreadable("t", _trace_bytes),
    special=True,
    unprivileged=True,
)
_case(
    "special/unreadable.parquet",
    "invalid",
    _unreadable_dataset(None),
    special=True,
    unprivileged=True,
)
_case(
    "special/unreadable-events.parquet",
    "invalid",
    _unreadable_dataset("events.parquet"),
    special=True,
    unprivileged=True,
)


def iter_cases(*, special: bool | None = None) -> Iterator[Case]:
    """The cases, optionally only the special (child-process) or only the in-process ones."""
    for c in CASES:
        if special is None or c.special == special:
            yield c


# ============================================================== hostile output paths
@dataclass(frozen=True)
class OutputCase:
    """A command whose ``-o`` or option value is hostile.

    It runs in this process (``orchestrace.cli.main``) unless the case is about the process:
    a file-size limit, dropped write access, a FIFO or a huge value (``special``) run it as a
    child.

    ``argv`` placeholders: ``{trace}`` a valid trace (``trace.json``), ``{run}`` a recorded
    JSONL run (``run.jsonl``), ``{d}`` the case directory (also the working directory). ``setup(d)`` plants what must survive; every path in ``protect`` must
    be unchanged afterwards. When the command exits 0, ``output`` (path, kind) must load back.

    Attributes:
        name: Unique id.
        argv: Arguments after ``orchestrace``.
        setup: Creates the victims.
        protect: Paths (relative to the case directory) that must be left exactly as they were.
        output: ``(path, kind)`` of what a successful run writes, or ``None``.
        fsize: File-size limit of the child (``RLIMIT_FSIZE``, bytes): a full disk.
        unprivileged: Run without the power to write anywhere regardless of modes.
        must_fail: The command must exit 1 or 2.
        special: Must run in a child process (it reads a FIFO, or a huge value may exhaust
            memory, which the child's memory limit turns into an error).
    """

    name: str
    argv: tuple[str, ...]
    setup: Callable[[Path], None] = lambda d: None
    protect: tuple[str, ...] = ()
    output: tuple[str, str] | None = None
    fsize: int | None = None
    unprivileged: bool = False
    must_fail: bool = False
    special: bool = False

    @property
    def child(self) -> bool:
        """Whether it runs in a child process (see the class docstring)."""
        return self.special or self.unprivileged or self.fsize is not None


def _victim_dir(name: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        (d / name / "sub").mkdir(parents=True)
        (d / name / "notes.txt").write_text("precious")
        (d / name / "sub" / "results.csv").write_text("a,b\n1,2\n")

    return setup


def _victim_file(name: str, text: str = "precious") -> Callable[[Path], None]:
    return lambda d: (d / name).write_text(text)


def _readonly_dir(d: Path) -> None:
    (d / "ro").mkdir()
    (d / "ro").chmod(0o555)


OUTPUT_CASES: list[OutputCase] = []
_WRITERS: dict[str, tuple[str, ...]] = {
    "convert": ("convert", "{trace}", "-o"),
    "convert-run": ("convert", "{run}", "-o"),
    "replay": ("replay", "{run}", "-o"),
    "export": ("export", "--to", "trl", "{run}", "-o"),
    "generate": ("generate", "--agents", "3", "--steps", "10", "-o"),
}
for _w, _pre in _WRITERS.items():
    OUTPUT_CASES += [
        OutputCase(
            f"output/{_w}-existing-dir",
            (*_pre, "{d}/victim"),
            _victim_dir("victim"),
            ("victim",),
            must_fail=True,
        ),
        OutputCase(
            f"output/{_w}-existing-dir-slash",
            (*_pre, "{d}/victim/"),
            _victim_dir("victim"),
            ("victim",),
            must_fail=True,
        ),
        OutputCase(
            f"output/{_w}-dir-named-parquet",
            (*_pre, "{d}/victim.parquet"),
            _victim_dir("victim.parquet"),
            ("victim.parquet",),
            must_fail=True,
        ),
        OutputCase(
            f"output/{_w}-parent-is-file", (*_pre, "{d}/afile/x.json"), _victim_file("afile"),
            ("afile",), must_fail=True,
        ),
        OutputCase(f"output/{_w}-dot", (*_pre, "."), _victim_dir("keep"), ("keep",), must_fail=True),
        OutputCase(
            f"output/{_w}-missing-parent", (*_pre, "{d}/no/such/dir/x.json"), must_fail=False
        ),
        OutputCase(
            f"output/{_w}-unwritable-dir",
            (*_pre, "{d}/ro/x.json"),
            _readonly_dir,
            ("ro",),
            unprivileged=True,
            must_fail=True,
        ),
    ]  # fmt: skip
for _w, _pre, _name, _kind in (
    ("convert", _WRITERS["convert"], "x.json", "json"),
    ("convert", _WRITERS["convert"], "x.jsonl", "jsonl"),
    ("convert", _WRITERS["convert"], "x.parquet", "parquet"),
    ("replay", _WRITERS["replay"], "x.json", "json"),
    ("export", _WRITERS["export"], "x.jsonl", "trl"),
    ("generate", _WRITERS["generate"], "x.json", "json"),
):
    if _kind != "trl":  # a trl export of one run has no preference rows: nothing fills a disk
        OUTPUT_CASES.append(
            OutputCase(
                f"output/{_w}-disk-full-{_name}",
                (*_pre, "{d}/" + _name),
                fsize=1024,
                must_fail=True,
            )
        )
    OUTPUT_CASES.append(
        OutputCase(f"output/{_w}-plain-{_name}", (*_pre, "{d}/" + _name), output=(_name, _kind))
    )
OUTPUT_CASES.append(
    OutputCase(
        "output/export-disk-full-verl.parquet",
        ("export", "--to", "verl", "{run}", "-o", "{d}/x.parquet"),
        fsize=1024,
        must_fail=True,
    )
)
OUTPUT_CASES += [
    OutputCase(
        "output/convert-over-foreign-file",
        ("convert", "{trace}", "-o", "{d}/notes.json"),
        _victim_file("notes.json", '{"mine": true}'),
        ("notes.json",),
        must_fail=True,
    ),
    OutputCase(
        "output/convert-onto-its-input",
        ("convert", "{trace}", "-o", "{trace}"),
        output=("trace.json", "json"),
    ),
    OutputCase(
        "output/convert-dangling-symlink",
        ("convert", "{trace}", "-o", "{d}/link.json"),
        lambda d: (d / "link.json").symlink_to(d / "elsewhere" / "x.json"),
    ),
    OutputCase(
        "output/export-trailing-slash-on-file",
        ("export", "--to", "trl", "{run}", "-o", "{d}/afile/"),
        _victim_file("afile"),
        ("afile",),
        must_fail=True,
    ),
]


# ============================================================== hostile options and spec files
def _spec(text: bytes) -> Callable[[Path], None]:
    return lambda d: (d / "spec.toml").write_bytes(text)


_ARGS: dict[str, tuple[tuple[str, ...], Callable[[Path], None]]] = {
    "reward-spec-dir": (("reward", "{trace}", "--spec", "{d}"), lambda d: None),
    "reward-spec-missing": (("reward", "{trace}", "--spec", "{d}/none.toml"), lambda d: None),
    "reward-spec-binary": (("reward", "{trace}", "--spec", "{d}/spec.toml"), _spec(bytes(range(256)))),
    "reward-spec-latin1": (("reward", "{trace}", "--spec", "{d}/spec.toml"), _spec(b"[reward.team]\nweight = 1 # caf\xe9\n")),
    "reward-spec-syntax": (("reward", "{trace}", "--spec", "{d}/spec.toml"), _spec(b"[reward.team\nweight = 1\n")),
    "reward-spec-lambda-string": (("reward", "{trace}", "--spec", "{d}/spec.toml"), _spec(b'[reward.parl]\nweight = 1\nlambda1 = "x"\n')),
    "reward-spec-weight-nan": (("reward", "{trace}", "--spec", "{d}/spec.toml"), _spec(b"[reward.team]\nweight = nan\n")),
    "reward-spec-weight-inf": (("reward", "{trace}", "--spec", "{d}/spec.toml"), _spec(b"[reward.team]\nweight = inf\n")),
    "reward-spec-weight-string": (("reward", "{trace}", "--spec", "{d}/spec.toml"), _spec(b'[reward.team]\nweight = "1"\n')),
    "reward-spec-unknown-family": (("reward", "{trace}", "--spec", "{d}/spec.toml"), _spec(b'[reward.x]\nweight = 1\nfamily = "nope"\n')),
    "reward-spec-unknown-param": (("reward", "{trace}", "--spec", "{d}/spec.toml"), _spec(b"[reward.team]\nweight = 1\nbogus = 2\n")),
    "reward-spec-not-table": (("reward", "{trace}", "--spec", "{d}/spec.toml"), _spec(b"reward = 5\n")),
    "reward-spec-empty": (("reward", "{trace}", "--spec", "{d}/spec.toml"), _spec(b"")),
    "reward-spec-deep": (("reward", "{trace}", "--spec", "{d}/spec.toml"), _spec(b"x = " + b"[" * 100_000 + b"]" * 100_000 + b"\n")),
    "reward-spec-fifo": (("reward", "{trace}", "--spec", "{d}/spec.toml"), lambda d: os.mkfifo(d / "spec.toml")),
    "reward-step-negative": (("reward", "{trace}", "--step", "-1"), lambda d: None),
    "reward-step-huge": (("reward", "{trace}", "--step", str(2**64)), lambda d: None),
    "credit-reward-nan": (("credit", "{run}", "--reward", "nan"), lambda d: None),
    "credit-reward-inf": (("credit", "{run}", "--reward", "inf"), lambda d: None),
    "credit-gamma-nan": (("credit", "{run}", "--method", "discounted", "--gamma", "nan"), lambda d: None),
    "credit-gamma-negative": (("credit", "{run}", "--method", "discounted", "--gamma", "-2"), lambda d: None),
    "credit-samples-negative": (("credit", "{run}", "--method", "shapley", "--samples", "-1"), lambda d: None),
    "credit-samples-huge": (("credit", "{run}", "--method", "shapley", "--samples", str(10**30)), lambda d: None),
    "credit-top-negative": (("credit", "{run}", "--top", "-1"), lambda d: None),
    "analyze-max-path-negative": (("analyze", "{trace}", "--max-path", "-1"), lambda d: None),
    "analyze-trace-id-ansi": (("analyze", "{run}", "--trace-id", "\x1b[31mX\r\nFAKE: ok"), lambda d: None),
    "convert-indent-negative": (("convert", "{trace}", "-o", "{d}/o.json", "--indent", "-5"), lambda d: None),
    "convert-indent-huge": (("convert", "{trace}", "-o", "{d}/o.json", "--indent", str(10**9)), lambda d: None),
    "convert-from-wrong": (("convert", "{trace}", "--from", "parquet", "-o", "{d}/o.json"), lambda d: None),
    "replay-stop-at-huge": (("replay", "{run}", "--stop-at", str(2**64)), lambda d: None),
    "replay-drop-unknown": (("replay", "{run}", "--drop-message", "nope"), lambda d: None),
    "replay-replace-ansi": (("replay", "{run}", "--replace-message", "\x1b[2J", "x"), lambda d: None),
    "export-reward-unknown": (("export", "{run}", "-o", "{d}/o.jsonl", "--reward", "nope"), lambda d: None),
    "export-method-unknown": (("export", "{run}", "-o", "{d}/o.jsonl", "--advantage", "credit", "--method", "nope"), lambda d: None),
    "generate-agents-zero": (("generate", "--agents", "0", "--steps", "5", "-o", "{d}/o.json"), lambda d: None),
    "generate-agents-huge": (("generate", "--agents", str(10**20), "--steps", "5", "-o", "{d}/o.json"), lambda d: None),
    "generate-seed-negative": (("generate", "--agents", "2", "--steps", "5", "--seed", "-1", "-o", "{d}/o.json"), lambda d: None),
}  # fmt: skip
for _nm, (_argv, _setup) in _ARGS.items():
    OUTPUT_CASES.append(
        OutputCase(
            f"args/{_nm}",
            _argv,
            _setup,
            must_fail=True,
            special=any(w in _nm for w in ("fifo", "huge", "deep")),
        )
    )


# -- Parquet columns of other Arrow types (same content, or the wrong kind of value)
def _cast(col: str, typ: str, values: Callable[[list[Any]], list[Any]] | None = None) -> Any:
    def f(t: Any) -> Any:
        import pyarrow as pa

        vals = t.column(col).to_pylist()
        vals = values(vals) if values else vals
        ty = {
            "large_string": pa.large_string(),
            "binary": pa.binary(),
            "dictionary": pa.dictionary(pa.int32(), pa.string()),
            "timestamp": pa.timestamp("s"),
            "float64": pa.float64(),
            "int64": pa.int64(),
            "string": pa.string(),
            "str_map": pa.map_(pa.string(), pa.string()),
            "int32": pa.int32(),
        }[typ]
        if typ == "dictionary":
            arr = pa.array(vals, pa.string()).dictionary_encode()
        elif typ == "binary":
            arr = pa.array([None if v is None else str(v).encode() for v in vals], ty)
        else:
            arr = pa.array(vals, ty)
        i = t.schema.get_field_index(col)
        return t.set_column(i, pa.field(col, arr.type), arr)

    return f


_str = lambda v: [None if x is None else str(x) for x in v]  # noqa: E731
for _nm, _tbl, _fn, _exp in (
    ("events-id-large-string", "events", _cast("id", "large_string"), "any"),
    ("events-type-dictionary", "events", _cast("type", "dictionary"), "any"),
    ("events-step-int32", "events", _cast("step", "int32"), "any"),
    ("events-step-float", "events", _cast("step", "float64", lambda v: [None if x is None else x + 0.5 for x in v]), "invalid"),
    ("events-tokens-float", "events", _cast("tokens_in", "float64", lambda v: [1.5 for _ in v]), "invalid"),
    ("events-trusted-string", "events", _cast("trusted", "string", lambda v: ["yes" for _ in v]), "invalid"),
    ("events-cost-string", "events", _cast("cost", "string", lambda v: ["x" for _ in v]), "invalid"),
    ("events-dur-string", "events", _cast("dur", "string", _str), "invalid"),
    ("events-content-int", "events", _cast("content", "int64", lambda v: [7 for _ in v]), "invalid"),
    ("events-t-timestamp", "events", _cast("t", "timestamp", lambda v: [int(x) for x in v]), "invalid"),
    ("events-attrs-binary", "events", _cast("attrs", "binary"), "any"),
    ("edges-type-null", "edges", _col("type", _at(0, None)), "invalid"),
    ("traces-meta-binary", "traces", _cast("meta", "binary"), "any"),
    ("traces-rewards-string-map", "traces", _cast("rewards", "str_map", lambda v: [[(k, "x") for k, _ in (r or [])] for r in v]), "invalid"),
    ("traces-n-edges-negative", "traces", _col("n_edges", _at(0, -5)), "any"),
    ("traces-schema-version-null", "traces", _col("schema_version", _at(0, None)), "any"),
    ("traces-task-id-int", "traces", _cast("task_id", "int64", lambda v: [5 for _ in v]), "invalid"),
):  # fmt: skip
    _pq_case(f"parquet/{_nm}", _exp, _table(_tbl, _fn))


def _big_input_with_planted_package(s: Seeds, d: Path) -> Path:
    """A sparse 65 MiB input next to a package named like the project (must never be run)."""
    pkg = d / "orchestrace"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    code = f"open({str(d / MARKER)!r}, 'w').write('imported from the working directory')\n"
    (pkg / "__main__.py").write_text(code)
    (pkg / "cli.py").write_text(code)
    big = d / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(65 << 20)
    return big


_case(
    "special/big-input-with-planted-package",
    "invalid",
    _big_input_with_planted_package,
    special=True,
    marker=True,
    commands=("validate",),
    note="inputs over 64 MiB restart the interpreter: it must not import from the cwd",
)


# -- recorded run metadata that replay, credit and rewards rebuild things from
def _meta(path: tuple[str, ...], value: Any) -> Callable[[Json], None]:
    def f(o: Json) -> None:
        cur = o["meta"]
        for k in path[:-1]:
            if not isinstance(cur.get(k), dict):
                cur[k] = {}
            cur = cur[k]
        cur[path[-1]] = value

    return f


for _nm, (_path, _val) in {
    "backend-string": (("backend",), "sim"),
    "backend-list": (("backend",), [1]),
    "backend-unknown": (("backend", "name"), "nope"),
    "backend-name-int": (("backend", "name"), 5),
    "backend-options-string": (("backend", "options"), "x"),
    "backend-sim-skills-bad": (("backend", "options", "skills"), {"worker": "x"}),
    "backend-sim-fail-rate-nan": (("backend", "options", "fail_rate"), Raw("NaN")),
    "backend-sim-tokens-per-s-zero": (("backend", "options", "tokens_per_s"), 0),
    "backend-openai-closed-port": (("backend",), {"name": "openai", "options": {"base_url": "http://127.0.0.1:9/v1"}}),
    "backend-hf-missing-model": (("backend",), {"name": "hf", "options": {"model": "/nonexistent"}}),
    "runner-string": (("runner",), "x"),
    "runner-unknown-topology": (("runner", "topology"), "nope"),
    "config-list": (("config",), [1]),
    "config-max-steps-negative": (("config", "max_steps"), -1),
    "config-agents-string": (("config", "agents"), "x"),
    "config-options-rounds-string": (("config", "options"), {"rounds": "x"}),
    "config-options-list": (("config", "options"), [1]),
    "config-seed-huge": (("config", "seed"), 2**80),
    "result-verdict-string": (("result", "verdict"), "x"),
    "result-verdict-passed-string": (("result", "verdict", "passed"), "yes"),
}.items():  # fmt: skip
    _json_case(f"json/run-meta-{_nm}", "any", _meta(_path, _val), base="run")
