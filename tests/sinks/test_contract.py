"""The durable sinks' contract, run against SQLite and PostgreSQL alike.

Mirrors the reference's SQLite/PostgreSQL tests (checklist items 10-14) and adds the
rest of the contract: every self-explaining rule, duplicates, atomic batches, ordering,
filtered streaming, run summaries, corrupt rows, schema versions.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ulid import ULID

from ledger.canonical import sha256_of
from ledger.errors import (
    CorruptRecord,
    DuplicateEvent,
    EventNotFound,
    NotSelfExplaining,
    RunNotFound,
    SchemaVersionError,
    SinkClosed,
    ValidationError,
)
from ledger.model import Event, Kind, Ref, Verdict
from ledger.sinks import DurableSink, Reader, Sink, upgrade
from ledger.sinks import sql as sqlmod

from .conftest import Store
from .factories import action, request_event, result_event

ZERO = ULID.from_int(0)


def test_request_action_result_round_trip(store: Store, run_id: str) -> None:
    sink = store.open()
    assert isinstance(sink, Sink) and isinstance(sink, DurableSink)
    assert isinstance(sink, Reader)
    act = action(run_id)
    sink.record(request_event(run_id))
    sink.commit_action(act)
    sink.record(result_event(run_id))
    got = sink.get(act.event_id)
    assert got.tool == "delete_file"
    assert got.args == '{"path":"/tmp/x"}'
    assert got == act
    chain = sink.chain(run_id)
    assert chain.request is not None and chain.request.kind is Kind.REQUEST
    assert len(chain.actions) == 1
    result = chain.actions[0].result
    assert result is not None and result.call_id == "c1"


def test_raw_json_is_kept_byte_exact(store: Store, run_id: str) -> None:
    sink = store.open()
    args = '{ "path" : "/tmp/x",  "n": 1.50, "s":"\\u00e9<&>" }'
    act = action(run_id, args=args)
    sink.commit_action(act)
    assert sink.get(act.event_id).args == args
    [(stored, digest)] = store.sql(
        "SELECT event_json, content_hash FROM {p}events WHERE event_id = :i",
        i=str(act.event_id),
    )
    assert stored == act.to_json()
    assert digest == sha256_of(orjson.loads(stored), profile="rfc8785")


@pytest.mark.parametrize(
    "changes",
    [
        {"kind": "tool_request"},
        {"run_id": ""},
        {"call_id": ""},
        {"tool": ""},
        {"args": None},
        {"args": "null"},
        {"verdict": "denied"},
        {"verdict": None},
        {"refs": []},
        {"refs": [Ref(source="tool", id="")]},
        {"refs": [Ref(source="web", id="x")]},
        {"tool": "", "args": None, "refs": []},
    ],
)
def test_an_unexplained_action_is_refused_and_not_stored(
    store: Store, run_id: str, changes: dict[str, Any]
) -> None:
    sink = store.open()
    bad = action(run_id, **changes)
    with pytest.raises(NotSelfExplaining):
        sink.commit_action(bad)
    with pytest.raises(EventNotFound):
        sink.get(bad.event_id)


def test_record_stores_a_denied_action_without_validation(store: Store, run_id: str) -> None:
    sink = store.open()
    denied = action(run_id, verdict="denied", reason="policy")
    sink.record(denied)
    assert sink.get(denied.event_id).verdict == "denied"


def test_zero_event_id_is_refused(store: Store, run_id: str) -> None:
    sink = store.open()
    with pytest.raises(ValidationError, match="zero ULID"):
        sink.record(Event(kind=Kind.PROMPT, run_id=run_id, event_id=ZERO))
    with pytest.raises(ValidationError, match="zero ULID"):
        sink.commit_action(action(run_id, event_id=ZERO))
    assert store.sql("SELECT count(*) FROM {p}events")[0][0] == 0


def test_duplicate_id_fails_and_never_overwrites(store: Store, run_id: str) -> None:
    sink = store.open()
    first = action(run_id)
    sink.commit_action(first)
    with pytest.raises(DuplicateEvent):
        sink.commit_action(first)
    impostor = action(run_id, event_id=first.event_id, tool="format_disk")
    with pytest.raises(DuplicateEvent):
        sink.record(impostor)
    assert sink.get(first.event_id).tool == "delete_file"


def test_record_many_is_one_transaction(store: Store, run_id: str) -> None:
    sink = store.open()
    existing = request_event(run_id)
    sink.record(existing)
    batch = [result_event(run_id, f"c{i}") for i in range(5)] + [existing]
    with pytest.raises(DuplicateEvent):
        sink.record_many(batch)
    repeated = [result_event(run_id, "a")] * 2
    with pytest.raises(DuplicateEvent):
        sink.record_many(repeated)
    with pytest.raises(ValidationError):
        sink.record_many([result_event(run_id), Event(kind=Kind.PROMPT, event_id=ZERO)])
    assert [e.event_id for e in sink.events(run_id=run_id)] == [existing.event_id]
    many = [result_event(run_id, f"m{i}") for i in range(2500)]
    sink.record_many(many)
    assert [e.call_id for e in sink.events(run_id=run_id)][1:] == [e.call_id for e in many]


def test_durable_across_close_and_reopen(store: Store, run_id: str) -> None:
    sink = store.open()
    act = action(run_id)
    sink.commit_action(act)
    sink.close()
    with pytest.raises(SinkClosed):
        sink.commit_action(action(run_id, "c2"))
    with pytest.raises(SinkClosed):
        sink.get(act.event_id)
    again = store.open()
    assert again.get(act.event_id) == act


def test_fifty_concurrent_commits(store: Store, run_id: str) -> None:
    sink = store.open()
    start = threading.Barrier(50)
    errors: list[BaseException] = []

    def commit(i: int) -> None:
        start.wait()
        try:
            sink.commit_action(action(run_id, f"c{i}"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(sink.chain(run_id).actions) == 50


def test_a_bad_record_fails_only_its_own_caller(store: Store, run_id: str) -> None:
    sink = store.open()
    dup = action(run_id, "dup")
    sink.commit_action(dup)
    start = threading.Barrier(20)
    outcome: dict[int, BaseException | None] = {}

    def commit(i: int) -> None:
        ev = dup if i == 7 else action(run_id, f"c{i}")
        start.wait()
        try:
            sink.commit_action(ev)
            outcome[i] = None
        except BaseException as exc:
            outcome[i] = exc

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert isinstance(outcome.pop(7), DuplicateEvent)
    assert all(v is None for v in outcome.values())
    assert len(list(sink.events(run_id=run_id))) == 20


def test_chain_follows_commit_order_not_producer_time(store: Store, run_id: str) -> None:
    sink = store.open()
    now = datetime.now(UTC)
    later = request_event(run_id).replace(time=now + timedelta(hours=1))
    act = action(run_id).replace(time=now - timedelta(hours=1))
    res = result_event(run_id).replace(time=now - timedelta(hours=2))
    for ev in (later, act, res):
        sink.record(ev)
    chain = sink.chain(run_id)
    assert [e.event_id for e in chain.events] == [later.event_id, act.event_id, res.event_id]
    with pytest.raises(RunNotFound):
        sink.chain("no-such-run")


def test_events_filters_and_pages(
    store: Store, run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlmod, "PAGE_SIZE", 7)
    sink = store.open()
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    evs: list[Event] = []
    for i in range(30):
        tool = "read" if i % 3 else "write"
        ev = action(run_id, f"c{i}", tool=tool, time=t0 + timedelta(minutes=i))
        evs.append(ev if i % 5 else ev.replace(verdict="denied"))
    sink.record_many(evs)
    sink.record(request_event("other-" + run_id))
    assert list(sink.events(run_id=run_id)) == evs
    assert [e.tool for e in sink.events(run_id=run_id, tool="write")] == ["write"] * 10
    assert len(list(sink.events(run_id=run_id, verdict="denied"))) == 6
    assert len(list(sink.events(kind=Kind.REQUEST))) == 1
    window = list(sink.events(since=t0 + timedelta(minutes=5), until=t0 + timedelta(minutes=15)))
    assert window == evs[5:15]
    assert list(sink.events(run_id=run_id, limit=10)) == evs[:10]
    assert list(sink.events(run_id=run_id, after=evs[19].event_id)) == evs[20:]
    assert list(sink.events(run_id=run_id, after=str(evs[27].event_id), limit=1)) == [evs[28]]
    with pytest.raises(EventNotFound):
        list(sink.events(after=action(run_id).event_id))


def test_runs_summarize_each_run(store: Store, run_id: str) -> None:
    sink = store.open()
    t0 = datetime(2026, 2, 1, tzinfo=UTC)
    a, b = run_id + "-a", run_id + "-b"
    sink.record_many(
        [
            request_event(a).replace(time=t0),
            action(a, "c1", time=t0 + timedelta(seconds=1)),
            result_event(a, "c1", err="boom", time=t0 + timedelta(seconds=2)),
            Event(kind=Kind.GATE_DECISION, run_id=a, call_id="c2", verdict=Verdict.DENIED, time=t0),
            action(a, "c2", verdict="denied", time=t0 + timedelta(seconds=3)),
            Event(kind=Kind.RUN_END, run_id=a, time=t0 + timedelta(seconds=4)),
            request_event(b).replace(time=t0 + timedelta(hours=1)),
        ]
    )
    runs = list(sink.runs(since=t0, until=t0 + timedelta(days=1)))
    assert [r.run_id for r in runs] == [a, b]
    first = runs[0]
    assert (first.events, first.actions, first.denials, first.errors) == (6, 2, 1, 1)
    assert first.ended and not runs[1].ended
    assert first.first_time == t0 and first.last_time == t0 + timedelta(seconds=4)
    assert [r.run_id for r in sink.runs(since=t0 + timedelta(minutes=30))] == [b]
    assert len(list(sink.runs(since=t0, limit=1))) == 1


def test_get_unknown_and_malformed_ids(store: Store) -> None:
    sink = store.open()
    with pytest.raises(EventNotFound):
        sink.get(action("r").event_id)
    with pytest.raises(ValidationError):
        sink.get("not-a-ulid")


def test_a_hand_edited_row_names_itself(store: Store, run_id: str) -> None:
    sink = store.open()
    act = action(run_id)
    sink.commit_action(act)
    store.sql(
        "UPDATE {p}events SET event_json = :j WHERE event_id = :i",
        j='{"event_id": oops',
        i=str(act.event_id),
    )
    with pytest.raises(CorruptRecord, match=str(act.event_id)) as info:
        sink.get(act.event_id)
    assert "seq=" in str(info.value)
    with pytest.raises(CorruptRecord, match=str(act.event_id)):
        sink.chain(run_id)
    other = action(run_id, "c2")
    store.sql(
        "UPDATE {p}events SET event_json = :j WHERE event_id = :i",
        j=other.to_json(),
        i=str(act.event_id),
    )
    with pytest.raises(CorruptRecord, match="disagrees"):
        sink.get(act.event_id)


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("run_id", "another-run"),
        ("call_id", "c9"),
        ("kind", "tool_result"),
        ("tool", "read_file"),
        ("verdict", "denied"),
        ("time_us", 0),
        ("has_err", True),
    ],
)
def test_a_hand_edited_column_is_named_and_the_json_wins(
    store: Store, run_id: str, column: str, value: object, caplog: pytest.LogCaptureFixture
) -> None:
    """A filter column edited by hand disagrees with the row's JSON: reads return what
    the JSON holds (the truth) and log a warning naming the row and the column."""
    sink = store.open()
    act = action(run_id)
    sink.commit_action(act)
    store.sql(
        f"UPDATE {{p}}events SET {column} = :v WHERE event_id = :i", v=value, i=str(act.event_id)
    )
    with caplog.at_level(logging.WARNING, logger="ledger.sinks.rows"):
        assert sink.get(act.event_id) == act
        assert list(sink.events()) == [act]
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and all(f"column {column} is" in w for w in warned)
    assert str(act.event_id) in warned[0] and "changed outside the ledger" in warned[0]
    chain_run = str(value) if column == "run_id" else run_id
    assert sink.chain(chain_run).events == (act,)


def test_args_nested_to_the_limit_read_back(store: Store, run_id: str) -> None:
    from ledger.model import MAX_NESTING

    deep = '{"a":' + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1) + "}"
    sink = store.open()
    act = action(run_id, args=deep)
    sink.commit_action(act)
    assert sink.get(act.event_id) == act
    assert list(sink.events(run_id=run_id)) == [act]
    assert sink.chain(run_id).actions[0].intent.args == deep


def test_a_closed_sink_refuses_every_write_before_checking_it(store: Store) -> None:
    sink = store.open()
    sink.close()
    with pytest.raises(SinkClosed):
        sink.commit_action(Event(kind="prompt"))  # not self-explaining: closed comes first
    with pytest.raises(SinkClosed):
        sink.record_many(["not an event"])  # type: ignore[list-item]
    with pytest.raises(SinkClosed):
        sink.record(request_event("r"))


def test_a_duplicate_in_a_big_batch_is_named(store: Store, run_id: str) -> None:
    """Beyond one statement's rows, the refusal still names the stored id, and only it."""
    sink = store.open()
    old = action(run_id, "old")
    sink.commit_action(old)
    batch = [request_event(run_id) for _ in range(2100)] + [old]
    with pytest.raises(DuplicateEvent) as info:
        sink.record_many(batch)
    if store.path is not None:  # SQLite names the ids it found (PostgreSQL quotes the server)
        assert str(old.event_id) in str(info.value)
        assert all(str(e.event_id) not in str(info.value) for e in batch[:-1])
    assert [e.event_id for e in sink.events(run_id=run_id)] == [old.event_id]


def test_a_reader_can_go_on_past_a_row_that_does_not_parse(store: Store, run_id: str) -> None:
    sink = store.open()
    events = [action(run_id, f"c{i}") for i in range(3)]
    sink.record_many(events)
    [(seq,)] = store.sql("SELECT seq FROM {p}events WHERE event_id = :i", i=str(events[1].event_id))
    store.sql("UPDATE {p}events SET event_json = 'garbage' WHERE seq = :s", s=seq)
    seen: list[Event] = []
    with pytest.raises(CorruptRecord) as info:
        seen.extend(sink.events(run_id=run_id))
    assert seen == events[:1] and info.value.seq == seq
    assert list(sink.events(run_id=run_id, after=info.value.seq)) == events[2:]


def test_a_newer_schema_is_refused(store: Store) -> None:
    store.open().close()
    store.sql("UPDATE {p}ledger_schema_version SET version_num = '9999_from_the_future'")
    with pytest.raises(SchemaVersionError, match="newer than this code"):
        store.open()


def test_upgrade_on_demand_and_quick_reopen(store: Store) -> None:
    from ledger.sinks.schema import HEAD

    if store.path is not None:
        url = f"sqlite:///{store.path}"
        assert upgrade(url) == HEAD
    else:
        assert upgrade(store.dsn, schema=store.schema) == HEAD
    [(version,)] = store.sql("SELECT version_num FROM {p}ledger_schema_version")
    assert version == HEAD
    store.open().close()


def test_head_constant_matches_the_shipped_revisions() -> None:
    from ledger.sinks.schema import HEAD, scripts_head

    assert scripts_head() == HEAD


def test_an_event_without_an_rfc8785_form_is_stored_unhashed(store: Store, run_id: str) -> None:
    sink = store.open()
    big = action(run_id, args='{"n":1152921504606846976}')  # 2^60: beyond I-JSON
    sink.commit_action(big)
    assert sink.get(big.event_id).args == '{"n":1152921504606846976}'
    [(digest,)] = store.sql(
        "SELECT content_hash FROM {p}events WHERE event_id = :i", i=str(big.event_id)
    )
    assert digest is None


def test_bad_filters_are_validation_errors(store: Store) -> None:
    sink = store.open()
    with pytest.raises(ValidationError, match="kind"):
        list(sink.events(kind="bogus"))
    with pytest.raises(ValidationError, match="verdict"):
        list(sink.events(verdict="maybe"))
    with pytest.raises(ValidationError, match="naive"):
        list(sink.events(since=datetime(2026, 1, 1)))
    assert list(sink.events(limit=0)) == []


_TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tool=_TEXT.filter(bool), reason=_TEXT.filter(bool), value=_TEXT, batch=st.integers(1, 4))
def test_any_text_is_stored_exactly_by_each_write_path(
    store: Store, tool: str, reason: str, value: str, batch: int
) -> None:
    """Whatever text a record holds (quotes, backslashes, escapes, line separators,
    astral characters), the stored row is the event's own JSON and the key columns its
    values, alone or in a group commit (PostgreSQL sends a batch as one JSON document),
    and the log still verifies."""
    from ledger.integrity.verify import verify_ledger

    sink = store.open()
    run = f"r{ULID()}"
    sink.commit_action(action(run, call="warm-up"))  # the next writes take the short path
    events = [
        action(run, call_id=f"{value}{i}", tool=tool, reason=reason, args={"v": value, "i": i})
        for i in range(batch)
    ]
    if batch == 1:
        sink.commit_action(events[0])
    else:
        sink.record_many(events)
    for event in events:
        [(stored, kept_tool, kept_call)] = store.sql(
            "SELECT event_json, tool, call_id FROM {p}events WHERE event_id = :i",
            i=str(event.event_id),
        )
        assert (stored, kept_tool, kept_call) == (event.to_json(), tool, event.call_id)
        assert sink.get(event.event_id) == event
    assert verify_ledger(sink, None).ok
