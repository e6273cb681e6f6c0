"""The pure retention rules: durations, dates, the policy, holds, tombstones."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.errors import ValidationError
from ledger.model.erasure import (
    ALL_FIELDS,
    Erasure,
    erase_fields,
    erased_whole,
    erasure_digest,
    record_summary,
    tombstone_of,
)
from ledger.model.event import Event
from ledger.retention import Hold, Policy, format_duration, parse_date, parse_duration
from ledger.retention.rules import change_kind, require_reason

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RECORD = "01JDX0S1ZQ9T4W8M3V6K2N7B5C"


@pytest.mark.parametrize(
    ("text", "span"),
    [("400d", timedelta(days=400)), ("180D", timedelta(days=180)), ("26w", timedelta(weeks=26)),
     ("48h", timedelta(hours=48)), ("2y", timedelta(days=730)), ("0", timedelta(0)),
     (" 7d ", timedelta(days=7))],
)  # fmt: skip
def test_durations_parse(text: str, span: timedelta) -> None:
    assert parse_duration(text) == span


@pytest.mark.parametrize("text", ["", "d", "400", "-5d", "1.5d", "6m", "10 days", "400dd", "1e3d"])
def test_malformed_durations_are_refused_with_the_forms_accepted(text: str) -> None:
    with pytest.raises(ValidationError, match=r"e\.g\. 400d"):
        parse_duration(text)


def test_six_m_is_refused_as_ambiguous() -> None:
    with pytest.raises(ValidationError, match="ambiguous"):
        parse_duration("6m")


@given(st.integers(min_value=0, max_value=24 * 365 * 900))
def test_format_duration_reads_back(hours: int) -> None:
    span = timedelta(hours=hours)
    assert parse_duration(format_duration(span)) == span


@pytest.mark.parametrize("text", ["2026-13-01", "2026-02-30", "yesterday", "2026/01/01", "",
                                  "2026-01-01T00:00:00"])  # fmt: skip
def test_malformed_dates_are_refused(text: str) -> None:
    with pytest.raises(ValidationError):
        parse_date(text)


def test_dates_and_times_parse_as_utc() -> None:
    assert parse_date("2026-01-31") == datetime(2026, 1, 31, tzinfo=UTC)
    assert parse_date("2026-01-31T01:00:00+01:00") == datetime(2026, 1, 31, tzinfo=UTC)


@pytest.mark.parametrize("reason", ["", "   ", None, "\n"])
def test_a_reason_is_required(reason: object) -> None:
    with pytest.raises(ValidationError, match="reason is required"):
        require_reason(reason)


def test_floor_cannot_exceed_keep() -> None:
    with pytest.raises(ValidationError, match="cannot exceed keep"):
        Policy(keep=timedelta(days=100), floor=timedelta(days=180))


def test_policy_cutoffs() -> None:
    p = Policy(keep=timedelta(days=400), floor=timedelta(days=180))
    now = datetime(2026, 12, 1, tzinfo=UTC)
    assert p.cutoff(now) == now - timedelta(days=180)
    assert p.expired_before(now) == now - timedelta(days=400)


def test_change_kinds() -> None:
    base = Policy(keep=timedelta(days=400), floor=timedelta(days=180))
    assert change_kind(None, base) == "first"
    assert change_kind(base, base) == "same"
    assert change_kind(base, Policy(keep=base.keep, floor=timedelta(days=200))) == "raise"
    assert change_kind(base, Policy(keep=timedelta(days=500), floor=base.floor)) == "raise"
    assert change_kind(base, Policy(keep=base.keep, floor=timedelta(days=10))) == "lower"
    keyed = Policy(keep=base.keep, floor=base.floor, keys=("a+1+x",))
    assert change_kind(base, keyed) == "raise"  # the first keys are free
    assert change_kind(keyed, Policy(keep=base.keep, floor=base.floor, keys=("b+2+y",))) == "lower"


def test_hold_by_run_covers_that_run_only() -> None:
    h = Hold(hold_id=RECORD, reason="litigation", run_id="r1")
    assert h.covers("r1", T0) and not h.covers("r2", T0)


@given(
    st.integers(-1000, 1000),
    st.one_of(st.none(), st.integers(-500, 500)),
    st.one_of(st.none(), st.integers(-500, 500)),
)
def test_hold_by_range_is_half_open(t: int, since: int | None, until: int | None) -> None:
    if since is None and until is None:
        return
    if since is not None and until is not None and since >= until:
        with pytest.raises(ValidationError):
            Hold(hold_id=RECORD, reason="x", since=T0 + timedelta(hours=since),
                 until=T0 + timedelta(hours=until))  # fmt: skip
        return
    h = Hold(
        hold_id=RECORD,
        reason="x",
        since=None if since is None else T0 + timedelta(hours=since),
        until=None if until is None else T0 + timedelta(hours=until),
    )
    expected = (since is None or t >= since) and (until is None or t < until)
    assert h.covers("any", T0 + timedelta(hours=t)) is expected
    released = Hold(hold_id=RECORD, reason="x", since=h.since, until=h.until, released=T0)
    assert not released.covers("any", T0 + timedelta(hours=t))


def test_a_hold_needs_exactly_one_scope() -> None:
    with pytest.raises(ValidationError):
        Hold(hold_id=RECORD, reason="x")
    with pytest.raises(ValidationError):
        Hold(hold_id=RECORD, reason="x", run_id="r1", since=T0)


def _event() -> Event:
    return Event(
        kind="action", run_id="r1", call_id="c1", tool="send_mail", verdict="allowed",
        args={"to": "alice@example.com"}, reason="policy ok", preview="mail alice",
        refs=[{"source": "memory", "id": "m-alice"}], err="", duration_ms=12,
    )  # fmt: skip


def test_whole_erasure_keeps_the_structure_and_drops_the_content() -> None:
    ev = _event()
    gone = erase_fields(ev, fields=ALL_FIELDS, leaf_hash="ab" * 32, record=RECORD, reason="gdpr")
    for name in ("event_id", "run_id", "call_id", "time", "kind", "tool", "verdict", "duration_ms"):
        assert getattr(gone, name) == getattr(ev, name)
    assert gone.args is None and gone.refs == () and gone.reason == "" and gone.preview == ""
    assert erased_whole(gone) and gone.erased is not None
    assert gone.erased.fields == ("refs", "preview", "args", "reason")  # what it held, no more
    text = gone.to_json()
    assert "alice" not in text
    assert Event.from_json(text) == gone
    stone = tombstone_of(text.encode())
    assert stone is not None and stone.leaf_hash == bytes.fromhex("ab" * 32)
    assert stone.records == (RECORD,)


def test_field_erasure_keeps_the_other_fields_and_merges_later_erasures() -> None:
    ev = _event()
    first = erase_fields(ev, fields=["args"], leaf_hash="cd" * 32, record=RECORD, reason="one")
    assert first.args is None and first.reason == "policy ok" and first.refs == ev.refs
    later = "01JDX0S1ZQ9T4W8M3V6K2N7B5D"
    second = erase_fields(first, fields=["refs"], leaf_hash="cd" * 32, record=later, reason="two")
    first_bytes = hashlib.sha256(first.to_json().encode()).hexdigest()
    assert second.erased == Erasure(
        fields=("refs", "args"), leaf_hash="cd" * 32, records=(RECORD, later), reason="two",
        earlier=(first_bytes,),  # the bytes the first erasure left, which its digest covers
    )  # fmt: skip
    assert second.erased is not None and second.erased.written_by(RECORD) == first_bytes
    with pytest.raises(ValidationError, match="changed outside"):
        erase_fields(first, fields=["refs"], leaf_hash="ee" * 32, record=later, reason="x")


def test_unknown_fields_cannot_be_erased() -> None:
    with pytest.raises(ValidationError, match="always kept"):
        erase_fields(_event(), fields=["run_id"], leaf_hash="ab" * 32, record=RECORD, reason="x")


@pytest.mark.parametrize(
    "data",
    [b'{"event_id":"x","args":{"erased":{"fields":1}}}', b"not json", b'{"erased":{}}',
     b'{"kind":"action","args":"\\"erased\\":{"}'],
)  # fmt: skip
def test_ordinary_bytes_are_not_tombstones(data: bytes) -> None:
    assert tombstone_of(data) is None


def test_erasure_digest_is_order_and_content_sensitive() -> None:
    a, b = (0, b"\x01" * 32), (5, b"\x02" * 32)
    assert erasure_digest([a, b]) != erasure_digest([b, a])
    assert erasure_digest([a]) != erasure_digest([(1, a[1])])


def test_record_summary_reads_an_erasure_record_only() -> None:
    args = {"events": 3, "digest": "ff", "tombstones": "ee"}
    admin = "ledger-retention-01JDX0S1ZQ9T4W8M3V6K2N7B5C"
    record = Event(kind="action", run_id=admin, tool="ledger.erase", args=args, verdict="allowed")
    summary = record_summary(record.to_json().encode())
    assert summary is not None and (summary.events, summary.digest) == (3, "ff")
    assert summary.tombstones == "ee"
    other = Event(kind="action", run_id=admin, tool="mail", args=args)
    assert record_summary(other.to_json().encode()) is None
    # the same record in an agent's run is no erasure record (the ledger writes its own
    # records in retention runs only)
    lookalike = Event(kind="action", run_id="agent-run", tool="ledger.erase", args=args)
    assert record_summary(lookalike.to_json().encode()) is None
