"""Fixtures for the Merkle log suites: a ledger on SQLite or PostgreSQL per test.

``log_store`` runs a test once per backend; PostgreSQL ledgers live in a fresh schema
per test, dropped after. ``Store.sql`` runs raw SQL around the ledger (``{p}`` is the
table prefix), as an attacker with write access to the database would.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa

from ledger.ids import new_event_id
from ledger.sinks import PostgresSink, SQLiteSink
from tests.sinks.conftest import Store as SinkStore
from tests.sinks.conftest import engine_url


@dataclass
class Store(SinkStore):
    """The sinks suite's store (``open``, ``sql``, ``prefix``), plus the ledger's URL."""

    url: str = ""


def make_sqlite_store(path: Path) -> Store:
    return Store("sqlite", lambda: SQLiteSink(path), url=f"sqlite:///{path}", path=path)


def make_pg_store(dsn: str) -> Store:
    schema = f"ledger_i_{str(new_event_id()).lower()}"
    sep = "&" if "?" in dsn else "?"
    return Store(
        "postgres",
        lambda: PostgresSink.open(dsn, schema=schema),
        url=f"{dsn}{sep}ledger_schema={schema}",
        dsn=dsn,
        schema=schema,
    )


def drop_schema(store: Store) -> None:
    engine = sa.create_engine(engine_url(store.dsn), poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{store.schema}" CASCADE'))
    finally:
        engine.dispose()


@pytest.fixture
def sqlite_log(tmp_path: Path) -> Iterator[Store]:
    store = make_sqlite_store(tmp_path / "ledger.db")
    yield store
    store.close_all()


@pytest.fixture
def pg_log(pg_dsn: str) -> Iterator[Store]:
    store = make_pg_store(pg_dsn)
    yield store
    store.close_all()
    drop_schema(store)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def log_store(request: pytest.FixtureRequest) -> Store:
    """The database under test, once per backend."""
    name = "sqlite_log" if request.param == "sqlite" else "pg_log"
    result: Store = request.getfixturevalue(name)
    return result
