"""commands.refusal and @exits: the one place a command's error becomes a line on stderr and an exit code."""

from __future__ import annotations

import pytest

from hermes_runner.commands import exits, refusal
from hermes_runner.errors import (
    ConfigError,
    ExitCode,
    ExportError,
    ForeignRunDirError,
    NotARunDir,
    RunDirBusy,
    SandboxError,
)


@pytest.mark.parametrize("exc", [ConfigError("x"), ForeignRunDirError("x"), RunDirBusy("x"), NotARunDir("x"),
                                 ExportError("x")])  # fmt: skip
def test_bad_input_is_exit_2_with_one_line(exc, capsys):
    assert refusal(exc) == ExitCode.CONFIG == 2
    assert capsys.readouterr().err == "error: x\n"


def test_another_runner_error_is_exit_1_a_message_is_bad_input_and_a_code_wins(capsys):
    assert refusal(SandboxError("died")) == ExitCode.FAILED
    assert refusal("no such option") == ExitCode.CONFIG
    assert refusal("cannot be opened", ExitCode.FAILED) == 1
    assert capsys.readouterr().err.splitlines() == ["error: died", "error: no such option", "error: cannot be opened"]


def test_exits_returns_what_main_returns_and_ends_a_runner_error_with_its_code(capsys):
    @exits()
    def ok(argv: list[str] | None = None) -> int:
        return 3

    @exits("merge refused")
    def refused(argv: list[str] | None = None) -> int:
        raise ConfigError(f"bad {argv}")

    @exits()
    def broken(argv: list[str] | None = None) -> int:
        raise SandboxError("gone")

    assert ok([]) == 3 and refused(["a"]) == 2 and broken() == 1
    assert capsys.readouterr().err.splitlines() == ["merge refused: bad ['a']", "error: gone"]


def test_exits_lets_other_errors_and_argparse_exits_through():
    @exits()
    def bug(argv: list[str] | None = None) -> int:
        raise KeyError("a bug is a traceback, not a refusal")

    @exits()
    def usage(argv: list[str] | None = None) -> int:
        raise SystemExit(2)

    with pytest.raises(KeyError):
        bug()
    with pytest.raises(SystemExit):
        usage()
