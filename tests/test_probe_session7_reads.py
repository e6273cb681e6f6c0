"""Probes of issue 18's read side (session 7): the report computed in the database
against the streaming build, on ledgers edited by hand or erased.

Each test pins one defect a new user found (each fixed since).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import LedgerError
from ledger.model import Event, Ref
from ledger.report import build_report
from ledger.report.aggregate import in_database
from ledger.retention.store import Retention, Selection
from ledger.sinks import MemoryReader, SQLiteSink

T0 = datetime(2026, 2, 1, 8, tzinfo=UTC)
REF = [Ref(source="tool", id="01J00000000000000000000000")]


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


class NotSQL:
    """The same ledger behind a reader that is not a SQL sink: the streaming build."""

    def __init__(self, inner: SQLiteSink) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)


def report(reader: Any, **window: Any) -> dict[str, Any]:
    data: dict[str, Any] = build_report(reader, **window).to_dict()
    return data


def edit(path: Path, sql: str, *args: object) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute(sql, args)
        conn.commit()
    finally:
        conn.close()


def approved_write(reason: str = "") -> list[Event]:
    """Run r1: a request, an approved write citing a ref, and its result."""
    return [
        Event(kind="request", run_id="r1", time=at(0), args='"go"'),
        Event(
            kind="action",
            run_id="r1",
            call_id="w",
            tool="write",
            verdict="allowed",
            args={},
            refs=REF,
            reason=reason,
            time=at(1),
        ),
        Event(
            kind="tool_result", run_id="r1", call_id="w", tool="write", result='"ok"', time=at(2)
        ),
    ]


@pytest.fixture
def two_runs(tmp_path: Path) -> Iterator[tuple[Path, list[Event]]]:
    """r1: an approved write and its result (the run's last row); r2 after it."""
    events = [
        *approved_write(),
        Event(kind="request", run_id="r2", time=at(3), args='"go"'),
        Event(kind="run_end", run_id="r2", time=at(4)),
    ]
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(events)
    yield path, events


def test_an_edited_run_column_does_not_invent_violations(
    two_runs: tuple[Path, list[Event]],
) -> None:
    path, events = two_runs
    edit(path, "UPDATE events SET run_id = 'r2' WHERE event_id = ?", str(events[2].event_id))
    with SQLiteSink(path) as sink:
        assert in_database(sink)
        db = report(sink)
        streamed = report(NotSQL(sink))
    # both see the edited row and say so
    assert db["hash_check"]["mismatch_count"] == streamed["hash_check"]["mismatch_count"] == 1
    assert db["compliant"] is False
    # neither the JSON nor the columns hold an r1 result without an intent
    assert db["unsafe_without_intent"] == streamed["unsafe_without_intent"]
    assert db["missing_results"] == streamed["missing_results"]
    assert db["totals"] == streamed["totals"]


def test_an_erased_run_is_listed_alike_by_both_builds(tmp_path: Path) -> None:
    events = [*approved_write(reason="asked"), Event(kind="run_end", run_id="r1", time=at(3))]
    with SQLiteSink(tmp_path / "ledger.db") as sink:
        sink.record_many(events)
        retention = Retention(sink)
        retention.set_policy(keep="400d", floor="180d", reason="probe", by="tester")
        retention.erase(Selection.of_run("r1"), reason="gdpr 7", by="tester")
        stored = list(sink.events())
        db = report(sink, since=at(0), until=at(10))
        streamed = report(NotSQL(sink), since=at(0), until=at(10))
    memory = report(MemoryReader(stored), since=at(0), until=at(10))
    assert streamed["approved_actions"] == memory["approved_actions"]
    assert db["approved_actions"] == streamed["approved_actions"]


def test_a_text_time_column_is_a_finding_not_an_internal_error(
    two_runs: tuple[Path, list[Event]],
) -> None:
    path, events = two_runs
    edit(path, "UPDATE events SET time_us = 'abc' WHERE event_id = ?", str(events[1].event_id))
    with SQLiteSink(path) as sink:
        try:
            data = report(sink)
        except LedgerError as exc:  # a clean error naming the damage is acceptable
            assert "outside the ledger" in str(exc)
        else:
            assert data["compliant"] is False and data["hash_check"]["mismatch_count"] >= 1


def test_a_report_made_while_the_ledger_grows_agrees_with_itself(
    two_runs: tuple[Path, list[Event]],
) -> None:
    path, _ = two_runs
    written: list[int] = []

    def meanwhile(done: int) -> None:  # an agent commits while the report is being made
        if written:
            return
        written.append(done)
        with SQLiteSink(path) as other:
            other.record_many(
                [
                    Event(kind="action", run_id="r3", call_id="x", tool="write",
                          verdict="allowed", args={}, refs=REF, time=at(5)),
                    Event(kind="tool_result", run_id="r3", call_id="x", tool="write",
                          result='"ok"', time=at(6)),
                ]
            )  # fmt: skip

    with SQLiteSink(path) as sink:
        data = build_report(sink, until=at(60), progress=meanwhile).to_dict()
    assert written
    actions = data["totals"]["actions"]
    assert sum(bucket["actions"] for bucket in data["timeline"]) == actions
    assert sum(tool["actions"] for tool in data["tools"]) == actions
    assert data["totals"]["approved_actions"] == actions


def test_a_huge_runs_limit_is_not_an_internal_error(
    two_runs: tuple[Path, list[Event]],
) -> None:
    path, events = two_runs
    expected = list(MemoryReader(events).runs())
    with SQLiteSink(path) as sink:
        try:
            got = list(sink.runs(limit=2**64))
        except LedgerError:
            return  # a clean refusal naming the argument is acceptable
    assert got == expected


def test_a_missing_prefix_node_falls_back_to_the_full_log_check(tmp_path: Path) -> None:
    from ledger.integrity.verify import verify_ledger

    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(
            Event(kind="request", run_id=f"r{i}", time=at(i), args='"go"') for i in range(30)
        )
    edit(path, "UPDATE events SET nodes = NULL WHERE seq = 8")  # completes node (3, 0)
    with SQLiteSink(path) as sink:
        full = verify_ledger(sink, None)
        data = report(sink, since=at(10), until=at(22))
    assert data["totals"]["events"] == 12
    assert data["log_check"]["ok"] is full.ok


def test_a_row_moved_out_of_the_window_by_its_time_column_is_listed(
    two_runs: tuple[Path, list[Event]],
) -> None:
    """The window is chosen by the time column (both builds); a row whose column was
    moved out while its JSON time is inside, among the window's rows, is tampering the
    report lists, never a silent gap."""
    path, events = two_runs
    moved = (at(50) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    edit(path, "UPDATE events SET time_us = ? WHERE event_id = ?", moved, str(events[1].event_id))
    with SQLiteSink(path) as sink:
        data = report(sink, since=at(0), until=at(3))
    assert data["compliant"] is False
    listed = data["hash_check"]["mismatches"]
    assert [m["event_id"] for m in listed] == [str(events[1].event_id)], listed
    assert "outside the window" in listed[0]["detail"]
