"""Session 14's hostile review of the read side: the report on a caller's PostgreSQL
connection, the report over a sparse ``seq`` range, ``runs()`` under a database
collation that is not code point order, and the content-hash check's shortcut for
integers beyond 2^53."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from ledger.model import Event, Ref
from ledger.report import build_report
from ledger.report.hashes import check_hashes
from ledger.sinks import MemoryReader, PostgresSink, SQLiteSink

T0 = datetime(2026, 3, 1, 9, tzinfo=UTC)
REF = [Ref(source="tool", id="01J00000000000000000000000", hash="sha256:ab")]


def _run(run_id: str, start: float = 0) -> list[Event]:
    def at(minute: float) -> datetime:
        return T0 + timedelta(minutes=start + minute)

    return [
        Event(kind="request", run_id=run_id, time=at(0), args='"tidy"'),
        Event(kind="action", run_id=run_id, call_id="w", tool="write", verdict="allowed",
              args={"p": 1}, refs=REF, time=at(1)),
        Event(kind="tool_result", run_id=run_id, call_id="w", tool="write", result="1",
              time=at(2)),
        Event(kind="action", run_id=run_id, call_id="d", tool="rm", verdict="denied",
              args={}, reason="no", time=at(3)),
        Event(kind="run_end", run_id=run_id, time=at(4)),
    ]  # fmt: skip


def _comparable(reader: Any, **window: Any) -> dict[str, Any]:
    """The report's numbers, without what only a SQL ledger has (hash and log checks)."""
    data = build_report(reader, **window).to_dict()
    for key in ("generated_at", "retention", "log_check", "log_scope", "log_statement"):
        data.pop(key)
    data.pop("hash_check")
    return data


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    import psycopg

    schema = f"probe14_{uuid.uuid4().hex[:12]}"
    yield schema
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_a_report_on_the_callers_connection_leaves_it_usable(pg_dsn: str, pg_schema: str) -> None:
    """``PostgresSink(connection)`` reads through the caller's connection. The report
    set ``yield_per`` on that connection (``Connection.execution_options`` changes it in
    place), so every later statement of the caller -- and the sink's own next read --
    went through a server-side cursor: ``DECLARE ... CURSOR FOR SAVEPOINT``, a syntax
    error."""
    with PostgresSink.open(pg_dsn, schema=pg_schema) as owner:
        owner.record_many(_run("r1"))
    engine = sa.create_engine(pg_dsn.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            sink = PostgresSink(conn, schema=pg_schema)
            report = build_report(sink)
            assert report.events == 5
            assert conn.get_execution_options() == {}
            with conn.begin():  # the caller's own work goes on
                assert conn.execute(sa.text("SELECT 1")).scalar() == 1
            assert len(list(sink.events(run_id="r1"))) == 5
            assert build_report(sink).events == 5
    finally:
        engine.dispose()


def test_a_report_on_the_callers_autocommit_connection_is_made(pg_dsn: str, pg_schema: str) -> None:
    """On a caller's connection in autocommit mode the report failed: its pass and its
    runs' last rows were read through server-side cursors, which live only in a
    transaction ("DECLARE CURSOR can only be used in transaction blocks")."""
    events = _run("r1") + _run("r2", start=0.5)
    with PostgresSink.open(pg_dsn, schema=pg_schema) as owner:
        owner.record_many(events)
    with _autocommit(pg_dsn) as conn:
        sink = PostgresSink(conn, schema=pg_schema)
        assert _comparable(sink) == _comparable(MemoryReader(events))
        assert conn.execute(sa.text("SELECT 1")).scalar() == 1


@contextmanager
def _autocommit(pg_dsn: str) -> Iterator[sa.Connection]:
    """A caller's own connection in autocommit mode (its engine disposed after)."""
    engine = sa.create_engine(pg_dsn.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            yield conn
    finally:
        engine.dispose()


def test_a_report_over_a_sparse_seq_range_is_made(tmp_path: Path) -> None:
    """``seq`` numbers need not be dense (a sequence restarted higher, a restore, a
    ``seq`` changed by SQL). The report kept one bit per ``seq`` number of the window's
    range: a last row at ``seq`` 2^62 asked for 2^59 bytes, a ``MemoryError`` instead of
    a report."""
    path = tmp_path / "ledger.db"
    events = _run("r1") + _run("r2", start=0.5)
    with SQLiteSink(path) as sink:
        sink.record_many(events)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE events SET seq = ? WHERE seq = (SELECT max(seq) FROM events)", (2**62,))
    conn.commit()
    conn.close()
    with SQLiteSink(path) as sink:
        assert _comparable(sink) == _comparable(MemoryReader(list(sink.events())))
        window = {"since": T0 + timedelta(minutes=1), "until": T0 + timedelta(minutes=4)}
        assert _comparable(sink, **window) == _comparable(MemoryReader(events), **window)


def test_runs_are_ordered_alike_under_a_database_collation(pg_dsn: str, pg_schema: str) -> None:
    """Runs starting at the same microsecond are listed in code point order by every
    reader. PostgreSQL ordered them by the column's collation: under an en-US one (what
    a server initialised with an en_US locale gives every text column) "a" came before
    "B", so ``runs()`` disagreed with the JSONL and memory readers and ``runs(limit=)``
    (``ledger runs --limit``) kept other runs."""
    import psycopg

    events = [Event(kind="request", run_id=r, time=T0, args='"x"') for r in "bBa_A"]
    with PostgresSink.open(pg_dsn, schema=pg_schema) as sink:
        sink.record_many(events)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        has_icu = conn.execute("SELECT 1 FROM pg_collation WHERE collname = 'en-US-x-icu'")
        if has_icu.fetchone() is None:
            pytest.skip("the server has no ICU en-US collation")
        conn.execute(
            f'ALTER TABLE "{pg_schema}".events ALTER COLUMN run_id TYPE text COLLATE "en-US-x-icu"'
        )
    memory = MemoryReader(events)
    with PostgresSink.open(pg_dsn, schema=pg_schema) as sink:
        for kw in ({}, {"newest": True}, {"limit": 2}, {"newest": True, "limit": 2}):
            assert list(sink.runs(**kw)) == list(memory.runs(**kw)), kw


def test_the_hash_check_does_not_take_an_integer_beyond_2_53_for_a_float(
    tmp_path: Path,
) -> None:
    """The shortcut of the content-hash check hashes ``orjson``'s sorted form. An edit of
    args ``{"n":1152921504606846976.0}`` into ``{"n":1152921504606847000}`` (an integer
    RFC 8785 cannot carry: the exact encoder refuses it) gave the same text, so the
    changed row was counted intact."""
    event = Event(kind="request", run_id="r1", args='{"n":1152921504606846976.0}')
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many([event])
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE events SET event_json = replace(event_json, '1152921504606846976.0', "
        "'1152921504606847000')"
    )
    conn.commit()
    conn.close()
    with SQLiteSink(path) as sink:
        check = check_hashes(sink)
        assert check.mismatch_count == 1, check.summary()
        assert "does not match its content hash" in check.mismatches[0].detail
        assert build_report(sink).hash_check.mismatch_count == 1


@pytest.mark.parametrize("field", ["args", "result"])
def test_a_stored_row_nested_too_deep_is_named_as_its_spaced_twin_is(
    tmp_path: Path, field: str
) -> None:
    """The constructor refuses ``args``/``result`` nested more than 128 levels, and so
    did the exact decoder; the compact decoder (every row a sink wrote, so every SQL row
    and JSONL line) skipped that check, so the same event read back or was refused
    depending on one space. A row edited by SQL to such a value is named by ``chain()``
    and ``events()``, not read back."""
    from ledger.errors import CorruptRecord, ValidationError

    deep = "[" * 200 + "]" * 200
    event = Event(kind="tool_result", run_id="r1", call_id="c", tool="t", result="1")
    text = event.to_json()
    compact = text.replace('"result":1', f'"{field}":{deep}')
    assert compact != text
    for variant in (compact, compact.replace(f'"{field}":', f'"{field}": ')):
        with pytest.raises(ValidationError, match="nested more than 128"):
            Event.from_json(variant)
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many([event])
    conn = sqlite3.connect(path)
    conn.execute("UPDATE events SET event_json = ?", (compact,))
    conn.commit()
    conn.close()
    with SQLiteSink(path) as sink:
        with pytest.raises(CorruptRecord, match="nested more than 128"):
            sink.chain("r1")
        with pytest.raises(CorruptRecord, match="nested more than 128"):
            list(sink.events())


def test_every_read_on_the_callers_autocommit_connection_works(pg_dsn: str, pg_schema: str) -> None:
    """``events()`` on a caller's connection in autocommit mode failed ("SAVEPOINT can
    only be used in transaction blocks"): each page was read in a savepoint. With no
    transaction to keep alive, a page is read under the writers' lock alone, and the
    lock is released after it: a writer on another connection is not blocked."""
    events = _run("r1") + _run("r2", start=0.5)
    with PostgresSink.open(pg_dsn, schema=pg_schema) as owner, _autocommit(pg_dsn) as conn:
        owner.record_many(events)
        sink = PostgresSink(conn, schema=pg_schema)
        assert [e.event_id for e in sink.events()] == [e.event_id for e in events]
        assert len(list(sink.events(run_id="r2", kind="action"))) == 2
        assert len(sink.chain("r1").events) == 5
        assert [r.run_id for r in sink.runs()] == ["r1", "r2"]
        assert sink.get(events[3].event_id) == events[3]
        owner.record(Event(kind="run_end", run_id="r3"))  # not blocked
        assert len(list(sink.events())) == len(events) + 1
        assert conn.execute(sa.text("SELECT 1")).scalar() == 1
