"""The Sink contract, one suite over every sink: DiscardSink, JSONLSink, SQLiteSink and
PostgresSink. (The DurableSink tier, over the SQL sinks, is tests/sinks/test_contract.py;
the Reader tier is tests/sinks/test_reader_contract.py.)"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ledger.errors import SinkClosed, ValidationError
from ledger.model import Event
from ledger.sinks import DurableSink, Sink, open_sink

from .conftest import Store


@pytest.fixture(params=["discard", "jsonl", "sqlite", "postgresql"])
def make_sink(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Sink]]:
    opened: list[Sink] = []

    def make() -> Sink:
        if request.param == "postgresql":
            store: Store = request.getfixturevalue("pg_store")
            sink: Sink = store.open()
        elif request.param == "discard":
            sink = open_sink("discard:")
        else:
            ext = "jsonl" if request.param == "jsonl" else "db"
            sink = open_sink(f"{request.param}:///{tmp_path}/ledger.{ext}")
        opened.append(sink)
        return sink

    yield make
    for sink in opened:
        sink.close()  # type: ignore[attr-defined]


def test_every_sink_is_a_sink_and_a_context_manager(make_sink: Callable[[], Sink]) -> None:
    sink = make_sink()
    assert isinstance(sink, Sink)
    with sink as same:  # type: ignore[attr-defined]
        assert same is sink
        sink.record(Event(kind="prompt", run_id="r"))


def test_record_refuses_what_is_not_an_event(make_sink: Callable[[], Sink]) -> None:
    sink = make_sink()
    for bad in ({"kind": "prompt"}, '{"kind":"prompt"}', None):
        with pytest.raises(ValidationError):
            sink.record(bad)  # type: ignore[arg-type]


def test_a_closed_sink_refuses_writes_or_drops_them_as_documented(
    make_sink: Callable[[], Sink],
) -> None:
    sink = make_sink()
    sink.close()  # type: ignore[attr-defined]
    sink.close()  # type: ignore[attr-defined]  # idempotent
    if type(sink).__name__ == "DiscardSink":
        sink.record(Event(kind="prompt"))  # documented: it drops every event, always
        return
    with pytest.raises(SinkClosed):
        sink.record(Event(kind="prompt"))


def test_only_the_sql_sinks_are_durable(make_sink: Callable[[], Sink]) -> None:
    sink = make_sink()
    durable = type(sink).__name__ in ("SQLiteSink", "PostgresSink")
    assert isinstance(sink, DurableSink) is durable
