"""``open_sink`` URLs and the group committer's bookkeeping."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import sqlalchemy as sa

from ledger.errors import (
    LedgerError,
    PayloadKeyError,
    SinkClosed,
    StorageError,
    ValidationError,
)
from ledger.ids import new_event_id
from ledger.sinks import DiscardSink, JSONLSink, SQLiteSink, open_sink, upgrade
from ledger.sinks.groupcommit import GroupCommitter

from .factories import action


def test_open_sink_sqlite_relative_and_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with open_sink("sqlite:///rel.db") as sink:
        assert isinstance(sink, SQLiteSink)
        sink.record(action("r1"))
    assert (tmp_path / "rel.db").exists()
    with open_sink(f"sqlite:///{tmp_path / 'abs.db'}") as sink:
        assert isinstance(sink, SQLiteSink) and sink.path == tmp_path / "abs.db"
    with open_sink("jsonl:///rel.jsonl") as sink:
        assert isinstance(sink, JSONLSink) and not sink.fsync
    assert isinstance(open_sink("discard:"), DiscardSink)
    with open_sink("SQLite:///upper.db") as sink:  # schemes are case-insensitive
        assert isinstance(sink, SQLiteSink) and sink.path == tmp_path / "upper.db"
    assert isinstance(open_sink("DISCARD:"), DiscardSink)


@pytest.mark.parametrize("url", ["mysql://x/y", "jsonl://host/x", "nonsense"])
def test_open_sink_refuses_unknown_urls(url: str) -> None:
    with pytest.raises(ValidationError):
        open_sink(url)


def _threads(n: int, target: Callable[[int], None]) -> list[threading.Thread]:
    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return threads


def test_each_caller_gets_its_own_outcome() -> None:
    batches: list[list[int]] = []

    def write(items: list[int]) -> Sequence[BaseException | None]:
        batches.append(items)
        return [ValueError(f"bad {i}") if i % 5 == 0 else None for i in items]

    committer: GroupCommitter[int] = GroupCommitter(write)
    results: dict[int, BaseException | None] = {}

    def submit(i: int) -> None:
        try:
            committer.submit(lambda: i)
            results[i] = None
        except ValueError as exc:
            results[i] = exc

    for t in _threads(40, submit):
        t.join()
    assert sorted(i for b in batches for i in b) == list(range(40))
    assert {i for i, e in results.items() if e is not None} == set(range(0, 40, 5))
    committer.close()
    with pytest.raises(SinkClosed):
        committer.submit(lambda: 1)


@pytest.mark.parametrize(
    "raised",
    [StorageError("disk full"), PayloadKeyError("made a crypto-shredding ledger meanwhile")],
    ids=["StorageError", "PayloadKeyError"],
)
def test_a_failed_transaction_fails_every_caller_with_its_own_error(raised: LedgerError) -> None:
    """Each caller of a batch that failed whole gets its own exception, of the class the
    write raised (a PayloadKeyError stays one for every caller, not only the first)."""
    gate = threading.Barrier(10)

    def write(items: list[int]) -> Sequence[BaseException | None]:
        time.sleep(0.01)  # the others queue up behind the first batch
        raise type(raised)(str(raised))

    committer: GroupCommitter[int] = GroupCommitter(write)
    errors: list[BaseException] = []

    def submit(i: int) -> None:
        gate.wait()
        try:
            committer.submit(lambda: i)
        except LedgerError as exc:
            errors.append(exc)

    for t in _threads(10, submit):
        t.join()
    assert len(errors) == 10 and len({id(e) for e in errors}) == 10
    assert all(type(e) is type(raised) and str(raised) in str(e) for e in errors), errors


def test_an_item_that_cannot_be_built_is_not_written() -> None:
    written: list[int] = []

    def write(items: list[int]) -> Sequence[BaseException | None]:
        written.extend(items)
        return [None] * len(items)

    committer: GroupCommitter[int] = GroupCommitter(write)

    def boom() -> int:
        raise ValidationError("bad event")

    with pytest.raises(ValidationError):
        committer.submit(boom)
    assert written == []


def test_under_concurrency_an_item_that_cannot_be_built_fails_its_caller_alone() -> None:
    """Queued callers' items are built by the leader of their batch: one that cannot
    be built raises its own error in its own caller, is not written, and takes no
    other caller's item with it."""
    written: list[int] = []
    gate = threading.Barrier(30)

    def write(items: list[int]) -> Sequence[BaseException | None]:
        time.sleep(0.002)  # the others queue up behind each batch
        written.extend(items)
        return [None] * len(items)

    committer: GroupCommitter[int] = GroupCommitter(write)
    outcome: dict[int, BaseException | None] = {}

    def make(i: int) -> int:
        if i % 7 == 3:
            raise ValidationError(f"bad event {i}")
        return i

    def submit(i: int) -> None:
        gate.wait()
        for j in range(i * 10, i * 10 + 10):
            try:
                committer.submit(lambda j=j: make(j))  # type: ignore[misc]
                outcome[j] = None
            except ValidationError as exc:
                outcome[j] = exc

    for t in _threads(30, submit):
        t.join()
    bad = {j for j in range(300) if j % 7 == 3}
    assert sorted(written) == sorted(set(range(300)) - bad)
    assert {j for j, e in outcome.items() if e is not None} == bad
    assert all(str(j) in str(outcome[j]) for j in bad)


def test_a_leader_waiting_for_callers_writes_as_soon_as_they_are_all_there() -> None:
    """Under steady concurrency the leader waits for as many callers as its last batch
    held; once they are all queued it writes at once, not when the wait runs out (here
    30 s: a leader nobody told would hold every caller that long)."""
    batches: list[list[int]] = []

    def write(items: list[int]) -> Sequence[BaseException | None]:
        batches.append(items)
        return [None] * len(items)

    committer: GroupCommitter[int] = GroupCommitter(write, gather=30.0)
    committer._last_batch = 4  # as after a batch of four
    started = time.monotonic()
    for t in _threads(4, lambda i: committer.submit(lambda: i)):
        t.join(20)
    assert time.monotonic() - started < 10
    assert sorted(i for b in batches for i in b) == [0, 1, 2, 3] and len(batches) == 1


def test_an_unopenable_sqlite_file_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="cannot open"):
        SQLiteSink(tmp_path / "no-such-dir" / "ledger.db")


def test_stress_outcomes_match_what_the_writer_decided() -> None:
    import random

    rng = random.Random(5)
    decided: dict[int, str] = {}
    lock = threading.Lock()

    def write(items: list[int]) -> Sequence[BaseException | None]:
        with lock:
            if rng.random() < 0.05:
                for i in items:
                    decided[i] = "batch"
                raise StorageError("batch failed")
            out: list[BaseException | None] = []
            for i in items:
                bad = rng.random() < 0.1
                decided[i] = "item" if bad else "ok"
                out.append(ValueError(str(i)) if bad else None)
            return out

    committer: GroupCommitter[int] = GroupCommitter(write)
    seen: dict[int, str] = {}

    def worker(k: int) -> None:
        for j in range(150):
            i = k * 1000 + j
            try:
                committer.submit(lambda i=i: i)  # type: ignore[misc]
                seen[i] = "ok"
            except ValueError:
                seen[i] = "item"
            except StorageError:
                seen[i] = "batch"

    for t in _threads(24, worker):
        t.join()
    committer.close()
    assert len(seen) == 24 * 150
    assert seen == decided


def test_upgrade_takes_the_schema_from_the_url_as_open_sink_does(pg_dsn: str) -> None:
    schema = f"upg_{new_event_id()}".lower()
    url = f"{pg_dsn}{'&' if '?' in pg_dsn else '?'}ledger_schema={schema}"
    engine = sa.create_engine(pg_dsn.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        assert upgrade(url)
        query = "SELECT table_name FROM information_schema.tables WHERE table_schema = :s"
        with engine.connect() as conn:
            tables = set(conn.execute(sa.text(query), {"s": schema}).scalars())
        assert "events" in tables
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()


@pytest.mark.parametrize(
    "url", ["sqlite:///a\x00b.db", "sqlite:///\ud800.db", "jsonl:///\ud800.jsonl"]
)
def test_urls_that_no_store_can_hold_are_validation_errors(url: str) -> None:
    with pytest.raises(ValidationError):
        open_sink(url)
