"""Bad reward specs: one clear line naming the file, the entry and the fix; exit 1."""

import os

import pytest

from orchestrace.cli import main
from orchestrace.errors import ConfigError
from orchestrace.rewards import Composite, load_spec
from orchestrace.trace.generate import generate_trace


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "rewards.toml"

    def write(text):
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path

    return write


CASES = [
    ('[reward.parl]\nlambda1 = "x"\n', "[reward.parl]: lambda1 must be a number (got 'x'); write"),
    ("[reward.team]\nweight = nan\n", "[reward.team]: weight must be a finite number (got nan)"),
    ("[reward.team]\nweight = inf\n", "[reward.team]: weight must be a finite number (got inf)"),
    ("[reward.team]\nweight = -inf\n", "weight must be a finite number (got -inf)"),
    ('[reward.team]\nweight = "high"\n', "[reward.team]: weight must be a number, got 'high'"),
    ("[reward.team]\nweight = true\n", "weight must be a number, got True"),
    (
        '[reward.tools]\nfamily = "R5"\ncost_weight = "x"\n',
        "[reward.tools]: cost_weight must be a number (got 'x')",
    ),
    (
        '[reward.tools]\nfamily = "R5"\ncost_weight = nan\n',
        "[reward.tools]: cost_weight must be a finite number (got nan)",
    ),
    ("[reward.parl]\nlambda1 = nan\n", "[reward.parl]: lambda1 must be a finite number"),
    (
        '[reward.parl]\nlambda1 = {start = 1, steps = "x"}\n',
        "[reward.parl]: lambda1.steps must be an integer (got 'x')",
    ),
    (
        "[reward.parl]\nlambda1 = {start = nan}\n",
        "[reward.parl]: lambda1.start must be a finite number (got nan)",
    ),
    (
        "[reward.parl]\nlambda1 = {start = 1, stop = 2}\n",
        "[reward.parl]: lambda1 schedule has unknown key 'stop'",
    ),
    ("[reward.parl]\nlambda1 = { start = 1, steps = 0 }\n", "steps must be >= 1"),
    (
        "[reward.parl]\nlamda1 = 0.2\n",
        "[reward.parl]: unknown setting 'lamda1' for reward 'parl' (did you mean 'lambda1'?)",
    ),
    ("[reward.team]\nbogus = 2\n", "its settings are: weight, family"),
    ('[reward.team]\nchecker = "x"\n', "checker cannot be set in a spec"),
    ("[reward.x]\nweight = 1\n", "[reward.x]: unknown reward 'x'; use one of:"),
    ("[reward.t]\nfamily = 3\n", "[reward.t]: family must be a reward name (got 3)"),
    ('[reward.h]\nfamily = "hybrid"\nalpha = 7\n', "[reward.h]: alpha must be in [0, 1]"),
    ("[rewards.team]\nweight = nan\n", "[rewards.team]: weight must be a finite number"),
    ("[team]\nweight = nan\n", "[team]: weight must be a finite number"),
    ("[reward]\nteam = 5\n", "[reward.team]: expected a table of settings, got 5"),
    ("[reward.team\nweight = 1\n", "not valid TOML: Expected ']' at the end of a table"),
    ("reward = 5\n", "no rewards; add tables like [reward.team] weight = 1.0"),
    ("", "no rewards"),
    (
        b"\xff\xfe[reward.team]\n",
        "not UTF-8 text (line 1, byte 0: b'\\xff'); save the spec as UTF-8",
    ),
    (b"[reward.team]\nweight = 1 # caf\xe9\n", "not UTF-8 text (line 2, byte 30: b'\\xe9')"),
]


@pytest.mark.parametrize("text,message", CASES)
def test_bad_spec_names_file_entry_and_fix(spec, text, message):
    path = spec(text)
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: "), msg
    assert message in msg
    assert "\n" not in msg


@pytest.mark.parametrize("text,message", CASES[:6])
def test_bad_spec_through_the_cli(spec, tmp_path, capsys, text, message):
    path = spec(text)
    trace = tmp_path / "t.json"
    assert main(["generate", "--seed", "1", "-o", str(trace)]) == 0
    capsys.readouterr()
    rc = main(["reward", str(trace), "--spec", str(path)])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.startswith(f"error: {path}: ") and err.count("\n") == 1
    assert message in err


def test_spec_paths_that_are_not_files(tmp_path):
    with pytest.raises(
        ConfigError, match=r"is a directory; pass a TOML file such as rewards\.toml"
    ):
        load_spec(tmp_path)
    with pytest.raises(ConfigError, match="no such reward spec file"):
        load_spec(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="not a regular file"):
        load_spec("/dev/zero")
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_spec(fifo)  # must not block
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * (1 << 20))
    with pytest.raises(ConfigError, match="over 1048576 bytes"):
        load_spec(big)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_unreadable_spec(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text("[reward.team]\n")
    path.chmod(0)
    with pytest.raises(ConfigError, match="cannot read the reward spec"):
        load_spec(path)


def test_good_spec_still_loads(spec):
    combo = load_spec(
        spec(
            "[reward.team]\nweight = 1\n[reward.parl]\nweight = 0.5\n"
            "lambda1 = { start = 0.2, end = 0.0, steps = 100 }\n"
            '[reward.tools]\nfamily = "R5"\nweight = -0.25\ncost_weight = 0.001\n'
            '[reward.roles]\nfamily = "role"\nweights = { expert = 1.0, novice = 0.5 }\n'
        )
    )
    assert sorted(combo.rewards) == ["parl", "roles", "team", "tools"]
    assert combo.rewards["tools"][1] == -0.25
    tr = generate_trace(agents=3, steps=20, depth=1, seed=0)
    assert len(combo([tr])) == 1


def test_api_spec_errors_name_the_entry():
    with pytest.raises(ConfigError, match=r"^\[reward\.tools\]: cost_weight must be a number"):
        Composite.from_spec({"tools": {"family": "R5", "cost_weight": "x"}})
    with pytest.raises(ConfigError, match=r"^\[reward\.team\]: weight must be a finite number"):
        Composite.from_spec({"team": {"weight": float("nan")}})


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
def test_credit_reward_must_be_finite(tmp_path, capsys, value):
    trace = tmp_path / "t.json"
    assert main(["generate", "--seed", "1", "-o", str(trace)]) == 0
    capsys.readouterr()
    rc = main(["credit", str(trace), f"--reward={value}"])
    out = capsys.readouterr()
    assert rc == 1 and out.out == ""
    assert out.err.startswith("error: --reward must be a finite number (got ")
    assert out.err.count("\n") == 1
