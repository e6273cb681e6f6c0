"""Schema versions: where a database stands against the newest Alembic revision, and
bringing it there.

>>> revision_state(head_revision())
<SchemaState.CURRENT: 'current'>
>>> revision_state(None, has_events=True)
<SchemaState.UNSTAMPED: 'unstamped'>

:func:`revision_state` is the one judge of a schema's state; the sinks, the readers and
``ledger db check`` all ask it. Every writing SQL sink calls :func:`ensure_schema` on
open. When the database is already at the newest revision that costs one catalog lookup
and one row read. A database stamped with a revision this code does not know (written by
a newer version of the library), or holding ledger tables without a version stamp (the
version table dropped by hand), is refused with ``SchemaVersionError``. Readers never
migrate (:func:`require_readable`). To migrate on demand, ``ledger.sinks.upgrade(url)``.

The revisions live in ``ledger/sinks/migrations/versions``; the version is kept in the table
``ledger_schema_version`` (not ``alembic_version``, so a database shared with an
application that uses Alembic itself is not confused).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import sqlite3
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ledger.errors import SchemaVersionError, StorageError

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory

__all__ = [
    "VERSION_TABLE",
    "SchemaState",
    "check_sqlite_file",
    "current_revision",
    "ensure_schema",
    "head_revision",
    "require_readable",
    "revision_state",
    "schema_state",
    "sqlite_file_state",
]

log = logging.getLogger(__name__)

VERSION_TABLE = "ledger_schema_version"
HEAD = "0007_tool_seq_index"  # the newest revision; a test checks it against ``versions/``
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


@functools.cache
def _scripts() -> ScriptDirectory:
    from alembic.script import ScriptDirectory  # Alembic loads only when migrating

    return ScriptDirectory(str(MIGRATIONS_DIR))


def head_revision() -> str:
    """The newest revision this code knows (without loading Alembic)."""
    return HEAD


def scripts_head() -> str | None:
    """The head revision as Alembic reads it from ``versions/`` (must equal ``HEAD``)."""
    return _scripts().get_current_head()


def advisory_key(name: str) -> int:
    """A stable signed 64-bit key for ``pg_advisory_*`` locks named ``name``."""
    digest = hashlib.sha256(f"agentledger:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class SchemaState(StrEnum):
    """Where a database's ledger schema stands."""

    CURRENT = "current"  # at the newest revision this code knows
    BEHIND = "behind"  # at an older known revision: `ledger db upgrade` brings it up
    EMPTY = "empty"  # no ledger tables yet
    UNKNOWN = "unknown"  # stamped with a revision this code does not know (newer code wrote it)
    UNSTAMPED = "unstamped"  # ledger tables without a version stamp: altered by hand


def revision_state(revision: str | None, *, has_events: bool = False) -> SchemaState:
    """The state of a database stamped ``revision`` (None: no stamp), which holds an
    ``events`` table when ``has_events``."""
    if revision is None:
        return SchemaState.UNSTAMPED if has_events else SchemaState.EMPTY
    if revision == HEAD:
        return SchemaState.CURRENT
    try:
        known = _scripts().get_revision(revision) is not None
    except Exception:  # alembic raises several kinds for an unknown id
        known = False
    return SchemaState.BEHIND if known else SchemaState.UNKNOWN


def schema_state(conn: sa.Connection, schema: str | None) -> tuple[str | None, SchemaState]:
    """``(revision, state)`` of the database behind ``conn``, read without changing it."""
    revision = current_revision(conn, schema)
    has_events = revision is not None or sa.inspect(conn).has_table("events", schema=schema)
    return revision, revision_state(revision, has_events=has_events)


def require_readable(
    revision: str | None, state: SchemaState, where: str, place: str = "it"
) -> None:
    """Refuse to read a ledger whose schema is not current, saying what to do; reading
    never migrates (``StorageError``, or ``SchemaVersionError`` for a newer or unstamped
    schema)."""
    import shlex

    upgrade = f"`ledger db upgrade {shlex.quote(where)}`"
    if state is SchemaState.CURRENT:
        return
    if state is SchemaState.EMPTY:
        raise StorageError(
            f"no ledger at {where}: {place} has no events table; create it with {upgrade}"
        )
    if state is SchemaState.BEHIND:
        raise StorageError(
            f"the ledger at {where} is at schema revision {revision!r}, this code reads "
            f"{HEAD!r}; run {upgrade}"
        )
    if state is SchemaState.UNSTAMPED:
        raise SchemaVersionError(_unstamped(where))
    raise SchemaVersionError(
        f"the ledger at {where} is at schema revision {revision!r}, newer than this code "
        f"knows (newest: {HEAD!r}); upgrade agentledger to read it"
    )


def _unstamped(where: str) -> str:
    return (
        f"{where} has an events table but no ledger schema version ({VERSION_TABLE} is "
        "missing or empty); nothing was changed. Either a table of another application is "
        "in the way (give the ledger its own file or schema), or the ledger's version table "
        "was dropped outside the ledger (restore the database from a backup)"
    )


def current_revision(conn: sa.Connection, schema: str | None) -> str | None:
    """The revision the database is stamped with, or None for an empty database."""
    if not sa.inspect(conn).has_table(VERSION_TABLE, schema=schema):
        return None
    table = sa.table(VERSION_TABLE, sa.column("version_num"), schema=schema)
    rows = conn.execute(sa.select(table.c.version_num)).scalars().all()
    if len(rows) != 1:
        raise SchemaVersionError(
            f"{VERSION_TABLE} holds {len(rows)} rows, expected 1; the schema version is "
            "unknown, repair it with Alembic"
        )
    return str(rows[0])


def ensure_schema(conn: sa.Connection, schema: str | None = None) -> bool:
    """Bring the database behind ``conn`` to the head revision; True if it migrated.

    Runs inside the caller's transaction (the caller commits). On PostgreSQL it takes a
    transaction-level advisory lock so concurrent openers migrate once; on SQLite the
    caller holds ``BEGIN IMMEDIATE``.
    """
    head = head_revision()
    found, state = schema_state(conn, schema)
    if state is SchemaState.CURRENT:
        return False
    _refuse_unusable(state, found, head)
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": advisory_key("migrate")})
        if schema:
            conn.execute(sa.text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
        found = current_revision(conn, schema)
        if found == head:
            return False
    log.info("migrating ledger schema %s from %s to %s", schema or "", found or "empty", head)
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = conn
    config.attributes["schema"] = schema
    try:
        command.upgrade(config, "head")
    except sa.exc.SQLAlchemyError as exc:
        detail = getattr(exc, "orig", None) or exc  # the driver's words, not the SQL
        raise StorageError(
            f"cannot migrate the ledger schema to {head}: {detail} (a table of another "
            "application in the way? give the ledger its own file or schema)"
        ) from exc
    return True


def _refuse_unusable(state: SchemaState, found: str | None, head: str) -> None:
    if state is SchemaState.UNSTAMPED:
        raise SchemaVersionError(_unstamped("this database"))
    if state is SchemaState.UNKNOWN:
        raise SchemaVersionError(
            f"the database's ledger schema is at revision {found!r}, newer than this code "
            f"knows (newest: {head!r}); upgrade agentledger to read or write it"
        )


def sqlite_file_state(path: Path) -> tuple[str | None, SchemaState] | None:
    """``(revision, state)`` of an existing SQLite file, read read-only (so a file this
    code must refuse is left unchanged: nothing turns WAL on first); None when there is
    no file or it is not a database SQLite can read (left to the normal open to report)."""
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        tables = {
            str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        rows = (
            conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchall()
            if VERSION_TABLE in tables
            else []
        )
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    if len(rows) > 1:
        raise SchemaVersionError(
            f"{VERSION_TABLE} in {path} holds {len(rows)} rows, expected 1; the schema "
            "version is unknown, repair it with Alembic"
        )
    found = str(rows[0][0]) if rows else None
    return found, revision_state(found, has_events="events" in tables)


def check_sqlite_file(path: Path) -> None:
    """Refuse (``SchemaVersionError``) an existing SQLite file that this code must not
    write: stamped with a revision it does not know, or holding an events table without a
    stamp. Checked read-only, before any connection that could change the file."""
    found = sqlite_file_state(path)
    if found is not None:
        _refuse_unusable(found[1], found[0], HEAD)
