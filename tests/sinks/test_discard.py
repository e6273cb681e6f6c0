"""``DiscardSink``: drops everything, never durable (checklist items 2 and 6)."""

from __future__ import annotations

from ledger.model import Event, Kind
from ledger.sinks import DiscardSink, DurableSink, Sink, open_sink

from .factories import action


def test_record_accepts_anything_and_returns_none() -> None:
    sink = DiscardSink()
    sink.record(Event(kind=Kind.PROMPT))
    sink.record(action("r1"))


def test_is_a_sink_but_not_durable() -> None:
    sink = DiscardSink()
    assert isinstance(sink, Sink)
    assert not isinstance(sink, DurableSink)
    assert not hasattr(sink, "commit_action")


def test_context_manager_and_close_are_harmless() -> None:
    with DiscardSink() as sink:
        sink.record(Event(kind=Kind.PROMPT))
    sink.close()
    sink.record(Event(kind=Kind.PROMPT))


def test_open_sink_discard() -> None:
    assert isinstance(open_sink("discard:"), DiscardSink)
