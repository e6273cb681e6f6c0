"""``runs()`` streams its summaries (on PostgreSQL by libpq's single-row mode, so the
aggregate may run in parallel): every run once, in order, and a caller that stops early
leaves the sink usable, its connection neither busy nor in a failed transaction."""

from __future__ import annotations

from collections.abc import Generator
from datetime import timedelta

from .conftest import Store
from .test_time_high_water import T0, _event


def _fleet(store: Store, run_id: str, runs: int = 30) -> list[str]:
    sink = store.open()
    names = [f"{run_id}-{k:03d}" for k in range(runs)]
    sink.record_many(
        [_event(name, i, k * 10 + i) for k, name in enumerate(names) for i in range(4)]
    )
    return names


def test_every_run_is_summarised_once_in_time_order(store: Store, run_id: str) -> None:
    names = _fleet(store, run_id)
    sink = store.open()
    found = list(sink.runs())
    assert [r.run_id for r in found] == names
    assert all(r.events == 4 and not r.ended for r in found)
    window = list(sink.runs(since=T0 + timedelta(seconds=100), until=T0 + timedelta(seconds=200)))
    assert [r.run_id for r in window] == names[10:20]
    assert [r.run_id for r in sink.runs(newest=True, limit=3)] == names[::-1][:3]


def test_a_caller_that_stops_early_leaves_the_sink_usable(store: Store, run_id: str) -> None:
    names = _fleet(store, run_id)
    sink = store.open()
    for _ in range(3):  # more times than the pool has spare connections
        it = sink.runs()
        assert next(it).run_id == names[0]
        assert isinstance(it, Generator)
        it.close()
    assert len(sink.chain(names[5]).events) == 4
    assert [r.run_id for r in sink.runs()] == names
    sink.record(_event(names[0], 99, 5))
    assert next(iter(sink.runs())).events == 5
