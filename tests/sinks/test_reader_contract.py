"""The Reader contract, one suite over every reader: MemoryReader, JSONLReader, SQLite
and PostgreSQL. Each backend is filled with the same events (written as its sink writes
them) and must answer every question the same way."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ledger.errors import EventNotFound, LedgerError, RunNotFound, ValidationError
from ledger.ids import new_event_id
from ledger.model import Event, Kind, Ref, Verdict
from ledger.sinks import (
    JSONLReader,
    JSONLSink,
    MemoryReader,
    Reader,
    SQLiteSink,
    open_reader,
)

from .conftest import Store

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
REQ = Ref(source="memory", id="m1", hash="h")


def _corpus(run: str) -> list[Event]:
    """Two runs, one event outside any run, a denial, an error, a run end; the commit
    order differs from the event-id order in run ``a`` (a late gate decision)."""
    ids = [new_event_id() for _ in range(11)]
    a, b = f"{run}-a", f"{run}-b"
    t = [T0 + timedelta(seconds=i) for i in range(11)]
    return [
        Event(kind="request", event_id=ids[0], run_id=a, time=t[0], args='"go"'),
        Event(kind="action", event_id=ids[2], run_id=a, call_id="c1", tool="write",
              time=t[2], args={"p": 1}, verdict="allowed", refs=[REQ]),
        Event(kind="gate_decision", event_id=ids[1], run_id=a, call_id="c1", tool="write",
              time=t[1], verdict="allowed", label="allow-all"),
        Event(kind="tool_result", event_id=ids[3], run_id=a, call_id="c1", tool="write",
              time=t[3], result='"ok"', duration_ms=4),
        Event(kind="request", event_id=ids[4], run_id=b, time=t[4], args='"other"'),
        Event(kind="action", event_id=ids[5], run_id=b, call_id="c2", tool="rm",
              time=t[5], args={}, verdict="denied", reason="no"),
        Event(kind="gate_decision", event_id=ids[6], run_id=b, call_id="c2", tool="rm",
              time=t[6], verdict="denied", reason="no"),
        Event(kind="tool_result", event_id=ids[7], run_id=b, call_id="c3", tool="read",
              time=t[7], err="boom"),
        Event(kind="run_end", event_id=ids[8], run_id=b, time=t[8]),
        Event(kind="prompt", event_id=ids[9], run_id="", time=t[9]),
        Event(kind="abort", event_id=ids[10], run_id="", time=t[10], err="killed"),
    ]  # fmt: skip


Opener = Callable[[list[Event]], Reader]


@pytest.fixture(params=["memory", "jsonl", "sqlite", "postgresql"])
def make_reader(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    opened: list[Reader] = []

    def memory(events: list[Event]) -> Reader:
        return MemoryReader(events)

    def jsonl(events: list[Event]) -> Reader:
        path = tmp_path / "l.jsonl"
        with JSONLSink(path) as sink:
            for e in events:
                sink.record(e)
        return JSONLReader(path)

    def sqlite(events: list[Event]) -> Reader:
        path = tmp_path / "l.db"
        with SQLiteSink(path) as sink:
            sink.record_many(events)
        return open_reader(f"sqlite:///{path}")

    def postgresql(events: list[Event]) -> Reader:
        store: Store = request.getfixturevalue("pg_store")
        sink = store.open()
        sink.record_many(events)
        return sink

    opener = {"memory": memory, "jsonl": jsonl, "sqlite": sqlite, "postgresql": postgresql}[
        request.param
    ]

    def make(events: list[Event]) -> Reader:
        reader = opener(events)
        opened.append(reader)
        return reader

    yield make
    for reader in opened:
        reader.close()  # type: ignore[attr-defined]


def test_get_finds_each_event_and_names_an_unknown_one(make_reader: Opener) -> None:
    events = _corpus("g")
    reader = make_reader(events)
    for e in events:
        assert reader.get(e.event_id) == e
        assert reader.get(str(e.event_id)) == e
    with pytest.raises(EventNotFound):
        reader.get(new_event_id())
    with pytest.raises(ValidationError):
        reader.get("not-an-id")


def test_chain_is_in_event_id_order_whatever_the_commit_order(make_reader: Opener) -> None:
    events = _corpus("c")
    reader = make_reader(events)
    chain = reader.chain("c-a")
    assert [e.event_id for e in chain.events] == sorted(
        e.event_id for e in events if e.run_id == "c-a"
    )
    assert chain.run_id == "c-a" and chain.request is not None
    (action,) = chain.actions
    assert action.result is not None and action.outcome == "succeeded"
    with pytest.raises(RunNotFound, match="nobody"):
        reader.chain("nobody")


def test_events_filter_in_commit_order_and_page(make_reader: Opener) -> None:
    events = _corpus("e")
    reader = make_reader(events)
    assert list(reader.events()) == events
    assert list(reader.events(run_id="e-a")) == [e for e in events if e.run_id == "e-a"]
    assert list(reader.events(run_id="")) == [e for e in events if e.run_id == ""]
    assert list(reader.events(kind="action")) == [e for e in events if e.kind is Kind.ACTION]
    assert list(reader.events(kind=Kind.ACTION, verdict=Verdict.DENIED)) == [events[5]]
    assert list(reader.events(tool="write")) == events[1:4]
    window = list(reader.events(since=T0 + timedelta(seconds=2), until=T0 + timedelta(seconds=4)))
    assert window == [events[1], events[3]]  # since inclusive, until exclusive, by time
    assert list(reader.events(limit=3)) == events[:3]
    assert list(reader.events(limit=0)) == []
    assert list(reader.events(after=events[4].event_id)) == events[5:]
    assert list(reader.events(after=str(events[4].event_id), limit=2)) == events[5:7]


def test_runs_summarize_every_run_the_empty_run_id_included(make_reader: Opener) -> None:
    events = _corpus("r")
    reader = make_reader(events)
    runs = {r.run_id: r for r in reader.runs()}
    assert list(runs) == ["r-a", "r-b", ""]  # oldest first
    a, b, none = runs["r-a"], runs["r-b"], runs[""]
    assert (a.events, a.actions, a.denials, a.errors, a.ended) == (4, 1, 0, 0, False)
    assert (b.events, b.actions, b.denials, b.errors, b.ended) == (5, 1, 1, 1, True)
    assert (none.events, none.errors, none.ended) == (2, 1, True)
    assert a.first_time == T0 and a.last_time == T0 + timedelta(seconds=3)
    assert [r.run_id for r in reader.runs(limit=1)] == ["r-a"]
    late = list(reader.runs(since=T0 + timedelta(seconds=5)))
    assert [r.run_id for r in late] == ["r-b", ""] and late[0].events == 4


@pytest.mark.parametrize(
    "call",
    [
        lambda r: list(r.events(limit=-1)),
        lambda r: list(r.events(limit=1.5)),
        lambda r: list(r.events(kind="nope")),
        lambda r: list(r.events(kind=["action"])),
        lambda r: list(r.events(verdict="maybe")),
        lambda r: list(r.events(run_id=3)),
        lambda r: list(r.events(tool=b"x")),
        lambda r: list(r.events(since="yesterday")),
        lambda r: list(r.runs(limit=-1)),
        lambda r: r.chain(None),
    ],
)
def test_bad_arguments_are_validation_errors(
    make_reader: Opener, call: Callable[[Reader], object]
) -> None:
    reader = make_reader(_corpus("v"))
    with pytest.raises(ValidationError):
        call(reader)


def test_an_unknown_after_id_is_event_not_found(make_reader: Opener) -> None:
    reader = make_reader(_corpus("a"))
    with pytest.raises(EventNotFound):
        list(reader.events(after=new_event_id()))


def test_every_reader_is_a_reader_and_a_context_manager(make_reader: Opener) -> None:
    reader = make_reader(_corpus("p"))
    assert isinstance(reader, Reader)
    with reader as same:  # type: ignore[attr-defined]
        assert same is reader
    assert issubclass(ValidationError, LedgerError)
