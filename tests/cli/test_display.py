"""Hostile ids and content never reach the terminal raw, and human output stays bounded."""

import json
import re

import pytest

from orchestrace._safe import bounded, display, guarded_output, redact
from orchestrace.cli import main

HOSTILE = "\x1b[31mRED\x1b[0m\x07\r\nFAKE: ok"
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A recorded run, and copies whose trace id is hostile or huge."""
    d = tmp_path_factory.mktemp("display")
    run = d / "run.jsonl"
    assert main(["run", "centralized", "-k", "2", "-o", str(run), "--no-progress"]) == 0
    lines = run.read_text().splitlines()
    out = {}
    for name, tid in (("hostile", HOSTILE), ("huge", "A" * 10**6)):
        recs = []
        for line in lines:
            r = json.loads(line)
            for key in ("header", "event", "edge", "footer"):
                if isinstance(r.get(key), dict) and "trace_id" in r[key]:
                    r[key]["trace_id"] = tid
            recs.append(json.dumps(r))
        path = d / f"{name}.jsonl"
        path.write_text("\n".join(recs) + "\n")
        out[name] = path
    return out


COMMANDS = [
    ["validate"],
    ["analyze"],
    ["credit"],
    ["credit", "--method", "discounted"],
    ["reward"],
    ["replay"],
    ["convert", "-o", "{tmp}/c.json"],
    ["export", "-o", "{tmp}/e.jsonl", "--to", "trl"],
    ["analyze", "--trace-id", HOSTILE],
]


@pytest.mark.parametrize("kind", ["hostile", "huge"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c)[:30])
def test_no_raw_control_characters_and_bounded_output(recorded, tmp_path, capsys, kind, command):
    capsys.readouterr()
    argv = [a.replace("{tmp}", str(tmp_path)) for a in command]
    rc = main([argv[0], str(recorded[kind]), *argv[1:]])
    out = capsys.readouterr()
    text = out.out + out.err
    assert rc in (0, 1), text
    assert not RAW_CONTROL.search(text), repr(text[:500])
    assert not any(line.startswith("FAKE") for line in text.splitlines())
    assert len(text) < 5000, len(text)
    if kind == "hostile" and command[0] in ("analyze", "credit", "reward") and rc == 0:
        assert "\\x1b[31mRED\\x1b[0m\\x07\\r\\nFAKE: ok" in text
    if kind == "huge" and command[0] in ("analyze", "credit", "reward") and rc == 0:
        assert "… (1000000 chars)" in text


def test_json_output_keeps_the_full_id(recorded, capsys):
    capsys.readouterr()
    assert main(["reward", str(recorded["hostile"]), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["trace_id"] == HOSTILE


def test_error_lines_are_escaped_and_bounded(tmp_path, capsys):
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps({"trace_id": "x" * 100_000 + HOSTILE, "events": "nope"}))
    rc = main(["validate", str(bad)])
    out = capsys.readouterr()
    text = out.out + out.err
    assert rc == 1
    assert not RAW_CONTROL.search(text)
    assert len(text) < 20_000


def test_run_answer_is_clipped(capsys):
    from types import SimpleNamespace

    from orchestrace.cli.run import result_lines

    meta = {"result": {"answer": "A" * 10_000 + HOSTILE, "truth": 4, "stop_reason": HOSTILE}}
    res = SimpleNamespace(
        success=False, backend_calls=0, cpu_s=0.0, wall_s=0.0, trace=SimpleNamespace(meta=meta)
    )
    line = result_lines(res, "out\x1b.jsonl")
    assert len(line[0]) < 400 and not RAW_CONTROL.search("\n".join(line))


# ------------------------------------------------------------------------------- helpers
@pytest.mark.parametrize(
    "text,expected",
    [
        (HOSTILE, "\\x1b[31mRED\\x1b[0m\\x07\\r\\nFAKE: ok"),
        ("tab\there", "tab\\there"),
        ("del\x7f c1\x9b", "del\\x7f c1\\x9b"),
        ("bidi\u202eevil", "bidi\\u202eevil"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("line\u2028sep", "line\\u2028sep"),
        ("lone\ud800", "lone\\ud800"),
        ("café 東京", "café 東京"),
        (12, "12"),
    ],
)
def test_display_escapes(text, expected):
    assert display(text) == expected


def test_display_clips_with_length():
    assert display("x" * 81) == "x" * 79 + "… (81 chars)"
    assert display("x" * 80) == "x" * 80
    assert display("\x1b" * 100).endswith("… (100 chars)")
    assert len(display("\x1b" * 10**6)) < 100
    assert len(display("y" * 10**7)) < 100


def test_guard_escapes_everything_printed(capsys):
    with guarded_output():
        print(f"a{HOSTILE}b")
        import sys

        print("err\x1b[2J", file=sys.stderr)
    out = capsys.readouterr()
    assert out.out == "a\\x1b[31mRED\\x1b[0m\\x07\\r\nFAKE: okb\n"
    assert out.err == "err\\x1b[2J\n"


def test_bounded_clips_lines_and_count():
    assert bounded("a\n" + "b" * 5000, width=100).endswith("… (5000 chars)")
    assert bounded("\n".join("x" * 70), lines=5).endswith("... and 65 more line(s)")
    assert bounded(f"error: {HOSTILE}\n  next\tline") == (
        "error: \\x1b[31mRED\\x1b[0m\\x07\\r\nFAKE: ok\n  next\tline"
    )


@pytest.mark.parametrize(
    "text,secret",
    [
        ("Authorization: Bearer sk-FAKE-SECRET-0123456789", "sk-FAKE"),
        ('{"authorization": "Bearer abc.def-ghi"}', "abc.def"),
        ("x-api-key: k-1234567890", "k-1234567890"),
        ("http://alice:s3cretPW@host:8000/v1", "s3cretPW"),
        ("https://host/v1?api_key=QUERYSECRET&x=1", "QUERYSECRET"),
        ("password=hunter22 user=bob", "hunter22"),
        ("token: tok-ABCDEFGH", "tok-ABCDEFGH"),
        ("hf_ABCDEFGHIJKLMNOPQRSTUV leaked", "hf_ABCDEFGH"),
        ("Basic YWxpY2U6czNjcmV0UFc=", "YWxpY2U6"),
    ],
)
def test_redact_removes_secrets(text, secret):
    out = redact(text)
    assert secret not in out and "***" in out


def test_redact_keeps_ordinary_text():
    for text in (
        "prompt_tokens=-50",
        "tokens_in 12, max_tokens=512",
        "the key is fine",
        "http://127.0.0.1:8000/v1/chat/completions answered 500",
        # a path whose last part is a secret's name is a path (`error: PATH: place: ...`)
        "/etc/passwd: file name: cannot tell the trace format",
        "runs\\token: file name: cannot tell the trace format",
    ):
        assert redact(text) == text
