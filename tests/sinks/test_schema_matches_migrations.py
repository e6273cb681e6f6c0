"""The Core tables the code reads and writes are exactly what the Alembic migrations
build: Alembic's own ``compare_metadata`` finds no difference (tables, columns, types,
nullability, indexes), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from ledger.sinks import SQLiteSink
from ledger.sinks.schema import VERSION_TABLE
from ledger.sinks.sql import events_table
from ledger.sinks.tree import TreeTables

from .conftest import Store


def _metadata() -> sa.MetaData:
    """Every Core table the library defines, on one MetaData."""
    md = sa.MetaData()
    tables: list[sa.Table] = [events_table(None)]
    tree = TreeTables(None)
    tables += [tree.head, tree.checkpoints]
    try:
        from ledger.retention.tables import RetentionTables
    except ImportError:  # pragma: no cover - before the retention tables exist
        pass
    else:
        kept = RetentionTables(None)
        tables += [kept.policy, kept.holds, kept.erasures]
    from ledger.sinks.shred import ShredTables

    shred = ShredTables(None)
    tables += [shred.mode, shred.keys]
    for table in tables:
        table.to_metadata(md)
    return md


def _differences(conn: sa.Connection) -> list[object]:
    def include(obj: object, name: str | None, kind: str, reflected: bool, other: object) -> bool:
        return not (kind == "table" and name == VERSION_TABLE)

    context = MigrationContext.configure(
        conn, opts={"compare_type": True, "include_object": include}
    )
    return list(compare_metadata(context, _metadata()))


def test_sqlite_tables_equal_the_migrations(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    SQLiteSink(path).close()
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            assert _differences(conn) == []
    finally:
        engine.dispose()


@pytest.fixture
def pg_conn(pg_store: Store) -> Iterator[sa.Connection]:
    sink = pg_store.open()
    engine = sa.create_engine(
        sink._engine.url,  # the sink's own server and database
        connect_args={"options": f"-csearch_path={pg_store.schema}"},
    )
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def test_postgres_tables_equal_the_migrations(pg_conn: sa.Connection) -> None:
    assert _differences(pg_conn) == []
