"""The erasure's fast tombstone builder writes exactly what the model's rule writes: for
any stored event (ordinary or already erased, escaped text or not) and any fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.model.erasure import ALL_FIELDS, erase_fields, erase_stored
from ledger.model.event import Event
from ledger.retention.tombstones import TombstoneMaker
from ledger.sinks.rows import content_hash

RECORD = "01JDX0S1ZQ9T4W8M3V6K2N7B5C"
LATER = "01JDX0S1ZQ9T4W8M3V6K2N7B5D"
LEAF = "ab" * 32

text = st.text(max_size=12) | st.sampled_from(["", "run-1", 'a"b', "a\\b", "é\u2028", "\x01"])
values = (
    st.none()
    | st.integers(-(2**60), 2**60)
    | text
    | st.lists(st.integers(-(2**63), 2**63 - 1), max_size=2)
)
events = st.builds(
    Event,
    kind=st.sampled_from(["action", "tool_result", "request", "run_end"]),
    run_id=text,
    call_id=text,
    tool=text,
    label=text,
    preview=text,
    reason=text,
    err=text,
    agent_path=text,
    verdict=st.none() | st.sampled_from(["allowed", "denied"]),
    duration_ms=st.integers(0, 2**62),
    time=st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
    )
    | st.just(datetime(2025, 1, 1, tzinfo=UTC) + timedelta(microseconds=5)),
    args=st.none() | st.dictionaries(text, values, max_size=3),
    result=st.none() | values.filter(lambda v: v is not None and not isinstance(v, str)),
    refs=st.lists(st.builds(dict, source=st.just("memory"), id=text.filter(bool)), max_size=2),
)
field_sets = st.just(ALL_FIELDS) | st.sets(st.sampled_from(ALL_FIELDS), min_size=1)


@settings(max_examples=300, deadline=None)
@given(
    event=events, fields=field_sets, earlier=st.none() | field_sets, reason=text.filter(str.strip)
)
def test_the_fast_tombstone_is_the_model_tombstone(
    event: Event, fields: tuple[str, ...], earlier: tuple[str, ...] | None, reason: str
) -> None:
    if earlier is not None:  # an event already erased (some fields) by an earlier record
        event = erase_fields(event, fields=earlier, leaf_hash=LEAF, record=RECORD, reason="one")
    data = event.to_json().encode("utf-8")
    maker = TombstoneMaker(fields=fields, record=LATER, reason=reason)
    made = maker.make(data, LEAF)
    assert made == erase_stored(data, fields=fields, leaf_hash=LEAF, record=LATER, reason=reason)
    expected = erase_fields(event, fields=fields, leaf_hash=LEAF, record=LATER, reason=reason)
    assert made[0] == expected.to_json()
    assert (made[1] or content_hash(made[0])) == content_hash(made[0])
    assert maker.make(data, LEAF) == made  # the cached plan gives the same again


@settings(max_examples=100, deadline=None)
@given(
    page=st.lists(st.tuples(events, st.none() | field_sets), max_size=6),
    fields=field_sets,
    reason=text.filter(str.strip),
)
def test_a_page_of_tombstones_is_each_row_s_tombstone(
    page: list[tuple[Event, tuple[str, ...] | None]], fields: tuple[str, ...], reason: str
) -> None:
    datas, leaves = [], []
    for i, (event, earlier) in enumerate(page):
        if earlier is not None:
            event = erase_fields(event, fields=earlier, leaf_hash=LEAF, record=RECORD, reason="1")
        datas.append(event.to_json().encode("utf-8"))
        leaves.append(bytes([i]) * 32 if earlier is None else bytes.fromhex(LEAF))
    maker = TombstoneMaker(fields=fields, record=LATER, reason=reason)
    made = maker.make_page(datas, leaves)
    expected = [
        erase_stored(d, fields=fields, leaf_hash=leaf.hex(), record=LATER, reason=reason)
        for d, leaf in zip(datas, leaves, strict=True)
    ]
    assert made == expected
    assert maker.make_page(datas, leaves) == made  # the cached plans give the same again
