"""``ledger db upgrade URL`` and ``ledger db check URL``.

``upgrade`` brings the schema to the newest revision (:func:`ledger.sinks.upgrade`);
``check`` reports schema revision, row counts and an integrity check
(:func:`ledger.report_db.check_database`) and exits with status 1 when something is wrong.
"""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from ledger.cli.common import (
    emit_json,
    json_option,
    progress,
    stdout,
    url_or_db,
    url_or_db_required,
)
from ledger.report.database import check_database, database_url

__all__ = ["db", "register"]


@click.group(short_help="Schema and health: upgrade, check, copy, vacuum.")
def db() -> None:
    """Database schema, health, copies and space: upgrade (create or migrate), check
    (read-only), copy (into an empty ledger, verified), vacuum (reclaim erased space)."""


@db.command(short_help="Create or migrate the schema at URL to the newest revision.")
@url_or_db_required
@json_option
def upgrade(url: str, as_json: bool) -> None:
    """Bring the ledger schema at URL to the newest revision (creates it if empty)."""
    from ledger.sinks import upgrade as upgrade_schema

    revision = upgrade_schema(database_url(url).url)
    if as_json:
        emit_json({"revision": revision})
    else:
        click.echo(f"schema at revision {revision}")


@db.command(short_help="Schema revision, row counts and integrity (read-only).")
@url_or_db
@json_option
def check(url: str, as_json: bool) -> None:
    """Schema revision, row counts and integrity of the ledger at URL (read-only)."""
    result = check_database(url)
    if as_json:
        emit_json(result.to_dict())
    else:
        stdout().print(f"ledger database {escape(result.url)}", soft_wrap=True)
        table = Table(show_header=False)
        table.add_column("what")
        table.add_column("value")
        table.add_row("dialect", result.dialect)
        table.add_row(
            "schema",
            f"{result.revision or '(none)'} ({result.schema_status}; newest {result.head})",
        )
        table.add_row("events", str(result.events))
        table.add_row("runs", str(result.runs))
        for kind, count in sorted(result.kinds.items(), key=lambda item: str(item[0])):
            table.add_row(f"  {kind}", str(count))
        table.add_row("integrity", result.integrity)
        table.add_row("content hashes", result.hash_check.summary())
        table.add_row("tamper-evident log", escape(result.log_statement()))
        stdout().print(table)
        verdict = "[green]ok[/]" if result.ok else "[bold red]problems found[/]"
        stdout().print(verdict)
    if not result.ok:
        raise SystemExit(1)


@db.command(short_help="Copy a ledger into an empty one (any store), then verify it.")
@click.argument("source")
@click.argument("destination")
@click.option(
    "--skip-unreadable", is_flag=True,
    help="Leave out source records that do not read back (listed), instead of stopping.",
)  # fmt: skip
@click.option(
    "--allow-damaged", is_flag=True,
    help="Copy a source database that fails `ledger db check` (the copy would hide it).",
)  # fmt: skip
@json_option
def copy(
    source: str, destination: str, skip_unreadable: bool, allow_damaged: bool, as_json: bool
) -> None:
    """Copy every event of SOURCE into the empty ledger DESTINATION in commit order, then
    read the copy back and check it holds the same events (SQLite, PostgreSQL, JSONL).

    A source database is checked first (as `ledger db check` does: content hashes and the
    tamper-evident log): a damaged or tampered one is refused, because its copy would get
    a fresh, valid log and hide what was done, unless --allow-damaged."""
    from ledger.errors import StorageError
    from ledger.sinks import copy_ledger
    from ledger.sinks.url import parse_url

    if parse_url(source).scheme in ("sqlite", "postgresql") and not allow_damaged:
        found = check_database(source)
        if found.schema_status == "behind":  # an older revision is not damage
            raise StorageError(
                f"the source {found.url} is at schema revision {found.revision}, older than "
                f"this version's {found.head}, so nothing was copied; run `ledger db upgrade` "
                "on it first, then copy it"
            )
        if not found.ok:
            raise StorageError(
                f"the source {found.url} fails its checks (see `ledger db check`); a copy "
                "would hide that behind a new log, so nothing was copied (--allow-damaged "
                "copies it anyway)"
            )

    with progress("copying events") as step:
        result = copy_ledger(source, destination, skip_unreadable=skip_unreadable, progress=step)
    if as_json:
        emit_json(
            {"source": result.source, "destination": result.destination,
             "copied": result.copied, "verified": result.verified,
             "skipped": list(result.skipped)}
        )  # fmt: skip
        return
    click.echo(f"copied {result.copied} events to {result.destination}; the copy verifies")
    for line in result.skipped:
        click.echo(f"left out: {line}", err=True)


def register(group: click.Group) -> None:
    """Add the ``db`` group to ``group``."""
    group.add_command(db)
