"""Probes of ``events.time_hi_us`` (the running maximum of the event time in commit
order, where a query since a time starts): the write paths and states beyond those of
``test_time_high_water.py`` (writers in two processes, a caller's connection, a group
commit over the multi-statement size with a duplicate, erasure, crypto-shredding,
vacuum, ``ledger db copy``, the ``ledger events --since`` command, rows deleted or
inserted by hand), each checked against a filter of every event.

The tests under "defects found at c8e24a0" failed at that commit (a row deleted by hand
made every intact row after it a changed time_hi_us in ``ledger db check`` and
``verify_rows``; so did a time edited in one row's JSON; a row without a leaf index was
skipped by ``events(since=...)``) and pass with the fix that followed it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from ledger.cli import cli
from ledger.errors import DuplicateEvent
from ledger.report.verification import verify_rows
from ledger.retention import Retention, Selection
from ledger.sinks import PostgresSink, SQLiteSink
from ledger.sinks.rows import COLUMNS, event_row, to_micros
from ledger.sinks.shred import ENV_KEY, FileKeyWrapper

from .conftest import Store, engine_url
from .test_time_high_water import T0, _assert_running_max, _event, _url


def _assert_since_exact(sink: Any, cuts: list[datetime], **filters: Any) -> None:
    """``events(since=cut)`` is exactly a filter of every event, for each cut."""
    every = list(sink.events(**filters))
    assert every
    for cut in cuts:
        got = [e.event_id for e in sink.events(since=cut, **filters)]
        want = [e.event_id for e in every if e.time >= cut]
        assert got == want, cut


def _cuts(last_s: int, step: int) -> list[datetime]:
    return [T0 + timedelta(seconds=s) for s in range(-5, last_s + step, step)]


# --- defects found at c8e24a0 (fixed after it) ----------------------------------------


def _delete_the_highest_row_in_the_middle(store: Store, run_id: str) -> None:
    """Ten rows whose third has the largest time; that row deleted by hand."""
    sink = store.open()
    times = [10, 20, 1000, 30, 40, 50, 60, 70, 80, 90]
    sink.record_many([_event(run_id, i, t) for i, t in enumerate(times)])
    store.close_all()
    store.sql("DELETE FROM {p}events WHERE call_id = 'c2'")


def test_probe_db_check_blames_no_intact_row_for_a_row_deleted_before_it(
    store: Store, run_id: str
) -> None:
    """At c8e24a0 a row deleted by hand made each of the 7 intact rows after it a
    'content-hash mismatch' (a time_hi_us above the running maximum of the surviving
    rows, harmless to a query since a time, reported as 'would miss rows')."""
    _delete_the_highest_row_in_the_middle(store, run_id)
    found = CliRunner().invoke(cli, ["db", "check", _url(store), "--json"])
    report = json.loads(found.stdout)
    # the deletion itself is the log check's finding
    assert any(f["kind"] == "deleted" for f in report["log_check"]["findings"])
    details = [m["detail"] for m in report["hash_check"]["mismatches"]]
    assert not any("time_hi_us" in d for d in details), details
    assert report["hash_check"]["mismatch_count"] == 0


def test_probe_verify_rows_blames_no_intact_row_for_a_row_deleted_before_it(
    store: Store, run_id: str
) -> None:
    """At c8e24a0 ``verify_rows`` reported each of the 7 intact rows after a row deleted
    by hand as a changed time_hi_us."""
    _delete_the_highest_row_in_the_middle(store, run_id)
    sink = store.open()
    hashes, log = verify_rows(sink)
    assert log is not None and not log.ok  # the deletion is found
    assert hashes.mismatch_count == 0, [m.detail for m in hashes.mismatches]


def test_probe_a_row_inserted_by_hand_is_still_found_since_its_time(
    store: Store, run_id: str
) -> None:
    """At c8e24a0 a row without a leaf index (inserted around the ledger) before ledger
    rows was skipped by ``events(since=...)``: the binary search over leaf indexes never
    probes it and the scan began at the next leaf row (before the change it was
    returned; a tampered state ``ledger verify`` reports)."""
    sink = store.open()
    sink.record_many([_event(run_id, i, 10 * i) for i in range(10)])
    hand = _event(run_id, 99, 5000)
    row = dict(zip(COLUMNS, event_row(hand), strict=True))
    names = ", ".join(COLUMNS)
    marks = ", ".join(f":{c}" for c in COLUMNS)
    store.sql(f"INSERT INTO {{p}}events ({names}) VALUES ({marks})", **row)
    sink.record(_event(run_id, 10, 100))  # a ledger row after it
    since = T0 + timedelta(seconds=4000)
    stored = store.sql("SELECT call_id FROM {p}events WHERE time_us >= :t", t=to_micros(since))
    assert [r[0] for r in stored] == ["c99"]  # what the filter of every row finds
    assert [e.call_id for e in sink.events(since=since)] == ["c99"]


def test_probe_an_edited_json_time_is_one_finding_not_one_per_later_row(
    store: Store, run_id: str
) -> None:
    """At c8e24a0 a time edited in one row's stored JSON (its time_us column untouched)
    made every intact row after it a changed time_hi_us as well: the check raised its
    maximum by the edited JSON time, not the column the writer used."""
    sink = store.open()
    times = [10, 20, 1000, 30, 40, 50, 60, 70, 80, 90]
    sink.record_many([_event(run_id, i, t) for i, t in enumerate(times)])
    (text,) = store.sql("SELECT event_json FROM {p}events WHERE call_id = 'c2'")[0]
    edited = json.loads(text)
    edited["time"] = (T0 + timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    store.sql("UPDATE {p}events SET event_json = :j WHERE call_id = 'c2'", j=json.dumps(edited))
    hashes, _ = verify_rows(sink)
    assert hashes.mismatch_count == 1, [m.detail for m in hashes.mismatches]


# --- what held -------------------------------------------------------------------------

_WORKER = r"""
import random, sys
from datetime import UTC, datetime, timedelta
import sqlalchemy as sa
from ledger.model import Event
from ledger.sinks import PostgresSink, SQLiteSink

where, schema, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
T0 = datetime(2020, 1, 1, tzinfo=UTC)
rnd = random.Random(k)

def ev(i):
    return Event(kind="tool_result", run_id=f"w{k}", call_id=f"c{i}", tool="t",
                 time=T0 + timedelta(seconds=rnd.randint(0, 5000)), result={"i": i})

if where.startswith("postgresql") and k % 2:  # the caller's connection, its transactions
    engine = sa.create_engine(where)
    with engine.connect() as conn:
        sink = PostgresSink(conn, schema=schema)
        for j in range(0, 120, 3):
            with conn.begin():
                sink.record(ev(j))
                sink.record_many([ev(j + 1), ev(j + 2)])
    engine.dispose()
else:
    sink = (PostgresSink.open(where, schema=schema) if where.startswith("postgresql")
            else SQLiteSink(where))
    for j in range(0, 120, 4):
        sink.record(ev(j))
        sink.record_many([ev(j + 1), ev(j + 2), ev(j + 3)])
    sink.close()
"""


def test_writers_in_two_processes_keep_the_running_maximum(store: Store) -> None:
    """Two processes (on PostgreSQL one through its own connection, in transactions of
    its own) write events with times in any order at once: every row holds the running
    maximum, and a query since any time is a filter of every event."""
    sink = store.open()
    sink.record(_event("first", 0, 2500))
    if store.path:
        where, schema = str(store.path), ""
    else:
        where, schema = engine_url(store.dsn), store.schema or ""
    workers = [
        subprocess.Popen([sys.executable, "-c", _WORKER, where, schema, str(k)]) for k in range(2)
    ]
    for w in workers:
        assert w.wait(timeout=120) == 0
    _assert_running_max(store)
    assert len(list(sink.events())) == 1 + 2 * 120
    _assert_since_exact(sink, _cuts(5000, 250))


def test_a_group_commit_past_the_statement_size_with_a_duplicate(store: Store, run_id: str) -> None:
    """Batches of more than 2,000 rows (SQLite's multi-statement insert) written by
    threads at once, one of them refused for a duplicate id (the savepoint path): the
    stored rows hold the running maximum and nothing matching is skipped."""
    sink = store.open()
    taken = _event(run_id, 0, 7000)
    sink.record(taken)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        batch = [_event(f"{run_id}-{k}", i, (i * 7919 + k * 13) % 6000) for i in range(2100)]
        if k == 2:
            batch.insert(1000, taken)
        try:
            sink.record_many(batch)
        except DuplicateEvent as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(errors) == 1
    _assert_running_max(store)
    assert len(list(sink.events())) == 1 + 3 * 2100
    _assert_since_exact(sink, _cuts(7000, 500))


def _keyed(store: Store, key: FileKeyWrapper) -> Any:
    if store.path:
        sink: Any = SQLiteSink(store.path, payload_key=key)
    else:
        engine = sa.create_engine(engine_url(store.dsn), poolclass=sa.pool.NullPool)
        sink = PostgresSink(engine, schema=store.schema, payload_key=key)
    store.opened.append(sink)
    return sink


def test_erasure_shredding_and_vacuum_leave_the_bound_exact_and_checked(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crypto-shredding ledger whose run with the largest time is erased (its key
    destroyed), then vacuumed: ``ledger db check`` finds nothing, and a query since
    any time is a filter of every event."""
    monkeypatch.delenv(ENV_KEY, raising=False)
    sink = _keyed(store, FileKeyWrapper.create(tmp_path / "payload.key"))
    sink.record_many([_event("a", i, t) for i, t in enumerate([100, 200, 300])])
    sink.record_many([_event("big", 10, 90_000)])
    sink.record_many([_event("b", 20 + i, t) for i, t in enumerate([400, 50, 600])])
    retention = Retention(sink)
    retention.set_policy(keep="30d", floor="1d", reason="the probe")
    outcome = retention.erase(Selection.of_run("big"), reason="gdpr")
    assert outcome.erased == 1 and outcome.shredded
    cuts = [*_cuts(600, 50), T0 + timedelta(seconds=90_000), T0 + timedelta(days=2)]
    _assert_since_exact(sink, cuts)
    store.close_all()
    vacuum = CliRunner().invoke(cli, ["db", "vacuum", "--db", _url(store), "--json"])
    assert vacuum.exit_code == 0, vacuum.output
    checked = CliRunner().invoke(cli, ["db", "check", _url(store), "--json"])
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout)["hash_check"]["mismatch_count"] == 0
    _assert_running_max(store)
    _assert_since_exact(store.open(), cuts)


def test_a_deleted_row_hides_no_row_from_a_query_since_a_time(store: Store, run_id: str) -> None:
    """A row deleted by hand in the middle (the one with the largest time, or another):
    a query since a time still returns every surviving row at or after it."""
    sink = store.open()
    times = [10, 20, 1000, 30, 40, 50, 60, 70, 80, 90, 5, 95, 1200, 15]
    sink.record_many([_event(run_id, i, t) for i, t in enumerate(times)])
    store.sql("DELETE FROM {p}events WHERE call_id IN ('c2', 'c9')")
    _assert_since_exact(store.open(), _cuts(1300, 25))


def test_a_copy_and_the_events_command_since_a_time(
    store: Store, run_id: str, tmp_path: Path
) -> None:
    """``ledger db copy`` fills the running maximum in the copy, and ``ledger events
    --since`` on both sides lists exactly the events at or after the time."""
    sink = store.open()
    times = [300, 100, 900, 200, 950, 50, 400, 1000, 10, 600]
    for i in range(0, len(times), 3):
        sink.record_many([_event(run_id, j, times[j]) for j in range(i, min(i + 3, len(times)))])
    store.close_all()
    copy = f"sqlite:///{tmp_path / 'copy.db'}"
    done = CliRunner().invoke(cli, ["db", "copy", _url(store), copy])
    assert done.exit_code == 0, done.output
    high = None
    with sa.create_engine(copy).connect() as conn:
        for when, stated in conn.exec_driver_sql(
            "SELECT time_us, time_hi_us FROM events ORDER BY seq"
        ):
            high = when if high is None else max(high, when)
            assert stated == high
    for url in (_url(store), copy):
        for cut in (0, 250, 900, 1000, 1001):
            since = (T0 + timedelta(seconds=cut)).strftime("%Y-%m-%dT%H:%M:%SZ")
            out = CliRunner().invoke(cli, ["events", "--db", url, "--since", since, "--json"])
            assert out.exit_code == 0, out.output
            got = [e["call_id"] for e in json.loads(out.stdout)]
            assert got == [f"c{j}" for j, t in enumerate(times) if t >= cut], (url, cut)
