"""Live spans the tracing queue had to drop (acceptance probe): never a delay or a lost
record, but the operator is told, once while it happens and with the count at close, not
left to find holes in the traces."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from ledger import AllowAll, Gate, Kind
from ledger.adapters.otel import TracingSink
from ledger.sinks import SQLiteSink


class Stuck(SpanExporter):
    """An exporter that blocks until released (a collector that stopped answering)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(10)
        return SpanExportResult.SUCCESS


def test_dropped_spans_are_reported_and_every_record_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stuck = Stuck()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(stuck))
    sink = TracingSink(SQLiteSink(tmp_path / "l.db"), provider, max_queue=2, drain_timeout=0.5)
    gate = Gate(sink, policy=AllowAll())
    with caplog.at_level(logging.WARNING, logger="ledger.adapters.otel"):
        with gate.run("many calls") as run:
            for i in range(20):
                run.call("write", {"i": i}, lambda i: i)
        stuck.release.set()
        sink.close()
    assert sink.dropped > 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings  # once when it starts, once with the count
    assert "dropped" in warnings[0] and str(sink.dropped) in warnings[1]
    with SQLiteSink(tmp_path / "l.db") as reader:
        assert len(list(reader.events(kind=Kind.TOOL_RESULT))) == 20
