"""A new user's mistakes, and the odd cases a careful user meets: every one is refused
with a ``LedgerError`` that names the field and the problem (never a bare ``TypeError`` or
an SQLAlchemy traceback), and nothing is half-written. Companion of ``test_acceptance``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from ledger import (
    Event,
    Kind,
    LedgerError,
    new_event_id,
)
from ledger.errors import CorruptRecord, SchemaVersionError, StorageError
from ledger.sinks import (
    JSONLSink,
    PostgresSink,
    SQLiteSink,
    open_sink,
    read_jsonl,
    upgrade,
)

from .conftest import Store
from .factories import BAD, good_action


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda p: JSONLSink(p), "directory"),
        (lambda p: JSONLSink(p / "missing" / "x.jsonl"), "does not exist"),
        (lambda p: JSONLSink(BAD(123)), "path"),
        (lambda p: JSONLSink(BAD(None)), "path"),
        (lambda p: JSONLSink(""), "path"),
        (lambda p: JSONLSink(p / "x.jsonl", fsync=BAD("yes")), "fsync"),
        (lambda p: read_jsonl(p / "none.jsonl"), "none.jsonl"),
        (lambda p: read_jsonl(BAD(None)), "path"),
        (lambda p: JSONLSink(p / "x.jsonl").record(BAD("event")), "event"),
        (lambda p: open_sink("jsonl:x.jsonl"), "jsonl:///"),
        (lambda p: open_sink("jsonl:///"), "jsonl:///"),
        (lambda p: open_sink(f"jsonl:///{p}/x.jsonl?fsync=maybe"), "fsync"),
    ],
)
def test_jsonl_bad_input(tmp_path: Path, call: Callable[[Path], Any], named: str) -> None:
    with pytest.raises(LedgerError, match=named):
        call(tmp_path)


# --- bad input everywhere ------------------------------------------------------------------


BAD_READS: list[tuple[Callable[[Any], object], str]] = [
    (lambda s: s.get("not-a-ulid"), "event_id"),
    (lambda s: s.get(123), "event_id"),
    (lambda s: s.chain(None), "run_id"),
    (lambda s: s.chain(123), "run_id"),
    (lambda s: s.events(kind="bogus"), "kind"),
    (lambda s: s.events(verdict="maybe"), "verdict"),
    (lambda s: s.events(run_id=5), "run_id"),
    (lambda s: s.events(tool=b"rm"), "tool"),
    (lambda s: s.events(limit=-1), "limit"),
    (lambda s: s.events(limit="10"), "limit"),
    (lambda s: s.events(limit=True), "limit"),
    (lambda s: s.events(since=datetime(2026, 1, 1)), "since: naive"),
    (lambda s: s.events(until=datetime(2026, 1, 1)), "until: naive"),
    (lambda s: s.events(since=1700000000), "since"),
    (lambda s: s.events(after="nope"), "after"),
    (lambda s: s.events(after=new_event_id()), "after"),
    (lambda s: s.runs(limit=-1), "limit"),
    (lambda s: s.runs(limit="x"), "limit"),
    (lambda s: s.runs(since=datetime(2026, 1, 1)), "since: naive"),
    (lambda s: s.record(None), "event"),
    (lambda s: s.commit_action({"kind": "action"}), "event"),
    (lambda s: s.record_many(None), "events"),
    (lambda s: s.record_many(Event(kind=Kind.PROMPT)), "events"),
    (lambda s: s.record_many([Event(kind=Kind.PROMPT), "x"]), "event"),
]


@pytest.mark.parametrize(("call", "named"), BAD_READS)
def test_bad_arguments_are_ledger_errors(
    store: Store, call: Callable[[Any], object], named: str
) -> None:
    sink = store.open()
    with pytest.raises(LedgerError, match=named):
        call(sink)  # refused when called, before any iteration
    assert store.sql("SELECT count(*) FROM {p}events")[0][0] == 0


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda p: SQLiteSink(BAD(123)), "path"),
        (lambda p: SQLiteSink(BAD(None)), "path"),
        (lambda p: SQLiteSink(""), "path"),
        (lambda p: SQLiteSink(":memory:"), "memory"),
        (lambda p: SQLiteSink(p), "directory"),
        (lambda p: SQLiteSink(p / "missing" / "l.db"), "does not exist"),
        (lambda p: SQLiteSink(p / "l.db", busy_timeout=BAD("soon")), "busy_timeout"),
        (lambda p: open_sink("mysql://x"), "mysql"),
        (lambda p: open_sink(BAD(p / "l.db")), "URL"),
        (lambda p: open_sink("sqlite://"), "sqlite:///"),
        (lambda p: open_sink("sqlite:///"), "sqlite:///"),
        (lambda p: open_sink("sqlite:///:memory:"), "memory"),
        (lambda p: upgrade("mysql://x"), "mysql"),
        (lambda p: upgrade(BAD(42)), "URL"),
        (lambda p: upgrade(f"sqlite:///{p}/l.db", schema="s"), "schema"),
        (lambda p: SQLiteSink(p / "l.db", lock_wait=float("nan")), "lock_wait"),
        (lambda p: PostgresSink(BAD("postgresql://x")), "Engine or Connection"),
        (lambda p: PostgresSink(sa.create_engine("sqlite://")), "PostgreSQL"),
        (lambda p: PostgresSink.open(BAD(42)), "dsn"),
        (lambda p: PostgresSink.open("mysql://x"), "dsn"),
        (lambda p: PostgresSink.open("postgresql://x", pool_sise=3), "pool_sise"),
        (lambda p: PostgresSink.open("postgresql://x", schema="a;b"), "schema"),
        (lambda p: PostgresSink.open("postgresql://u@127.0.0.1:1/db"), "cannot open"),
    ],
)
def test_bad_constructors_are_ledger_errors(
    tmp_path: Path, call: Callable[[Path], object], named: str
) -> None:
    with pytest.raises(LedgerError, match=named) as info:
        call(tmp_path)
    assert "sqlalche.me" not in str(info.value)


def test_not_a_database_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n" * 50)
    with pytest.raises(LedgerError, match="not a database"):
        SQLiteSink(path)


def test_a_database_newer_than_the_code_is_refused(store: Store) -> None:
    store.open().close()
    store.sql("UPDATE {p}ledger_schema_version SET version_num = '0099_from_the_future'")
    with pytest.raises(SchemaVersionError, match="newer than this code"):
        store.open()
    url = f"sqlite:///{store.path}" if store.path else f"{store.dsn}?ledger_schema={store.schema}"
    with pytest.raises(SchemaVersionError, match="0099_from_the_future"):
        open_sink(url)
    with pytest.raises(SchemaVersionError):
        upgrade(url)


@pytest.mark.parametrize(
    "url",
    [
        "mysql://ops:s3cret@db/ledger",
        "postgresql://ops:s3cret@[::1/ledger",
        "postgresql://ops:s3cret@db:port/ledger",
        "postgresql://ops:s3cret@127.0.0.1:1/ledger",
    ],
)
def test_url_errors_never_show_the_password(url: str) -> None:
    for call in (open_sink, upgrade):
        with pytest.raises(LedgerError) as info:
            call(url)
        assert "s3cret" not in str(info.value)


def test_ledger_schema_is_taken_from_the_query_only() -> None:
    from ledger.sinks.url import parse_url

    def split_schema(url: str) -> tuple[str | None, str | None]:
        parsed = parse_url(url)
        return parsed.dsn, parsed.schema

    assert split_schema("postgresql:///db?ledger_schema=s&sslmode=disable") == (
        "postgresql+psycopg:///db?sslmode=disable",
        "s",
    )
    assert split_schema("postgresql://") == ("postgresql+psycopg://", None)
    assert split_schema("POSTGRES://u@h/db?ledger_schema=s") == ("postgresql+psycopg://u@h/db", "s")


@pytest.mark.parametrize("name", ["a?b.db", "c%20d.db", "e#f.db", "g h.db"])
def test_sqlite_file_names_are_taken_literally(tmp_path: Path, name: str) -> None:
    with SQLiteSink(tmp_path / name) as sink:
        sink.record(Event(kind=Kind.PROMPT, run_id="r"))
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".db"] == [name]
    with SQLiteSink(str(tmp_path / name)) as sink:
        assert len(list(sink.events(run_id="r"))) == 1


def test_a_relative_sqlite_path_keeps_its_file_after_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    act = good_action("r1")
    with SQLiteSink("rel.db") as sink:
        sink.commit_action(act)
        os.chdir(tmp_path / "elsewhere")
        sink.record(good_action("r1", "c2"))  # the writer connection already exists
        summaries = sink.runs()  # holds a pooled reader connection while iterated
        assert next(summaries).events == 2
        assert sink.get(act.event_id) == act  # so this one needs a new connection
        assert [e.call_id for e in sink.events(run_id="r1")] == ["c1", "c2"]
        assert list(summaries) == []
    assert not (tmp_path / "elsewhere" / "rel.db").exists()


def test_a_foreign_events_table_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE events (id INTEGER, name TEXT)")
    with pytest.raises(StorageError, match="events table but no ledger schema version") as info:
        SQLiteSink(path)
    assert "[SQL" not in str(info.value)
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert tables == ["events"]  # nothing of the ledger's schema was half-made


def test_runs_names_a_run_whose_time_was_edited_by_hand(store: Store) -> None:
    sink = store.open()
    sink.record(Event(kind=Kind.PROMPT, run_id="edited"))
    store.sql("UPDATE {p}events SET time_us = 999999999999999999")
    with pytest.raises(CorruptRecord, match="'edited'"):
        list(sink.runs())


@pytest.mark.postgres
def test_a_failed_read_in_the_callers_transaction_leaks_no_lock(
    pg_store: Store, user_engine: sa.Engine
) -> None:
    PostgresSink(user_engine, schema=pg_store.schema).close()
    held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
    with user_engine.connect() as blocker, user_engine.connect() as conn:
        blocker.execute(sa.text(f'LOCK TABLE "{pg_store.schema}".events IN ACCESS EXCLUSIVE MODE'))
        conn.execute(sa.text("SET lock_timeout = '100ms'"))
        ledger = PostgresSink(conn, schema=pg_store.schema, migrate=False)
        with pytest.raises(StorageError, match="lock timeout"):  # the real cause, named
            list(ledger.events())
        blocker.rollback()
        assert conn.execute(sa.text(held)).scalar() == 0
        act = good_action("r")
        ledger.commit_action(act)  # the caller's transaction is still usable
        conn.commit()
    assert pg_store.sql("SELECT count(*) FROM {p}events")[0][0] == 1


@pytest.mark.postgres
def test_a_connection_closed_by_its_owner_is_a_clear_error(
    pg_store: Store, user_engine: sa.Engine
) -> None:
    PostgresSink(user_engine, schema=pg_store.schema).close()
    conn = user_engine.connect()
    ledger = PostgresSink(conn, schema=pg_store.schema)
    conn.close()
    calls: list[Callable[[], object]] = [
        lambda: ledger.commit_action(good_action("r")),
        lambda: ledger.record_many([Event(kind=Kind.PROMPT)]),
        lambda: ledger.get(new_event_id()),
        lambda: list(ledger.events()),
        lambda: list(ledger.runs()),
        lambda: ledger.chain("r"),
        lambda: PostgresSink(conn, schema=pg_store.schema),
    ]
    for call in calls:
        with pytest.raises(StorageError, match="closed by its owner"):
            call()
