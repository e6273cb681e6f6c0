"""Event JSON: the reference's names, order and omit-empty rules; byte-exact raw JSON;
reading the Go reference's output; refusing what is not an event."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ulid import ULID

from ledger import Event, Kind, LedgerError, Ref, RefSource, ValidationError, Verdict
from ledger.model import Actor, Approval

FIELD_ORDER = [
    "event_id",
    "run_id",
    "call_id",
    "refs",
    "time",
    "agent_path",
    "kind",
    "tool",
    "label",
    "preview",
    "args",
    "verdict",
    "reason",
    "result",
    "err",
    "duration_ms",
]
WHO_ORDER = [*FIELD_ORDER, "actor", "approval"]  # the reference's 16, then who

ZERO_ID = "00000000000000000000000000"
EID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"


def _fast(text: object) -> Event | None:
    """The compact path's event (``ledger.model.codec._compact``), None when it declines."""
    from ledger.model.codec import _compact

    found = _compact(Event, text)
    return None if found is None else found[0]


def _keys(text: str) -> list[str]:
    pairs: list[tuple[str, Any]] = json.loads(text, object_pairs_hook=lambda p: p)
    return [k for k, _ in pairs]


def _minimal(**extra: str) -> str:
    """A minimal event line with ``extra`` raw JSON members appended."""
    members = [f'"event_id":"{EID}"', '"time":"2026-01-02T03:04:05Z"', '"kind":"prompt"']
    members += [f'"{k}":{v}' for k, v in extra.items()]
    return "{" + ",".join(members) + "}"


def make(**fields: Any) -> Event:
    """``Event(**fields)`` with loosely typed arguments (plain strings, Python values)."""
    return Event(**fields)


def _full_event() -> Event:
    return make(
        event_id=EID,
        run_id="r1",
        call_id="c1",
        refs=[
            Ref(source="tool", id="01ARZ3NDEKTSV4RRFFQ69G5FA0", hash=""),
            Ref(source="memory", id="m1", hash="sha256:00ff"),
        ],
        time=datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=UTC),
        agent_path="root",
        kind=Kind.ACTION,
        tool="delete_file",
        label="Delete a file",
        preview="rm /tmp/x",
        args='{"path": "/tmp/x"}',
        verdict=Verdict.ALLOWED,
        reason="clean up <tmp> & logs",
        result='"ok"',
        err="exit 1",
        duration_ms=12,
    )


GOLDEN = (
    '{"event_id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","run_id":"r1","call_id":"c1",'
    '"refs":[{"source":"tool","id":"01ARZ3NDEKTSV4RRFFQ69G5FA0","hash":""},'
    '{"source":"memory","id":"m1","hash":"sha256:00ff"}],'
    '"time":"2026-01-02T03:04:05.12Z","agent_path":"root","kind":"action",'
    '"tool":"delete_file","label":"Delete a file","preview":"rm /tmp/x",'
    '"args":{"path": "/tmp/x"},"verdict":"allowed","reason":"clean up <tmp> & logs",'
    '"result":"ok","err":"exit 1","duration_ms":12}'
)


# --- writing ---------------------------------------------------------------------------


def test_golden_example() -> None:
    assert _full_event().to_json() == GOLDEN
    assert Event.from_json(GOLDEN) == _full_event()


def test_field_names_and_order_are_the_references() -> None:
    assert _keys(_full_event().to_json()) == FIELD_ORDER


def test_empty_fields_are_omitted_but_id_time_and_kind_are_always_written() -> None:
    ev = make(kind=Kind.PROMPT, event_id=EID, time=datetime(2026, 1, 2, tzinfo=UTC))
    assert ev.to_json() == (
        '{"event_id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","time":"2026-01-02T00:00:00Z","kind":"prompt"}'
    )


def test_zero_ulid_is_written_as_26_zeros() -> None:
    ev = make(kind=Kind.PROMPT, event_id=ZERO_ID)
    assert json.loads(ev.to_json())["event_id"] == ZERO_ID


def test_ref_fields_are_always_written_even_when_empty() -> None:
    ev = Event(kind=Kind.ACTION, refs=(Ref(source="", id="", hash=""),))
    assert json.loads(ev.to_json())["refs"] == [{"source": "", "id": "", "hash": ""}]
    assert _keys(ev.to_json())[:3] == ["event_id", "refs", "time"]


@pytest.mark.parametrize(
    ("field", "empty"),
    [
        ("run_id", ""),
        ("call_id", ""),
        ("agent_path", ""),
        ("tool", ""),
        ("label", ""),
        ("preview", ""),
        ("reason", ""),
        ("err", ""),
        ("duration_ms", 0),
        ("args", None),
        ("result", None),
        ("verdict", None),
        ("refs", ()),
    ],
)
def test_each_empty_field_is_omitted(field: str, empty: object) -> None:
    assert field not in _keys(make(kind=Kind.ACTION, **{field: empty}).to_json())


def test_json_null_args_are_written_not_omitted() -> None:
    # absent (None) and the JSON value null are different things
    text = Event(kind=Kind.ACTION, args="null").to_json()
    assert '"args":null' in text
    assert Event.from_json(text).args == "null"


@pytest.mark.parametrize(
    "raw",
    ['{"a": 1}', '"\\u00e9"', "[1,\n 2 ,3]", '{"x":"<&>"}', '{"n": 1.50e+2}', '"\\/"'],
)
def test_raw_args_and_result_are_embedded_verbatim(raw: str) -> None:
    ev = Event(kind=Kind.TOOL_RESULT, args=raw, result=raw)
    text = ev.to_json()
    assert f'"args":{raw},' in text
    assert f'"result":{raw}' in text
    back = Event.from_json(text)
    assert back.args == raw
    assert back.result == raw
    assert back.to_json() == text


def test_text_fields_with_control_and_non_ascii_characters_round_trip() -> None:
    ev = Event(
        kind=Kind.PROMPT, preview='line1\nline2\t"quoted"\\ \x00\x1f é 𝄞 \u2028', label="<b>"
    )
    text = ev.to_json()
    assert "\n" not in text
    assert json.loads(text)["preview"] == ev.preview
    assert Event.from_json(text) == ev


def test_time_is_written_in_utc_with_trimmed_fraction() -> None:
    plus2 = timezone(timedelta(hours=2))
    cases = {
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC): "2026-01-02T03:04:05Z",
        datetime(2026, 1, 2, 3, 4, 5, 500000, tzinfo=UTC): "2026-01-02T03:04:05.5Z",
        datetime(2026, 1, 2, 3, 4, 5, 1, tzinfo=UTC): "2026-01-02T03:04:05.000001Z",
        datetime(2026, 1, 2, 5, 4, 5, 123450, tzinfo=plus2): "2026-01-02T03:04:05.12345Z",
    }
    for when, expected in cases.items():
        assert json.loads(Event(kind=Kind.PROMPT, time=when).to_json())["time"] == expected


# --- reading the reference's JSON ------------------------------------------------------


GO_ACTION = (
    '{"event_id":"01JGRZ8Q2X0000000000000000","run_id":"01JGRZ8Q2X0000000000000001",'
    '"call_id":"call_1767323045123456789","refs":[{"source":"tool",'
    '"id":"01JGRZ8Q2X0000000000000002","hash":""}],'
    '"time":"2026-01-02T03:04:05.123456789+01:00","agent_path":"root","kind":"action",'
    '"tool":"delete_file","args":{"path":"/tmp/x"},"verdict":"allowed",'
    '"reason":"remove \\u003ctmp\\u003e \\u0026 logs"}'
)


def test_reads_a_go_action_line() -> None:
    ev = Event.from_json(GO_ACTION)
    assert ev.event_id == ULID.from_str("01JGRZ8Q2X0000000000000000")
    assert ev.run_id == "01JGRZ8Q2X0000000000000001"
    assert ev.call_id == "call_1767323045123456789"
    assert ev.refs == (Ref(source=RefSource.TOOL, id="01JGRZ8Q2X0000000000000002", hash=""),)
    # nanoseconds are cut to microseconds, the offset is applied, the result is UTC
    assert ev.time == datetime(2026, 1, 2, 2, 4, 5, 123456, tzinfo=UTC)
    assert ev.time.tzinfo is UTC
    assert ev.agent_path == "root"
    assert ev.kind is Kind.ACTION
    assert ev.tool == "delete_file"
    assert ev.args == '{"path":"/tmp/x"}'
    assert ev.verdict is Verdict.ALLOWED
    assert ev.reason == "remove <tmp> & logs"  # Go's HTML escapes are read as text
    assert ev.result is None


def test_reads_go_zero_values() -> None:
    line = (
        '{"event_id":"00000000000000000000000000","refs":[{"source":"","id":"","hash":""}],'
        '"time":"0001-01-01T00:00:00Z","kind":"run_end"}'
    )
    ev = Event.from_json(line)
    assert str(ev.event_id) == ZERO_ID
    assert int(ev.event_id) == 0
    assert ev.refs == (Ref(source="", id="", hash=""),)
    assert not ev.refs[0].known_source
    assert ev.time == datetime(1, 1, 1, tzinfo=UTC)
    assert ev.kind is Kind.RUN_END


def test_go_zero_time_round_trips() -> None:
    line = (
        '{"event_id":"00000000000000000000000000","time":"0001-01-01T00:00:00Z","kind":"run_end"}'
    )
    ev = Event.from_json(line)
    assert ev.to_json() == line
    assert Event.from_json(ev.to_json()) == ev


def test_reads_go_tool_result_with_result_and_duration() -> None:
    line = (
        '{"event_id":"01JGRZ8Q2X0000000000000003","run_id":"r1","call_id":"c1",'
        '"time":"2026-01-02T03:04:05.5-07:00","agent_path":"gyr","kind":"tool_result",'
        '"tool":"restart_service","result":{"ok":true,"lines":["a","b"]},"err":"",'
        '"duration_ms":42}'
    )
    ev = Event.from_json(line)
    assert ev.time == datetime(2026, 1, 2, 10, 4, 5, 500000, tzinfo=UTC)
    assert ev.result == '{"ok":true,"lines":["a","b"]}'
    assert ev.err == ""
    assert ev.duration_ms == 42


def test_lowercase_event_id_is_read() -> None:
    ev = Event.from_json(_minimal().replace(EID, EID.lower()))
    assert str(ev.event_id) == EID


def test_bytes_input_is_accepted() -> None:
    assert Event.from_json(GO_ACTION.encode("utf-8")) == Event.from_json(GO_ACTION)
    loose: Any = bytearray(GOLDEN.encode("utf-8"))  # accepted at run time too
    assert Event.from_json(loose) == _full_event()


def test_whitespace_around_members_is_tolerated_and_raw_values_stay_exact() -> None:
    text = (
        '{ "event_id" : "' + EID + '" ,\n "time":"2026-01-02T03:04:05Z", "kind": "action",'
        '\t"args" :  {"b": [1, 2],  "a" : "\\u00e9"}  , "result":[ ] }\n'
    )
    ev = Event.from_json(text)
    assert ev.args == '{"b": [1, 2],  "a" : "\\u00e9"}'
    assert ev.result == "[ ]"


def test_unknown_members_are_ignored() -> None:
    ev = Event.from_json(_minimal(future_field='{"x": [1]}', another="2"))
    assert ev.kind is Kind.PROMPT


def test_null_refs_and_empty_verdict_read_as_absent() -> None:
    ev = Event.from_json(_minimal(refs="null", verdict='""'))
    assert ev.refs == ()
    assert ev.verdict is None


# --- refusing what is not an event -----------------------------------------------------


BAD_LINES = {
    "empty": "",
    "blank": "   \n",
    "not json": "hello",
    "array": "[]",
    "null": "null",
    "string": '"event"',
    "truncated": _minimal()[:-1],
    "truncated mid-value": _minimal()[:40],
    "trailing text": _minimal() + " x",
    "two objects": _minimal() + _minimal(),
    "trailing comma": _minimal()[:-1] + ",}",
    "single quotes": _minimal().replace('"', "'"),
    "missing event_id": '{"time":"2026-01-02T03:04:05Z","kind":"prompt"}',
    "missing time": '{"event_id":"' + EID + '","kind":"prompt"}',
    "missing kind": '{"event_id":"' + EID + '","time":"2026-01-02T03:04:05Z"}',
    "event_id number": _minimal().replace(f'"{EID}"', "5"),
    "event_id bad": _minimal().replace(EID, "not-a-ulid"),
    "event_id null": _minimal().replace(f'"{EID}"', "null"),
    "time number": _minimal().replace('"2026-01-02T03:04:05Z"', "1767323045"),
    "time no zone": _minimal().replace("05Z", "05"),
    "time bad": _minimal().replace("2026-01-02", "2026-02-30"),
    "kind unknown": _minimal().replace("prompt", "chat"),
    "kind number": _minimal().replace('"prompt"', "3"),
    "run_id number": _minimal(run_id="5"),
    "tool object": _minimal(tool="{}"),
    "reason null": _minimal(reason="null"),
    "verdict unknown": _minimal(verdict='"maybe"'),
    "refs object": _minimal(refs='{"source":"tool"}'),
    "refs item number": _minimal(refs="[1]"),
    "ref id number": _minimal(refs='[{"source":"tool","id":5,"hash":""}]'),
    "duration string": _minimal(duration_ms='"5"'),
    "duration negative": _minimal(duration_ms="-1"),
    "duration float": _minimal(duration_ms="1.5"),
    "duration bool": _minimal(duration_ms="true"),
    "args NaN": _minimal(args="NaN"),
    "args single quoted": _minimal(args="{'a': 1}"),
    "raw control char": _minimal(reason='"a\x01b"'),
    "duplicate event_id": _minimal()[:-1] + f',"event_id":"{ZERO_ID}"}}',
    "duplicate kind": _minimal()[:-1] + ',"kind":"prompt"}',
    "duplicate args": _minimal(args="1")[:-1] + ',"args":2}',
    "duplicate unknown": _minimal(x="1")[:-1] + ',"x":1}',
}


@pytest.mark.parametrize("line", BAD_LINES.values(), ids=list(BAD_LINES))
def test_bad_lines_are_refused_with_validation_error(line: str) -> None:
    with pytest.raises(ValidationError) as info:
        Event.from_json(line)
    assert isinstance(info.value, LedgerError)


@pytest.mark.parametrize(
    ("line", "named"),
    [
        (BAD_LINES["missing event_id"], "event_id"),
        (BAD_LINES["missing time"], "time"),
        (BAD_LINES["missing kind"], "kind"),
        (BAD_LINES["kind unknown"], "kind"),
        (BAD_LINES["run_id number"], "run_id"),
        (BAD_LINES["duration string"], "duration_ms"),
        (BAD_LINES["verdict unknown"], "verdict"),
        (BAD_LINES["refs object"], "refs"),
        (BAD_LINES["args NaN"], "args"),
        (BAD_LINES["duplicate kind"], "kind"),
        (BAD_LINES["time no zone"], "time"),
    ],
)
def test_refusal_names_the_bad_field(line: str, named: str) -> None:
    with pytest.raises(ValidationError, match=named):
        Event.from_json(line)


def test_non_utf8_bytes_are_refused() -> None:
    with pytest.raises(ValidationError, match="UTF-8"):
        Event.from_json(b'{"event_id":"\xff"}')


@pytest.mark.parametrize("value", [None, 5, ["{}"], {"kind": "prompt"}])
def test_non_text_input_is_refused(value: object) -> None:
    with pytest.raises(ValidationError):
        Event.from_json(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "time_text",
    ["2026-01-02T03:04:05+99:00", "2026-01-02T03:04:05-24:00", "0001-01-01T00:00:00+01:00"],
)
def test_out_of_range_offsets_are_refused_with_validation_error(time_text: str) -> None:
    with pytest.raises(ValidationError, match="time"):
        Event.from_json(_minimal().replace("2026-01-02T03:04:05Z", time_text))


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_json_literals_are_refused_anywhere(literal: str) -> None:
    with pytest.raises(ValidationError):
        Event.from_json(_minimal(extension=literal))


@pytest.mark.parametrize(
    "time_text",
    ["2026-W01-1T03:04:05Z", "２０２６-01-02T03:04:05+01:00"],
    ids=["iso-week-date", "fullwidth-digits"],
)
def test_non_rfc3339_times_are_refused(time_text: str) -> None:
    with pytest.raises(ValidationError, match="time"):
        Event.from_json(_minimal().replace("2026-01-02T03:04:05Z", time_text))


@pytest.mark.parametrize("raw", [' {"a": 1}', '{"a": 1}\n', "\t1 "])
def test_raw_json_with_outer_whitespace_round_trips(raw: str) -> None:
    ev = Event(kind=Kind.TOOL_RESULT, result=raw)
    assert Event.from_json(ev.to_json()) == ev


# --- properties ------------------------------------------------------------------------

STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"')
WS = st.text(alphabet=" \t\n\r", max_size=3)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def raw_json_text(draw: st.DrawFn, value: Any) -> str:
    """``value`` as JSON text with random inner whitespace and random escaping."""
    if isinstance(value, dict):
        if not value:
            return "{" + draw(WS) + "}"
        members = [
            draw(raw_json_text(k)) + draw(WS) + ":" + draw(WS) + draw(raw_json_text(v))
            for k, v in value.items()
        ]
        return "{" + draw(WS) + ("," + draw(WS)).join(members) + draw(WS) + "}"
    if isinstance(value, list):
        if not value:
            return "[" + draw(WS) + "]"
        items = [draw(raw_json_text(v)) for v in value]
        return "[" + draw(WS) + (draw(WS) + "," + draw(WS)).join(items) + draw(WS) + "]"
    return json.dumps(value, ensure_ascii=draw(st.booleans()))


@st.composite
def raw_field(draw: st.DrawFn) -> object:
    """None, a Python value, or raw JSON text (str or bytes) for args/result."""
    form = draw(st.sampled_from(["none", "value", "text", "bytes"]))
    if form == "none":
        return None
    if form == "value":
        # a top-level str would be taken as raw JSON text and None as "absent"
        return draw(json_values.filter(lambda v: v is not None and not isinstance(v, str)))
    text = draw(raw_json_text(draw(json_values)))
    return text.encode("utf-8") if form == "bytes" else text


times = st.datetimes(
    min_value=datetime(1970, 1, 1),
    max_value=datetime(2200, 1, 1),
    timezones=st.sampled_from(
        [UTC, timezone(timedelta(hours=1)), timezone(timedelta(hours=-9, minutes=-30))]
    ),
)
refs = st.builds(
    Ref,
    source=st.sampled_from(["tool", "memory", "ledger", "", "web"]),
    id=st.text(max_size=30),
    hash=st.one_of(st.just(""), st.text(max_size=70)),
)
events = st.builds(
    Event,
    kind=st.sampled_from(list(Kind)),
    event_id=st.integers(min_value=0, max_value=2**128 - 1).map(ULID.from_int),
    run_id=st.text(max_size=30),
    call_id=st.text(max_size=30),
    refs=st.lists(refs, max_size=3),
    time=times,
    agent_path=st.text(max_size=20),
    tool=st.text(max_size=20),
    label=st.text(max_size=20),
    preview=st.text(max_size=60),
    args=raw_field(),
    verdict=st.none() | st.sampled_from(list(Verdict)),
    reason=st.text(max_size=60),
    result=raw_field(),
    err=st.text(max_size=30),
    duration_ms=st.integers(min_value=0, max_value=2**63 - 1),
    actor=st.none()
    | st.builds(
        Actor,
        principal=st.text(max_size=20),
        agent_id=st.text(max_size=10),
        agent_version=st.text(max_size=5),
    ),
    approval=st.none()
    | st.builds(
        Approval,
        approver=st.text(min_size=1, max_size=20),
        time=st.none() | times,
        reason=st.text(max_size=30),
    ),
)

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(events)
def test_from_json_of_to_json_is_the_same_event(ev: Event) -> None:
    text = ev.to_json()
    back = Event.from_json(text)
    assert back == ev
    assert back.args == ev.args  # byte-exact
    assert back.result == ev.result
    assert back.to_json() == text  # stable under round trip
    assert Event.from_json(text.encode("utf-8")) == ev


@PROPERTY
@given(events)
def test_to_json_is_one_line_of_json_with_the_reference_layout(ev: Event) -> None:
    text = ev.to_json()
    # one line, unless the raw args/result given carry their own newlines
    assert text.count("\n") == (ev.args or "").count("\n") + (ev.result or "").count("\n")
    decoded = json.loads(text)
    keys = _keys(text)
    assert keys == [k for k in WHO_ORDER if k in keys]
    assert {"event_id", "time", "kind"} <= set(keys)
    assert decoded["event_id"] == str(ev.event_id)
    assert decoded["kind"] == ev.kind.value
    for i, ref in enumerate(ev.refs):
        assert decoded["refs"][i] == {"source": str(ref.source), "id": ref.id, "hash": ref.hash}
    for name in ("args", "result"):
        raw = getattr(ev, name)
        assert (name in decoded) == (raw is not None)
        if raw is not None:
            assert decoded[name] == json.loads(raw)


@settings(max_examples=100, deadline=None)
@given(json_values, st.data())
def test_raw_text_is_kept_exactly_as_given(value: Any, data: st.DataObject) -> None:
    raw = data.draw(raw_json_text(value))
    ev = Event(kind=Kind.TOOL_RESULT, args=raw, result=raw)
    assert ev.args == raw
    assert Event.from_json(ev.to_json()).result == raw


@settings(max_examples=100, deadline=None)
@given(json_values.filter(lambda v: v is not None and not isinstance(v, str)))
def test_python_values_are_stored_as_equivalent_compact_json(value: Any) -> None:
    ev = Event(kind=Kind.ACTION, args=value)
    assert ev.args is not None
    assert json.loads(ev.args) == value
    outside_strings = STRING_LITERAL.sub("", ev.args)
    assert not set(outside_strings) & set(" \t\n\r"), ev.args


def test_enum_values_survive_reading() -> None:
    for kind in Kind:
        assert Event.from_json(_minimal().replace('"prompt"', f'"{kind.value}"')).kind is kind
    for verdict in Verdict:
        assert Event.from_json(_minimal(verdict=f'"{verdict.value}"')).verdict is verdict


@pytest.mark.parametrize("source", [s.value for s in RefSource])
def test_ref_sources_survive_reading(source: str) -> None:
    ev = Event.from_json(_minimal(refs=f'[{{"source":"{source}","id":"x","hash":"h"}}]'))
    assert ev.refs[0].source is RefSource(source)


# --- the fast paths: the same results as the exact ones ---------------------------------


@PROPERTY
@given(events)
def test_compact_decoding_equals_the_exact_scanner(ev: Event) -> None:
    import orjson

    from ledger.model.codec import event_from_json

    text = ev.to_json()
    fast = _fast(text)
    raws = [r for r in (ev.args, ev.result) if r is not None]
    if fast is None:  # only raw text that orjson would not write back verbatim declines
        assert any(orjson.dumps(orjson.loads(r)).decode() != r for r in raws)
        return
    exact = event_from_json(Event, text)
    assert fast == exact == ev
    assert (fast.args, fast.result) == (exact.args, exact.result)
    assert [type(r.source) for r in fast.refs] == [type(r.source) for r in exact.refs]
    assert _fast(text.encode("utf-8")) == ev


@pytest.mark.parametrize(
    "line",
    [
        _minimal(args='{"a": 1}'),  # not compact: the scanner keeps the spaces
        _minimal(args="1.50"),
        _minimal(args='"\\u00e9"'),
        _minimal(args="-0"),
        _minimal(refs='[{"source":"tool","id":"x","extra":1}]'),
        _minimal(refs="{}"),
        _minimal(verdict='"maybe"'),
        _minimal(verdict="null"),  # refused by the exact path: not read as absent
        _minimal(refs="null", tool="null"),
        _minimal(duration_ms="1.0"),
        _minimal(duration_ms="-1"),
        _minimal(duration_ms="true"),
        _minimal(run_id="1"),
        '{"event_id":"' + EID + '","time":"2026-01-02T03:04:05Z"}',
        '{"event_id":"' + EID + '","time":"2026-01-02T03:04:05Z","kind":"prompt","kind":"x"}',
        '{"event_id":"bad","time":"2026-01-02T03:04:05Z","kind":"prompt"}',
        '{"event_id":"' + EID + '","time":"yesterday","kind":"prompt"}',
        "[1]",
        '{"event_id": oops',
    ],
)
def test_compact_decoding_declines_what_it_cannot_vouch_for(line: str) -> None:
    from ledger.model.codec import event_from_json

    assert _fast(line) is None
    try:
        exact: Event | None = event_from_json(Event, line)
    except ValidationError:
        exact = None
    if exact is not None:  # the public path still reads it, exactly
        assert Event.from_json(line) == exact
        assert Event.from_json(line).args == exact.args


@PROPERTY
@given(events)
def test_hash_built_from_fields_equals_the_hash_of_the_parsed_json(ev: Event) -> None:
    import orjson

    from ledger.canonical import CanonicalizationError, loads_exact, sha256_of
    from ledger.model.codec import encode_event, event_canonical_hash
    from ledger.sinks.rows import content_hash, event_row

    text, event_id, time_text = encode_event(ev)
    assert text == ev.to_json()
    assert (event_id, time_text) == (str(ev.event_id), json.loads(text)["time"])
    try:
        expected: str | None = sha256_of(loads_exact(text), "rfc8785")
    except (CanonicalizationError, orjson.JSONDecodeError):
        expected = None
    built = event_canonical_hash(ev, event_id, time_text)
    assert built is None or built == expected
    if ev.event_id.bytes != bytes(16):
        assert event_row(ev)[9] == expected == content_hash(text)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.text(max_size=4), json_values, max_size=4),
    st.integers(min_value=0, max_value=2**63 - 1),
)
def test_hash_built_from_fields_on_flat_and_nested_args(args: Any, duration: int) -> None:

    from ledger.canonical import CanonicalizationError, loads_exact, sha256_of
    from ledger.model.codec import encode_event, event_canonical_hash

    ev = Event(kind=Kind.ACTION, args=args, result=list(args.values()), duration_ms=duration)
    text, event_id, time_text = encode_event(ev)
    try:
        expected: str | None = sha256_of(loads_exact(text), "rfc8785")
    except CanonicalizationError:
        expected = None
    built = event_canonical_hash(ev, event_id, time_text)
    assert built == expected


@settings(max_examples=300, deadline=None)
@given(
    st.datetimes(
        timezones=st.sampled_from(
            [UTC, timezone(timedelta(hours=3)), timezone(timedelta(seconds=-37))]
        )
    )
)
def test_format_time_is_the_field_by_field_layout(value: datetime) -> None:
    """The layout, field by field, of the time in UTC (an aware time in another zone is
    converted; one that has no UTC form is refused)."""
    from ledger.errors import ValidationError
    from ledger.timefmt import format_time

    try:
        v = value.astimezone(UTC)
    except OverflowError:
        with pytest.raises(ValidationError, match="out of range in UTC"):
            format_time(value)
        return
    expected = f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}"
    if v.microsecond:
        expected += "." + f"{v.microsecond:06d}".rstrip("0")
    assert format_time(value) == expected + "Z"


_member_values = st.one_of(
    json_values,
    st.sampled_from(
        [
            EID,
            "2026-01-02T03:04:05.5Z",
            "action",
            "denied",
            "",
            "tool",
            [],
            None,
            0,
            7,
            [{"source": "tool", "id": "x", "hash": ""}],
            [{"id": 1}],
            True,
            2**63,
        ]
    ),
)


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(st.sampled_from(FIELD_ORDER), _member_values, max_size=8),
    st.sampled_from(["prompt", "action", "bogus", None]),
)
def test_compact_decoding_never_accepts_what_the_exact_path_refuses(
    members: dict[str, Any], kind: str | None
) -> None:
    import orjson

    from ledger.model.codec import event_from_json

    line = orjson.dumps(
        {"event_id": EID, "time": "2026-01-02T03:04:05Z", "kind": kind} | members
    ).decode()
    fast = _fast(line)
    if fast is None:
        return
    exact = event_from_json(Event, line)  # raises if the fast path accepted a bad line
    assert fast == exact
    assert (fast.args, fast.result) == (exact.args, exact.result)


@pytest.mark.parametrize("extra", ['"x"', '{"a":[1,{"b":null}]}', "1.5", "[]"])
def test_compact_decoding_leaves_out_unknown_members_as_the_exact_path_does(extra: str) -> None:
    from ledger.model.codec import event_from_json

    line = _minimal(args='{"a":1}', extra=extra)
    fast = _fast(line)
    assert fast is not None
    assert fast == event_from_json(Event, line) == Event.from_json(_minimal(args='{"a":1}'))


def test_deeply_nested_json_is_refused_not_a_recursion_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    line = (
        '{"event_id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","time":"2026-01-02T03:04:05Z",'
        f'"kind":"prompt","label":"x","args":{deep}}}'
    )
    with pytest.raises(ValidationError):
        Event.from_json(line)


def test_who_is_optional_and_events_written_before_it_read_back_unchanged() -> None:
    old = '{"event_id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","time":"2026-01-02T03:04:05Z","kind":"action"}'
    ev = Event.from_json(old)
    assert ev.actor is None and ev.approval is None and ev.principal == ""
    assert ev.to_json() == old
    who = ev.replace(
        actor=Actor(principal="alice", agent_id="bot", agent_version="2"),
        approval={"approver": "bob", "time": "2026-01-02T03:04:00Z", "reason": "ticket 7"},
    )
    text = who.to_json()
    assert text.endswith(
        ',"actor":{"principal":"alice","agent_id":"bot","agent_version":"2"},'
        '"approval":{"approver":"bob","time":"2026-01-02T03:04:00Z","reason":"ticket 7"}}'
    )
    assert Event.from_json(text) == who
    assert Event.from_json(text.replace(",", ", ")) == who  # the exact path too
    assert who.principal == "alice"


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("actor", {"principal": 3}, "actor.principal"),
        ("actor", {"user": "x"}, "unknown field 'user'"),
        ("actor", "alice", "expected an object"),
        ("approval", {"reason": "ok"}, "approver is missing"),
        ("approval", {"approver": ""}, "approver"),
        ("approval", {"approver": "bob", "time": "noon"}, "approval.time"),
    ],
)
def test_bad_who_is_refused_naming_the_field(field: str, value: object, said: str) -> None:
    with pytest.raises(ValidationError, match=said):
        Event(kind="action", **{field: value})  # type: ignore[arg-type]


@PROPERTY
@given(events)
def test_the_fast_decode_makes_exactly_the_event_the_validating_constructor_makes(
    ev: Event,
) -> None:
    """Whatever the codec can encode, the compact path (no second validation, slots
    filled directly) gives the same event as the constructor's checked path, member by
    member and type by type, and an ordinary frozen, hashable ``Event``."""
    import copy
    import dataclasses
    import pickle

    from ledger.model.codec import event_from_json

    text = ev.to_json()
    fast = _fast(text)
    if fast is None:  # only raw args/result that orjson would not write back verbatim
        return
    checked = Event(**{f.name: getattr(ev, f.name) for f in dataclasses.fields(Event)})
    exact = event_from_json(Event, text.replace('"kind":', ' "kind":', 1))  # the scanner
    for other in (checked, exact):
        assert type(fast) is type(other) is Event
        for field in dataclasses.fields(Event):
            mine, theirs = getattr(fast, field.name), getattr(other, field.name)
            assert mine == theirs, field.name
            assert type(mine) is type(theirs), field.name
        assert [type(r) for r in fast.refs] == [type(r) for r in other.refs]
        assert [type(r.source) for r in fast.refs] == [type(r.source) for r in other.refs]
    assert type(fast.event_id) is ULID and fast.event_id.bytes == ev.event_id.bytes
    assert vars(fast.event_id) == vars(ULID.from_bytes(ev.event_id.bytes))
    assert fast.time.tzinfo is UTC
    assert fast == ev and hash(fast) == hash(ev) and repr(fast) == repr(exact)  # (fold)
    assert fast.to_json() == text
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.tool = "other"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(fast)) == ev
    assert copy.copy(fast) == ev and fast.replace(tool="t").tool == "t"
    if fast.approval is not None:
        assert type(fast.approval) is Approval and fast.approval == ev.approval
    if fast.actor is not None:
        assert type(fast.actor) is Actor and fast.actor == ev.actor


def test_an_empty_actor_reads_as_no_actor_on_every_path() -> None:
    line = _minimal(actor="{}")
    assert Event.from_json(line).actor is None
    assert _fast(line) is None  # the exact path decides
    assert Event.from_json(_minimal(actor='{"principal":"p"}')).actor == Actor(principal="p")
    assert Event.from_json(line).actor is None  # after a cached actor too
