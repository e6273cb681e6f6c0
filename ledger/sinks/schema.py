"""Schema versions: bring a database to the newest Alembic revision, or refuse it.

Every SQL sink calls :func:`ensure_schema` on open. When the database is already at the
newest revision that costs one catalog lookup and one row read. A database stamped with a
revision this code does not know (written by a newer version of the library) is refused
with ``SchemaVersionError``. To migrate on demand, without opening a sink for writing::

    >>> from ledger.sinks import upgrade
    >>> upgrade("sqlite:///ledger.db")                     # doctest: +SKIP
    '0001_events'

The revisions live in ``ledger/sinks/migrations/versions``; the version is kept in the table
``ledger_schema_version`` (not ``alembic_version``, so a database shared with an
application that uses Alembic itself is not confused).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ledger.errors import SchemaVersionError, StorageError, ValidationError

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory

__all__ = ["VERSION_TABLE", "ensure_schema", "head_revision", "upgrade"]

log = logging.getLogger(__name__)

VERSION_TABLE = "ledger_schema_version"
HEAD = "0001_events"  # the newest revision; a test checks it against ``versions/``
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
    found = current_revision(conn, schema)
    if found == head:
        return False
    _check_known(found, head)
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


def _check_known(found: str | None, head: str) -> None:
    if found is None:
        return
    try:
        known = _scripts().get_revision(found) is not None
    except Exception:  # alembic raises several kinds for an unknown id
        known = False
    if not known:
        raise SchemaVersionError(
            f"the database's ledger schema is at revision {found!r}, newer than this code "
            f"knows (newest: {head!r}); upgrade agentledger to read or write it"
        )


def check_sqlite_file(path: Path) -> None:
    """Refuse (``SchemaVersionError``) an existing SQLite file stamped with a revision
    this code does not know, reading it read-only: it is checked before any connection
    that could write to it (turning WAL on, say), so a newer database is left unchanged.
    Anything else (no file, no version table, not a database) is left to the normal open."""
    if not path.is_file():
        return
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return
    try:
        rows = conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchall()
    except sqlite3.Error:
        return
    finally:
        conn.close()
    if len(rows) == 1:
        _check_known(str(rows[0][0]), HEAD)


def upgrade(url: str, *, schema: str | None = None) -> str:
    """Bring the database at ``url`` (``sqlite:///path`` or ``postgresql://...``, which
    may carry ``?ledger_schema=NAME`` as ``open_sink`` takes it) to the newest revision
    and return it."""
    if not isinstance(url, str):
        raise ValidationError(f"upgrade: expected a database URL string, got {type(url).__name__}")
    if url.startswith("sqlite:"):
        from ledger.sinks.sqlite import SQLiteSink, path_from_url

        if schema is not None:
            raise ValidationError("schema: only a PostgreSQL ledger has a schema; drop it")

        SQLiteSink(path_from_url(url)).close()
    elif url.startswith(("postgresql:", "postgresql+psycopg:", "postgres:")):
        from ledger.sinks.postgres import PostgresSink
        from ledger.sinks.url import split_schema

        dsn, in_url = split_schema(url)
        PostgresSink.open(dsn, schema=schema or in_url).close()
    else:
        from ledger.sinks.url import shown_url

        raise ValidationError(
            f"upgrade: {shown_url(url)!r} is not a sqlite:/// or postgresql:// URL"
        )
    return head_revision()
