"""Fixtures for the Merkle log suites: a ledger on SQLite or PostgreSQL per test.

``log_store`` runs a test once per backend; PostgreSQL ledgers live in a fresh schema
per test, dropped after. ``Store.sql`` runs raw SQL around the ledger (``{p}`` is the
table prefix), as an attacker with write access to the database would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from ledger.ids import new_event_id
from ledger.sinks import PostgresSink, SQLiteSink
from ledger.sinks.url import parse_url

SQLSink = SQLiteSink | PostgresSink


def engine_url(dsn: str) -> str:
    found = parse_url(dsn).dsn
    assert found is not None
    return found


@dataclass
class Store:
    backend: str
    opener: Callable[[], SQLSink]
    url: str
    opened: list[SQLSink] = field(default_factory=list)
    path: Path | None = None
    dsn: str = ""
    schema: str = ""

    def open(self) -> SQLSink:
        sink = self.opener()
        self.opened.append(sink)
        return sink

    def close_all(self) -> None:
        for sink in self.opened:
            sink.close()

    @property
    def prefix(self) -> str:
        return f'"{self.schema}".' if self.schema else ""

    def sql(self, statement: str, **params: Any) -> list[Any]:
        url = f"sqlite:///{self.path}" if self.path else engine_url(self.dsn)
        engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
        try:
            with engine.begin() as conn:
                result = conn.execute(sa.text(statement.format(p=self.prefix)), params)
                return list(result.all()) if result.returns_rows else []
        finally:
            engine.dispose()


def make_sqlite_store(path: Path) -> Store:
    return Store("sqlite", lambda: SQLiteSink(path), f"sqlite:///{path}", path=path)


def make_pg_store(dsn: str) -> Store:
    schema = f"ledger_i_{str(new_event_id()).lower()}"
    sep = "&" if "?" in dsn else "?"
    return Store(
        "postgres",
        lambda: PostgresSink.open(dsn, schema=schema),
        f"{dsn}{sep}ledger_schema={schema}",
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
