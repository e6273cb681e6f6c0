"""Fixtures for the gate tests: real SQLite and JSONL sinks, and small fault injectors
that wrap a real SQLite sink (no mocks of the database)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Self

import pytest

from ledger.errors import StorageError
from ledger.model import Event, Kind
from ledger.sinks import JSONLSink, SQLiteSink


@pytest.fixture
def sqlite_sink(tmp_path: Path) -> Iterator[SQLiteSink]:
    sink = SQLiteSink(tmp_path / "l.db")
    yield sink
    sink.close()


@pytest.fixture
def jsonl_sink(tmp_path: Path) -> Iterator[JSONLSink]:
    sink = JSONLSink(tmp_path / "l.jsonl")
    yield sink
    sink.close()


class Wrapped:
    """A durable sink and reader that delegates to a real SQLiteSink."""

    def __init__(self, inner: SQLiteSink) -> None:
        self.inner = inner
        self.lock = threading.Lock()

    def record(self, event: Event) -> None:
        self.inner.record(event)

    def record_many(self, events: Iterable[Event]) -> None:
        for event in events:  # one at a time, so a fault injector sees each
            self.record(event)

    def commit_action(self, event: Event) -> None:
        self.inner.commit_action(event)

    def chain(self, run_id: str) -> Any:
        return self.inner.chain(run_id)

    def events(self, **kw: Any) -> Any:
        return self.inner.events(**kw)

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FlakyCommits(Wrapped):
    """Fails every second ``commit_action`` with a StorageError ("disk full")."""

    def __init__(self, inner: SQLiteSink) -> None:
        super().__init__(inner)
        self.commits = 0
        self.failed: list[str] = []

    def commit_action(self, event: Event) -> None:
        with self.lock:
            self.commits += 1
            fail = self.commits % 2 == 0
        if fail:
            self.failed.append(event.call_id)
            raise StorageError("disk full")
        self.inner.commit_action(event)


class FailingRecords(Wrapped):
    """``record`` fails for the kinds in ``failing`` (all kinds when it holds None)."""

    def __init__(self, inner: SQLiteSink, failing: set[Kind] | None = None) -> None:
        super().__init__(inner)
        self.failing = failing

    def record(self, event: Event) -> None:
        if self.failing is None or event.kind in self.failing:
            raise StorageError(f"cannot write {event.kind}")
        self.inner.record(event)


def kinds(events: Iterable[Event]) -> list[str]:
    return [str(e.kind) for e in events]


def of_call(events: Iterable[Event], call_id: str) -> list[Event]:
    return [e for e in events if e.call_id == call_id]


class SlowCommits(Wrapped):
    """``commit_action`` waits until the test releases it (to cancel mid-commit)."""

    def __init__(self, inner: SQLiteSink) -> None:
        super().__init__(inner)
        self.entered = threading.Event()
        self.release = threading.Event()

    def commit_action(self, event: Event) -> None:
        self.entered.set()
        self.release.wait(10)
        self.inner.commit_action(event)
