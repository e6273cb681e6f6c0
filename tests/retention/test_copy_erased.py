"""``ledger db copy`` and erasure: a copy is called verified only when its own log
verifies, so a ledger with erased events (whose rows keep the leaves of the events as
committed, which a new log cannot carry) is refused before anything is written, from
any source store, and an ordinary copy verifies as ``ledger verify`` would."""

from __future__ import annotations

from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from ledger.cli import cli
from ledger.errors import RetentionError, ValidationError
from ledger.ids import new_event_id
from ledger.integrity.verify import verify_ledger
from ledger.retention import Retention, Selection
from ledger.sinks import JSONLSink, SQLiteSink, copy_ledger, open_sink
from ledger.sinks.url import parse_url

from .conftest import OLD, Ledger, needs_retention_schema, run_events

pytestmark = needs_retention_schema


def _drop_schema(dsn: str, schema: str) -> None:
    found = parse_url(dsn).dsn
    assert found is not None
    engine = sa.create_engine(found, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


def _erased_ledger(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    for i in range(3):
        sink.record_many(run_events(f"old-{i}", OLD + timedelta(days=i)))
    r = Retention(sink)
    r.set_policy(keep="30d", floor="10d", reason="v1")
    r.erase(Selection.of_run("old-0"), reason="a data subject asked")
    assert verify_ledger(sink, None).ok  # the source itself verifies
    ledger_db.close_all()


def test_a_ledger_with_erased_events_is_refused_and_nothing_is_written(
    ledger_db: Ledger, tmp_path: Path
) -> None:
    _erased_ledger(ledger_db)
    target = tmp_path / "copy.db"
    with pytest.raises(ValidationError, match=r"erased events .* cannot carry"):
        copy_ledger(ledger_db.url, f"sqlite:///{target}")
    assert not target.exists()
    result = CliRunner().invoke(cli, ["db", "copy", ledger_db.url, f"sqlite:///{target}"])
    assert result.exit_code == 1
    assert "erased events" in result.output and "Traceback" not in result.output
    assert not target.exists()


def test_a_jsonl_export_holding_a_tombstone_is_refused_too(
    sqlite_ledger: Ledger, tmp_path: Path
) -> None:
    """A JSONL file keeps no tree to pre-check: its tombstone stops the copy as it is
    met, and the file the copy created is removed."""
    _erased_ledger(sqlite_ledger)
    lines = tmp_path / "export.jsonl"
    with SQLiteSink(Path(sqlite_ledger.url.removeprefix("sqlite:///")), migrate=False) as s:
        events = list(s.events())
    assert any(e.erased is not None for e in events)
    with JSONLSink(lines) as out:  # as `ledger db copy` writes it: retention runs carried
        out._record_copied(events)
    target = tmp_path / "from-jsonl.db"
    with pytest.raises(ValidationError, match="erased events"):
        copy_ledger(f"jsonl:///{lines}", f"sqlite:///{target}")
    assert not target.exists()


def test_an_ordinary_copy_verifies_as_ledger_verify_would(
    ledger_db: Ledger, tmp_path: Path
) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    ledger_db.close_all()
    target = tmp_path / "copy.db"
    assert copy_ledger(ledger_db.url, f"sqlite:///{target}").verified
    with SQLiteSink(target) as copy:
        assert verify_ledger(copy, None).ok


@pytest.mark.parametrize("to", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_policy_and_the_holds_come_along_and_rule_the_copy(
    ledger_db: Ledger, to: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Between SQL ledgers (either way) the copy has the source's policy history and
    standing holds, so the hold still stops an erasure there and an erasure the policy
    allows goes through and leaves the copy's log verifying."""
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    sink.record_many(run_events("old-2", OLD + timedelta(days=1)))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="180d", reason="v1")
    r.set_policy(keep="300d", floor="200d", reason="v2: a higher floor")
    hold = r.add_hold(run_id="old-1", reason="litigation")
    released = r.add_hold(run_id="old-2", reason="a closed matter")
    r.release_hold(released.hold_id, reason="closed")
    policies, holds = r.policies(), r.holds(released=True)
    ledger_db.close_all()
    if to == "sqlite":
        target_url = f"sqlite:///{tmp_path / 'copy.db'}"
    else:  # a schema of its own (the source may be the PostgreSQL fixture's)
        dsn: str = request.getfixturevalue("pg_dsn")
        schema = f"ledger_copy_{str(new_event_id()).lower()}"
        target_url = f"{dsn}{'&' if '?' in dsn else '?'}ledger_schema={schema}"
        request.addfinalizer(lambda: _drop_schema(dsn, schema))
    assert copy_ledger(ledger_db.url, target_url).verified
    with closing(open_sink(target_url)) as copy:
        again = Retention(copy)
        assert again.policies() == policies
        assert again.holds(released=True) == holds
        assert [h.hold_id for h in again.holds()] == [hold.hold_id]
        with pytest.raises(RetentionError, match="hold"):
            again.erase(Selection.of_run("old-1"), reason="held")
        done = again.erase(Selection.of_run("old-2"), reason="a data subject asked")
        assert done.erased == len(run_events("old-2", OLD))
        assert verify_ledger(copy, None).ok
