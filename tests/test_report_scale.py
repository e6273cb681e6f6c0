"""The report computed in the database equals the report of one streaming pass.

On a SQL ledger ``build_report`` counts with SQL aggregates and checks the rows in one
streaming pass of narrow records (``ledger.report.aggregate``); any other reader gets the
streaming build over whole events. Both must say the same thing: every count, listing,
finding and the timeline, on SQLite and PostgreSQL, for windows cutting calls in two, for
safe reads, denials, results without an intent, approvals and who, and for rows damaged
by hand. The streaming side is the same ledger behind a reader that is not a SQL sink.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# the benchmark's generator, as a module of the namespace package ``benchmarks`` (the
# checkout is on the path): putting benchmarks/ itself on sys.path would let its mcp.py
# shadow the mcp package for every test collected after this one
from benchmarks.scale import fleet
from ledger.errors import ValidationError
from ledger.model import Actor, Approval, Event, Ref
from ledger.report import build_report
from ledger.report.aggregate import in_database
from ledger.sinks import PostgresSink, SQLiteSink

T0 = datetime(2026, 2, 1, 8, tzinfo=UTC)


class Streamed:
    """The same ledger read as any reader is (not a SQL sink): the streaming build."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def get(self, *a: Any, **k: Any) -> Any:
        return self._inner.get(*a, **k)

    def chain(self, *a: Any, **k: Any) -> Any:
        return self._inner.chain(*a, **k)

    def events(self, *a: Any, **k: Any) -> Any:
        return self._inner.events(*a, **k)

    def runs(self, *a: Any, **k: Any) -> Any:
        return self._inner.runs(*a, **k)

    def stored_rows(self, *a: Any, **k: Any) -> Any:
        return self._inner.stored_rows(*a, **k)

    # the tamper-evident log, as the sink keeps it (verified by the streaming build too)
    @property
    def keeps_head(self) -> bool:
        return bool(getattr(self._inner, "keeps_head", False))

    def leaf_rows(self) -> Any:
        return self._inner.leaf_rows()

    def stored_head(self) -> Any:
        return self._inner.stored_head()

    def stored_leaf_hashes(self) -> Any:
        return self._inner.stored_leaf_hashes()

    def checkpoint_notes(self) -> Any:
        return self._inner.checkpoint_notes()

    def stored_consistency_proof(self, *a: Any) -> Any:
        return self._inner.stored_consistency_proof(*a)

    def count_rows(self) -> Any:
        return self._inner.count_rows()

    def close(self) -> None:
        pass

    def __enter__(self) -> Streamed:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _both(reader: Any, since: datetime | None, until: datetime | None) -> tuple[Any, Any]:
    assert in_database(reader) and not in_database(Streamed(reader))
    db = build_report(reader, since=since, until=until).to_dict()
    streamed = build_report(Streamed(reader), since=since, until=until).to_dict()
    db.pop("generated_at")
    streamed.pop("generated_at")
    # the retention section comes from the retention tables, which the streaming proxy
    # (events only) does not pass through: not part of what the two builds compute
    db.pop("retention")
    streamed.pop("retention")
    # the log: the database build re-reads the window's rows and binds them to the
    # stored head (ledger.report.logcheck); the streamed build rebuilds every row. They
    # agree on the verdict, the tree and the checkpoints, not on how many rows were read
    db_log, streamed_log = db.pop("log_check"), streamed.pop("log_check")
    if streamed_log is None:
        assert db_log is None
    else:
        for field in ("ok", "origin", "size", "root", "checkpoints_verified", "covered"):
            assert db_log[field] == streamed_log[field], f"log_check {field} differs"
        kinds = [(f["kind"], f["severity"]) for f in streamed_log["findings"]]
        assert [(f["kind"], f["severity"]) for f in db_log["findings"]] == kinds
    scope = db.pop("log_scope")
    assert streamed.pop("log_scope") is None
    said = db.pop("log_statement")
    assert said.startswith(streamed.pop("log_statement"))
    if scope is not None:
        assert said.endswith(scope["statement"]) and db_log is not None
        assert scope["rows"] == db_log["rows"] <= streamed_log["rows"]
    return db, streamed


def assert_same(reader: Any, since: datetime | None = None, until: datetime | None = None) -> Any:
    db, streamed = _both(reader, since, until)
    for key in streamed:
        assert db[key] == streamed[key], f"{key} differs (window {since} .. {until})"
    assert db == streamed
    return db


# --- a hand-made run with every case the report tells apart -----------------------------


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def cases(run: str = "r1", start: float = 0) -> list[Event]:
    """A run with a safe read, an approved write, a denial, a failed write, a result
    with no intent, an allowed action with no result, a result recorded before its
    action, a decision not marked safe with no action, and calls outside any run."""
    who = Actor(principal="alice@example.com", agent_id="bot", agent_version="2")
    ref = [Ref(source="tool", id="01J00000000000000000000000", hash="sha256:ab")]

    def ev(minute: float, kind: str, **kw: Any) -> Event:
        return Event(kind=kind, run_id=kw.pop("run_id", run), time=at(start + minute),
                     actor=kw.pop("actor", who), **kw)  # fmt: skip

    return [
        ev(0, "request", args='"tidy"'),
        ev(1, "gate_decision", call_id="s", tool="read_file", verdict="allowed",
           label="safe:readers", args={"p": 1}),
        ev(2, "tool_result", call_id="s", tool="read_file", result='"x"'),
        ev(3, "gate_decision", call_id="w", tool="write_file", verdict="allowed",
           label="policy:w", approval=Approval(approver="bob", time=at(start + 2.5),
                                               reason="ticket 1")),
        ev(4, "action", call_id="w", tool="write_file", verdict="allowed", args={"p": 2},
           refs=ref, reason="asked"),
        ev(5, "tool_result", call_id="w", tool="write_file", result="1"),
        ev(6, "gate_decision", call_id="d", tool="rm", verdict="denied", reason="no"),
        ev(7, "action", call_id="d", tool="rm", verdict="denied", args={}, reason="no rm"),
        ev(8, "action", call_id="f", tool="write_file", verdict="allowed", args={}, refs=ref),
        ev(9, "tool_result", call_id="f", err="PermissionError"),  # no tool=: counts as write
        ev(10, "tool_result", call_id="ghost", tool="deploy", result="2"),  # no intent
        ev(11, "action", call_id="lost", tool="deploy", verdict="allowed", args={}, refs=ref),
        ev(12, "tool_result", call_id="early", tool="send", result="3"),  # before its action
        ev(13, "action", call_id="early", tool="send", verdict="allowed", args={}, refs=ref),
        ev(14, "gate_decision", call_id="ns", tool="fetch", verdict="allowed", label="p"),
        ev(15, "tool_result", call_id="ns", tool="fetch", result="4"),  # decision not safe
        ev(16, "tool_result", call_id="", tool="fetch", result="5"),  # no call id
        ev(17, "action", run_id="norun-01JABC", call_id="x", tool="rm", verdict="denied",
           args={}, reason="outside any run", actor=None),
        ev(18, "run_end", reason="completed"),
    ]  # fmt: skip


@pytest.fixture
def sqlite_sink(tmp_path: Path) -> Iterator[SQLiteSink]:
    with SQLiteSink(tmp_path / "ledger.db") as sink:
        yield sink


WINDOWS = [
    (None, None),
    (at(0), at(100)),
    (at(2.5), None),  # cuts the approved write: its decision is before the window
    (at(4.5), at(9.5)),  # results whose actions came before, a failure at the edge
    (None, at(5)),  # an intent whose result is at the window's end (exclusive)
    (at(12.5), at(13.5)),  # only the late action of the early result
    (at(30), at(40)),  # nothing in it
]


@pytest.mark.parametrize("since,until", WINDOWS)
def test_every_case_is_reported_alike_on_sqlite(
    sqlite_sink: SQLiteSink, since: datetime | None, until: datetime | None
) -> None:
    sqlite_sink.record_many(cases("r1") + cases("r2", start=0.25))
    data = assert_same(sqlite_sink, since, until)
    if (since, until) == (None, None):
        totals = data["totals"]
        assert totals["unsafe_without_intent"] == 2 * 4 and totals["denials"] == 2
        assert data["outside_runs"] and data["approved_actions"][0]["approver"] == "bob"
        tools = {t["tool"]: t for t in data["tools"]}
        assert tools["read_file"]["safe_reads"] == 2 and tools["write_file"]["failed"] == 2


@pytest.mark.parametrize("since,until", WINDOWS[:5])
def test_every_case_is_reported_alike_on_postgres(
    pg_sink: PostgresSink, since: datetime | None, until: datetime | None
) -> None:
    pg_sink.record_many(cases("r1") + cases("r2", start=0.25))
    assert_same(pg_sink, since, until)


# --- generated fleets, any window --------------------------------------------------------

_YEAR = datetime(2025, 1, 1, tzinfo=UTC)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    size=st.integers(1, 600),
    start=st.floats(0, 365),
    days=st.one_of(st.none(), st.floats(0, 400)),
    open_start=st.booleans(),
)
def test_generated_fleets_are_reported_alike(
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    size: int,
    start: float,
    days: float | None,
    open_start: bool,
) -> None:
    path = tmp_path_factory.mktemp("fleet") / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(fleet(size, seed=seed))
        since = None if open_start else _YEAR + timedelta(days=start)
        until = None if days is None else _YEAR + timedelta(days=start + days)
        if since is not None and until is not None and since >= until:
            with pytest.raises(ValidationError, match="empty time window"):
                build_report(sink, since=since, until=until)  # not a compliant nothing
            return
        assert_same(sink, since, until)


def test_a_larger_generated_ledger_is_reported_alike(tmp_path: Path) -> None:
    """20,000 gate-shaped events over a year (runs cut by the windows, safe reads,
    denials, failures, the rare violations), whole year and one month."""
    with SQLiteSink(tmp_path / "ledger.db") as sink:
        sink.record_many(fleet(20_000, seed=7))
        whole = assert_same(sink)
        assert whole["totals"]["events"] == 20_000 and whole["totals"]["denials"] > 0
        assert any(t["safe_reads"] for t in whole["tools"])
        assert_same(sink, datetime(2025, 6, 1, tzinfo=UTC), datetime(2025, 7, 1, tzinfo=UTC))


def test_a_larger_generated_ledger_is_reported_alike_on_postgres(pg_sink: PostgresSink) -> None:
    pg_sink.record_many(fleet(5_000, seed=11))
    assert_same(pg_sink)
    assert_same(pg_sink, datetime(2025, 3, 1, tzinfo=UTC), datetime(2025, 4, 15, tzinfo=UTC))


# --- rows damaged by hand ---------------------------------------------------------------

EDITS = [
    # the JSON no longer parses: left out of every count, listed
    "UPDATE events SET event_json = substr(event_json, 2) WHERE event_id = :i",
    # the kind column says tool_result, the JSON (the truth) says action
    "UPDATE events SET kind = 'tool_result' WHERE event_id = :i",
    # the verdict column edited: counted as the JSON says, listed
    "UPDATE events SET verdict = 'denied' WHERE event_id = :i",
    # the tool column edited
    "UPDATE events SET tool = 'elsewhere' WHERE event_id = :i",
    # the time column moved within the window
    "UPDATE events SET time_us = time_us + 1000000 WHERE event_id = :i",
    # a seq below the first (0 and below: no reader may step over it)
    "UPDATE events SET seq = -5 WHERE event_id = :i",
    # values of another type than the ledger writes (SQLite keeps what an UPDATE gives)
    "UPDATE events SET content_hash = CAST(content_hash AS BLOB) WHERE event_id = :i",
    "UPDATE events SET nodes = 7 WHERE event_id = :i",
    "UPDATE events SET event_id = CAST(event_id AS BLOB) WHERE event_id = :i",
    # the JSON changed and its hash recomputed by nobody: a content-hash mismatch
    "UPDATE events SET event_json = replace(event_json, '\"asked\"', '\"forged\"') "
    "WHERE event_id = :i",
]


@pytest.mark.parametrize("edit", EDITS)
def test_a_damaged_row_is_counted_and_listed_alike(tmp_path: Path, edit: str) -> None:
    events = cases("r1") + cases("r2", start=0.25)
    target = next(e for e in events if e.kind == "action" and e.reason == "asked")
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(events)
    conn = sqlite3.connect(path)
    conn.execute(edit.replace(":i", "?"), (str(target.event_id),))
    conn.commit()
    conn.close()
    with SQLiteSink(path) as sink:
        data = assert_same(sink)
        assert data["compliant"] is False
        if "nodes" not in edit:  # a node of the log is the log check's finding
            assert data["hash_check"]["mismatch_count"] >= 1
        assert_same(sink, at(1), at(10))


def test_a_lowered_time_high_water_is_a_finding_and_hides_no_row(tmp_path: Path) -> None:
    """``time_hi_us`` lowered by SQL on the rows up to one (what would start a query
    since a time after them): the report lists each such row of its window and still
    counts every row (it does not read the window through that column). The streaming
    build, over ``events(since=)``, which does, is not compared here."""
    events = cases("r1") + cases("r2", start=0.25)
    target = next(e for e in events if e.kind == "action" and e.reason == "asked")
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(events)
        before = build_report(sink, since=at(1), until=at(10)).to_dict()
    conn = sqlite3.connect(path)
    lowered = conn.execute(
        "UPDATE events SET time_hi_us = 0 WHERE time_us >= ? AND seq <= "
        "(SELECT seq FROM events WHERE event_id = ?)",
        (int(at(1).timestamp() * 1_000_000), str(target.event_id)),
    ).rowcount
    conn.commit()
    conn.close()
    assert lowered >= 1
    with SQLiteSink(path) as sink:
        after = build_report(sink, since=at(1), until=at(10)).to_dict()
    assert after["compliant"] is False
    assert after["hash_check"]["mismatch_count"] == lowered
    assert all("time_hi_us" in m["detail"] for m in after["hash_check"]["mismatches"])
    assert after["totals"] == before["totals"]


# --- every per-row check in one pass ----------------------------------------------------


@pytest.mark.parametrize("edit", [None, *EDITS[:1], EDITS[-1]])
def test_one_pass_verification_finds_what_the_two_checks_find(
    tmp_path: Path, edit: str | None
) -> None:
    from ledger.integrity.verify import verify_ledger
    from ledger.report.hashes import check_hashes
    from ledger.report.verification import verify_rows

    events = cases("r1")
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(events)
    if edit is not None:
        target = next(e for e in events if e.kind == "action" and e.reason == "asked")
        conn = sqlite3.connect(path)
        conn.execute(edit.replace(":i", "?"), (str(target.event_id),))
        conn.commit()
        conn.close()
    with SQLiteSink(path) as sink:
        hashes, log = verify_rows(sink)
        assert hashes == check_hashes(sink)
        assert log is not None and log == verify_ledger(sink, None)
        assert log.ok is (edit is None) and (hashes.mismatch_count == 0) is (edit is None)
        assert hashes.checked == len(events)
