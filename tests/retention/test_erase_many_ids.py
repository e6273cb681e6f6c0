"""An erasure by event ids takes any number of them: the ids travel as one parameter
(a driver binds at most 65,535, and PostgreSQL refused 65,535 ids and more), and the
rows are still found by the event id index."""

from __future__ import annotations

from datetime import timedelta

from ledger.model.event import Event
from ledger.retention import Retention, Selection
from tests.retention.conftest import OLD, Ledger, needs_retention_schema

pytestmark = needs_retention_schema

MANY = 66_000


def test_an_erasure_by_more_ids_than_a_statement_binds(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    events = [
        Event(kind="request", run_id=f"r{i // 1000}", time=OLD + timedelta(seconds=i),
              args=f'"user {i}"')
        for i in range(MANY + 10)
    ]  # fmt: skip
    for start in range(0, len(events), 11_000):
        sink.record_many(events[start : start + 11_000])
    r = Retention(sink)
    r.set_policy(keep="400d", floor="30d", reason="policy")
    chosen = [str(e.event_id) for e in events[:MANY]]
    assert r.erase(Selection.of_events(chosen), reason="GDPR", dry_run=True).erased == MANY
    done = r.erase(Selection.of_events(chosen), reason="GDPR")
    assert done.erased == MANY
    left = ledger_db.sql("SELECT count(*) FROM {p}events WHERE event_json LIKE '%user %'")
    assert int(left[0][0]) == 10  # the ten not chosen, untouched
    assert r.erasures()[0].events == MANY
