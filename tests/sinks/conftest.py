"""Fixtures for the sink suites: one ``store`` per test, SQLite or PostgreSQL.

``store`` is parametrized over both databases; a test using it runs twice. It gives a
:class:`Store` whose ``open()`` opens a new sink on the same database (so a test can
close and reopen). PostgreSQL stores live in a fresh schema per test, dropped after.
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


def engine_url(dsn: str) -> str:
    """The SQLAlchemy URL of a ledger's PostgreSQL URL."""
    found = parse_url(dsn).dsn
    assert found is not None
    return found


SQLSink = SQLiteSink | PostgresSink


@dataclass
class Store:
    """A database under test: ``open()`` gives a new sink on it; all are closed after."""

    backend: str
    opener: Callable[[], SQLSink]
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
        """How raw SQL names this store's tables: ``events`` or ``"schema".events``."""
        return f'"{self.schema}".' if self.schema else ""

    def sql(self, statement: str, **params: Any) -> list[Any]:
        """Run raw SQL on the database (``{p}`` is the table prefix); return its rows."""
        url = f"sqlite:///{self.path}" if self.path else engine_url(self.dsn)
        engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
        try:
            with engine.begin() as conn:
                result = conn.execute(sa.text(statement.format(p=self.prefix)), params)
                return list(result.all()) if result.returns_rows else []
        finally:
            engine.dispose()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    path = tmp_path / "ledger.db"
    store = Store("sqlite", lambda: SQLiteSink(path), path=path)
    yield store
    store.close_all()


@pytest.fixture(scope="session")
def pg_engine(pg_dsn: str) -> Iterator[sa.Engine]:
    engine = sa.create_engine(engine_url(pg_dsn), pool_size=10, max_overflow=60)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except sa.exc.OperationalError as exc:
        pytest.fail(f"PostgreSQL at LEDGER_TEST_POSTGRES_DSN is not reachable: {exc}")
    yield engine
    engine.dispose()


@pytest.fixture
def pg_store(pg_dsn: str, pg_engine: sa.Engine) -> Iterator[Store]:
    schema = f"ledger_t_{str(new_event_id()).lower()}"
    store = Store(
        "postgres",
        lambda: PostgresSink.open(pg_dsn, schema=schema),
        dsn=pg_dsn,
        schema=schema,
    )
    yield store
    store.close_all()
    with pg_engine.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))


@pytest.fixture
def user_engine(pg_store: Store) -> Iterator[sa.Engine]:
    """An engine of the test's own, as a user's application would have."""
    engine = sa.create_engine(engine_url(pg_store.dsn))
    yield engine
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest) -> Store:
    """The database under test, once per backend."""
    name = "sqlite_store" if request.param == "sqlite" else "pg_store"
    result: Store = request.getfixturevalue(name)
    return result


@pytest.fixture
def run_id() -> str:
    """A run id no other test uses."""
    return f"r-{new_event_id()}"
