"""Columnar traces end to end: ``validate`` and ``analyze --json`` of a Parquet dataset and a JSON file.

Every measurement runs in its own fresh process pinned to one core (``taskset -c 1`` where
available, ``--core`` to choose; Arrow, DuckDB and BLAS limited to one thread), repeated
``--reps`` times, the commands of a group taking turns (ours, then each baseline, then ours
again...) so that a change in the machine's load hits every side alike; the parent reads the
child's CPU time and peak RSS from ``os.wait4`` (``resource`` usage of that child alone).
Floors and baselines measured in the same run, under the same conditions:
``pyarrow.parquet.read_table`` of the dataset's three tables, the DuckDB query of events by
type and tokens per agent straight from the same files (what ``analyze`` reports of them), and
``msgspec.json.decode`` of the JSON file. Reported: median and range of wall time, CPU time
and peak RSS, the ratio of each command to its floor (medians), and the load average before
and after (the figures are only as quiet as the machine).

    python benchmarks/bench_columnar.py [--events 1000000] [--reps 5] [--no-json] [--out FILE]

Inputs are generated once with ``orchestrace generate`` into ``benchmarks/.data``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / ".data"
CLI = [sys.executable, "-m", "orchestrace"]
READ_TABLE = (
    "import sys, pyarrow.parquet as pq\n"
    "for f in ('events', 'edges', 'traces'):\n"
    "    pq.read_table(f'{sys.argv[1]}/{f}.parquet')\n"
)
DECODE = "import sys, msgspec\nmsgspec.json.decode(open(sys.argv[1], 'rb').read())\n"
#: The DuckDB baseline: events by type and tokens per agent, straight from the Parquet files.
DUCKDB = (
    "import sys, duckdb\n"
    "con = duckdb.connect(config={'threads': 1})\n"
    "events = sys.argv[1] + '/events.parquet'\n"
    "con.execute('SELECT type, count(*) FROM read_parquet($1) GROUP BY type', [events])"
    ".fetchall()\n"
    "con.execute('SELECT agent, sum(tokens_in), sum(tokens_out) FROM read_parquet($1) "
    "GROUP BY agent', [events]).fetchall()\n"
)
#: The CPU the measured processes are pinned to (``--core``).
CORE = ["1"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # as an installed package runs: with compiled bytecode (kept apart from the sources)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(DATA / "pycache")
    for key in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "ARROW_NUM_THREADS"):
        env[key] = "1"
    env["ARROW_IO_THREADS"] = "1"
    return env


def _pin() -> list[str]:
    return ["taskset", "-c", CORE[0]] if shutil.which("taskset") else []


def measure(argv: list[str]) -> dict[str, float]:
    """Run ``argv`` once in a fresh process; wall s, CPU s and peak RSS (MB) of that child."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*_pin(), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env()
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err[-500:]}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1024,
    }


def repeated(name: str, argv: list[str], reps: int) -> dict[str, Any]:
    """``reps`` runs of one command (after a warm-up), summarised."""
    return interleaved([(name, argv)], reps)[0]


def interleaved(commands: list[tuple[str, list[str]]], reps: int) -> list[dict[str, Any]]:
    """``reps`` runs of each command, taking turns, after one warm-up run of each."""
    for _, argv in commands:
        measure(argv)  # warm-up (bytecode, page cache), not counted
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in commands}
    for _ in range(reps):
        for name, argv in commands:
            runs[name].append(measure(argv))
    return [summary(name, runs[name]) for name, _ in commands]


def summary(name: str, runs: list[dict[str, float]]) -> dict[str, Any]:
    reps = len(runs)
    out: dict[str, Any] = {"name": name, "reps": reps}
    for key in ("wall_s", "cpu_s", "rss_mb"):
        values = [r[key] for r in runs]
        out[key] = {
            "median": statistics.median(values),
            "min": min(values),
            "max": max(values),
        }
    print(
        f"  {name:<28} wall {out['wall_s']['median']:7.3f} s "
        f"[{out['wall_s']['min']:.3f}-{out['wall_s']['max']:.3f}]  "
        f"cpu {out['cpu_s']['median']:7.3f} s "
        f"[{out['cpu_s']['min']:.3f}-{out['cpu_s']['max']:.3f}]  "
        f"rss {out['rss_mb']['median']:7.0f} MB",
        flush=True,
    )
    return out


def tiled(base: Path, copies: int, out: Path) -> None:
    """Write ``copies`` copies of a one-trace dataset, one after another, as one trace.

    Copy ``c`` gets event ids shifted by ``c`` times the event count, agents suffixed
    ``~c`` (so each copy is its own team) and times shifted past the previous copy: the
    result is a valid trace ``copies`` times as long, written without holding it whole.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    traces = pq.read_table(base / "traces.parquet")
    n = traces.column("n_events")[0].as_py()
    events = pq.ParquetFile(base / "events.parquet")
    span = pc.max(
        pc.add(
            *[
                pq.read_table(base / "events.parquet", columns=["t", "dur"]).column(c)
                for c in ("t", "dur")
            ]
        )
    ).as_py()

    def shift_ids(col: Any, c: int) -> Any:
        digits = pc.utf8_slice_codeunits(col, start=1)
        num = pc.add(pc.cast(digits, pa.int64()), c * n)
        return pc.binary_join_element_wise("e", pc.cast(num, pa.string()), "")

    def rename(col: Any, c: int) -> Any:
        return col if c == 0 else pc.binary_join_element_wise(col, f"~{c}", "")

    writers = {}
    for name in ("events", "edges"):
        schema = pq.read_schema(base / f"{name}.parquet")
        writers[name] = pq.ParquetWriter(tmp / f"{name}.parquet", schema)
    try:
        for c in range(copies):
            for batch in events.iter_batches(batch_size=1 << 16):
                t = pa.Table.from_batches([batch])
                for col, fn in (
                    ("id", shift_ids),
                    ("agent", rename),
                    ("to", rename),
                    ("from", rename),
                ):
                    i = t.schema.get_field_index(col)
                    t = t.set_column(i, col, fn(t.column(col), c))
                i = t.schema.get_field_index("t")
                t = t.set_column(i, "t", pc.add(t.column("t"), c * (span + 1.0)))
                writers["events"].write_table(t)
            for batch in pq.ParquetFile(base / "edges.parquet").iter_batches(batch_size=1 << 16):
                t = pa.Table.from_batches([batch])
                for col in ("src", "dst"):
                    i = t.schema.get_field_index(col)
                    t = t.set_column(i, col, shift_ids(t.column(col), c))
                writers["edges"].write_table(t)
    finally:
        for w in writers.values():
            w.close()
    counts = {k: [traces.column(k)[0].as_py() * copies] for k in ("n_events", "n_edges")}
    for k, v in counts.items():
        traces = traces.set_column(traces.schema.get_field_index(k), k, pa.array(v, pa.int64()))
    pq.write_table(traces, tmp / "traces.parquet")
    shutil.copy(base / "_orchestrace.json", tmp / "_orchestrace.json")
    tmp.rename(out)


def inputs(events: int, with_json: bool) -> dict[str, Path]:
    DATA.mkdir(exist_ok=True)
    agents = 100 if events >= 10_000 else 10
    from orchestrace.trace.generate import GENERATOR_VERSION

    stem = f"columnar-gen{GENERATOR_VERSION}-{events}"  # inputs of one generator version
    out = {"parquet": DATA / f"{stem}.parquet"}
    if with_json:
        out["json"] = DATA / f"{stem}.json"
    for path in out.values():
        if not path.exists():
            print(f"generating {path} ...", flush=True)
            subprocess.run(
                [
                    *CLI,
                    "generate",
                    "-k",
                    str(agents),
                    "-l",
                    str(events),
                    "-d",
                    "3",
                    "-o",
                    str(path),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-json", action="store_true", help="skip the JSON file and msgspec")
    ap.add_argument("--out", help="also write the figures as JSON here")
    ap.add_argument("--core", default="1", help="the CPU to pin every measured process to")
    ap.add_argument(
        "--tile",
        type=int,
        default=0,
        help="also measure a dataset of this many copies of the --events one (e.g. 10: "
        "10x the events), for the scaling ratio and peak memory",
    )
    args = ap.parse_args()
    CORE[0] = args.core
    files = inputs(args.events, not args.no_json)
    load_before = os.getloadavg()
    print(
        f"{args.events:,} events, {args.reps} reps, one core ({'taskset' if _pin() else 'unpinned'}); "
        f"load average {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f} "
        f"on {os.cpu_count()} CPUs",
        flush=True,
    )
    pq_path = str(files["parquet"])
    rows = interleaved(
        [
            ("read_table (floor)", [sys.executable, "-c", READ_TABLE, pq_path]),
            ("duckdb query (baseline)", [sys.executable, "-c", DUCKDB, pq_path]),
            ("validate parquet", [*CLI, "validate", "-q", pq_path]),
            ("analyze --json parquet", [*CLI, "analyze", "--json", pq_path]),
        ],
        args.reps,
    )
    if "json" in files:
        js = str(files["json"])
        rows += interleaved(
            [
                ("msgspec decode (floor)", [sys.executable, "-c", DECODE, js]),
                ("validate json", [*CLI, "validate", "-q", js]),
                ("analyze --json json", [*CLI, "analyze", "--json", js]),
            ],
            args.reps,
        )
    if args.tile > 1:
        big = files["parquet"].with_name(f"{files['parquet'].stem}x{args.tile}.parquet")
        if not big.exists():
            print(f"writing {big} ...", flush=True)
            tiled(files["parquet"], args.tile, big)
        x = f" x{args.tile}"
        rows += interleaved(
            [
                ("read_table (floor)" + x, [sys.executable, "-c", READ_TABLE, str(big)]),
                ("validate parquet" + x, [*CLI, "validate", "-q", str(big)]),
                ("analyze --json parquet" + x, [*CLI, "analyze", "--json", str(big)]),
            ],
            args.reps,
        )
    by = {r["name"]: r for r in rows}
    ratios = {}
    for name, floor in (
        ("validate parquet", "read_table (floor)"),
        ("analyze --json parquet", "read_table (floor)"),
        ("analyze --json parquet", "duckdb query (baseline)"),
        ("validate json", "msgspec decode (floor)"),
        ("analyze --json json", "msgspec decode (floor)"),
    ):
        if name in by:
            for key in ("wall_s", "cpu_s"):
                ratios[f"{name} / {floor} ({key})"] = (
                    by[name][key]["median"] / by[floor][key]["median"]
                )
    if args.tile > 1:
        for name in ("read_table (floor)", "validate parquet", "analyze --json parquet"):
            for key in ("wall_s", "cpu_s"):
                ratios[f"{name} x{args.tile} / x1 ({key})"] = (
                    by[f"{name} x{args.tile}"][key]["median"] / by[name][key]["median"]
                )
    for k, v in ratios.items():
        print(f"  {k:<62} {v:6.2f}x")
    load_after = os.getloadavg()
    print(
        f"load average after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; "
        "wall times include waiting for a core when the load exceeds the CPUs: compare CPU "
        "times and ratios measured in the same run",
        flush=True,
    )
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "events": args.events,
                    "load_before": load_before,
                    "load_after": load_after,
                    "rows": rows,
                    "ratios": ratios,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
