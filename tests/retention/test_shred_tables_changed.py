"""The payload tables of a crypto-shredding ledger changed by SQL. Its ``payload_mode``
row deleted: its data keys say what it is; writers are refused (they would store new
payloads in clear), readers read on, and ``ledger verify``, ``ledger db check`` and the
next erasure report it. A data key overwritten or re-labelled: ``ledger verify`` says
so (with the payload key, it opens every standing data key)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.errors import IntegrityError, RetentionError
from ledger.model.event import Event
from ledger.model.sealed import is_envelope
from ledger.retention import Retention, Selection
from ledger.sinks.shred import ENV_KEY, FileKeyWrapper, shredding
from tests.retention.conftest import OLD, Ledger, needs_retention_schema, open_keyed, run_events

pytestmark = needs_retention_schema


@pytest.fixture
def lost(ledger_db: Ledger, key: FileKeyWrapper) -> Iterator[Ledger]:
    """A shredding ledger of two old runs (one shredded by an erasure), then its
    ``payload_mode`` row deleted by SQL; every sink of it closed."""
    sink = open_keyed(ledger_db, key)
    sink.record_many(run_events("old-1", OLD))
    sink.record_many(run_events("old-2", OLD + timedelta(days=1), secret="bob"))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="30d", reason="v1", by="dpo")
    r.erase(Selection.of_run("old-1"), reason="gdpr", fields=["args", "result"])
    assert r.tables_changed() == ""
    ledger_db.close_all()
    ledger_db.opened.clear()
    ledger_db.sql("DELETE FROM {p}payload_mode")
    yield ledger_db


def _count(db: Ledger) -> int:
    return int(db.sql("SELECT count(*) FROM {p}events")[0][0])


def _action(run_id: str) -> Event:
    return Event(kind="action", run_id=run_id, call_id="c1", tool="send_mail",
                 time=datetime.now(UTC), args={"to": "eve@example.com"}, verdict="allowed",
                 reason="ok")  # fmt: skip


@pytest.mark.parametrize("with_key", [False, True])
def test_a_writer_is_refused_and_nothing_is_stored(
    lost: Ledger, key: FileKeyWrapper, with_key: bool
) -> None:
    """Without the row a keyless writer took the ledger for one in clear and stored
    the payloads of new runs unencrypted; now opening any writer is refused, saying
    what was deleted and what to do."""
    before = _count(lost)
    with pytest.raises(IntegrityError, match=r"payload_mode row is gone.*ledger verify"):
        sink = open_keyed(lost, key if with_key else None)
        sink.commit_action(_action("new-run"))
    assert _count(lost) == before


def test_readers_read_on_as_a_shredding_ledger(lost: Ledger, key: FileKeyWrapper) -> None:
    """A reader with the key decrypts the surviving run; without it, the envelopes
    stay as stored and the shredded run's payloads read as erased."""
    keyed = open_keyed(lost, key, reader=True)
    assert shredding(keyed)
    kept = [e for e in keyed.chain("old-2").events if e.kind == "action" and e.args]
    assert kept and all("bob@example.com" in str(e.args) for e in kept if e.tool == "send_mail")
    blind = open_keyed(lost, None, reader=True)
    sealed = [e for e in blind.chain("old-2").events if e.kind == "action" and e.args]
    assert sealed and all(is_envelope(e.args) for e in sealed)
    erased = [e for e in blind.chain("old-1").events if e.kind == "action"]
    assert erased and all(e.args is None and e.erased is not None for e in erased)


def test_verify_check_and_erasure_report_it(lost: Ledger, key: FileKeyWrapper) -> None:
    runner = CliRunner()
    for command in (["verify"], ["db", "check"]):
        result = runner.invoke(cli, [*command, "--db", lost.url])
        assert result.exit_code == 1, (command, result.output)
        assert "payload_mode" in result.output, (command, result.output)
    reader: Any = open_keyed(lost, key, reader=True)
    r = Retention(reader)
    assert "payload_mode" in r.tables_changed(scan=False)
    before = lost.sql("SELECT seq, event_json FROM {p}events ORDER BY seq")
    with pytest.raises((RetentionError, IntegrityError), match="payload_mode"):
        r.erase(Selection.of_run("old-2"), reason="gdpr")
    assert lost.sql("SELECT seq, event_json FROM {p}events ORDER BY seq") == before


@pytest.fixture
def keyed(ledger_db: Ledger, key: FileKeyWrapper) -> Iterator[Ledger]:
    """A shredding ledger of two old runs and a young one, every sink closed."""
    sink = open_keyed(ledger_db, key)
    sink.record_many(run_events("old-1", OLD))
    sink.record_many(run_events("young", datetime.now(UTC) - timedelta(days=1), secret="bob"))
    Retention(sink).set_policy(keep="400d", floor="30d", reason="v1", by="dpo")
    ledger_db.close_all()
    ledger_db.opened.clear()
    yield ledger_db


def _verify(db: Ledger, key: FileKeyWrapper | None) -> Any:
    env = {ENV_KEY: str(key.path)} if key is not None else {}
    return CliRunner().invoke(cli, ["verify", "--db", db.url], env=env)


@pytest.mark.parametrize(
    "forgery",
    [
        "UPDATE {p}run_keys SET wrapped = :junk WHERE run_id = 'young'",
        "UPDATE {p}run_keys SET wrapped = (SELECT wrapped FROM {p}run_keys WHERE run_id = "
        "'old-1') WHERE run_id = 'young'",
    ],
)
def test_a_data_key_overwritten_by_sql_is_reported_by_verify_with_the_key(
    keyed: Ledger, key: FileKeyWrapper, forgery: str
) -> None:
    """The young run's payloads become unreadable with no erasure (inside the floor):
    verify given the payload key opens every standing data key and says which does not
    open; without the key nothing can open them, and it says nothing of them."""
    assert _verify(keyed, key).exit_code == 0
    keyed.sql(forgery, junk=b"\x00" * 60)
    result = _verify(keyed, key)
    assert result.exit_code == 1, result.output
    assert "young" in result.output and "does not open" in result.output


def test_a_data_key_relabelled_by_sql_is_reported(keyed: Ledger) -> None:
    keyed.sql("UPDATE {p}run_keys SET key_id = 'other-key' WHERE run_id = 'young'")
    result = _verify(keyed, None)
    assert result.exit_code == 1, result.output
    assert "other-key" in result.output and "payload_mode" in result.output


@pytest.mark.postgres
def test_a_writer_whose_mode_row_rolled_back_refuses_a_ledger_made_under_another_key(
    pg_ledger: Ledger, tmp_path: Path
) -> None:
    """A sink on the caller's connection records the mode under key A in a transaction
    the caller rolls back; another writer then makes the ledger a key-B ledger. The
    first sink's next write is refused (it stored the run's data key under key A: a run
    the ledger's key cannot read, reported as a changed table)."""
    import sqlalchemy as sa

    from ledger.errors import PayloadKeyError
    from ledger.sinks import PostgresSink

    key_a = FileKeyWrapper.create(tmp_path / "a.key")
    key_b = FileKeyWrapper.create(tmp_path / "b.key")
    engine = sa.create_engine(pg_ledger.sql_url, poolclass=sa.pool.NullPool)
    try:
        PostgresSink(engine, schema=pg_ledger.schema).close()  # the schema, no mode yet
        conn = engine.connect()
        try:
            rolled = conn.begin()
            first = PostgresSink(conn, schema=pg_ledger.schema, payload_key=key_a)
            rolled.rollback()
            other = PostgresSink(engine, schema=pg_ledger.schema, payload_key=key_b)
            other.record(_action("run-b"))
            other.close()
            with conn.begin():
                conn.exec_driver_sql("SET LOCAL statement_timeout = '10s'")  # fail, not hang
                with pytest.raises(PayloadKeyError, match="is not this ledger's"):
                    first.record(_action("run-a"))
        finally:
            conn.close()
        assert pg_ledger.sql("SELECT run_id, key_id FROM {p}run_keys") == [("run-b", key_b.key_id)]
    finally:
        engine.dispose()
