"""JSON and JSONL reading and Parquet writing against their floors, in fresh one-core processes.

* load + validate of a 1,000,000-event survey-schema JSON file (``orchestrace.io.load``: decode,
  import, ``check_trace``) against the bare ``msgspec.json.decode`` of the same bytes;
* ``orchestrace convert`` of a native JSON trace to a Parquet dataset, and ``orchestrace
  generate`` of a Parquet dataset, against ``pyarrow.parquet.write_table`` of the same three
  tables (already in memory);
* ``orchestrace validate`` and ``orchestrace analyze --json`` of a JSONL record stream of
  1,000,000 events and of 10,000,000 (``--big``; the stream is 2.3 GB): CPU time and peak
  memory (VmHWM), and the ratio of the two sizes.

Every side runs ``--repeat`` times (default 3), alternated with its baseline, each in a new
process pinned to one core (``taskset -c 1`` when available); medians of CPU time (user + system
of the child) are compared, and wall times and the load average are printed alongside, because
the machine may be shared.

    python benchmarks/bench_jsonio.py            # 1,000,000 events
    python benchmarks/bench_jsonio.py --big      # also the 10,000,000-event stream
    python benchmarks/bench_jsonio.py --clean    # delete the large inputs afterwards
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from _common import cached_trace_file, data_path, report

PIN = ["taskset", "-c", "1"] if shutil.which("taskset") else []


def _child(argv: list[str], *, env: dict[str, str] | None = None) -> dict[str, float]:
    """Run ``argv`` pinned to one core; its CPU time (user + system), wall time and VmHWM."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(
        [*PIN, "/usr/bin/time", "-f", "VMHWM %M", *argv],
        stdout=subprocess.DEVNULL,
        # the CLI never restarts itself with other malloc settings: every side runs in the
        # environment given (ORCHESTRACE_HUGE_PAGES would change the CLI's sides alone)
        env={**os.environ, "ORCHESTRACE_NO_REEXEC": "1", **(env or {})},
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{argv} failed:\n{r.stderr[-2000:]}")
    hwm = next(int(x.split()[1]) for x in r.stderr.splitlines() if x.startswith("VMHWM"))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu": cpu, "wall": wall, "rss_mb": hwm / 1024}


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "orchestrace", *args]


def _alternate(
    sides: dict[str, list[str]], repeat: int, env: dict[str, str] | None = None
) -> dict[str, dict[str, float]]:
    """Run each side ``repeat`` times, interleaved; medians of each measure."""
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
    for _ in range(repeat):
        for name, argv in sides.items():
            runs[name].append(_child(argv, env=env))
    return _medians(runs)


def _medians(runs: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Medians of each measure of each side's runs, and the range of their CPU times."""
    return {
        k: {m: statistics.median(r[m] for r in v) for m in ("cpu", "wall", "rss_mb")}
        | {"cpu_min": min(r["cpu"] for r in v), "cpu_max": max(r["cpu"] for r in v)}
        for k, v in runs.items()
    }


def _spread(m: dict[str, float]) -> str:
    return f"{m['cpu']:.2f} s CPU ({m['cpu_min']:.2f}-{m['cpu_max']:.2f}), {m['wall']:.2f} s wall"


def bench_load_validate(repeat: int) -> None:
    path = cached_trace_file(
        "upstream-1000000.json", 1000, 1_000_000, 3, fmt="upstream", llm_events=False
    )
    ours = _py(f"""
        from orchestrace.io import load
        tr = load({str(path)!r})
        assert tr.n_events == 1_000_000
    """)
    floor = _py(f"""
        import msgspec
        with open({str(path)!r}, "rb") as fh:
            doc = msgspec.json.decode(fh.read())
        assert len(doc["events"]) == 1_000_000
    """)
    m = _alternate({"ours": ours, "floor": floor}, repeat)  # both in the same environment
    report(
        "load+validate 1,000,000 events (survey-schema JSON, 205 MB), fresh process",
        m["ours"]["cpu"],
        "s CPU",
        baseline="msgspec.json.decode of the same file",
        baseline_value=m["floor"]["cpu"],
        target="<=1.5x the decode, < 2 s",
        ok=m["ours"]["cpu"] <= 1.5 * m["floor"]["cpu"] and m["ours"]["cpu"] < 2.0,
        note=f"medians of {repeat}, interleaved, same environment; ours {_spread(m['ours'])}; "
        f"decode {_spread(m['floor'])}; interpreter start-up included on both sides",
    )


def bench_write(repeat: int) -> None:
    src = cached_trace_file("native-1000000.json", 1000, 1_000_000, 3)
    out = data_path("bench-convert-out.parquet")
    gen_out = data_path("bench-generate-out.parquet")
    tables = data_path(f"{src.stem}-tables.parquet")  # (the generator's version in the name)
    if not tables.exists():
        subprocess.run([*_cli("convert", str(src), "-o", str(tables))], check=True)
    # the floor: pyarrow writing the same three tables, already in memory
    floor = _py(f"""
        import pyarrow.parquet as pq, pathlib, shutil, time, tempfile
        src = pathlib.Path({str(tables)!r})
        tabs = {{f.name: pq.read_table(f) for f in src.glob("*.parquet")}}
        out = pathlib.Path(tempfile.mkdtemp())
        import resource
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        for name, t in tabs.items():
            pq.write_table(t, out / name, row_group_size=1 << 16)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        shutil.rmtree(out)
        print((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    """)
    convert = _cli("convert", str(src), "-o", str(out), "--force")
    generate = _cli(
        "generate",
        "-k",
        "1000",
        "-l",
        "1000000",
        "-d",
        "3",
        "-s",
        "3",
        "-o",
        str(gen_out),
        "--force",
    )
    env: dict[str, str] = {}  # every side in the same environment (the caller's)
    runs: dict[str, list[dict[str, float]]] = {"convert": [], "generate": []}
    writes = []
    for _ in range(repeat):  # interleaved: a change of load falls on every side alike
        for name, argv in (("convert", convert), ("generate", generate)):
            runs[name].append(_child(argv, env=env))
        r = subprocess.run(
            [*PIN, *floor], capture_output=True, text=True, check=True, env={**os.environ, **env}
        )
        writes.append(float(r.stdout.strip().splitlines()[-1]))
    m = _medians(runs)
    w = statistics.median(writes)
    for name in ("convert", "generate"):
        report(
            f"{name} 1,000,000 events to a Parquet dataset (whole command, fresh process)",
            m[name]["cpu"],
            "s CPU",
            baseline="pyarrow.parquet.write_table of the same 3 tables (write only)",
            baseline_value=w,
            target="<=3x",
            ok=m[name]["cpu"] <= 3 * w,
            note=f"medians of {repeat}, interleaved with the floor, same environment; "
            f"{_spread(m[name])}; write-only floor {min(writes):.2f}-{max(writes):.2f} s CPU",
        )
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(gen_out, ignore_errors=True)


def _stream(n: int) -> Path:
    """A record stream of ``n`` events (1,000,000 tiled ``n / 1,000,000`` times)."""
    src = cached_trace_file("native-1000000.json", 1000, 1_000_000, 3)
    path = data_path(f"{src.stem}-stream-{n}.jsonl")
    if path.exists():
        return path
    copies = n // 1_000_000
    subprocess.run(_py(_TILE.format(src=str(src), out=str(path), copies=copies)), check=True)
    return path


# the events, agents and times of copy k are shifted so that the copies form one valid trace
_TILE = """
import msgspec
from orchestrace.io import load
from orchestrace.trace.model import Edge
tr = load({src!r}, check=False)
enc = msgspec.json.Encoder()
n = len(tr.events)
span = max(e.t + e.dur for e in tr.events) + 1.0
with open({out!r} + ".part", "wb") as f:
    head = {{"trace_id": tr.trace_id, "task_id": tr.task_id, "system": tr.system,
             "topology": tr.topology}}
    f.write(enc.encode({{"header": head}}) + b"\\n")
    for k in range({copies}):
        sfx, off, dt = (f"#{{k}}" if k else ""), k * n, k * span
        buf = []
        for e in tr.events:
            d = {{"id": f"e{{int(e.id[1:]) + off}}", "t": round(e.t + dt, 6)}}
            for key in ("agent", "to", "from_"):
                v = getattr(e, key)
                if v is not None and (key != "agent" or e.type != "tool_result"):
                    d[key] = v + sfx
            buf.append(b'{{"event":' + enc.encode(msgspec.structs.replace(e, **d)) + b"}}\\n")
        f.write(b"".join(buf))
        buf = [b'{{"edge":' + enc.encode(Edge(f"e{{int(g.src[1:]) + off}}",
               f"e{{int(g.dst[1:]) + off}}", g.type)) + b"}}\\n" for g in tr.edges]
        if k:
            buf.append(b'{{"edge":' + enc.encode(Edge(f"e{{off}}", f"e{{off + 1}}", "causal"))
                       + b"}}\\n")
        f.write(b"".join(buf))
    costs = {{"tokens": 1.0, "wall_clock_s": span * {copies}}}
    f.write(enc.encode({{"footer": {{"costs": costs}}}}) + b"\\n")
import os
os.replace({out!r} + ".part", {out!r})
"""


def bench_stream(big: bool, repeat: int) -> None:
    sizes = [1_000_000, 10_000_000] if big else [1_000_000]
    got: dict[tuple[str, int], dict[str, float]] = {}
    for n in sizes:
        path = _stream(n)
        sides = {
            "validate": _cli("validate", "-q", str(path)),
            "analyze": _cli("analyze", "--json", str(path)),
        }
        for name, m in _alternate(sides, repeat if n < 10_000_000 else 1).items():
            got[(name, n)] = m
            report(
                f"{name} JSONL record stream, {n:,} events (fresh process)",
                m["cpu"],
                "s CPU",
                target="< 2 GB RSS",
                ok=m["rss_mb"] < 2048,
                note=f"peak RSS {m['rss_mb']:.0f} MiB; {_spread(m)}",
            )
    if big:
        for name in ("validate", "analyze"):
            ratio = got[(name, 10_000_000)]["cpu"] / got[(name, 1_000_000)]["cpu"]
            report(
                f"{name} JSONL, 10x the events",
                ratio,
                "x the CPU time",
                target="<=11x",
                ok=ratio <= 11,
                note=f"RSS {got[(name, 1_000_000)]['rss_mb']:.0f} -> "
                f"{got[(name, 10_000_000)]['rss_mb']:.0f} MiB",
            )


def main(big: bool = False, repeat: int = 3, clean: bool = False, quick: bool = False) -> None:
    """The figures; ``quick`` (from ``run.py --quick``) measures each side once, not ``repeat``."""
    repeat = 1 if quick else repeat
    print(f"JSON/JSONL I/O (load average {os.getloadavg()[0]:.1f})")
    bench_load_validate(repeat)
    bench_write(repeat)
    bench_stream(big, repeat)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if clean:
        stem = cached_trace_file("native-1000000.json", 1000, 1_000_000, 3).stem
        for name in ("stream-10000000.jsonl", "stream-1000000.jsonl", "tables.parquet"):
            p = data_path(f"{stem}-{name}")
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--big", action="store_true", help="also the 10,000,000-event stream")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--clean", action="store_true", help="delete the large inputs afterwards")
    a = ap.parse_args()
    main(a.big, a.repeat, a.clean)
