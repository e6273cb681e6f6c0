"""``check_database(url)``: the health of a ledger database, without changing it.

>>> result = check_database("sqlite:///ledger.db")            # doctest: +SKIP
>>> result.ok, result.revision, result.events, result.integrity  # doctest: +SKIP
(True, '0001_events', 1520, 'ok')

It reports the schema revision (against the newest this code knows), row counts (events,
runs, events per kind) and an integrity check: SQLite's ``PRAGMA integrity_check`` on a
SQLite file, and on every engine the content-hash check of every row
(:mod:`ledger.report.hashes`). The database is opened read-only (SQLite) or only read
(PostgreSQL): a check never migrates; ``ledger.sinks.upgrade(url)`` does.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import sqlalchemy as sa

from ledger.errors import StorageError, ValidationError
from ledger.integrity.verify import VerifyResult, log_statement, verify_stored
from ledger.report.hashes import HashCheck, check_rows
from ledger.report.retention import with_retention_tables
from ledger.sinks.schema import SchemaState, revision_state
from ledger.sinks.url import LedgerURL, parse_url, shown_url

__all__ = ["DatabaseCheck", "check_database", "database_url", "engine_for"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class DatabaseCheck:
    """What ``check_database`` found."""

    url: str
    dialect: str
    revision: str | None
    head: str
    events: int = 0
    runs: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    integrity: str = "not run"
    hash_check: HashCheck = field(
        default_factory=lambda: HashCheck(available=False, note="not run")
    )

    has_events: bool = False
    log_check: VerifyResult | None = None  # the Merkle log (None: not checked)

    @property
    def schema_status(self) -> str:
        """``current``, ``behind`` (run ``ledger db upgrade``), ``empty``, ``unknown`` (newer
        than this code) or ``unstamped`` (tables without a version: altered by hand)."""
        return str(revision_state(self.revision, has_events=self.has_events).value)

    @property
    def ok(self) -> bool:
        """Schema current, integrity ``ok``, no content-hash mismatch, and the
        tamper-evident log verified."""
        return (
            self.schema_status == SchemaState.CURRENT
            and self.integrity == "ok"
            and not self.hash_check.mismatch_count
            and (self.log_check is None or self.log_check.ok)
        )

    def log_statement(self) -> str:
        """One sentence on the tamper-evident log: its verification, or why it was not
        checked (a schema this version cannot read as current)."""
        if self.log_check is None and self.schema_status != SchemaState.CURRENT:
            return (
                f"tamper-evident log: not checked (the schema is {self.schema_status}, at "
                f"revision {self.revision or 'none'}; newest {self.head}); run `ledger db "
                "upgrade` to bring it up to date, then check again"
            )
        return log_statement(self.log_check)

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "dialect": self.dialect,
            "ok": self.ok,
            "schema": {"revision": self.revision, "head": self.head, "status": self.schema_status},
            "rows": {"events": self.events, "runs": self.runs, "kinds": dict(self.kinds)},
            "integrity": self.integrity,
            "hash_check": self.hash_check.to_dict(),
            "log_check": None if self.log_check is None else self.log_check.to_dict(),
            "log_statement": self.log_statement(),
        }


def database_url(url: str) -> LedgerURL:
    """``url`` parsed, refused (with the forms that work) unless it names a database:
    ``db`` commands take sqlite and postgresql URLs, not a ``jsonl:`` file (no schema)."""
    forms = "sqlite:///FILE (sqlite:////absolute/path) or postgresql://USER@HOST:PORT/DB"
    try:
        parsed = parse_url(url)
    except ValidationError:
        parsed = None
    if parsed is None or parsed.scheme not in ("sqlite", "postgresql"):
        shown = parsed.shown if parsed else shown_url(url)
        raise ValidationError(f"{shown!r} is not a database URL: `db` commands take {forms}")
    return parsed


def engine_for(url: str) -> sa.Engine:
    """A read-only engine for ``url`` (SQLite opened ``mode=ro``; the file must exist)."""
    parsed = database_url(url)
    if parsed.dsn is not None:
        return sa.create_engine(parsed.dsn, pool_pre_ping=True)
    assert parsed.path is not None
    if parsed.path.is_dir():
        raise StorageError(f"{parsed.path} is a directory, not a ledger database file")
    if not parsed.path.is_file():
        raise StorageError(f"no ledger database at {parsed.path}: the file does not exist")
    from ledger.sinks.sqlite import require_sqlite_file

    require_sqlite_file(parsed.path, empty_ok=True)  # a file of something else, named
    target = parsed.path.resolve().as_uri().replace("file://", "file:", 1)
    return sa.create_engine(f"sqlite+pysqlite:///{target}?mode=ro&uri=true")


def _integrity(conn: sa.Connection) -> str:
    if conn.dialect.name != "sqlite":
        return "ok"  # PostgreSQL has no file-level check; the row checks below apply
    rows = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA integrity_check").all()]
    return "ok" if rows == ["ok"] else "; ".join(rows[:10])


def check_database(url: str) -> DatabaseCheck:
    """Check the ledger database at ``url`` (see the module docstring)."""
    parsed = database_url(url)
    try:
        return _check_database(url, parsed)
    except sa.exc.DBAPIError as exc:
        orig = exc.orig or exc
        if parsed.path is None or "Could not decode to UTF-8" not in str(orig):
            raise
        from ledger.sinks.rows import sqlite_read_failed

        raise StorageError(sqlite_read_failed(parsed.path, orig)) from exc


def _check_database(url: str, parsed: LedgerURL) -> DatabaseCheck:
    schema = parsed.schema
    from ledger.sinks.schema import current_revision, head_revision
    from ledger.sinks.sql import events_table, stored_rows

    engine = engine_for(url)
    try:
        with engine.connect() as conn:
            revision = current_revision(conn, schema)
            base = DatabaseCheck(
                url=parsed.shown,
                dialect=conn.dialect.name,
                revision=revision,
                head=head_revision(),
            )
            inspector = sa.inspect(conn)
            if not inspector.has_table("events", schema=schema):
                where = f"schema {schema or inspector.default_schema_name!r}"
                hint = f"`ledger db upgrade {shlex.quote(base.url)}`"
                why = f"{where} has no events table (create it with {hint})"
                return replace(base, hash_check=HashCheck(available=False, note=why))
            table = events_table(schema)
            kinds: dict[str, int] = dict(
                conn.execute(sa.select(table.c.kind, sa.func.count()).group_by(table.c.kind)).all()
            )
            runs = conn.execute(sa.select(sa.func.count(sa.distinct(table.c.run_id)))).scalar()
            integrity = _integrity(conn)

        @contextmanager
        def reading() -> Iterator[sa.Connection]:
            with engine.connect() as c:
                yield c

        # time_hi_us is checked where the schema has it (revision 0006 and after)
        current = revision_state(revision, has_events=True) is SchemaState.CURRENT
        hashes = check_rows(stored_rows(reading, table, high_water=current))
    finally:
        engine.dispose()
    log_check = None
    if revision_state(revision, has_events=True) is SchemaState.CURRENT:
        from ledger.sinks.opening import open_reader

        with open_reader(url) as reader:
            log_check = verify_stored(reader)
            if log_check is not None:  # and the retention tables against the log (as verify)
                log_check = with_retention_tables(reader, log_check)
    return DatabaseCheck(
        url=base.url,
        dialect=base.dialect,
        revision=revision,
        head=base.head,
        events=sum(kinds.values()),
        runs=int(runs or 0),
        kinds=kinds,
        integrity=integrity,
        hash_check=hashes,
        has_events=True,
        log_check=log_check,
    )
