"""A new user's walk through the sinks' public contract, in the documented call forms.

Each test reads as the user would write the code: the names imported from ``ledger`` and
``ledger.sinks``, the constructors of DESIGN.md ("Signatures ..."), the errors of the
``LedgerError`` hierarchy. Backend-neutral parts run on SQLite and PostgreSQL (``store``).
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, cast

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import QueuePool

from ledger import (
    DuplicateEvent,
    Event,
    EventNotFound,
    Kind,
    NotSelfExplaining,
    Ref,
    RefSource,
    Verdict,
)
from ledger.errors import RunNotFound, SinkClosed, StorageError
from ledger.sinks import (
    DiscardSink,
    DurableSink,
    JSONLSink,
    PostgresSink,
    Reader,
    Sink,
    SQLiteSink,
    open_sink,
    read_jsonl,
)

from .conftest import Store, engine_url
from .factories import good_action

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


# --- the sinks and their roles --------------------------------------------------------


def test_sqlite_sink_from_str_and_from_path(tmp_path: Path) -> None:
    act = good_action("r1")
    with SQLiteSink(str(tmp_path / "a.db")) as sink:
        assert isinstance(sink, Sink) and isinstance(sink, DurableSink)
        assert isinstance(sink, Reader)
        sink.commit_action(act)
    with SQLiteSink(tmp_path / "a.db") as again:
        assert again.get(act.event_id) == act
        assert again.get(str(act.event_id)) == act
        assert again.get(str(act.event_id).lower()) == act


def test_plain_sinks_are_not_durable_nor_readers(tmp_path: Path) -> None:
    for sink in (DiscardSink(), JSONLSink(tmp_path / "x.jsonl")):
        with sink:
            assert isinstance(sink, Sink)
            assert not isinstance(sink, DurableSink) and not isinstance(sink, Reader)


def test_open_sink_all_four_url_forms(
    tmp_path: Path, pg_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_sink(f"sqlite:///{tmp_path}/u.db") as sink:  # sqlite:////abs/u.db
        assert isinstance(sink, SQLiteSink) and sink.path == tmp_path / "u.db"
    monkeypatch.chdir(tmp_path)
    with open_sink("sqlite:///rel.db") as sink:
        assert isinstance(sink, SQLiteSink) and (tmp_path / "rel.db").exists()
    with open_sink(f"jsonl:///{tmp_path}/u.jsonl") as sink:
        assert isinstance(sink, JSONLSink)
        sink.record(Event(kind=Kind.PROMPT, run_id="r"))
    assert len(read_jsonl(tmp_path / "u.jsonl").events) == 1
    assert isinstance(open_sink("discard:"), DiscardSink)
    with open_sink(f"{pg_store.dsn}?ledger_schema={pg_store.schema}") as sink:
        assert isinstance(sink, PostgresSink) and isinstance(sink, DurableSink)
        sink.commit_action(good_action("r"))
    assert pg_store.sql("SELECT count(*) FROM {p}events")[0][0] == 1


# --- JSONL -----------------------------------------------------------------------------


def test_jsonl_walk_through(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    events = [Event(kind=Kind.REQUEST, run_id="r", args='"go"'), good_action("r")]
    with JSONLSink(path, fsync=True) as sink:
        for event in events:
            sink.record(event)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with pytest.raises(SinkClosed, match="closed"):
        sink.record(events[0])
    contents = read_jsonl(path)
    assert contents.events == events
    assert (contents.truncated_tail, contents.corrupt_lines) == (False, [])
    with path.open("ab") as f:
        f.write(b"not json\n" + b'{"args":' + b"[" * 5000 + b"]" * 5000 + b"}\n")
        f.write(events[0].to_json()[:30].encode())  # a crash in the middle of a line
    contents = read_jsonl(str(path))
    assert contents.events == events
    assert contents.truncated_tail is True and contents.corrupt_lines == [3, 4]


# --- commit_action: each rule, and every gap named at once --------------------------------


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"kind": Kind.TOOL_REQUEST}, "kind"),
        ({"run_id": ""}, "run_id"),
        ({"call_id": ""}, "call_id"),
        ({"tool": ""}, "tool"),
        ({"args": None}, "args"),
        ({"args": "null"}, "args"),
        ({"args": "[]"}, "args"),
        ({"args": '"x"'}, "args"),
        ({"verdict": Verdict.DENIED}, "verdict"),
        ({"verdict": "needs_approval"}, "verdict"),
        ({"verdict": None}, "verdict"),
        ({"refs": ()}, "refs"),
        ({"refs": [Ref(source="web", id="x")]}, "refs: .*known source"),
        ({"refs": [Ref(source=RefSource.MEMORY, id="")]}, "refs: .*non-empty id"),
    ],
)
def test_commit_action_rule_by_rule(store: Store, changes: dict[str, Any], named: str) -> None:
    sink = store.open()
    bad = good_action("r1", **changes)
    with pytest.raises(NotSelfExplaining, match=named) as info:
        sink.commit_action(bad)
    assert len(info.value.problems) == 1
    with pytest.raises(EventNotFound):
        sink.get(bad.event_id)


def test_commit_action_names_every_gap_and_stores_nothing(store: Store) -> None:
    sink = store.open()
    bad = Event(
        kind=Kind.TOOL_RESULT, args="[1]", verdict="denied", refs=[Ref(source="web", id="")]
    )
    with pytest.raises(NotSelfExplaining) as info:
        sink.commit_action(bad)
    message = str(info.value)
    for part in ("kind", "run_id", "call_id", "tool", "args", "verdict", "ref"):
        assert part in message
    assert len(info.value.problems) == 7
    assert store.sql("SELECT count(*) FROM {p}events")[0][0] == 0
    good = good_action("r", refs=[Ref(source="web", id="x"), Ref(source="ledger", id="e1")])
    sink.commit_action(good)  # one usable ref is enough


def test_record_takes_any_kind_and_duplicates_fail_on_every_path(store: Store) -> None:
    sink = store.open()
    events = [Event(kind=kind, run_id="r") for kind in Kind]
    denied = good_action("r", "c9", verdict=Verdict.DENIED, reason="policy")
    for event in [*events, denied]:
        sink.record(event)
    assert sink.get(denied.event_id).verdict is Verdict.DENIED
    act = good_action("r", "c1")
    sink.commit_action(act)
    impostor = act.replace(tool="format_disk")
    for write in (sink.record, sink.commit_action, lambda e: sink.record_many([e])):
        with pytest.raises(DuplicateEvent, match=str(act.event_id)):
            write(impostor)
    assert sink.get(act.event_id).tool == "send_mail"
    fresh = Event(kind=Kind.PROMPT, run_id="r")
    with pytest.raises(DuplicateEvent):
        sink.record_many([fresh, denied])  # one bad event: nothing of the batch stored
    with pytest.raises(EventNotFound):
        sink.get(fresh.event_id)


# --- reading ---------------------------------------------------------------------------


def _history(run: str) -> list[Event]:
    minute = timedelta(minutes=1)
    return [
        Event(kind=Kind.REQUEST, run_id=run, args='"tidy up"', time=T0),
        good_action(run, "c1", tool="rm", time=T0 + minute),
        Event(kind=Kind.TOOL_RESULT, run_id=run, call_id="c1", tool="rm", time=T0 + 2 * minute),
        good_action(run, "c2", tool="mv", verdict="denied", time=T0 + 3 * minute),
        Event(kind=Kind.TOOL_RESULT, run_id=run, call_id="c3", err="boom", time=T0 + 4 * minute),
        Event(kind=Kind.RUN_END, run_id=run, time=T0 + 5 * minute),
    ]


def test_events_each_filter_alone_and_combined(store: Store) -> None:
    sink = store.open()
    a, b = _history("ra"), _history("rb")
    sink.record_many(a)
    sink.record_many(b)
    everything = a + b
    assert list(sink.events()) == everything
    assert list(sink.events(run_id="rb")) == b
    assert list(sink.events(kind=Kind.ACTION)) == [a[1], a[3], b[1], b[3]]
    assert list(sink.events(kind="tool_result")) == [a[2], a[4], b[2], b[4]]
    assert list(sink.events(tool="rm")) == [a[1], a[2], b[1], b[2]]
    assert list(sink.events(verdict=Verdict.DENIED)) == [a[3], b[3]]
    assert list(sink.events(verdict="allowed")) == [a[1], b[1]]
    paris = timezone(timedelta(hours=1))
    since = (T0 + timedelta(minutes=2)).astimezone(paris)
    until = T0 + timedelta(minutes=4)
    assert list(sink.events(since=since)) == [*a[2:], *b[2:]]
    assert list(sink.events(until=until)) == [*a[:4], *b[:4]]
    assert list(sink.events(after=a[5].event_id)) == b
    assert list(sink.events(after=str(b[3].event_id))) == b[4:]
    assert list(sink.events(limit=2)) == a[:2]
    assert list(sink.events(limit=0)) == []
    combined = sink.events(
        run_id="rb", kind="action", tool="rm", verdict="allowed",
        since=T0.astimezone(paris), until=until, after=a[0].event_id, limit=5,
    )  # fmt: skip
    assert list(combined) == [b[1]]


def test_runs_summaries(store: Store) -> None:
    sink = store.open()
    sink.record_many(_history("ra"))
    sink.record(Event(kind=Kind.REQUEST, run_id="rb", time=T0 + timedelta(hours=1)))
    first, second = sink.runs()
    assert first.run_id == "ra" and second.run_id == "rb"
    assert (first.first_time, first.last_time) == (T0, T0 + timedelta(minutes=5))
    assert (first.events, first.actions, first.denials, first.errors) == (6, 2, 1, 1)
    assert first.ended is True and second.ended is False
    assert [r.run_id for r in sink.runs(since=T0 + timedelta(minutes=30))] == ["rb"]
    assert [r.run_id for r in sink.runs(until=T0 + timedelta(minutes=30))] == ["ra"]
    assert [r.run_id for r in sink.runs(limit=1)] == ["ra"]


def test_chain_reassembles_the_run(store: Store) -> None:
    sink = store.open()
    history = _history("ra")
    sink.record_many(history)
    chain = sink.chain("ra")
    assert chain.request == history[0]
    assert [a.intent.call_id for a in chain.actions] == ["c1", "c2"]
    assert chain.actions[0].result == history[2]
    with pytest.raises(RunNotFound):
        sink.chain("unknown")


def test_closed_sink_refuses_everything(store: Store) -> None:
    sink = store.open()
    act = good_action("r")
    sink.commit_action(act)
    sink.close()
    sink.close()  # idempotent
    calls: list[Callable[[], object]] = [
        lambda: sink.record(good_action("r", "c2")),
        lambda: sink.commit_action(good_action("r", "c3")),
        lambda: sink.record_many([good_action("r", "c4")]),
        lambda: sink.record_many([]),
        lambda: sink.get(act.event_id),
        lambda: sink.chain("r"),
        lambda: sink.events(),
        lambda: sink.runs(),
    ]
    for call in calls:
        with pytest.raises(SinkClosed, match="closed"):
            call()


# --- PostgreSQL: whose engine, whose transaction -------------------------------------------


@pytest.mark.postgres
def test_postgres_open_owns_its_engine(pg_store: Store) -> None:
    with PostgresSink.open(pg_store.dsn, schema=pg_store.schema) as sink:
        act = good_action("r")
        sink.commit_action(act)
        assert sink.get(str(act.event_id)) == act
    assert sink.closed
    with pytest.raises(SinkClosed):
        sink.get(act.event_id)


@pytest.mark.postgres
def test_postgres_with_the_callers_engine_never_disposes_it(
    pg_store: Store, user_engine: sa.Engine
) -> None:
    with PostgresSink(user_engine, schema=pg_store.schema) as sink:
        sink.commit_action(good_action("r"))
    with user_engine.connect() as conn:  # still the caller's, still working
        assert conn.execute(sa.text("SELECT 1")).scalar() == 1
    assert cast(QueuePool, user_engine.pool).checkedin() >= 1


@pytest.mark.postgres
def test_postgres_joins_the_callers_transaction(pg_store: Store, user_engine: sa.Engine) -> None:
    PostgresSink(user_engine, schema=pg_store.schema).close()  # schema ready
    kept, lost = good_action("r", "kept"), good_action("r", "lost")
    with user_engine.begin() as conn:
        ledger = PostgresSink(conn, schema=pg_store.schema)
        ledger.commit_action(kept)
        with pytest.raises(DuplicateEvent):
            ledger.record(kept)  # refused in a savepoint: the transaction lives on
        assert ledger.get(kept.event_id) == kept  # visible inside the transaction
        ledger.close()
        assert not conn.closed and conn.in_transaction()  # never closed nor committed
    with pytest.raises(RuntimeError), user_engine.begin() as conn:
        PostgresSink(conn, schema=pg_store.schema).commit_action(lost)
        raise RuntimeError("the caller's work failed")
    rows = pg_store.sql("SELECT call_id FROM {p}events")
    assert [r[0] for r in rows] == ["kept"]


@pytest.mark.postgres
def test_postgres_connection_mode_takes_nothing_more_from_the_callers_pool(
    pg_store: Store,
) -> None:
    engine = sa.create_engine(
        engine_url(pg_store.dsn), pool_size=1, max_overflow=0, pool_timeout=0.5
    )
    try:
        refused = pytest.raises(StorageError, match="cannot open the PostgreSQL ledger")
        with engine.connect() as conn, refused:  # the pool's only connection; no schema yet
            PostgresSink(conn, schema=pg_store.schema)
        PostgresSink(engine, schema=pg_store.schema).close()
        act = good_action("r")
        with engine.begin() as conn:
            ledger = PostgresSink(conn, schema=pg_store.schema)
            ledger.commit_action(act)
            assert [e.event_id for e in ledger.events()] == [act.event_id]
            assert [r.actions for r in ledger.runs()] == [1]
            assert ledger.chain("r").actions[0].intent == act
    finally:
        engine.dispose()
    assert pg_store.sql("SELECT count(*) FROM {p}events")[0][0] == 1


@pytest.mark.postgres
def test_making_a_sink_leaves_the_callers_connection_as_it_was(
    pg_store: Store, user_engine: sa.Engine
) -> None:
    PostgresSink(user_engine, schema=pg_store.schema).close()
    act = good_action("r")
    with user_engine.connect() as conn:
        ledger = PostgresSink(conn, schema=pg_store.schema)
        assert not conn.in_transaction()
        with conn.begin():  # the caller's own transaction, begun after the sink was made
            ledger.commit_action(act)
    assert pg_store.sql("SELECT count(*) FROM {p}events")[0][0] == 1
