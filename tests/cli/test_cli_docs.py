"""docs/cli.md, the command reference, names every command the ``ledger`` CLI has."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli import cli

DOC = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")


def _commands(group: click.Group, prefix: str) -> list[str]:
    found: list[str] = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        path = f"{prefix} {name}"
        found.append(path)
        if isinstance(command, click.Group):
            found += _commands(command, path)
    return found


def test_every_command_is_in_the_reference() -> None:
    missing = [c for c in _commands(cli, "ledger") if f"`{c}" not in DOC and f"{c} " not in DOC]
    assert missing == [], f"docs/cli.md does not mention: {missing}"
