"""Session 7 review probes: retention records found by their index columns, and the
report's check of the retention tables against the log (each fixed since)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ledger.errors import LedgerError
from ledger.model.event import Event
from ledger.report.build import build_report
from ledger.retention import Retention, Selection
from ledger.sinks import SQLiteSink

OLD = datetime(2020, 1, 1, tzinfo=UTC)


def _held_ledger(path: Path) -> str:
    """A ledger of two old runs, a policy (floor 1d) and a hold on run r0; the hold id."""
    with SQLiteSink(path) as sink:
        when = [OLD + timedelta(seconds=i) for i in range(10)]
        sink.record_many(
            [
                Event(kind="request", run_id=f"r{i % 2}", args='"x"', time=t)
                for i, t in enumerate(when)
            ]
        )
        retention = Retention(sink)
        retention.set_policy(keep="30d", floor="1d", reason="policy", by="dpo")
        return retention.add_hold(run_id="r0", reason="litigation", by="dpo").hold_id


@pytest.mark.parametrize("column", ["tool", "kind", "run_id"])
def test_a_hold_hidden_by_an_edited_column_of_its_record_still_blocks_erasure(
    tmp_path: Path, column: str
) -> None:
    path = tmp_path / "ledger.db"
    _held_ledger(path)
    with sqlite3.connect(path) as conn:
        value = {"tool": "x", "kind": "request", "run_id": "zz"}[column]
        conn.execute(
            f"UPDATE events SET {column} = ? WHERE tool = 'ledger.hold.add' AND kind = 'action'",
            (value,),
        )
        conn.execute("DELETE FROM legal_holds")
    with SQLiteSink(path) as sink:
        with pytest.raises(LedgerError):
            Retention(sink).erase(Selection.of_run("r0"), reason="probe", by="attacker")
        assert all(e.erased is None for e in sink.events(run_id="r0"))


def test_report_flags_policy_and_hold_rows_deleted_by_sql(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _held_ledger(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM retention_policy")
        conn.execute("DELETE FROM legal_holds")
    with SQLiteSink(path) as sink:
        report = build_report(sink)
    assert report.retention is not None
    assert report.retention.tables_changed
    assert not report.compliant


def test_a_raised_floor_hidden_by_an_edited_tool_column_still_protects(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        young = datetime.now(UTC) - timedelta(days=10)
        sink.record_many([Event(kind="request", run_id="young", args='"x"', time=young)])
        retention = Retention(sink)
        retention.set_policy(keep="30d", floor="1d", reason="first", by="dpo")
        last = retention.set_policy(keep="3650d", floor="3650d", reason="raise", by="dpo")
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE events SET tool = 'x' WHERE event_id = ? AND kind = 'action'",
            (last.record_id,),
        )
        conn.execute("DELETE FROM retention_policy WHERE version = ?", (last.version,))
    with SQLiteSink(path) as sink:
        with pytest.raises(LedgerError):
            Retention(sink).erase(Selection.of_run("young"), reason="probe", by="attacker")
        assert all(e.erased is None for e in sink.events(run_id="young"))


def test_database_report_lists_only_the_runs_it_counted(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(
            [Event(kind="request", run_id=f"r{i % 20}", args='"x"') for i in range(12000)]
        )
    late: list[str] = []

    def commit_late_run(_read: int) -> None:
        if late:
            return
        late.append("late-run")
        with SQLiteSink(path) as other:
            other.record_many(
                [
                    Event(kind="request", run_id="late-run", args='"y"'),
                    Event(kind="run_end", run_id="late-run"),
                ]
            )

    with SQLiteSink(path) as sink:
        report = build_report(sink, progress=commit_late_run)
    assert late, "the report called progress"
    assert report.events == 12000
    assert sum(r.events for r in report.runs) == report.events
    assert "late-run" not in {r.run_id for r in report.runs}


def test_gate_refuses_a_reserved_run_id_before_the_run_starts(tmp_path: Path) -> None:
    from ledger.errors import ValidationError
    from ledger.gate import AllowAll, Gate

    with SQLiteSink(tmp_path / "ledger.db") as sink:
        gate = Gate(sink, policy=AllowAll())
        with pytest.raises(ValidationError, match="reserved"):
            gate.run("tidy up", run_id="ledger-retention-mine")


def test_reading_a_shredded_ledger_without_the_key_does_not_query_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlalchemy as sa
    from click.testing import CliRunner

    from ledger.cli.main import cli
    from ledger.sinks.shred import ENV_KEY

    key = tmp_path / "payload.key"
    assert CliRunner().invoke(cli, ["payload-key", "--out", str(key)]).exit_code == 0
    path = tmp_path / "ledger.db"
    monkeypatch.setenv(ENV_KEY, str(key))
    with SQLiteSink(path) as sink:
        sink.record_many([Event(kind="request", run_id=f"r{i}", args='"x"') for i in range(300)])
    monkeypatch.delenv(ENV_KEY)
    with SQLiteSink(path) as reader:
        statements: list[str] = []

        def seen(_c: object, _cur: object, statement: str, *_a: object) -> None:
            statements.append(statement)

        sa.event.listen(reader._engine, "before_cursor_execute", seen)
        events = list(reader.events())
        sa.event.remove(reader._engine, "before_cursor_execute", seen)
    assert len(events) == 300
    assert len(statements) < 30, f"{len(statements)} statements to read 300 events"
