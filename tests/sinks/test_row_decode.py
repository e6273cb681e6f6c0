"""The one decode of a stored row (``ledger.sinks.rows.parse_row``): what the sink wrote
reads back as the same event; a row that does not parse, or names another event, is
refused naming it; filter columns that disagree with the JSON are named in a warning and
the JSON wins. Rows are given as the driver gives them (tuples; SQLite's 0/1 flag)."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import CorruptRecord
from ledger.model import Actor, Approval, Event, Kind, Ref, Verdict
from ledger.sinks.rows import event_row as _event_row
from ledger.sinks.rows import parse_row
from tests.sinks.factories import action


def stored(ev: Event, seq: int = 7, *, flag_as_int: bool = False) -> tuple[object, ...]:
    """``ev`` as a read query fetches its row (READ_COLUMNS order)."""
    event_id, run_id, call_id, kind, tool, verdict, time_us, has_err, text, _ = _event_row(ev)
    flag = int(has_err) if flag_as_int else has_err
    return (seq, event_id, run_id, call_id, kind, tool, verdict, time_us, flag, text)


texts = st.text(max_size=12)
gate_events = st.builds(
    Event,
    kind=st.sampled_from(list(Kind)),
    run_id=texts,
    call_id=texts,
    tool=texts,
    label=texts,
    reason=texts,
    err=texts,
    verdict=st.none() | st.sampled_from(list(Verdict)),
    args=st.none()
    | st.dictionaries(st.text(max_size=4), st.integers(-(2**53), 2**53) | st.text(), max_size=3),
    result=st.none() | st.just('{"ok": true}') | st.just("[1,2]"),
    refs=st.lists(
        st.builds(Ref, source=st.sampled_from(["tool", "memory", "x"]), id=texts), max_size=2
    ),
    duration_ms=st.integers(min_value=0, max_value=2**40),
    actor=st.none() | st.builds(Actor, principal=st.text(min_size=1, max_size=8)),
    approval=st.none() | st.builds(Approval, approver=st.text(min_size=1, max_size=8)),
)


@settings(max_examples=200, deadline=None)
@given(gate_events, st.booleans())
def test_a_row_the_sink_wrote_reads_back_as_the_same_event(ev: Event, as_int: bool) -> None:
    back = parse_row(stored(ev, flag_as_int=as_int))
    assert back == ev
    assert (back.args, back.result) == (ev.args, ev.result)  # byte-exact raw JSON


@pytest.mark.parametrize(
    ("index", "value", "named"),
    [
        (2, "other-run", "run_id"),
        (3, "c9", "call_id"),
        (4, "tool_result", "kind"),
        (5, "rm", "tool"),
        (6, "denied", "verdict"),
        (7, 1, "time_us"),
        (8, True, "has_err"),
    ],
)
def test_a_column_that_disagrees_is_named_and_the_json_wins(
    index: int, value: object, named: str, caplog: pytest.LogCaptureFixture
) -> None:
    ev = action("r1")
    row = list(stored(ev))
    row[index] = value
    with caplog.at_level(logging.WARNING, logger="ledger.sinks.rows"):
        assert parse_row(tuple(row)) == ev
    assert f"{named} is {value!r}" in caplog.text and "seq=7" in caplog.text


def test_agreeing_columns_log_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ledger.sinks.rows"):
        parse_row(stored(action("r1"), flag_as_int=True))
    assert caplog.text == ""


@pytest.mark.parametrize(
    "text",
    [
        b'{"event_id":"01J000000000000000000000RQ","kind":"action"',  # cut short
        b"\xff\xfe",  # not UTF-8
        b'{"event_id":"01J000000000000000000000RQ","time":"2026-01-01T00:00:00Z","kind":"nope"}',
        b"[]",
    ],
)
def test_a_row_that_does_not_parse_is_refused_naming_it(text: bytes) -> None:
    row = (*stored(action("r1"), seq=42)[:-1], text)
    with pytest.raises(CorruptRecord, match=r"seq=42 .*does not parse") as caught:
        parse_row(row)
    assert caught.value.seq == 42


def test_a_row_whose_json_names_another_event_is_refused() -> None:
    ev, other = action("r1"), action("r1")
    row = (*stored(ev)[:-1], stored(other)[-1])
    with pytest.raises(CorruptRecord, match="disagrees with the stored JSON"):
        parse_row(row)


def test_hand_written_json_takes_the_exact_path_and_keeps_raw_text() -> None:
    ev = action("r1", args='{"path": "/tmp/x"}')  # not compact: kept byte-exact
    row = stored(ev)
    assert parse_row(row).args == '{"path": "/tmp/x"}'
    spaced = (*row[:-1], str(row[-1]).replace('","', '", "', 1))
    assert parse_row(spaced) == ev
