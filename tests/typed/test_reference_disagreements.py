"""Issue 16's twelve disagreements with the reference engine, each settled: faithful on
read (a history the reference accepts replays and projects here as it does there),
strict on write (what we write may be checked harder, and still replays there)."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import LedgerError, PersistError, RecordError, ReplayError
from ledger.typed import (
    Record,
    ShardStore,
    build_projection,
    final_id,
    normalize_appends,
    parse_config,
    persist,
)
from ledger.typed.checking import check_ledgers
from ledger.typed.persist import InvalidVoteError

TS = "2026-03-01T12:00:00.000Z"
CITATION = [{"type": "repository", "path": "README.md"}]


def shard_lines(root: Path, name: str, lines: list[str], *, prefix: bytes = b"") -> str:
    folder = root / "ledgers" / name / "ledger" / "shards"
    folder.mkdir(parents=True, exist_ok=True)
    file = f"{uuid.uuid4()}.jsonl"
    data = prefix + "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")
    (folder / file).write_bytes(data)
    return file


def chain(payloads: list[Any], *, notes: bool = False) -> list[Record]:
    """Records as the reference writer makes them (random ids; final ids for notes)."""
    out: list[Record] = []
    parents: tuple[str, ...] = ()
    for i, payload in enumerate(payloads):
        rid = final_id("tx:1", i) if notes else f"ldg-{uuid.uuid4()}"
        record = Record.new(id=rid, timestamp=TS, parents=parents, payload=payload)
        out.append(record)
        parents = (record.sha,)
    return out


def cells(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def project(tmp_path: Path, config_data: dict[str, Any], name: str, records: list[Record]) -> Path:
    config = parse_config(config_data)
    root = tmp_path / "store"
    shard_lines(root, name, [r.to_line() for r in records])
    return build_projection(config, ShardStore(root, config), tmp_path / "out")[name]


# 1 ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "payload", "sql"),
    [
        ("map", {"operation": "put", "key": "k\ud800", "value": 1}, "SELECT key FROM state"),
        ("table", {"operation": "insert", "value": {"id": "a\udfff"}}, "SELECT key FROM state"),
        (
            "counter",
            {"operation": "increment", "name": "\udc00n", "amount": 1},
            "SELECT name FROM state",
        ),
    ],
)
def test_1_a_lone_surrogate_in_a_text_column_is_stored_as_u_fffd(
    tmp_path: Path, kind: str, payload: dict[str, Any], sql: str
) -> None:
    config = {"x": {"type": kind, **({"key": "id"} if kind == "table" else {})}}
    db = project(tmp_path, config, "x", chain([payload]))
    (text,) = cells(db, sql)[0]
    assert "\ufffd" in text and not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def test_1_a_lone_surrogate_in_notes_fields_is_stored_as_u_fffd(tmp_path: Path) -> None:
    note = {
        "operation": "note",
        "subject": "s\ud800",
        "note": "n",
        "reason": "r\udfff",
        "citations": [{"type": "repository", "path": "a\ud800.md"}],
    }
    db = project(tmp_path, {"k": {"type": "notes"}}, "k", chain([note], notes=True))
    assert cells(db, "SELECT subject, reason FROM notes") == [("s\ufffd", "r\ufffd")]
    assert cells(db, "SELECT path FROM note_citations") == [("a\ufffd.md",)]


# 2 ----------------------------------------------------------------------------------------
def test_2_final_id_hashes_a_lone_surrogate_as_u_fffd() -> None:
    assert final_id("\ud800lone", 0) == final_id("\ufffdlone", 0)
    assert final_id("\ud800lone", 0) == "ldg-2ba6c0e6-9d82-4b03-a141-cecef8950111"  # oracle
    assert final_id("\U0001f600", 1) == final_id("\ud83d\ude00", 1)  # a pair is one character


# 3 ----------------------------------------------------------------------------------------
def test_3_transaction_id_length_counts_utf16_units() -> None:
    config = parse_config({"log": {"type": "log"}})
    request = [{"operation": "append", "value": 1}]
    assert normalize_appends(config, request, "\U0001f600" * 64)["transaction_id"]
    with pytest.raises(LedgerError, match="128 UTF-16 code units"):
        normalize_appends(config, request, "\U0001f600" * 65)  # 130 units
    with pytest.raises(LedgerError, match="128 UTF-16"):
        normalize_appends(config, request, "x" * 129)


# 4 ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("ident", [5, None, ["a"], {"k": 1}, "x" * 300])
def test_4_a_non_notes_payload_id_of_any_shape_replays(tmp_path: Path, ident: Any) -> None:
    db = project(
        tmp_path,
        {"log": {"type": "log"}},
        "log",
        chain([{"id": ident, "operation": "append", "value": 1}]),
    )
    assert cells(db, "SELECT value FROM state") == [("1",)]


def test_4_a_notes_payload_id_is_still_refused(tmp_path: Path) -> None:
    note = {"operation": "note", "subject": "s", "note": "n", "reason": "r", "citations": CITATION}
    with pytest.raises(
        ReplayError, match=r"must not duplicate the envelope ID|Invalid note record ID"
    ):
        project(tmp_path, {"k": {"type": "notes"}}, "k", chain([{**note, "id": 5}], notes=True))


# 5 ----------------------------------------------------------------------------------------
SCHEMAS = [
    ({"type": "integer", "minimum": 10}, 3),
    ({"type": "string", "pattern": "^a"}, "b"),
    ({"const": "x"}, "y"),
    ({"allOf": [{"maxLength": 1}]}, "long"),
    ({"type": "array", "minItems": 2}, [1]),
    ({"type": "object", "properties": {"n": {"type": "number", "exclusiveMaximum": 1}}}, {"n": 2}),
]


@pytest.mark.parametrize(("schema", "value"), SCHEMAS)
def test_5_replay_uses_the_reference_schema_subset(
    tmp_path: Path, schema: dict[str, Any], value: Any
) -> None:
    config = {"log": {"type": "log", "schema": schema}}
    db = project(tmp_path, config, "log", chain([{"operation": "append", "value": value}]))
    assert cells(db, "SELECT value FROM state") == [(json.dumps(value, separators=(",", ":")),)]


@pytest.mark.parametrize(("schema", "value"), SCHEMAS)
def test_5_the_write_path_keeps_full_draft_2020_12(schema: dict[str, Any], value: Any) -> None:
    config = parse_config({"log": {"type": "log", "schema": schema}})
    with pytest.raises(LedgerError, match="does not match schema"):
        normalize_appends(config, [{"operation": "append", "value": value}], "t:1")


def test_5_check_reports_the_keywords_the_reference_ignores() -> None:
    config = parse_config(
        {
            "a": {"type": "log", "schema": {"type": "string", "pattern": "^x", "maxLength": 3}},
            "b": {
                "type": "table",
                "key": "id",
                "schema": {
                    "type": "object",
                    "properties": {"n": {"minimum": 1, "description": "kept"}},
                    "additionalProperties": {"type": "string"},
                },
            },
            "c": {"type": "counter"},
        }
    )
    found = {f.name: f.ignored_keywords for f in check_ledgers(config)}
    assert found == {"a": ("pattern",), "b": ("additionalProperties", "minimum"), "c": ()}


def test_5_subset_still_refuses_what_the_reference_refuses(tmp_path: Path) -> None:
    config = {"log": {"type": "log", "schema": {"type": "string", "maxLength": 2}}}
    with pytest.raises(ReplayError, match=r"\(root\) must be at most 2 characters"):
        project(tmp_path, config, "log", chain([{"operation": "append", "value": "abc"}]))


# 6 ----------------------------------------------------------------------------------------
def test_6_an_object_in_an_enum_never_matches_on_replay(tmp_path: Path) -> None:
    config = {"log": {"type": "log", "schema": {"enum": [{"a": 1}, "s"]}}}
    with pytest.raises(ReplayError, match="must be one of"):
        project(tmp_path, config, "log", chain([{"operation": "append", "value": {"a": 1}}]))
    db = project(tmp_path / "2", config, "log", chain([{"operation": "append", "value": "s"}]))
    assert cells(db, "SELECT value FROM state") == [('"s"',)]


def test_6_the_write_path_never_writes_what_the_reference_would_refuse(tmp_path: Path) -> None:
    config = parse_config({"log": {"type": "log", "schema": {"enum": [{"a": 1}]}}})
    request = [{"operation": "append", "value": {"a": 1}}]
    with pytest.raises(LedgerError, match=r"must be one of: \[object Object\]"):
        normalize_appends(config, request, "t:1")  # Draft 2020-12 alone would accept it
    loose = parse_config({"log": {"type": "log"}})
    artifact = normalize_appends(loose, request, "t:1")  # the same artifact, made elsewhere
    store = ShardStore(tmp_path, config)
    with pytest.raises(PersistError, match="must be one of"):
        persist(config, store, artifact)
    assert store.names() == []


# 7 ----------------------------------------------------------------------------------------
def test_7_the_same_record_twice_in_one_shard_projects_with_a_warning(tmp_path: Path) -> None:
    config = parse_config({"log": {"type": "log"}})
    root = tmp_path / "store"
    (record,) = chain([{"operation": "append", "value": 1}])
    shard_lines(root, "log", [record.to_line(), record.to_line()])
    store = ShardStore(root, config)
    db = build_projection(config, store, tmp_path / "out")["log"]
    assert cells(db, "SELECT count(*) FROM records") == [(1,)]
    (finding,) = check_ledgers(config, store)
    assert finding.ok and [w.code for w in finding.warnings or ()] == ["duplicate-id"]


# 8 ----------------------------------------------------------------------------------------
def test_8_a_byte_order_mark_is_accepted_on_read(tmp_path: Path) -> None:
    config = parse_config({"log": {"type": "log"}})
    root = tmp_path / "store"
    records = chain([{"operation": "append", "value": v} for v in (1, 2)])
    file = shard_lines(root, "log", [r.to_line() for r in records], prefix=b"\xef\xbb\xbf")
    store = ShardStore(root, config)
    rec = store.read("log")
    assert rec.ok and [r.payload["value"] for r in rec.records] == [1, 2]
    first = len(records[0].to_line().encode()) + 1
    assert [(r.shard, r.offset) for r in rec.records] == [(file, 0), (file, 3 + first)]
    db = build_projection(config, store, tmp_path / "out")["log"]
    assert cells(db, "SELECT size FROM shards") == [(3 + first + len(records[1].to_line()) + 1,)]


def test_8_a_byte_order_mark_is_never_written(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    store.append("log", [{"operation": "append", "value": 1}])
    (shard,) = store.shard_dir("log").iterdir()
    assert shard.read_bytes().startswith(b'{"id":')


# 9 ----------------------------------------------------------------------------------------
def test_9_an_integer_beyond_2_53_is_read_as_javascript_reads_it(tmp_path: Path) -> None:
    body = {
        "id": f"ldg-{uuid.uuid4()}",
        "parents": [],
        "payload": {"operation": "append", "value": 9007199254740993.0},
        "timestamp": TS,
        "type": "ledger_append",
        "version": 1,
    }
    record = Record.new(id=body["id"], timestamp=TS, parents=(), payload=body["payload"])
    line = record.to_line()
    assert '"value":9007199254740992' in line  # the reference writer's rounding
    db = project(tmp_path, {"log": {"type": "log"}}, "log", [Record.from_line(line)])
    assert cells(db, "SELECT value FROM state") == [("9007199254740992",)]


def test_9_the_write_path_refuses_such_an_integer_and_says_why() -> None:
    config = parse_config({"log": {"type": "log"}})
    with pytest.raises((RecordError, LedgerError), match=r"2\*\*53|JSON numbers cannot carry"):
        normalize_appends(config, [{"operation": "append", "value": 2**53 + 1}], "t:1")


# 10 ---------------------------------------------------------------------------------------
def test_10_a_vote_before_its_note_in_one_batch_is_refused(tmp_path: Path) -> None:
    config = parse_config({"k": {"type": "notes"}})
    note = {"operation": "note", "subject": "s", "note": "n", "reason": "r", "citations": CITATION}
    requests = [{"operation": "vote", "note_id": "#n", "vote": "up"}, {**note, "temp_id": "n"}]
    artifact = normalize_appends(config, requests, "t:1")
    store = ShardStore(tmp_path, config)
    with pytest.raises(InvalidVoteError, match="Vote references a missing note") as caught:
        persist(config, store, artifact)
    assert caught.value.result["ledgers"]["k"] == {
        "requested": 2,
        "persisted": 0,
        "rejected": 1,
        "invalid_vote_requests": 1,
    }
    assert store.names() == []
    in_order = normalize_appends(config, requests[::-1], "t:2")
    assert persist(config, store, in_order)["ledgers"]["k"]["persisted"] == 2


# 11 ---------------------------------------------------------------------------------------
def test_11_every_configured_ledger_is_in_the_result(tmp_path: Path) -> None:
    config = parse_config(
        {"z": {"type": "log"}, "a": {"type": "set"}, "raw": {}, "k": {"type": "notes"}}
    )
    artifact = normalize_appends(
        config, [{"ledger": "z", "operation": "append", "value": 1}], "t:1"
    )
    result = persist(config, ShardStore(tmp_path, config), artifact)
    assert list(result["ledgers"]) == list(config.names)  # the trusted config's order
    base = {
        "requested": 0,
        "validated": 0,
        "persisted": 0,
        "already_present": 0,
        "reconciled": 0,
        "rejected": 0,
    }
    assert result["ledgers"]["a"] == {
        **base,
        "branch": "ledgers/a",
        "type": "set",
        "transactions": [],
    }
    assert result["ledgers"]["raw"] == {**base, "branch": "ledgers/raw"}
    assert result["ledgers"]["k"] == {
        **base,
        "branch": "ledgers/k",
        "type": "notes",
        "transactions": [],
        "notes_added": 0,
        "note_votes_added": 0,
        "upvotes": 0,
        "downvotes": 0,
        "invalid_vote_requests": 0,
    }


# 12 ---------------------------------------------------------------------------------------
def test_12_notes_replay_metadata_is_in_the_reference_order(tmp_path: Path) -> None:
    note = {"operation": "note", "subject": "s", "note": "n", "reason": "r", "citations": CITATION}
    db = project(tmp_path, {"k": {"type": "notes"}}, "k", chain([note], notes=True))
    assert [r[0] for r in cells(db, "SELECT table_name FROM replay_metadata ORDER BY rowid")] == [
        "notes",
        "note_citations",
        "note_votes",
        "note_state",
    ]
