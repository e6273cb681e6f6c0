"""Fixtures for the retention suites: a ledger on SQLite or PostgreSQL per test, with
old history (outside any reasonable floor) and a young run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from ledger.ids import new_event_id
from ledger.model.event import Event
from ledger.sinks import PostgresSink, SQLiteSink
from ledger.sinks.schema import head_revision
from ledger.sinks.shred import ENV_KEY, FileKeyWrapper
from ledger.sinks.url import parse_url

OLD = datetime(2025, 1, 1, tzinfo=UTC)

needs_retention_schema = pytest.mark.skipif(
    head_revision() < "0003_retention",
    reason="needs schema revision 0003_retention (the retention tables) or later",
)


def run_events(run_id: str, when: datetime, calls: int = 2, secret: str = "alice") -> list[Event]:
    """A small run: request, actions with results (one denied), run end."""
    out = [Event(kind="request", run_id=run_id, time=when, args=f'"mail {secret}"')]
    for i in range(calls):
        t = when + timedelta(seconds=i + 1)
        out.append(
            Event(kind="action", run_id=run_id, call_id=f"c{i}", tool="send_mail", time=t,
                  args={"to": f"{secret}@example.com"}, verdict="allowed", reason="ok",
                  refs=[{"source": "memory", "id": f"m-{secret}"}])
        )  # fmt: skip
        out.append(
            Event(kind="tool_result", run_id=run_id, call_id=f"c{i}", tool="send_mail",
                  time=t + timedelta(milliseconds=5), result={"sent": secret}, duration_ms=3)
        )  # fmt: skip
    out.append(
        Event(kind="action", run_id=run_id, call_id="cd", tool="rm",
              time=when + timedelta(seconds=9), args={"path": f"/home/{secret}"},
              verdict="denied", reason=f"not for {secret}")
    )  # fmt: skip
    out.append(Event(kind="run_end", run_id=run_id, time=when + timedelta(seconds=10)))
    return out


@dataclass
class Ledger:
    backend: str
    url: str
    opener: Callable[[], Any]
    opened: list[Any] = field(default_factory=list)
    sql_url: str = ""
    schema: str = ""

    def open(self) -> Any:
        sink = self.opener()
        self.opened.append(sink)
        return sink

    def close_all(self) -> None:
        for s in self.opened:
            s.close()

    def sql(self, statement: str, **params: Any) -> list[Any]:
        engine = sa.create_engine(self.sql_url, poolclass=sa.pool.NullPool)
        prefix = f'"{self.schema}".' if self.schema else ""
        try:
            with engine.begin() as conn:
                result = conn.execute(sa.text(statement.format(p=prefix)), params)
                return list(result.all()) if result.returns_rows else []
        finally:
            engine.dispose()


@pytest.fixture
def sqlite_ledger(tmp_path: Path) -> Iterator[Ledger]:
    path = tmp_path / "ledger.db"
    store = Ledger("sqlite", f"sqlite:///{path}", lambda: SQLiteSink(path),
                   sql_url=f"sqlite:///{path}")  # fmt: skip
    yield store
    store.close_all()


@pytest.fixture
def pg_ledger(pg_dsn: str) -> Iterator[Ledger]:
    schema = f"ledger_r_{str(new_event_id()).lower()}"
    sep = "&" if "?" in pg_dsn else "?"
    found = parse_url(pg_dsn).dsn
    assert found is not None
    store = Ledger("postgres", f"{pg_dsn}{sep}ledger_schema={schema}",
                   lambda: PostgresSink.open(pg_dsn, schema=schema), sql_url=found,
                   schema=schema)  # fmt: skip
    yield store
    store.close_all()
    engine = sa.create_engine(found, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger_db(request: pytest.FixtureRequest) -> Ledger:
    """The database under test, once per backend."""
    name = "sqlite_ledger" if request.param == "sqlite" else "pg_ledger"
    found: Ledger = request.getfixturevalue(name)
    return found


# --- crypto-shredding ledgers -------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No payload key from the environment: a test that wants one gives it."""
    monkeypatch.delenv(ENV_KEY, raising=False)


@pytest.fixture
def key(tmp_path: Path) -> FileKeyWrapper:
    """An operator's payload key, in a file of the test's."""
    return FileKeyWrapper.create(tmp_path / "payload.key")


class _Disposer:
    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def close(self) -> None:
        self.engine.dispose()


def open_keyed(db: Ledger, key: FileKeyWrapper | None = None, *, reader: bool = False) -> Any:
    """A sink of ``db`` given ``key`` (None: no payload key); ``reader`` opens it without
    migrating. On PostgreSQL through an engine of the test's, so the key goes to the
    constructor; closed with ``db``."""
    if db.backend == "sqlite":
        path = Path(db.url.removeprefix("sqlite:///"))
        sink: Any = SQLiteSink(path, payload_key=key, migrate=not reader)
    else:
        engine = sa.create_engine(db.sql_url)
        db.opened.append(_Disposer(engine))
        sink = PostgresSink(engine, schema=db.schema, payload_key=key, migrate=not reader)
    db.opened.insert(0, sink)
    return sink
