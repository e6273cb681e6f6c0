"""A retention policy set before the first event leaves the payload mode open: the
ledger's first writer with a payload key still makes it a crypto-shredding ledger
(setting the policy first, the natural order before going live, used to fix the
ledger in clear: retention records, always in clear, counted as its events)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ledger.errors import PayloadKeyError
from ledger.integrity.verify import verify_ledger
from ledger.retention import Retention, Selection
from ledger.sinks.shred import FileKeyWrapper, shredding
from tests.retention.conftest import OLD, Ledger, needs_retention_schema, open_keyed, run_events

pytestmark = needs_retention_schema

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_a_policy_and_a_hold_set_first_leave_the_mode_to_the_first_writer(
    ledger_db: Ledger, key: FileKeyWrapper
) -> None:
    first = open_keyed(ledger_db)  # no key: an operator's maintenance command
    r = Retention(first, clock=lambda: NOW)
    r.set_policy(keep="400d", floor="30d", reason="before go-live")
    r.add_hold(since=OLD, until=NOW, reason="audit window")
    assert not shredding(first)
    writer = open_keyed(ledger_db, key)  # the application, with the payload key
    assert shredding(writer)
    writer.record_many(run_events("r1", OLD, secret="alice"))
    stored = ledger_db.sql("SELECT event_json FROM {p}events WHERE run_id = 'r1'")
    assert not any("alice@example.com" in str(text) for (text,) in stored)  # args sealed
    assert verify_ledger(writer, None).ok


def test_a_ledger_holding_events_in_clear_still_refuses_a_key(
    ledger_db: Ledger, key: FileKeyWrapper
) -> None:
    first = open_keyed(ledger_db)
    first.record_many(run_events("r1", OLD))
    Retention(first, clock=lambda: NOW).set_policy(keep="400d", floor="30d", reason="p")
    with pytest.raises(PayloadKeyError, match="created without crypto-shredding"):
        open_keyed(ledger_db, key)
    r = Retention(first, clock=lambda: NOW)
    assert r.erase(Selection.of_run("r1"), reason="GDPR").erased > 0
