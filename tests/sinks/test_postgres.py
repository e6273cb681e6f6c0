"""PostgreSQL specifics: the caller's engine and transaction, commit order for tailers,
and a backend terminated by the server in the middle of commits."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa

from ledger.errors import DuplicateEvent, EventNotFound, StorageError, ValidationError
from ledger.ids import new_event_id
from ledger.sinks import PostgresSink, open_sink

from .conftest import Store
from .factories import action, request_event

pytestmark = pytest.mark.postgres


def test_a_write_joins_the_callers_transaction(
    pg_store: Store, pg_engine: sa.Engine, run_id: str
) -> None:
    pg_store.open().close()  # the schema exists
    kept, dropped = action(run_id, "kept"), action(run_id, "dropped")
    with pg_engine.connect() as conn:
        ledger = PostgresSink(conn, schema=pg_store.schema)
        ledger.commit_action(dropped)
        assert ledger.get(dropped.event_id) == dropped  # visible inside the transaction
        conn.rollback()
        ledger.commit_action(kept)
        with pytest.raises(DuplicateEvent):  # refused in a savepoint: the rest survives
            ledger.commit_action(kept)
        conn.commit()
        ledger.close()
        assert conn.execute(sa.text("SELECT 1")).scalar() == 1  # not closed for us
    reader = pg_store.open()
    assert reader.get(kept.event_id) == kept
    with pytest.raises(EventNotFound):
        reader.get(dropped.event_id)


def test_a_callers_engine_is_never_disposed(pg_store: Store, pg_engine: sa.Engine) -> None:
    pool: Any = pg_engine.pool
    with pg_engine.connect():
        pass
    before = pool.checkedin()
    sink = PostgresSink(pg_engine, schema=pg_store.schema)
    sink.record(request_event("r"))
    sink.close()
    assert pool.checkedin() >= before >= 1


def test_open_sink_postgres_with_schema(pg_store: Store) -> None:
    url = f"{pg_store.dsn}?ledger_schema={pg_store.schema}"
    with open_sink(url) as sink:
        assert isinstance(sink, PostgresSink) and sink.schema == pg_store.schema
        sink.record(request_event("r"))


def test_tail_never_skips_a_row_that_commits_late(
    pg_store: Store, pg_engine: sa.Engine, run_id: str
) -> None:
    """Row A is written in a caller's open transaction. Another writer waits for it
    (the Merkle log's head row is locked until A commits, so leaf indexes follow commit
    order), and a tailer asking for what follows the last row it saw waits for A, then
    returns A and B."""
    sink = pg_store.open()
    first = action(run_id, "c0")
    sink.commit_action(first)
    late, quick = action(run_id, "late"), action(run_id, "quick")
    conn = pg_engine.connect()
    PostgresSink(conn, schema=pg_store.schema).commit_action(late)  # open transaction
    writer = threading.Thread(target=lambda: sink.commit_action(quick))
    writer.start()
    seen: list[str] = []
    tailer = threading.Thread(
        target=lambda: seen.extend(e.call_id for e in sink.events(after=first.event_id))
    )
    tailer.start()
    time.sleep(0.3)
    assert writer.is_alive()  # it waits for the transaction in flight
    assert tailer.is_alive() and seen == []  # so does the tailer
    conn.commit()
    conn.close()
    writer.join(timeout=30)
    tailer.join(timeout=30)
    assert seen in (["late"], ["late", "quick"])
    assert [e.call_id for e in sink.events(after=first.event_id)] == ["late", "quick"]
    seqs = pg_store.sql("SELECT call_id FROM {p}events WHERE run_id = :r ORDER BY seq", r=run_id)
    assert [s for (s,) in seqs] == ["c0", "late", "quick"]


@pytest.mark.slow
def test_terminated_backend_raises_and_leaves_no_partial_row(
    pg_store: Store, pg_engine: sa.Engine, run_id: str
) -> None:
    """The server terminates the writer's backend just before every third write reaches
    it (a real pg_terminate_backend from another session; a write is one statement that
    commits itself, or a transaction ending in COMMIT): that commit_action raises, and
    its row is absent; every acknowledged one is present; the pool recovers."""
    sink = PostgresSink.open(pg_store.dsn, schema=pg_store.schema)
    engine: sa.Engine = sink._engine
    writes = 0
    terminate = sa.text("SELECT pg_terminate_backend(:pid, 5000)")

    def before_write(conn: sa.Connection, cursor: Any, statement: str, *_: Any) -> None:
        nonlocal writes
        if "INSERT INTO" not in statement:
            return
        writes += 1
        if writes % 3 == 0:
            pid = conn.connection.dbapi_connection.info.backend_pid  # type: ignore[union-attr]
            with pg_engine.begin() as admin:
                assert admin.execute(terminate, {"pid": pid}).scalar()

    sa.event.listen(engine, "before_cursor_execute", before_write)
    acked: list[str] = []
    failed: list[str] = []
    for i in range(30):
        ev = action(run_id, f"c{i}")
        try:
            sink.commit_action(ev)
            acked.append(str(ev.event_id))
        except StorageError as exc:
            assert "not acknowledged" in str(exc)
            failed.append(str(ev.event_id))
    sa.event.remove(engine, "before_cursor_execute", before_write)
    assert len(failed) == 10
    reader = pg_store.open()
    stored = {str(e.event_id) for e in reader.events(run_id=run_id)}  # every row parses
    assert stored == set(acked)
    sink.commit_action(action(run_id, "after"))  # the pool recovered
    sink.close()


@pytest.mark.slow
def test_backends_terminated_at_random_moments_lose_nothing_acknowledged(
    pg_store: Store, pg_engine: sa.Engine, run_id: str
) -> None:
    app = f"ledger-fault-{new_event_id()}"
    sink = PostgresSink.open(
        pg_store.dsn, schema=pg_store.schema, connect_args={"application_name": app}
    )
    acked: list[str] = []
    failed: list[str] = []
    stop = threading.Event()

    def write(k: int) -> None:
        i = 0
        while not stop.is_set():
            ev = action(run_id, f"t{k}-{i}")
            i += 1
            try:
                sink.commit_action(ev)
                acked.append(str(ev.event_id))
            except StorageError:
                failed.append(str(ev.event_id))

    writers = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for w in writers:
        w.start()
    kill = sa.text(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = :a"
    )
    rng = random.Random(7)
    try:
        for _ in range(10):
            time.sleep(rng.uniform(0.01, 0.05))
            with pg_engine.begin() as conn:
                conn.execute(kill, {"a": app})
    finally:
        stop.set()
        for w in writers:
            w.join(timeout=30)
    reader = pg_store.open()
    stored = {str(e.event_id) for e in reader.events(run_id=run_id)}  # every row parses
    assert set(acked) <= stored <= set(acked) | set(failed)
    sink.close()


def test_reads_leave_the_callers_connection_as_they_found_it(
    pg_store: Store, pg_engine: sa.Engine, run_id: str
) -> None:
    """Every read on a borrowed connection leaves it usable: no execution options changed,
    no transaction left open when there was none, the caller's own transaction kept."""
    writer = pg_store.open()
    act = action(run_id)
    writer.commit_action(act)
    table = f'"{pg_store.schema}".jobs'
    pg_store.sql(f"CREATE TABLE {table} (n integer)")
    with pg_engine.connect() as conn:
        sink = PostgresSink(conn, schema=pg_store.schema)
        options = dict(conn.get_execution_options())
        reads = [
            lambda: sink.get(act.event_id),
            lambda: list(sink.events(run_id=run_id)),
            lambda: sink.chain(run_id),
            lambda: list(sink.runs()),
        ]
        for read in reads:
            read()
            assert not conn.in_transaction()
            assert dict(conn.get_execution_options()) == options
        with conn.begin():  # the caller's transaction, with reads and a write inside it
            conn.execute(sa.text(f"INSERT INTO {table} VALUES (1)"))
            for read in reads:
                read()
            assert conn.in_transaction()
            conn.execute(sa.text(f"INSERT INTO {table} VALUES (2)"))
            sink.record(request_event(run_id))
        summaries = sink.runs()
        next(summaries)
        conn.execute(sa.text(f"INSERT INTO {table} VALUES (3)"))  # between two summaries
        conn.commit()
        list(summaries)
    assert [n for (n,) in pg_store.sql(f"SELECT n FROM {table} ORDER BY n")] == [1, 2, 3]
    assert len(list(writer.events(run_id=run_id))) == 2


@pytest.mark.slow
def test_a_connection_lost_while_waiting_raises_and_is_not_retried(
    pg_store: Store, pg_engine: sa.Engine, run_id: str
) -> None:
    """A writer blocked inside its insert (a reader holds the writers' lock) whose backend
    the server terminates hears of it: commit_action raises and no row is left, even
    though the lock is released right after."""
    sink = PostgresSink.open(pg_store.dsn, schema=pg_store.schema)
    ev = action(run_id)
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            sink.commit_action(ev)
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    with pg_engine.connect() as admin:
        admin.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": sink._key})
        writer = threading.Thread(target=commit)
        writer.start()
        waiting = sa.text(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE '%ledger_lock%'"
        )
        deadline = time.monotonic() + 10
        pids: list[int] = []
        while not pids and time.monotonic() < deadline:
            pids = list(admin.execute(waiting).scalars())
            admin.commit()
            time.sleep(0.01)
        assert len(pids) == 1, "the writer never waited on the lock"
        admin.execute(sa.text("SELECT pg_terminate_backend(:p, 5000)"), {"p": pids[0]})
        admin.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": sink._key})
        admin.commit()
        writer.join(10)
    assert len(errors) == 1 and isinstance(errors[0], StorageError)
    assert "not acknowledged" in str(errors[0])
    with pytest.raises(EventNotFound):
        pg_store.open().get(ev.event_id)
    sink.commit_action(action(run_id, "after"))  # the next write takes a live connection
    sink.close()


def _commit_together(sink: PostgresSink, events: list[Any]) -> list[BaseException | None]:
    """``commit_action`` of each event from its own thread, all released at once; the
    outcome of each (None when it was acknowledged)."""
    barrier = threading.Barrier(len(events))
    outcomes: list[BaseException | None] = [None] * len(events)

    def commit(i: int) -> None:
        barrier.wait()
        try:
            sink.commit_action(events[i])
        except BaseException as exc:  # handed to the test thread
            outcomes[i] = exc

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(len(events))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


@pytest.mark.parametrize("bad", ["nul", "too_long"])
def test_a_value_the_server_refuses_fails_its_own_caller_only(
    pg_store: Store, run_id: str, bad: str
) -> None:
    """Eight callers committing at once, one of them with a value PostgreSQL cannot
    store (a NUL in the tool, refused before sending; a run id too long for its index,
    refused by the server inside the shared transaction): that caller fails alone."""
    sink = pg_store.open()
    for round_ in range(5):
        if bad == "nul":
            wrong = action(run_id, f"bad{round_}", tool="rm\x00rf")
        else:
            wrong = action("r" + "".join(random.choices("abcdefghij", k=3000)), f"bad{round_}")
        events = [wrong] + [action(run_id, f"r{round_}c{i}") for i in range(7)]
        outcomes = _commit_together(sink, events)
        expected = ValidationError if bad == "nul" else StorageError
        assert isinstance(outcomes[0], expected), outcomes[0]
        assert [outcomes[i] for i in range(1, 8)] == [None] * 7
        for ev in events[1:]:
            assert sink.get(ev.event_id) == ev
        with pytest.raises(EventNotFound):
            sink.get(wrong.event_id)


def test_a_schema_name_beyond_postgresqls_limit_is_refused(pg_dsn: str) -> None:
    with pytest.raises(ValidationError, match="at most 63 bytes"):
        PostgresSink.open(pg_dsn, schema="s" * 64)


def test_a_refused_value_in_the_callers_transaction_leaves_it_usable(
    pg_store: Store, pg_engine: sa.Engine, run_id: str
) -> None:
    pg_store.open().close()
    too_long = action("r" + "".join(random.choices("abcdefghij", k=3000)))
    kept = action(run_id)
    with pg_engine.connect() as conn:
        sink = PostgresSink(conn, schema=pg_store.schema)
        with pytest.raises(StorageError, match="refused the write, nothing of it stored"):
            sink.commit_action(too_long)
        sink.commit_action(kept)  # the savepoint took the refusal; the transaction lives
        conn.commit()
    reader = pg_store.open()
    assert reader.get(kept.event_id) == kept
    with pytest.raises(EventNotFound):
        reader.get(too_long.event_id)
