"""Library input an erasure takes as a user means it: an event id given twice is one
event (and said so), and ``fields="args"`` is the field ``args``, not its letters."""

from __future__ import annotations

from ledger.retention import Retention, Selection
from tests.retention.conftest import OLD, Ledger, needs_retention_schema, run_events

pytestmark = needs_retention_schema


def test_an_event_id_given_twice_is_one_event(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    events = run_events("old-1", OLD)
    sink.record_many(events)
    r = Retention(sink)
    r.set_policy(keep="400d", floor="180d", reason="v1")
    first, second = str(events[0].event_id), str(events[1].event_id)
    selection = Selection.of_events([first, first, second, first])
    assert selection.event_ids == (first, second)
    assert selection.describe() == "2 event(s) by id"
    done = r.erase(selection, reason="gdpr")
    assert done.erased == 2


def test_one_field_given_as_a_string(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="180d", reason="v1")
    done = r.erase(Selection.of_run("old-1"), reason="gdpr", fields="args")
    assert done.fields == ("args",) and done.erased == 7
    chain = sink.chain("old-1")
    assert chain.actions[0].intent.reason == "ok"  # the rest stays readable
