"""What a retention change records as its reason and its actor: something that shows,
and short. A reason of characters that show nothing (a Hangul filler, the blank Braille
pattern, a variation selector) said nothing, yet was recorded and shown as
``[erased: ]``; a reason of 100,000 characters went into each of the 1,000 tombstones
of an erasure (erased rows keep a small size)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.errors import ValidationError
from ledger.retention import Retention, Selection
from ledger.retention.rules import MAX_REASON
from tests.retention.conftest import OLD, Ledger, needs_retention_schema, run_events

pytestmark = needs_retention_schema

SHOW_NOTHING = ["\u3164", "\u2800", "\u115f", "\uffa0", "\u034f", "\u17b5", "\u200b",
                "\ufe0f", "\u3164 \u2800\u200b", "\U000e0020"]  # fmt: skip


def _ledger(db: Ledger) -> Retention:
    sink = db.open()
    sink.record_many(run_events("old", OLD))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="30d", reason="policy")
    return r


@pytest.mark.parametrize("blank", SHOW_NOTHING, ids=lambda s: s.encode("unicode_escape").decode())
def test_a_reason_or_actor_that_shows_nothing_is_refused(sqlite_ledger: Ledger, blank: str) -> None:
    r = _ledger(sqlite_ledger)
    with pytest.raises(ValidationError, match="reason is required"):
        r.erase(Selection.of_run("old"), reason=blank, by="dpo")
    with pytest.raises(ValidationError, match="reason is required"):
        r.add_hold(run_id="old", reason=blank)
    with pytest.raises(ValidationError, match="shows nothing"):
        r.erase(Selection.of_run("old"), reason="GDPR", by=blank)
    assert r.erasures() == [] and r.holds() == []
    result = CliRunner().invoke(
        cli, ["erase", "--db", sqlite_ledger.url, "--run", "old", "--reason", blank]
    )
    assert result.exit_code != 0 and "reason is required" in result.output, result.output
    assert r.erasures() == []


def test_a_reason_is_at_most_max_reason_characters(ledger_db: Ledger) -> None:
    r = _ledger(ledger_db)
    with pytest.raises(ValidationError, match="at most 1,000"):
        r.erase(Selection.of_run("old"), reason="GDPR " + "x" * MAX_REASON, by="dpo")
    with pytest.raises(ValidationError, match="at most 1,000"):
        r.add_hold(run_id="old", reason="x" * (MAX_REASON + 1))
    with pytest.raises(ValidationError, match="at most"):
        r.erase(Selection.of_run("old"), reason="GDPR", by="d" * 201)
    assert r.erasures() == []
    longest = "GDPR " + "x" * (MAX_REASON - 5)
    done = r.erase(Selection.of_run("old"), reason=longest, by="dpo")
    assert done.erased == len(run_events("old", OLD))
    sizes = ledger_db.sql("SELECT length(event_json) FROM {p}events WHERE run_id = 'old'")
    assert max(int(n) for (n,) in sizes) < MAX_REASON + 600  # a tombstone: small


def test_fields_may_be_given_as_any_iterable(sqlite_ledger: Ledger) -> None:
    r = _ledger(sqlite_ledger)
    done = r.erase(Selection.of_run("old"), reason="GDPR", fields=(f for f in ["args"]))
    assert done.fields == ("args",) and done.erased > 0


def test_an_event_erased_twice_does_not_give_the_latest_reason_for_every_part(
    sqlite_ledger: Ledger,
) -> None:
    """A tombstone keeps the latest erasure's reason: a part an earlier erasure took
    reads as erased by the latest of the erasures, not by the latest reason alone."""
    from ledger.model.erasure import erased_text

    r = _ledger(sqlite_ledger)
    r.erase(Selection.of_run("old"), reason="GDPR request 1", fields=["args"])
    r.erase(Selection.of_run("old"), reason="cleanup refs", fields=["refs"])
    sink = sqlite_ledger.opened[0]
    action = next(e for e in sink.chain("old").events if e.kind == "action")
    assert erased_text(action, "args") == (
        "[erased: cleanup refs, the latest of 2 erasures of this event]"
    )
    result = CliRunner().invoke(cli, ["why", "--db", sqlite_ledger.url, "old", "c0"])
    shown = " ".join(result.output.split())
    assert "args: [erased: cleanup refs, the latest of 2 erasures" in shown, shown
    assert "request: [erased: GDPR request 1]" in shown, shown  # one erasure took it


def test_the_viewer_and_drift_say_an_event_was_erased_twice(sqlite_ledger: Ledger) -> None:
    from ledger.drift import ErasedContent, EventResolver
    from ledger.model import RefSource
    from ledger.viewer.pages.parts import erased_mark

    r = _ledger(sqlite_ledger)
    r.erase(Selection.of_run("old"), reason="first", fields=["reason", "result"])
    r.erase(Selection.of_run("old"), reason="second")  # whole: every row a second time
    sink = sqlite_ledger.opened[0]
    events = list(sink.chain("old").events)
    action = next(e for e in events if e.kind == "action")
    assert "erased: second, the latest of 2 erasures of this event" in erased_mark(action, "reason")
    result = next(e for e in events if e.kind == "tool_result")
    with pytest.raises(ErasedContent, match="the latest of 2 erasures"):
        EventResolver(sink).current_hash(RefSource.TOOL, str(result.event_id))
