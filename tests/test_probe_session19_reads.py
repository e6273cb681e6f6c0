"""Session 19's hostile pass over the read side, one test per defect (each failed before
its fix): the database report took a run whose first record in the window is a prompt
for one started there (the streaming report did not), a windowed report relied on rows
from before its window without checking them, a ``has_err`` of ``'yes'`` passed every
check on SQLite, and a JSONL file's unreadable lines were counted as one."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from ledger.cli import cli
from ledger.ids import new_event_id
from ledger.model import Approval, Event, Ref
from ledger.report import build_report
from ledger.report.database import check_database
from ledger.sinks import JSONLReader, JSONLSink, MemoryReader, PostgresSink, SQLiteSink

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
REF = [Ref(source="tool", id="01J00000000000000000000000", hash="sha256:ab")]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """An empty SQL ledger of each backend: ``(sink, run SQL on it)``."""
    if request.param == "sqlite":
        path = tmp_path / "l.db"
        sink: Any = SQLiteSink(path)

        def sql(statement: str) -> None:
            with sqlite3.connect(path) as conn:
                conn.execute(statement.format(t="events"))

        yield sink, sql
        sink.close()
        return
    dsn = request.getfixturevalue("pg_dsn")
    schema = f"s19_{str(new_event_id()).lower()}"
    sink = PostgresSink.open(dsn, schema=schema)
    engine = sa.create_engine(dsn.replace("postgresql://", "postgresql+psycopg://", 1))

    def pg_sql(statement: str) -> None:
        with engine.begin() as conn:
            conn.exec_driver_sql(statement.format(t=f'"{schema}".events'))

    try:
        yield sink, pg_sql
    finally:
        sink.close()
        with engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        engine.dispose()


def _summary(report: Any) -> tuple[Any, ...]:
    return (
        report.compliant,
        len(report.unsafe_without_intent),
        [(a.call_id, a.policy, a.approver) for a in report.approved],
        [(t.tool, t.actions, t.succeeded, t.safe_reads) for t in report.tools],
    )


@pytest.mark.parametrize(
    "events",
    [
        [  # the call's first decision, before the window, was a denial of a non-safe tool
            Event(kind="gate_decision", run_id="R", call_id="c", tool="rm", verdict="denied",
                  reason="not safe", time=at(9)),
            Event(kind="prompt", run_id="R", time=at(11)),
            Event(kind="request", run_id="R", args='"go"', time=at(12)),
            Event(kind="gate_decision", run_id="R", call_id="c", tool="rm", verdict="allowed",
                  label="safe", reason="safe tool", time=at(13)),
            Event(kind="tool_result", run_id="R", call_id="c", tool="rm", result="1",
                  time=at(14)),
        ],
        [  # the policy and approver of the action are those decided first
            Event(kind="gate_decision", run_id="R", call_id="c", tool="write",
                  verdict="allowed", label="policy:early", time=at(9),
                  approval=Approval(approver="alice", time=at(9), reason="ticket 7")),
            Event(kind="retrieved", run_id="R", refs=REF, time=at(11)),
            Event(kind="request", run_id="R", args='"go"', time=at(12)),
            Event(kind="gate_decision", run_id="R", call_id="c", tool="write",
                  verdict="allowed", label="policy:late", time=at(13)),
            Event(kind="action", run_id="R", call_id="c", tool="write", verdict="allowed",
                  args={}, refs=REF, time=at(14)),
            Event(kind="tool_result", run_id="R", call_id="c", tool="write", result="1",
                  time=at(15)),
        ],
    ],
    ids=["denied-first", "approved-first"],
)  # fmt: skip
def test_a_run_whose_first_record_in_the_window_is_not_a_request_did_not_start_there(
    store: Any, events: list[Event]
) -> None:
    sink, _ = store
    sink.record_many(events)
    want = _summary(build_report(MemoryReader(events), since=at(10)))
    assert _summary(build_report(sink, since=at(10))) == want
    whole = build_report(MemoryReader(events))
    assert want[0] == whole.compliant and want[1] == len(whole.unsafe_without_intent)


def test_a_row_before_the_window_the_report_relies_on_is_checked(store: Any) -> None:
    """A denied action before the window, turned into an allowed one by SQL (its hash
    and the log left as they were), would make the result in the window look
    intended: the windowed report lists the row and is not compliant."""
    sink, sql = store
    sink.record_many([
        Event(kind="request", run_id="r", args='"go"', time=at(0)),
        Event(kind="action", run_id="r", call_id="c", tool="rm", verdict="denied", args={},
              reason="no", time=at(1)),
        Event(kind="tool_result", run_id="r", call_id="c", tool="rm", result="1", time=at(20)),
    ])  # fmt: skip
    assert not build_report(sink, since=at(10)).compliant  # the result ran without intent
    denied, allowed = '\'"verdict":"denied"\'', '\'"verdict":"allowed"\''
    sql(
        f"UPDATE {{t}} SET verdict = 'allowed', event_json = replace(event_json, {denied}, "
        f"{allowed}) WHERE kind = 'action'"
    )
    report = build_report(sink, since=at(10))
    assert not report.compliant
    assert report.hash_check.mismatch_count == 1
    (found,) = report.hash_check.mismatches
    assert found.run_id == "r" and "before the window" in found.detail
    assert "content hash" in found.detail


def test_a_row_moved_out_of_the_window_by_its_time_column_is_listed(store: Any) -> None:
    sink, sql = store
    sink.record_many([
        Event(kind="request", run_id="r", args='"go"', time=at(0)),
        Event(kind="action", run_id="r", call_id="c", tool="w", verdict="allowed", args={},
              refs=REF, time=at(12)),
        Event(kind="tool_result", run_id="r", call_id="c", tool="w", result="1", time=at(13)),
    ])  # fmt: skip
    sql("UPDATE {t} SET time_us = time_us - 86400000000 WHERE kind = 'action'")
    report = build_report(sink, since=at(10))
    assert not report.compliant
    assert any("time_us" in m.detail for m in report.hash_check.mismatches)


@pytest.mark.parametrize("value", ["'yes'", "X'01'", "2"])
def test_a_has_err_no_sink_writes_is_a_finding(tmp_path: Path, value: str) -> None:
    """SQL's ``CASE WHEN has_err`` (``runs()``' error counts) and Python's truth disagree
    on such a value: every check names the row."""
    path = tmp_path / "l.db"
    with SQLiteSink(path) as sink:
        sink.record_many([
            Event(kind="request", run_id="r", args='"go"', time=at(0)),
            Event(kind="action", run_id="r", call_id="c", tool="t", verdict="allowed",
                  args={}, refs=REF, time=at(1)),
            Event(kind="tool_result", run_id="r", call_id="c", tool="t", err="disk full",
                  time=at(2)),
        ])  # fmt: skip
        assert build_report(sink).compliant
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE events SET has_err = {value} WHERE kind = 'tool_result'")
    with SQLiteSink(path) as sink:
        report = build_report(sink)
        assert not report.compliant
        assert any("has_err" in m.detail for m in report.hash_check.mismatches)
    assert not check_database(f"sqlite:///{path}").ok
    result = CliRunner().invoke(cli, ["verify", "--db", f"sqlite:///{path}"])
    assert result.exit_code == 1 and "has_err" in result.output


def test_each_unreadable_jsonl_line_is_a_finding_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with JSONLSink(path) as sink:
        for i in range(3):
            sink.record(Event(kind="request", run_id=f"r{i}", args='"go"', time=at(i)))
    lines = path.read_text().splitlines()
    lines[1:1] = ["garbage", "{}", '{"kind": 5}']
    path.write_text("\n".join(lines) + "\n")
    report = build_report(JSONLReader(path))
    assert report.hash_check.mismatch_count == 3
    assert len({m.detail for m in report.hash_check.mismatches}) == 3
