"""A writer without the key that opened a ledger with no event yet (a retention policy
set first, say) must not store payloads in clear once a writer with the key has made it
a crypto-shredding ledger: its first write checks the mode under the writers' lock."""

from __future__ import annotations

import pytest

from ledger.errors import PayloadKeyError
from ledger.retention import Retention
from ledger.sinks.shred import FileKeyWrapper, shredding
from tests.retention.conftest import OLD, Ledger, needs_retention_schema, open_keyed, run_events

pytestmark = needs_retention_schema


@pytest.mark.parametrize("policy_first", [True, False], ids=["policy-first", "empty"])
def test_a_keyless_writer_opened_first_is_refused_once_the_ledger_is_shredding(
    ledger_db: Ledger, key: FileKeyWrapper, policy_first: bool
) -> None:
    first = open_keyed(ledger_db)
    if policy_first:
        Retention(first).set_policy(keep="400d", floor="30d", reason="before go-live")
    keyless = open_keyed(ledger_db)  # opened while the mode is still open
    keyed = open_keyed(ledger_db, key)  # makes it a shredding ledger
    assert shredding(keyed)
    keyed.record_many(run_events("sealed", OLD))
    with pytest.raises(PayloadKeyError, match="crypto-shredding ledger"):
        keyless.record_many(run_events("clear", OLD, secret="bob"))
    stored = ledger_db.sql("SELECT event_json FROM {p}events WHERE run_id = 'clear'")
    assert stored == []
    for event in run_events("clear2", OLD, secret="bob")[:1]:  # commit_action's path too
        with pytest.raises(PayloadKeyError):
            keyless.record(event)


def test_a_sink_on_the_callers_connection_checks_every_write(
    pg_dsn: str, key: FileKeyWrapper
) -> None:
    import sqlalchemy as sa

    from ledger.ids import new_event_id
    from ledger.sinks import PostgresSink
    from ledger.sinks.url import parse_url

    schema = f"race_{str(new_event_id()).lower()}"
    found = parse_url(pg_dsn).dsn
    assert found is not None
    engine = sa.create_engine(found, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            keyless = PostgresSink(conn, schema=schema)
            conn.commit()
            keyed = PostgresSink(engine, schema=schema, payload_key=key)
            assert shredding(keyed)
            with pytest.raises(PayloadKeyError, match="crypto-shredding ledger"):
                keyless.record_many(run_events("clear", OLD, secret="bob"))
            conn.rollback()
            keyed.close()
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()


def test_a_sink_opened_without_migrating_does_not_write_in_clear(
    sqlite_ledger: Ledger, key: FileKeyWrapper
) -> None:
    keyed = open_keyed(sqlite_ledger, key)
    keyed.record_many(run_events("sealed", OLD))
    reader = open_keyed(sqlite_ledger, reader=True)  # migrate=False, no key
    with pytest.raises(PayloadKeyError, match="crypto-shredding ledger"):
        reader.record_many(run_events("clear", OLD, secret="bob"))
    assert sqlite_ledger.sql("SELECT count(*) FROM {p}events WHERE run_id = 'clear'")[0][0] == 0


def test_retention_records_alone_do_not_end_the_check(
    sqlite_ledger: Ledger, key: FileKeyWrapper
) -> None:
    """What ``ledger db copy`` writes first may be only retention records: the check
    goes on until an event of a writer is committed."""
    from ledger.retention.records import RetentionRun

    keyless = open_keyed(sqlite_ledger)
    run = RetentionRun()
    records = run.events(tool="ledger.hold", asked="hold", record={"x": 1}, outcome={},
                         reason="r", by="b", at=OLD)  # fmt: skip
    keyless._record_copied(records)  # as db copy carries a source's retention runs
    keyed = open_keyed(sqlite_ledger, key)
    assert shredding(keyed)
    with pytest.raises(PayloadKeyError, match="crypto-shredding ledger"):
        keyless.record_many(run_events("clear", OLD, secret="bob"))
