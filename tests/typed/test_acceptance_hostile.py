"""Hostile input against the documented typed-ledger API: every refusal is a ``LedgerError``.

Garbage from hypothesis must never escape a public function as a bare ``KeyError``,
``ValueError``, ``TypeError``, ``UnicodeError`` or ``sqlite3`` error, and a refused
``persist`` leaves the store unchanged. The regression tests below pin the bugs the
acceptance walk found.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.errors import LedgerError
from ledger.typed import (
    ConfigError,
    Diagnostic,
    IntentQueue,
    LedgerResolver,
    PersistError,
    QueryError,
    Record,
    RecordError,
    ReplayError,
    ShardStore,
    apply_compaction,
    build_projection,
    canonical_json,
    final_id,
    normalize_appends,
    parse_config,
    persist,
    plan_compaction,
    query_records,
    query_sql,
    record_ref,
    record_sha,
    replay,
)

TS = "2026-01-01T00:00:00.000Z"
CONFIG = parse_config(
    {
        "h": {"type": "log", "schema": {"type": "string", "maxLength": 3}},
        "m": {"type": "map"},
        "n": {"type": "notes"},
        "r": {"schema": {"type": "object"}},
    }
)
FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.binary(max_size=4),
    st.dates(),
    st.sampled_from([float("nan"), 2**80, "\ud800", "#t", "h", "append", object()]),
)
garbage = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(
            st.one_of(st.text(max_size=6), st.integers(), st.none()), inner, max_size=3
        ),
    ),
    max_leaves=10,
)
REQUEST_KEYS = st.sampled_from(
    ["ledger", "operation", "value", "key", "record", "temp_id", "note_id", "vote", "type", "id"]
)
requests = st.dictionaries(REQUEST_KEYS, garbage, max_size=4)


def only_ledger_errors(call: Callable[[], object]) -> None:
    with contextlib.suppress(LedgerError):
        call()


def listing(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*"))


@FUZZ
@given(st.one_of(garbage, st.dictionaries(REQUEST_KEYS, garbage, max_size=3), st.text()))
def test_parse_config_garbage(source: Any) -> None:
    only_ledger_errors(lambda: parse_config(source))


@FUZZ
@given(st.one_of(garbage, st.text(max_size=60)), st.sampled_from(list(range(7))))
def test_record_from_line_garbage(value: Any, field: int) -> None:
    only_ledger_errors(lambda: Record.from_line(value))
    body: dict[str, Any] = {
        "version": 1,
        "id": final_id("tx", 0),
        "type": "ledger_append",
        "timestamp": TS,
        "parents": [],
        "payload": 1,
    }
    body[sorted([*body, "sha"])[field]] = value
    try:
        line = canonical_json({**body, "sha": record_sha(body)})
    except LedgerError:
        return
    only_ledger_errors(lambda: Record.from_line(line))


@FUZZ
@given(st.one_of(st.lists(requests, max_size=3), garbage), garbage)
def test_normalize_appends_garbage(batch: Any, transaction_id: Any) -> None:
    only_ledger_errors(lambda: normalize_appends(CONFIG, batch, "tx:1"))
    only_ledger_errors(lambda: normalize_appends(CONFIG, batch, transaction_id))


@FUZZ
@given(
    st.one_of(st.sampled_from(["ledger_append", "ledger_map_put", "ledger_note_vote"]), garbage),
    st.one_of(requests, garbage),
)
def test_intent_queue_garbage(tool: Any, arguments: Any) -> None:
    answer = IntentQueue(CONFIG).submit(tool, arguments)
    assert answer["success"] in (True, False)
    if not answer["success"]:
        assert answer["error"]


@FUZZ
@given(garbage, st.lists(requests, min_size=1, max_size=2), garbage)
def test_persist_garbage_leaves_the_store_unchanged(
    tmp_path_factory: pytest.TempPathFactory, artifact: Any, batch: Any, now: Any
) -> None:
    root = tmp_path_factory.mktemp("store")
    store = ShardStore(root)
    store.append("m", [{"operation": "put", "key": "k", "value": 1}], timestamp=TS)
    before = listing(root)
    only_ledger_errors(lambda: persist(CONFIG, store, artifact))
    try:
        valid = normalize_appends(CONFIG, batch, "tx:1")
    except LedgerError:
        return
    only_ledger_errors(lambda: persist(CONFIG, store, valid, now=now))
    if not isinstance(now, str | dt.datetime):
        assert listing(root) == before


OPERATOR = st.sampled_from(["eq", "in", "exists", "prefix", "gt", "gte", "lt", "lte", "nope"])


@FUZZ
@given(
    st.one_of(
        garbage,
        st.dictionaries(
            st.one_of(
                st.sampled_from(["payload.value", "payload.a.b", "payload.x\n"]),
                st.text(max_size=8),
            ),
            st.one_of(garbage, st.dictionaries(OPERATOR, garbage, max_size=2)),
            max_size=3,
        ),
    ),
    garbage,
    garbage,
)
def test_query_records_garbage(
    tmp_path_factory: pytest.TempPathFactory, where: Any, limit: Any, after: Any
) -> None:
    store = ShardStore(tmp_path_factory.mktemp("q"))
    store.append("h", [{"operation": "append", "value": "a"}])
    only_ledger_errors(lambda: query_records(store, "h", where=where))
    only_ledger_errors(lambda: query_records(store, "h", where=where, limit=limit, after=after))
    only_ledger_errors(lambda: query_records(store, limit, where=None))


@pytest.fixture(scope="module")
def projection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("proj")
    store = ShardStore(root / "store")
    store.append("m", [{"operation": "put", "key": "k", "value": [1]}])
    return build_projection(CONFIG, store, root / "out")["m"]


@FUZZ
@given(
    st.one_of(st.text(max_size=30), garbage, st.sampled_from(["SELECT ?", "SELECT :a"])),
    garbage,
    garbage,
)
def test_query_sql_garbage(projection: Path, sql: Any, params: Any, limit: Any) -> None:
    before = projection.read_bytes()
    only_ledger_errors(lambda: query_sql(projection, sql))
    only_ledger_errors(lambda: query_sql(projection, "SELECT value FROM state", params=params))
    only_ledger_errors(lambda: query_sql(projection, "SELECT 1", limit=limit))
    only_ledger_errors(lambda: query_sql(params, "SELECT 1"))
    assert projection.read_bytes() == before


# --- regressions found by the acceptance walk --------------------------------------------


def test_record_and_diagnostic_take_the_documented_positional_fields() -> None:
    line = Record.new(id=final_id("tx", 0), timestamp=TS, parents=[], payload=1).to_line()
    parsed = Record.from_line(line)
    made = Record(1, parsed.id, "ledger_append", TS, [], 1, parsed.sha)
    assert made == parsed and made.parents == () and hash(made) == hash(parsed)
    assert Record.from_line(line + "\n") == parsed  # as iterating over a shard file yields it
    with pytest.raises(RecordError):
        Record(1, parsed.id, "ledger_append", TS, "sha256:x", 1, parsed.sha)  # type: ignore[arg-type]
    diagnostic = Diagnostic("missing-parent", "a.jsonl", 3, parsed.id, "no parent")
    assert (diagnostic.code, diagnostic.line) == ("missing-parent", 3)


@pytest.mark.parametrize(
    "timestamp",
    [
        "٢٠٢٦-01-01T00:00:00.000Z",  # Arabic-Indic digits matched a \\d pattern
        "2026-01-01T24:00:00.000Z",
        "2026-01-01T00:00:00.000Z\n",
        ["2026-01-01T00:00:00.000Z"],  # unhashable: was a bare TypeError
        {"t": 1},
    ],
)
def test_bad_timestamps_are_invalid_envelopes(timestamp: Any) -> None:
    body = {
        "version": 1,
        "id": final_id("tx", 0),
        "type": "ledger_append",
        "timestamp": timestamp,
        "parents": [],
        "payload": 1,
    }
    line = canonical_json({**body, "sha": record_sha(body)})
    with pytest.raises(RecordError) as info:
        Record.from_line(line)
    assert info.value.code == "invalid-envelope"  # type: ignore[attr-defined]


def test_year_zero_round_trips_as_in_javascript() -> None:
    record = Record.new(
        id=final_id("tx", 0), timestamp="0000-02-29T00:00:00.000Z", parents=[], payload=1
    )
    assert Record.from_line(record.to_line()).timestamp == "0000-02-29T00:00:00.000Z"


def test_nan_in_a_line_is_invalid_json() -> None:
    line = Record.new(id=final_id("tx", 0), timestamp=TS, parents=[], payload=1).to_line()
    with pytest.raises(RecordError) as info:
        Record.from_line(line.replace('"payload":1', '"payload":NaN'))
    assert info.value.code == "invalid-json"  # type: ignore[attr-defined]


def test_public_helpers_refuse_wrong_types() -> None:
    with pytest.raises(RecordError):
        final_id(12345, 0)  # type: ignore[arg-type]
    with pytest.raises(RecordError):
        final_id("tx", -1)
    with pytest.raises(RecordError):
        record_sha([1, 2])  # type: ignore[arg-type]
    with pytest.raises(RecordError):
        Record.from_line(None)  # type: ignore[arg-type]


def test_lone_surrogates_are_measured_not_crashed_on() -> None:
    note = {
        "operation": "note",
        "subject": "\ud800 subject",
        "note": "n",
        "reason": "r\udc00",
        "citations": [{"type": "repository", "path": "a\ud800.md"}],
    }
    ledger = CONFIG["n"]
    record = Record.new(id=final_id("tx", 0), timestamp=TS, parents=[], payload=note)
    assert replay(ledger, [record]).tables["notes"][0]["subject"] == "\ud800 subject"
    log = Record.new(
        id=final_id("tx", 1),
        timestamp=TS,
        parents=[],
        payload={"operation": "append", "value": "\ud800"},
    )
    assert replay(CONFIG["h"], [log]).tables["state"][0]["value"] == '"\\ud800"'


def test_blank_means_what_javascript_trim_means() -> None:
    def subject(text: str) -> Record:
        note = {
            "operation": "note",
            "subject": text,
            "note": "n",
            "reason": "r",
            "citations": [{"type": "repository", "path": "a.md"}],
        }
        return Record.new(id=final_id("tx", 0), timestamp=TS, parents=[], payload=note)

    assert replay(CONFIG["n"], [subject("\x1c")]).tables["notes"][0]["subject"] == "\x1c"
    with pytest.raises(LedgerError, match="nonempty bounded"):
        replay(CONFIG["n"], [subject("\ufeff \u3000")])


def test_config_corner_cases() -> None:
    config = parse_config({"a": {"type": "map", "schema": {"type": "object", 1: "x"}}})
    assert config["a"].schema == {"type": "object", "1": "x"}
    with pytest.raises(ConfigError, match=r"tools\.ledger\.max-record-kb must be a positive"):
        parse_config({"max-record-kb": "abc"})
    with pytest.raises(ConfigError, match="cannot resolve"):
        parse_config({"schema": "\ud800.json"})
    with pytest.raises(ConfigError, match="schema is too deeply nested"):
        nested: dict[str, Any] = {}
        for _ in range(40):
            nested = {"not": nested}
        parse_config({"a": {"schema": nested}})


def test_trailing_newlines_do_not_slip_past_patterns(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="temporary ID"):
        normalize_appends(
            CONFIG,
            [{"ledger": "m", "operation": "put", "key": "k", "value": 1, "temp_id": "a\n"}],
            "t",
        )
    store = ShardStore(tmp_path)
    with pytest.raises(QueryError):
        query_records(store, "h", where={"payload.value\n": {"eq": 1}})
    with pytest.raises(QueryError):
        query_records(store, "h", after="sha256:" + "0" * 64 + "\n")
    config = parse_config({"h": {"type": "log", "compaction": {"min-segments": 2}}})
    for value in "ab":
        store.append("h", [{"operation": "append", "value": value}])
    plan = plan_compaction(config, store, "h")
    assert plan is not None
    for key, value in (
        ("created_at", "٢٠٢٦-01-01T00:00:00Z"),
        ("created_at", plan["created_at"] + "\n"),
        ("base_commit", plan["base_commit"] + "\n"),
    ):
        assert apply_compaction(config, store, {**plan, key: value}).status == "rejected"


def test_query_sql_refuses_what_sqlite3_would_raise(projection: Path) -> None:
    for call in (
        lambda: query_sql(None, "SELECT 1"),  # type: ignore[arg-type]
        lambda: query_sql(projection, "SELECT '\ud800'"),
        lambda: query_sql(projection, "SELECT ?", params=(2**80,)),
        lambda: query_sql(projection, "SELECT ?", params=(object(),)),
        lambda: query_sql(projection, "SELECT ?", params=5),  # type: ignore[arg-type]
        lambda: query_sql(projection, "VACUUM INTO 'x.db'"),
    ):
        with pytest.raises(QueryError):
            call()
    with pytest.raises(QueryError, match="refused"):
        query_sql(projection, "VACUUM INTO 'x.db'")


def test_intent_queue_answers_garbage_with_an_error() -> None:
    queue = IntentQueue(CONFIG)
    for tool, arguments in (
        (["ledger_append"], {}),
        ("ledger_map_put", {"key": "k", "value": dt.date(2026, 1, 1)}),
        ("ledger_map_put", {"key": "k", "value": float("nan")}),
        ("ledger_map_put", {"key": "k", "value": b"x"}),
    ):
        answer = queue.submit(tool, arguments)  # type: ignore[arg-type]
        assert answer["success"] is False and answer["error"]
    assert queue.submit("ledger_map_put", {"key": "\ud800", "value": "\udc00"})["success"]


def test_persist_refuses_a_bad_clock(tmp_path: Path) -> None:
    artifact = normalize_appends(
        CONFIG, [{"ledger": "m", "operation": "put", "key": "k", "value": 1}], "t:1"
    )
    nows: list[object] = [[], 5, "yesterday", dt.datetime(2026, 1, 1)]
    for now in nows:
        with pytest.raises(PersistError):
            persist(CONFIG, ShardStore(tmp_path), artifact, now=now)  # type: ignore[arg-type]
    assert not (tmp_path / "ledgers").exists()


def test_query_records_and_resolver_are_reachable_as_a_user_expects(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    (record,) = store.append("h", [{"operation": "append", "value": "a"}])
    assert query_records(store, CONFIG["h"]).records == (record,)
    assert LedgerResolver(store, CONFIG).current_hash(record_ref(record).source, record.id) == (
        record.sha
    )


def test_sqlite_projection_is_a_plain_database(projection: Path) -> None:
    conn = sqlite3.connect(f"{projection.as_uri()}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


def test_ledger_resolver_without_a_config_searches_every_ledger(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    resolver = LedgerResolver(store)
    assert resolver.current_hash(record_ref(Record.from_line(_line())).source, "x") is None
    (record,) = store.append("later", [{"any": "payload"}])
    assert resolver.current_hash(record_ref(record).source, record.id) == record.sha


def _line() -> str:
    return Record.new(id=final_id("tx", 0), timestamp=TS, parents=[], payload=1).to_line()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {"x": object()}])
def test_non_finite_values_say_finite_everywhere(value: Any) -> None:
    with pytest.raises(RecordError, match="finite"):
        Record.new(id=final_id("tx", 0), timestamp=TS, parents=[], payload={"value": value})
    with pytest.raises(RecordError, match="finite"):
        normalize_appends(
            CONFIG, [{"ledger": "m", "operation": "put", "key": "k", "value": value}], "t"
        )
    made = Record(
        1,
        final_id("tx", 0),
        "ledger_append",
        TS,
        (),
        {"operation": "append", "value": value},
        "sha256:" + "0" * 64,
    )
    with pytest.raises(LedgerError, match="finite"):
        replay(CONFIG["h"], [made])


def test_replay_refuses_what_is_not_a_ledger_or_records() -> None:
    record = Record.from_line(_line())
    for ledger, records in (
        (CONFIG["h"], [{"not": "a record"}]),
        (CONFIG["h"], 5),
        ("h", [record]),
    ):
        with pytest.raises(ReplayError):
            replay(ledger, records)  # type: ignore[arg-type]


def test_append_refuses_a_bare_payload_instead_of_a_list(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    with pytest.raises(RecordError, match="list of payloads"):
        store.append("h", {"operation": "append", "value": "x"})
    assert store.read("h").records == ()
    written = store.append("h", ({"operation": "append", "value": v} for v in "ab"))
    assert [r.payload["value"] for r in written] == ["a", "b"]
