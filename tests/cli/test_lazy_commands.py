"""The command line imports the module of the chosen command only, and lists every command."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from orchestrace import cli


def _commands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_the_listed_help_is_each_modules_own() -> None:
    lazy = _commands(cli.build_parser())
    full = _commands(cli.build_parser(load=True))
    listed = [(a.dest, a.help) for a in lazy._choices_actions]
    own = [(a.dest, a.help) for a in full._choices_actions]
    assert listed == own
    assert [name for name, _ in listed] == list(cli.COMMANDS)


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_a_chosen_command_gets_its_own_parser(name: str) -> None:
    lazy = _commands(cli.build_parser())
    full = _commands(cli.build_parser(load=True))
    lazy.load(name)  # what parsing the command does
    assert lazy.choices[name].format_help() == full.choices[name].format_help()
    assert [a.dest for a in lazy._choices_actions] == list(cli.COMMANDS)


def _cli_modules_after(argv: list[str]) -> set[str]:
    code = (
        "import sys\n"
        "from orchestrace.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(m for m in sys.modules if m.startswith('orchestrace.cli.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return set(out.split("\n")[-2].split())


def test_only_the_chosen_commands_module_is_imported() -> None:
    assert not set(cli.COMMANDS.values()) & _cli_modules_after(["--version"])
    assert set(cli.COMMANDS.values()) & _cli_modules_after(["schema"]) == {"orchestrace.cli.schema"}
