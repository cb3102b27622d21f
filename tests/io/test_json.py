import json
import os

import pytest

from orchestrace import TraceFormatError, TraceValidationError, dump, dumps, load, loads
from orchestrace.io import OutputError


def test_roundtrip_lossless(small_trace, medium_trace, tmp_path):
    for tr in (small_trace, medium_trace):
        assert loads(dumps(tr)) == tr
        assert loads(dumps(tr, indent=2)) == tr
        p = tmp_path / "t.json"
        dump(tr, p, overwrite=True)
        assert load(p) == tr
        assert dumps(load(p)) == dumps(tr)


def test_attrs_and_unicode_survive(small_trace):
    import msgspec

    ev = msgspec.structs.replace(
        small_trace.events[0],
        attrs={"nested": {"a": [1, 2.5, None]}, "emoji": "🤖\u0000"},
        content='line1\nline2 "quoted" ☃',
    )
    tr = small_trace.replace(events=(ev, *small_trace.events[1:]), meta={"seed": 3})
    assert loads(dumps(tr)) == tr


@pytest.mark.parametrize(
    "data,where,reason",
    [
        (b'{"trace_id": "x",', "end of data, line 1, column 18 (byte 17)", "JSON ends early"),
        (
            b'{"trace_id": "x",,}',
            "line 1, column 18 (byte 17)",
            "malformed JSON: object keys must be strings",
        ),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "line 1, column 1 (byte 0)", "malformed JSON"),
        (b'{"a": "\xff\xfe"}', "document", "not UTF-8 text"),
        (b"[" * 100_000, "document", "JSON nested too deeply"),
    ],
)
def test_malformed_json_is_a_clear_error(data, where, reason):
    with pytest.raises(TraceFormatError) as err:
        loads(data, source="f.json")
    assert err.value.where == where
    assert err.value.reason.startswith(reason)
    assert str(err.value).startswith(f"f.json: {where}: ")


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(TraceFormatError, match="no such file; check the path"):
        load(tmp_path / "missing.json")
    (tmp_path / "empty.json").write_bytes(b"")
    with pytest.raises(TraceFormatError, match="file is empty"):
        load(tmp_path / "empty.json")
    with pytest.raises(TraceFormatError, match="is a directory"):
        load(tmp_path, format="json")


def test_invalid_trace_lists_every_problem(small_trace):
    d = json.loads(dumps(small_trace))
    d["events"][0]["type"] = "think"
    d["edges"].append({"src": "e1", "dst": "nowhere", "type": "causal"})
    with pytest.raises(TraceValidationError) as err:
        loads(json.dumps(d), source="bad.json")
    codes = [p.code for p in err.value.problems]
    assert codes == ["unknown-type", "dangling-edge"]
    assert all(p.source == "bad.json" for p in err.value.problems)


def test_huge_string_loads(small_trace):
    import msgspec

    big = "x" * 10_000_000
    ev = msgspec.structs.replace(small_trace.events[0], content=big)
    tr = small_trace.replace(events=(ev, *small_trace.events[1:]))
    assert loads(dumps(tr)).events[0].content == big


def test_write_is_atomic(small_trace, tmp_path, monkeypatch):
    p = tmp_path / "t.json"
    dump(small_trace, p)
    before = p.read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OutputError, match="disk full"):
        dump(small_trace.replace(trace_id="other"), p, overwrite=True)
    assert p.read_bytes() == before
    assert [x.name for x in tmp_path.iterdir()] == ["t.json"]
