"""An option that takes one value, given twice to any ``ledger`` command, is a usage
error: click keeps the last value and drops the others without a word, so ``ledger
erase --db A --db B`` acted on B and ``--reason a --reason b`` recorded b."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ledger.cli import cli


def _commands(
    group: click.Group, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


SINGLE = [
    pytest.param(path, option, id=" ".join(path) + " " + max(option.opts, key=len))
    for path, command in _commands(cli)
    for option in command.params
    if isinstance(option, click.Option) and not (option.multiple or option.count or option.is_flag)
]


def test_every_command_was_walked() -> None:
    found = {" ".join(p.values[0]) for p in SINGLE}  # type: ignore[arg-type]
    assert {"erase", "hold add", "retention set", "events", "report", "verify"} <= found


@pytest.mark.parametrize(("path", "option"), SINGLE)
def test_a_single_valued_option_given_twice_is_a_usage_error(
    path: tuple[str, ...], option: click.Option, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused before the command runs: exit 2, the option named, nothing created."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LEDGER_DB", raising=False)
    flag = max(option.opts, key=len)
    values = ["x"] * max(option.nargs, 1)
    result = CliRunner().invoke(cli, [*path, flag, *values, flag, *values])
    assert result.exit_code == 2, result.output
    assert f"{flag} was given more than once" in result.output
    assert list(tmp_path.iterdir()) == []


def test_options_that_repeat_by_design_still_do(tmp_path: Path) -> None:
    """Flags and ``multiple`` options (``erase --field``) are not refused; the command
    goes on to its own checks (here: the ledger file does not exist)."""
    db = f"sqlite:///{tmp_path / 'missing.db'}"
    result = CliRunner().invoke(
        cli,
        ["erase", "--db", db, "--run", "r", "--field", "args", "--field", "result",
         "--reason", "gdpr", "--dry-run", "--dry-run"],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "more than once" not in result.output
    assert "does not exist" in result.output


def test_help_is_shown_whatever_else_the_line_holds() -> None:
    result = CliRunner().invoke(cli, ["erase", "--reason", "a", "--reason", "b", "--help"])
    assert result.exit_code == 0 and "erase [OPTIONS]" in result.output
