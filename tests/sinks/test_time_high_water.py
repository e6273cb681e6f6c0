"""``events.time_hi_us``: the running maximum of the event time in commit order, which
lets a query for the events since a time start where its matches can begin (PostgreSQL
walked the table from its start: 5.9 s for a first page at 10^7 events).

Every writer keeps it (one event, a batch, the group commit of many threads, the
retention records), the migration fills it in for the rows stored before it, a query
since a time returns exactly what a filter of every event would, and a changed value is
reported by ``ledger db check``."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.cli import cli
from ledger.model import Event, Ref, RefSource
from ledger.retention import Retention
from ledger.sinks.schema import MIGRATIONS_DIR

from .conftest import Store, engine_url

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _event(run: str, i: int, offset_s: int, tool: str = "t") -> Event:
    return Event(
        kind="tool_result",
        run_id=run,
        call_id=f"c{i}",
        tool=tool,
        time=T0 + timedelta(seconds=offset_s),
        result={"i": i},
    )


def _columns(store: Store) -> list[tuple[int, int, int | None]]:
    return [
        (int(r[0]), int(r[1]), r[2])
        for r in store.sql("SELECT seq, time_us, time_hi_us FROM {p}events ORDER BY seq")
    ]


def _assert_running_max(store: Store) -> None:
    high = None
    for seq, when, stated in _columns(store):
        high = when if high is None else max(high, when)
        assert stated == high, (seq, when, stated, high)


def test_every_write_path_keeps_the_running_maximum(store: Store, run_id: str) -> None:
    sink = store.open()
    times = [50, 10, 90, 20, 95, 5, 100, 1]
    sink.record(_event(run_id, 0, 40))
    sink.record_many([_event(run_id, i + 1, t) for i, t in enumerate(times)])
    sink.commit_action(
        Event(
            kind="action",
            run_id=run_id,
            call_id="a",
            tool="t",
            time=T0 + timedelta(seconds=3),
            args={"x": 1},
            verdict="allowed",
            reason="asked",
            refs=(Ref(source=RefSource.TOOL, id="the request"),),
        )
    )

    # the group commit: eight threads, each with its own times, batched by the leader
    def work(k: int) -> None:
        for j in range(20):
            sink.record(_event(f"{run_id}-{k}", j, (k * 37 + j * 11) % 200))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    Retention(sink).set_policy(keep="400d", floor="1d", reason="the retention records too")
    _assert_running_max(store)
    records = store.sql("SELECT count(*) FROM {p}events WHERE run_id LIKE 'ledger-retention-%'")
    assert records[0][0] >= 1
    assert len(_columns(store)) == 1 + len(times) + 1 + 160 + records[0][0]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    offsets=st.lists(st.integers(min_value=0, max_value=1000), min_size=0, max_size=60),
    batches=st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=10),
    since=st.integers(min_value=-10, max_value=1010),
    tool=st.sampled_from([None, "a", "b"]),
    limit=st.sampled_from([None, 1, 3]),
)
def test_a_query_since_a_time_returns_what_a_filter_of_every_event_would(
    store: Store,
    offsets: list[int],
    batches: list[int],
    since: int,
    tool: str | None,
    limit: int | None,
) -> None:
    """Times in any order, written in batches of any size: ``events(since=...)`` is
    exactly the events at or after ``since``, in commit order, however it is filtered
    and paged."""
    sink = store.open()
    run = f"h-{len(store.opened)}-{since}-{len(offsets)}"
    events = [_event(run, i, o, "ab"[o % 2]) for i, o in enumerate(offsets)]
    at = 0
    for size in batches * (len(events) // max(1, sum(batches)) + 1):
        if at >= len(events):
            break
        sink.record_many(events[at : at + size])
        at += size
    when = T0 + timedelta(seconds=since)
    got = [e.event_id for e in sink.events(run_id=run, since=when, tool=tool, limit=limit)]
    want = [e.event_id for e in events if e.time >= when and (tool is None or e.tool == tool)]
    assert got == want[:limit] if limit is not None else got == want
    _assert_running_max(store)


def test_the_bound_skips_no_late_event(store: Store, run_id: str) -> None:
    """An event stated long before the events around it (a late import, a slow clock) is
    still found by a query since its time, and one stated far ahead raises the bound for
    every row after it, which therefore still match."""
    sink = store.open()
    sink.record_many([_event(run_id, i, 100 + i) for i in range(50)])
    sink.record(_event(run_id, 50, 5))  # stated long before
    sink.record(_event(run_id, 51, 10_000))  # far ahead
    sink.record_many([_event(run_id, 52 + i, 200 + i) for i in range(10)])
    ids = [e.call_id for e in sink.events(since=T0 + timedelta(seconds=5))]
    assert ids == [f"c{i}" for i in range(62)]
    ids = [e.call_id for e in sink.events(since=T0 + timedelta(seconds=205))]
    assert ids == ["c51", *(f"c{52 + i}" for i in range(5, 10))]
    assert list(sink.events(since=T0 + timedelta(seconds=10_001))) == []


def test_an_empty_ledger_and_a_time_after_every_event(store: Store, run_id: str) -> None:
    sink = store.open()
    assert list(sink.events(since=T0)) == []
    sink.record(_event(run_id, 0, 0))
    assert list(sink.events(since=T0 + timedelta(seconds=1))) == []
    assert [e.call_id for e in sink.events(since=T0)] == ["c0"]


def _url(store: Store) -> str:
    """The ledger URL of ``store``, as a user gives it to ``ledger db``."""
    if store.path:
        return f"sqlite:///{store.path}"
    return f"{store.dsn}{'&' if '?' in store.dsn else '?'}ledger_schema={store.schema}"


def _alembic(store: Store, conn: sa.Connection) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = conn
    config.attributes["schema"] = store.schema or None
    return config


def _engine(store: Store) -> sa.Engine:
    url = f"sqlite:///{store.path}" if store.path else engine_url(store.dsn)
    return sa.create_engine(url, poolclass=sa.pool.NullPool)


def test_the_migration_fills_in_the_rows_stored_before_it(store: Store, run_id: str) -> None:
    sink = store.open()
    sink.record_many([_event(run_id, i, t) for i, t in enumerate([30, 10, 60, 20, 70, 5])])
    store.close_all()
    engine = _engine(store)
    with engine.begin() as conn:
        command.downgrade(_alembic(store, conn), "0005_payload_keys")
    columns = [
        c["name"] for c in sa.inspect(engine).get_columns("events", schema=store.schema or None)
    ]
    engine.dispose()
    assert "time_hi_us" not in columns
    url = _url(store)
    result = CliRunner().invoke(cli, ["db", "upgrade", url])
    assert result.exit_code == 0, result.output
    _assert_running_max(store)
    again = store.open()
    assert [e.call_id for e in again.events(since=T0 + timedelta(seconds=25))] == ["c0", "c2", "c4"]


def test_a_changed_high_water_mark_is_reported_by_db_check(store: Store, run_id: str) -> None:
    sink = store.open()
    sink.record_many([_event(run_id, i, 10 * i) for i in range(20)])
    store.close_all()
    url = _url(store)
    clean = CliRunner().invoke(cli, ["db", "check", url, "--json"])
    assert clean.exit_code == 0, clean.output
    # lowered: a query since a time would start after the rows it hides
    store.sql("UPDATE {p}events SET time_hi_us = 0 WHERE seq = (SELECT max(seq) FROM {p}events)")
    found = CliRunner().invoke(cli, ["db", "check", url, "--json"])
    assert found.exit_code == 1
    report = json.loads(found.stdout)
    text = json.dumps(report)
    assert "time_hi_us" in text and report["hash_check"]["mismatch_count"] == 1


def test_verification_reports_a_changed_high_water_mark_once(store: Store, run_id: str) -> None:
    """The one streaming pass of the report (``verify_rows``) checks it too; a row whose
    time column was changed is reported for that, and the rows after it are judged by
    the time its JSON states (no cascade of findings)."""
    from ledger.report.verification import verify_rows

    sink = store.open()
    sink.record_many([_event(run_id, i, 10 * i) for i in range(20)])
    hashes, log = verify_rows(sink)
    assert hashes.mismatch_count == 0 and log is not None and log.ok
    store.sql("UPDATE {p}events SET time_us = time_us + 10000000000 WHERE seq = 3")
    hashes, _ = verify_rows(sink)
    assert hashes.mismatch_count == 1 and "columns disagree" in hashes.mismatches[0].detail
    store.sql("UPDATE {p}events SET time_us = time_us - 10000000000 WHERE seq = 3")
    store.sql("UPDATE {p}events SET time_hi_us = NULL WHERE seq = 7")
    hashes, _ = verify_rows(sink)
    assert hashes.mismatch_count == 1 and "time_hi_us is None" in hashes.mismatches[0].detail
