"""On PostgreSQL every commit moves the stored tree head; a verification reads the head
and then every row, so it must read them in one snapshot, or rows committed meanwhile
look inserted outside the ledger (session 19: ``ledger verify``, ``ledger db check`` and
the report's full check failed on an intact ledger while a writer committed)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from ledger.integrity import verify_ledger
from ledger.model import Event
from ledger.report.verification import verify_all
from ledger.sinks import PostgresSink

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _run(i: int) -> list[Event]:
    t = T0 + timedelta(seconds=i)
    return [
        Event(kind="request", run_id=f"r{i}", time=t, args='"go"'),
        Event(kind="run_end", run_id=f"r{i}", time=t),
    ]


def test_a_verification_during_writes_sees_one_state_of_the_ledger(
    pg_sink: PostgresSink,
) -> None:
    sink = pg_sink
    sink.record_many([e for i in range(3000) for e in _run(i)])
    stop = threading.Event()

    def write() -> None:
        i = 10_000
        while not stop.is_set():
            sink.record_many(_run(i))
            i += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for _ in range(4):
            full = verify_all(sink)
            assert full.ok, full.findings[:3]
            lean = verify_ledger(sink, None)
            assert lean.ok, lean.findings[:3]
    finally:
        stop.set()
        writer.join()
    assert verify_all(sink).ok
