"""Reclaim the space erased rows left: SQLite ``VACUUM``, PostgreSQL ``VACUUM``.

>>> with open_sink("sqlite:///ledger.db") as sink:        # doctest: +SKIP
...     vacuum(sink).freed_bytes
1048576

An erased row keeps a small fixed size (its tombstone); the bytes its content held are
free space that ``VACUUM`` gives back. SQLite's ``VACUUM`` rewrites the database file, so
no copy of an erased row's old bytes is left in it (nor in its WAL, truncated after).
PostgreSQL's plain ``VACUUM`` marks the space of old row versions free without
overwriting it: ``full=True`` (``ledger db vacuum --full``) runs ``VACUUM FULL``, which
rewrites the tables (holding an exclusive lock on each while it does: writers wait).

Vacuum deletes no row and changes no stored byte: the only way data leaves the ledger is
an erasure, which the floor and legal holds govern, so what they protect is never
touched. The row count is read before and after: fewer rows after (deleted outside
the ledger meanwhile; a writer in between can only add) is an error.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ledger.errors import StorageError, ValidationError

__all__ = ["VacuumOutcome", "vacuum"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class VacuumOutcome:
    """What ``vacuum`` did: the database size before and after (SQLite; PostgreSQL
    reports the relation sizes of the ledger's tables), the rows kept."""

    dialect: str
    size_before: int
    size_after: int
    rows: int

    @property
    def freed_bytes(self) -> int:
        """Bytes given back (0 when nothing was freed)."""
        return max(0, self.size_before - self.size_after)

    def to_dict(self) -> dict[str, Any]:
        """Stable field names (``ledger db vacuum --json``)."""
        return {
            "dialect": self.dialect,
            "size_before": self.size_before,
            "size_after": self.size_after,
            "freed_bytes": self.freed_bytes,
            "rows": self.rows,
        }


def vacuum(sink: Any, *, full: bool = False) -> VacuumOutcome:
    """Run ``VACUUM`` on the SQL ledger behind ``sink`` (a ``SQLiteSink`` or
    ``PostgresSink`` that owns its engine); ``full``: PostgreSQL's ``VACUUM FULL``
    (SQLite's ``VACUUM`` always rewrites the file)."""
    engine: sa.Engine | None = getattr(sink, "_engine", None)
    if engine is None or not hasattr(sink, "_trees"):
        raise ValidationError(
            f"vacuum needs a SQL ledger (sqlite:/// or postgresql://), not {sink!r}"
        )
    rows_before = sink.count_rows()
    if engine.dialect.name == "sqlite":
        path = Path(sink.path)
        before = _sqlite_size(path)
        raw = engine.raw_connection()
        try:
            driver: Any = raw.driver_connection
            driver.execute("VACUUM")
            busy = driver.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy is not None and busy[0]:
                log.warning(
                    "vacuum of %s: another connection is reading the ledger, so the "
                    "write-ahead log (which holds the vacuumed copy) could not be "
                    "truncated and the files are larger for now; run `ledger db vacuum` "
                    "again when the ledger is idle",
                    path,
                )
        except Exception as exc:  # sqlite3.OperationalError: locked by a reader, say
            raise StorageError(f"VACUUM of {path} failed: {exc}; retry when it is idle") from exc
        finally:
            raw.close()
        after = _sqlite_size(path)
    else:
        if getattr(sink, "_conn", None) is not None:
            raise ValidationError(
                "vacuum cannot run inside the caller's transaction (PostgresSink(connection)); "
                "open the ledger by URL"
            )
        schema = getattr(sink, "schema", None)
        names = ["events", "tree_head", "tree_checkpoints", "run_keys"]
        qualified = [f'"{schema}".{n}' if schema else n for n in names]
        before = _pg_size(engine, qualified)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for name in qualified:
                conn.exec_driver_sql(f"VACUUM ({'FULL, ' if full else ''}ANALYZE) {name}")
        after = _pg_size(engine, qualified)
    rows_after = sink.count_rows()
    if rows_after < rows_before:  # cannot happen through the ledger: say so loudly
        raise StorageError(
            f"the ledger held {rows_before} rows before VACUUM and {rows_after} after: rows "
            "were deleted outside the ledger meanwhile; run `ledger verify`"
        )
    log.info("vacuum: %d -> %d bytes", before, after)
    return VacuumOutcome(
        dialect=engine.dialect.name, size_before=before, size_after=after, rows=rows_after
    )


def _sqlite_size(path: Path) -> int:
    total = 0
    for p in (path, Path(f"{path}-wal")):
        with contextlib.suppress(FileNotFoundError):
            total += p.stat().st_size
    return total


def _pg_size(engine: sa.Engine, tables: list[str]) -> int:
    with engine.connect() as conn:
        return sum(
            int(conn.execute(sa.text("SELECT pg_total_relation_size(:t)"), {"t": t}).scalar_one())
            for t in tables
        )
