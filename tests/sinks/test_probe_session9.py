"""Probes of session 9: the keyless reader's payload-mode settle (e0b92b5), the id and
filter column checks of ``parse_row``, and the tool index in commit order (c13b494).

Each test pinned a defect found by a hostile review (as a strict xfail) and passes
since it was fixed, or holds behaviour the suites did not cover."""

from __future__ import annotations

import random
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from click.testing import CliRunner

from ledger.cli import cli
from ledger.errors import PayloadKeyError, StorageError
from ledger.ids import new_event_id
from ledger.retention import Retention, Selection
from ledger.sinks import PostgresSink, SQLiteSink
from ledger.sinks.shred import ENV_KEY, FileKeyWrapper
from ledger.sinks.sql import PAGE_SIZE
from tests.retention.conftest import OLD, run_events

from .conftest import Store, engine_url
from .test_time_high_water import T0, _alembic, _engine, _event, _url


@pytest.fixture(autouse=True)
def _no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_KEY, raising=False)


@pytest.fixture
def key(tmp_path: Path) -> FileKeyWrapper:
    return FileKeyWrapper.create(tmp_path / "payload.key")


def _reader(store: Store, engine: sa.Engine | None = None) -> Any:
    """A reader opened without the payload key (it never migrates)."""
    if store.path is not None:
        sink: Any = SQLiteSink(store.path, migrate=False)
    else:
        assert engine is not None
        sink = PostgresSink(engine, schema=store.schema, migrate=False)
    store.opened.insert(0, sink)
    return sink


# --- the keyless reader's first row reads the payload mode ----------------------------


def test_a_clear_ledger_reads_when_its_payload_mode_cannot_be_read(
    store: Store, run_id: str
) -> None:
    store.open().record_many(run_events(run_id, OLD))
    store.close_all()
    store.sql("DROP TABLE {p}payload_mode")
    engine = None if store.path else sa.create_engine(engine_url(store.dsn))
    try:
        reader = _reader(store, engine)
        assert len(reader.chain(run_id).actions) == 3  # before e0b92b5: read, no query
    finally:
        if engine is not None:
            engine.dispose()


@pytest.mark.postgres
def test_a_role_that_may_read_only_the_events_still_reads_them(
    pg_store: Store, pg_engine: sa.Engine, run_id: str
) -> None:
    pg_store.open().record_many(run_events(run_id, OLD))
    pg_store.close_all()
    role = f"p9_ro_{str(new_event_id()).lower()}"
    schema = pg_store.schema
    with pg_engine.begin() as conn:
        conn.execute(sa.text(f'CREATE ROLE "{role}" LOGIN'))
        conn.execute(sa.text(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"'))
        tables = f'"{schema}".events, "{schema}".ledger_schema_version'
        conn.execute(sa.text(f'GRANT SELECT ON {tables} TO "{role}"'))
    engine = sa.create_engine(sa.make_url(engine_url(pg_store.dsn)).set(username=role))
    try:
        reader = _reader(pg_store, engine)
        try:
            assert len(reader.chain(run_id).actions) == 3
            assert len(list(reader.events(run_id=run_id))) == len(run_events(run_id, OLD))
        finally:
            reader.close()
    finally:
        engine.dispose()
        with pg_engine.begin() as conn:
            conn.execute(sa.text(f'DROP OWNED BY "{role}"'))
            conn.execute(sa.text(f'DROP ROLE "{role}"'))


@pytest.mark.postgres
def test_a_rolled_back_opening_does_not_leave_sealed_payloads_in_a_clear_ledger(
    pg_store: Store, key: FileKeyWrapper, run_id: str
) -> None:
    engine = sa.create_engine(engine_url(pg_store.dsn))
    try:
        PostgresSink(engine, schema=pg_store.schema).close()  # the schema, no events
        with engine.connect() as conn:
            conn.begin()
            writer = PostgresSink(conn, schema=pg_store.schema, payload_key=key)
            conn.rollback()  # the caller's transaction failed for reasons of its own
            try:
                with conn.begin():
                    writer.record_many(run_events(run_id, OLD))
            except (PayloadKeyError, StorageError):
                return  # refusing the write is a fix too
        with_key = PostgresSink(engine, schema=pg_store.schema, payload_key=key)
        try:
            intent = with_key.chain(run_id).actions[0].intent
            assert intent.args == '{"to":"alice@example.com"}'
        finally:
            with_key.close()
    finally:
        engine.dispose()


def test_readers_in_threads_settling_at_once_show_the_erased_run_erased(
    sqlite_store: Store, key: FileKeyWrapper, run_id: str
) -> None:
    """Many threads make the first read of one keyless reader opened before the ledger
    was made shredding: each sees the erased run erased and the other one sealed."""
    path = sqlite_store.path
    assert path is not None
    SQLiteSink(path).close()  # the schema only: no payload mode yet
    early = _reader(sqlite_store)
    writer = SQLiteSink(path, payload_key=key)
    sqlite_store.opened.append(writer)
    writer.record_many(run_events(f"{run_id}-a", OLD))
    writer.record_many(run_events(f"{run_id}-b", OLD, secret="bob"))
    r = Retention(writer)
    r.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
    done = r.erase(Selection.of_run(f"{run_id}-a"), reason="GDPR", fields=["args", "result"])
    barrier = threading.Barrier(8)
    seen: list[Any] = []

    def first_read() -> None:
        barrier.wait()
        try:
            a = early.chain(f"{run_id}-a").actions[0].intent
            b = early.chain(f"{run_id}-b").actions[0].intent
            seen.append((a.args, a.erased and a.erased.records, b.args[:30]))
        except Exception as exc:  # reported below
            seen.append(exc)

    threads = [threading.Thread(target=first_read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [(None, (done.record_id,), '{"encrypted":"aes-256-gcm","no')] * 8


def test_a_writer_without_the_key_shows_an_erased_run_erased(
    sqlite_store: Store, key: FileKeyWrapper, run_id: str
) -> None:
    path = sqlite_store.path
    assert path is not None
    writer = SQLiteSink(path, payload_key=key)
    sqlite_store.opened.append(writer)
    writer.record_many(run_events(run_id, OLD))
    r = Retention(writer)
    r.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
    done = r.erase(Selection.of_run(run_id), reason="GDPR", fields=["args", "result"])
    assert _reader(sqlite_store).chain(run_id).actions[0].intent.erased is not None
    keyless_writer = SQLiteSink(path)
    sqlite_store.opened.append(keyless_writer)
    intent = keyless_writer.chain(run_id).actions[0].intent
    assert intent.args is None and intent.erased is not None
    assert intent.erased.records == (done.record_id,)


# --- the tool index in commit order ---------------------------------------------------


def test_tool_queries_with_every_bound_match_a_filter_of_all_events(
    store: Store, run_id: str
) -> None:
    """``events(tool=...)`` with ``since``/``until``/``after``/``limit`` across pages,
    times out of commit order, tools that differ only by case or a space, and ''."""
    sink = store.open()
    rnd = random.Random(9)
    tools = ["", "a", "a ", "A", "b"]
    made = [
        _event(run_id, i, rnd.randrange(0, 2000), rnd.choice(tools))
        for i in range(2 * PAGE_SIZE + 77)
    ]
    sink.record_many(made[:300])
    sink.record_many(made[300:])
    stored = list(sink.events())
    ids = [e.event_id for e in stored]
    bounds = [(None, None, None), (500, None, None), (500, 1500, None), (None, 700, 400),
              (1000, None, 900), (1999, None, None), (0, 0, None)]  # fmt: skip
    for tool in [*tools, "zz"]:
        for since_s, until_s, after_i in bounds:
            since = None if since_s is None else T0 + timedelta(seconds=since_s)
            until = None if until_s is None else T0 + timedelta(seconds=until_s)
            after = None if after_i is None else ids[after_i]
            start = 0 if after_i is None else after_i + 1
            expected = [
                e.call_id
                for e in stored[start:]
                if e.tool == tool
                and (since is None or e.time >= since)
                and (until is None or e.time < until)
            ]
            query = {"tool": tool, "since": since, "until": until, "after": after}
            assert [e.call_id for e in sink.events(**query)] == expected, query
            limited = [e.call_id for e in sink.events(**query, limit=PAGE_SIZE + 3)]
            assert limited == expected[: PAGE_SIZE + 3], query


def test_copying_a_ledger_one_revision_behind_says_to_upgrade_it(
    sqlite_store: Store, run_id: str, tmp_path: Path
) -> None:
    sqlite_store.open().record_many([_event(run_id, i, (i * 37) % 100, "x") for i in range(20)])
    sqlite_store.close_all()
    engine = _engine(sqlite_store)
    with engine.begin() as conn:
        command.downgrade(_alembic(sqlite_store, conn), "0006_time_high_water")
    engine.dispose()
    target = f"sqlite:///{tmp_path / 'copy.db'}"
    result = CliRunner().invoke(cli, ["db", "copy", _url(sqlite_store), target])
    assert result.exit_code != 0
    assert "ledger db upgrade" in result.output and "--allow-damaged" not in result.output
