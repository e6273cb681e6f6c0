"""Session 7 final regression probes: the retention records found by a run_id range,
the retention CLI's check that a SQLite file holds a ledger."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.errors import LedgerError
from ledger.model.event import Event
from ledger.retention import Retention, Selection
from ledger.sinks import PostgresSink, SQLiteSink

OLD = datetime(2020, 1, 1, tzinfo=UTC)


def _ledger(path: Path) -> None:
    with SQLiteSink(path) as sink:
        sink.record_many([Event(kind="request", run_id="r0", args='"x"', time=OLD)])


def test_retention_set_on_a_ledger_whose_file_name_holds_a_question_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _ledger(tmp_path / "a?b.db")
    readable = CliRunner().invoke(cli, ["hold", "list", "--db", "a?b.db"])
    assert readable.exit_code == 0, readable.output  # a reader opens it
    result = CliRunner().invoke(
        cli,
        [
            *("retention", "set", "--db", "a?b.db", "--keep", "30d", "--floor", "1d"),
            *("--reason", "policy", "--by", "dpo"),
        ],
    )
    assert not (tmp_path / "a").exists(), "a stray empty file 'a' was created"
    assert result.exit_code == 0, result.output


def test_a_copied_reserved_prefix_run_does_not_lock_retention(tmp_path: Path) -> None:
    from ledger.sinks.copy import copy_ledger

    source = tmp_path / "old.jsonl"
    source.write_text(
        '{"event_id":"01M8SNW77AEVYSRBSGXHZ1HVNR","run_id":"r0",'
        '"time":"2020-01-01T00:00:00Z","kind":"request","args":"x"}\n'
        '{"event_id":"01M8SNW77AEVYSRBSGXK9CCPDT","run_id":"ledger-retention-import",'
        '"time":"2020-01-01T00:00:00Z","kind":"request","args":"x"}\n',
        encoding="utf-8",
    )
    target = tmp_path / "copy.db"
    try:
        copy_ledger(f"jsonl:///{source}", f"sqlite:///{target}")
    except LedgerError:
        return  # refusing the look-alike run at the copy is a fine answer too
    with SQLiteSink(target) as sink:
        retention = Retention(sink)
        retention.set_policy(keep="30d", floor="1d", reason="policy", by="dpo")
        assert retention.tables_changed() == ""


def test_retention_records_are_found_under_a_punctuation_ignoring_collation(
    pg_dsn: str,
) -> None:
    import psycopg

    schema = f"probe7f_{datetime.now(UTC).strftime('%H%M%S%f')}_{os.getpid()}"
    sink = PostgresSink.open(pg_dsn, schema=schema)
    try:
        sink.record_many(
            [
                Event(
                    kind="request", run_id=f"r{i % 2}", args='"x"', time=OLD + timedelta(seconds=i)
                )
                for i in range(6)
            ]
        )
        retention = Retention(sink)
        retention.set_policy(keep="30d", floor="1d", reason="policy", by="dpo")
        hold = retention.add_hold(run_id="r0", reason="litigation", by="dpo")
        sink.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            # what a database created with such a default collation gives every column
            conn.execute(
                f'CREATE COLLATION "{schema}".shifted (provider = icu, locale = "en-u-ka-shifted")'
            )
            conn.execute(
                f'ALTER TABLE "{schema}".events ALTER COLUMN run_id TYPE text '
                f'COLLATE "{schema}".shifted'
            )
        sink = PostgresSink.open(pg_dsn, schema=schema)
        retention = Retention(sink)
        assert retention.tables_changed() == ""
        with pytest.raises(LedgerError, match=hold.hold_id):
            retention.erase(Selection.of_run("r0"), reason="probe", by="dpo")
        assert retention.erase(Selection.of_run("r1"), reason="probe", by="dpo").erased == 3
    finally:
        sink.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
