import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrace import dump, dumps, generate_trace, load
from orchestrace.cli import main
from orchestrace.trace.analyze import SUMMARY_KEYS


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_schema(capsys):
    code, out, _ = run(capsys, "schema")
    assert code == 0 and json.loads(out)["$schema"].endswith("2020-12/schema")


def test_generate_same_seed_same_bytes(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for p in (a, b):
        assert (
            run(
                capsys,
                "generate",
                "--agents",
                "12",
                "--steps",
                "300",
                "--depth",
                "2",
                "--seed",
                "5",
                "-o",
                str(p),
            )[0]
            == 0
        )
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() == dumps(generate_trace(12, 300, 2, 5))


def test_validate_ok_and_bad(tmp_path, capsys, small_trace):
    good = tmp_path / "good.json"
    dump(small_trace, good)
    code, out, _ = run(capsys, "validate", str(good))
    assert (
        code == 0
        and out == f"{good}: ok ({small_trace.n_events} events, {len(small_trace.edges)} edges)\n"
    )
    d = json.loads(dumps(small_trace))
    d["events"][1]["id"] = "e1"
    d["events"][2]["type"] = "wander"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d))
    code, out, _ = run(capsys, "validate", str(good), str(bad))
    lines = out.splitlines()
    assert code == 1
    assert lines[0].endswith(f"ok ({small_trace.n_events} events, {len(small_trace.edges)} edges)")
    assert lines[1].startswith(f"{bad}: $.events[2].type: unknown event type 'wander'; use one of:")
    assert all(line.startswith(str(bad)) for line in lines[1:])


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{",
        b"\x00\xff" * 50,
        b"[]",
        b'{"events": 5}',
        b"[" * 200_000,
        b'"' + b"a" * 10_000_000 + b'"',
    ],
)
def test_validate_bad_files_exit_1_without_traceback(tmp_path, capsys, content):
    p = tmp_path / "x.json"
    p.write_bytes(content)
    code, out, err = run(capsys, "validate", str(p))
    assert code == 1 and "Traceback" not in out + err
    assert out.startswith(f"{p}: ") and len(out) < 2000


def test_validate_missing_file(capsys, tmp_path):
    code, out, _ = run(capsys, "validate", str(tmp_path / "nope.json"))
    assert code == 1 and out == f"{tmp_path / 'nope.json'}: file: no such file; check the path\n"


def test_validate_partial_recording(tmp_path, capsys, small_trace):
    from orchestrace.io import StreamWriter

    p = tmp_path / "run.jsonl"
    w = StreamWriter(p, trace_id="t", task_id="x")
    for e in small_trace.events[:4]:
        w.event(e)
    for e in small_trace.edges:
        if int(e.dst[1:]) <= 4:
            w.edge(e)
    w.abandon()
    with open(p, "ab") as fh:
        fh.write(b'{"event": {"id": "e5", "t"')  # killed mid-write
    code, out, _ = run(capsys, "validate", str(p))
    assert (
        code == 1 and "trace is truncated: line 11 was cut off mid-record after 4 complete" in out
    )
    code, out, _ = run(capsys, "validate", "--partial", str(p))
    assert code == 0 and "warning: trace is truncated" in out
    assert out.strip().endswith("ok with 1 warning(s) (1 trace(s), 4 events)")


def test_analyze_json_keys(tmp_path, capsys, medium_trace):
    p = tmp_path / "t.json"
    dump(medium_trace, p)
    code, out, _ = run(capsys, "analyze", str(p), "--json")
    s = json.loads(out)
    assert code == 0 and tuple(s) == ("trace_id", *SUMMARY_KEYS)
    assert s["trace_id"] == medium_trace.trace_id
    assert s["events"] == medium_trace.n_events and s["agents"] == 40
    assert s["speedup"] == pytest.approx(s["work_s"] / s["critical_path_s"])
    assert s["critical_path"][0] == "e1"
    code, text, _ = run(capsys, "analyze", str(p))
    assert code == 0 and "critical path" in text and "speedup" in text


def test_analyze_parquet_and_jsonl(tmp_path, capsys, medium_trace):
    a, b = tmp_path / "t.parquet", tmp_path / "t.jsonl"
    dump(medium_trace, a)
    dump(medium_trace, b)
    outs = [json.loads(run(capsys, "analyze", str(p), "--json")[1]) for p in (a, b)]
    assert outs[0] == outs[1]


def test_analyze_invalid_trace_exits_1(tmp_path, capsys, small_trace):
    p = tmp_path / "cyc.json"
    d = json.loads(dumps(small_trace))
    d["edges"].append({"src": "e9", "dst": "e1", "type": "causal"})
    p.write_text(json.dumps(d))
    code, _, err = run(capsys, "analyze", str(p))
    assert code == 1 and "causal cycle" in err and "Traceback" not in err


def test_convert_all_ways(tmp_path, capsys, reference, small_trace):
    src = tmp_path / "t.json"
    dump(small_trace, src)
    up = tmp_path / "up.json"
    assert run(capsys, "convert", str(src), "--to", "upstream", "-o", str(up))[0] == 0
    import jsonschema

    jsonschema.validate(
        json.loads(up.read_text()), json.loads((reference / "trace_schema.json").read_text())
    )
    back = tmp_path / "back.parquet"
    assert run(capsys, "convert", str(up), "--from", "upstream", "-o", str(back))[0] == 0
    assert load(back) == small_trace
    ex = tmp_path / "ex.jsonl"
    assert run(capsys, "convert", str(reference / "example_trace.json"), "-o", str(ex))[0] == 0


def test_console_script_and_module(tmp_path):
    p = tmp_path / "g.json"
    r = subprocess.run(
        [sys.executable, "-m", "orchestrace", "generate", "-o", str(p)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [str(Path(sys.executable).parent / "orchestrace"), "validate", str(p)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0 and re.search(r"ok \(200 events, \d+ edges\)\n$", r.stdout), r.stdout


def test_demo(capsys, tmp_path):
    code, out, _ = run(capsys, "demo", "--agents", "8", "-o", str(tmp_path / "demo.jsonl"))
    assert code == 0 and "critical steps" in out and "swarm" in out
    assert (tmp_path / "demo.jsonl").exists()


@pytest.mark.parametrize("agents", ["0", "999", "100000000"])
def test_demo_names_agents_when_it_is_out_of_range(capsys, tmp_path, agents):
    code, _, err = run(capsys, "demo", "--agents", agents, "-o", str(tmp_path / "d.jsonl"))
    assert code == 1 and err.startswith("error: --agents must be from 1 to 998 (got ")
    assert "--task-size" not in err and not (tmp_path / "d.jsonl").exists()


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["analyze"])
    assert e.value.code == 2
    assert main([]) == 2


def test_run_and_replay_commands(tmp_path, capsys):
    out = tmp_path / "d.jsonl"
    code, text, _ = run(
        capsys,
        "run",
        "debate",
        "--task",
        "arith",
        "--agents",
        "3",
        "-o",
        str(out),
        "-O",
        "rounds=1",
        "--no-progress",
    )
    assert code == 0 and "backend calls" in text and "critical steps" in text
    code, text, _ = run(capsys, "replay", str(out))
    assert code == 0 and "identical trace" in text
    first_msg = next(e.id for e in load(out).events if e.type == "message")
    code, text, _ = run(
        capsys, "replay", str(out), "--drop-message", first_msg, "-o", str(tmp_path / "f.json")
    )
    assert code == 0 and "fork with DropMessage" in text and "backend call(s)" in text
    forked = load(tmp_path / "f.json")
    calls = sum(e.type == "llm_call" for e in forked.events)  # the share is of the fork's calls
    assert f"of the fork's {calls} LLM calls)" in text
    code, text, err = run(
        capsys, "replay", str(out), "--drop-message", first_msg, "--resample-message", first_msg
    )
    assert code == 1 and "--drop-message and --resample-message both name message" in err
    code, text, _ = run(capsys, "run", "swarm", "--json", "--agents", "2", "--no-progress")
    assert code == 0 and json.loads(text)["events"] > 0


def test_run_bad_input_is_a_clear_error(capsys):
    for args, msg in (
        (["run", "mesh"], "unknown topology 'mesh'"),
        (["run", "swarm", "--task", "chess"], "unknown task 'chess'"),
        (["run", "swarm", "-O", "rounds"], "--option takes KEY=VALUE"),
        (["run", "swarm", "--agents", "0"], "agents must be >= 1"),
        (["run", "swarm", "--backend", "hf"], "needs --model"),
        (["replay", "nope.jsonl"], "no such file"),
    ):
        code, _, err = run(capsys, *args)
        assert code == 1 and msg in err and "Traceback" not in err
